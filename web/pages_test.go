package web

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"
	"golang.org/x/crypto/argon2"
	"golang.org/x/crypto/ssh"

	"github.com/postern/postern/internal/fakeclock"
	"github.com/postern/postern/internal/testwait"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/recipes"
	"github.com/postern/postern/store"
)

// pageSite is a web server over a fresh store, served by an httptest TLS
// server (the cookies are __Host- cookies, which need https), with one
// agent "bot" and one dev connection "web1".
type pageSite struct {
	t     *testing.T
	clock *fakeclock.Clock
	st    *store.Store
	eng   *policy.Engine
	srv   *Server
	ts    *httptest.Server
	agent *store.Agent
	conn  *store.Connection
	// connKey is web1's private key file: no page may show it.
	connKey []byte
	dbPath  string
}

// pagePassword is every test admin's password.
const pagePassword = "correct horse battery staple"

// newPageSite builds the site; edit, if not nil, changes the Config before
// New.
func newPageSite(t *testing.T, edit func(*Config)) *pageSite {
	t.Helper()
	ctx := context.Background()
	// The clock starts at the real time: the browser's cookie jar judges
	// the session cookie's expiry by it.
	clock := fakeclock.New()
	clock.Advance(time.Since(clock.Now()))
	b := newTestBackend(t, clock)
	st, eng, dbPath := b.st, b.eng, b.path
	cfg := Config{Store: st, Engine: eng, Catalog: b.cat, Now: clock.Now, Logger: zerolog.Nop()}
	if edit != nil {
		edit(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ts := httptest.NewTLSServer(srv.Handler())
	t.Cleanup(ts.Close)
	ps := &pageSite{t: t, clock: clock, st: st, eng: eng, srv: srv, ts: ts, dbPath: dbPath}
	agentKey := newTestKeyPair(t)
	if ps.agent, err = st.CreateAgent(ctx, store.Unaudited(), "bot", agentKey.Authorized); err != nil {
		t.Fatalf("CreateAgent: %v", err)
	}
	ps.conn, ps.connKey = ps.addConnection("web1", store.EnvDev)
	if _, err := st.SetGrant(ctx, store.Unaudited(), "bot", "web1", store.Rules{Read: store.RuleAllow, Write: store.RuleAsk, Destructive: store.RuleAsk}); err != nil {
		t.Fatalf("SetGrant: %v", err)
	}
	return ps
}

// cheapHash is password's argon2id PHC string at the lowest cost
// VerifyPassword accepts (64 KiB, one pass) rather than HashPassword's
// 19 MiB and two passes: a login verifies with the parameters its hash
// names, and the page tests log in a few hundred times, which at full
// cost took most of the package's time under the race detector (35 s
// for one test of three logins). HashPassword's own parameters are
// TestPasswordHashRoundTrip's.
func cheapHash(password string) string {
	salt := []byte("page-test-salt")
	key := argon2.IDKey([]byte(password), salt, 1, 64, 1, 32)
	enc := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=64,t=1,p=1$%s$%s", argon2.Version, enc.EncodeToString(salt), enc.EncodeToString(key))
}

// addConnection creates a connection with a real ed25519 key and returns
// it with its private key file.
func (ps *pageSite) addConnection(alias string, env store.Env) (*store.Connection, []byte) {
	ps.t.Helper()
	return addTestConnection(ps.t, ps.st, alias, env)
}

// addAdmin creates an admin with pagePassword, stored as a cheap argon2id
// hash (see cheapHash).
func (ps *pageSite) addAdmin(name string) {
	ps.t.Helper()
	if _, err := ps.st.CreateAdmin(context.Background(), store.Unaudited(), name, cheapHash(pagePassword), store.RoleOwner); err != nil {
		ps.t.Fatalf("CreateAdmin(%s): %v", name, err)
	}
}

// ask stores a pending approval request of "bot" on conn, as the bastion
// would, and returns it.
func (ps *pageSite) ask(conn *store.Connection, class, text string, needed int) store.Approval {
	ps.t.Helper()
	a, _, err := ps.st.RequestApproval(context.Background(), store.Approval{
		AgentID: ps.agent.ID, ConnectionID: conn.ID, Class: class, Kind: "exec",
		Operation: text, Reasons: "rm deletes files", OperationSHA256: policy.OperationHash(text), ApprovalsNeeded: needed,
	}, 2*time.Minute)
	if err != nil {
		ps.t.Fatalf("RequestApproval: %v", err)
	}
	return a
}

// pageClient is a browser: a cookie jar, and redirects not followed, so
// that tests see each 303.
type pageClient struct {
	ps   *pageSite
	c    *http.Client
	csrf string // the session's CSRF token, read from a page
}

// admin adds an admin called name and returns a client logged in as it.
func (ps *pageSite) admin(name string) *pageClient {
	ps.t.Helper()
	ps.addAdmin(name)
	pc := ps.client()
	pc.loginAs(name)
	return pc
}

func (ps *pageSite) client() *pageClient {
	ps.t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		ps.t.Fatal(err)
	}
	c := *ps.ts.Client() // a copy: the server's client is shared
	c.Jar = jar
	// A request that hangs fails the test at its deadline (an event stream
	// included).
	c.Timeout = testwait.Remaining(ps.t)
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &pageClient{ps: ps, c: &c}
}

// get fetches path and returns the status, the Location and the body.
func (pc *pageClient) get(path string) (int, http.Header, string) {
	pc.ps.t.Helper()
	resp, err := pc.c.Get(pc.ps.ts.URL + path)
	if err != nil {
		pc.ps.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		pc.ps.t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

// post posts form to path and returns the status, headers and body.
func (pc *pageClient) post(path string, form url.Values) (int, http.Header, string) {
	pc.ps.t.Helper()
	resp, err := pc.c.PostForm(pc.ps.ts.URL+path, form)
	if err != nil {
		pc.ps.t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		pc.ps.t.Fatalf("POST %s: %v", path, err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

var (
	loginCSRFPattern = regexp.MustCompile(`name="csrf_token" value="([^"]+)"`)
	metaCSRFPattern  = regexp.MustCompile(`<meta name="csrf-token" content="([^"]+)">`)
)

// loginAs logs in through the login form and remembers the session's CSRF
// token.
func (pc *pageClient) loginAs(name string) {
	pc.ps.t.Helper()
	status, _, body := pc.tryLogin(name, pagePassword)
	if status != http.StatusSeeOther {
		pc.ps.t.Fatalf("login as %s: got status %d; want 303\n%s", name, status, body)
	}
	pc.readCSRF()
}

// readCSRF reads the session's CSRF token from a page.
func (pc *pageClient) readCSRF() {
	pc.ps.t.Helper()
	_, _, body := pc.get("/approvals")
	m := metaCSRFPattern.FindStringSubmatch(body)
	if m == nil {
		pc.ps.t.Fatalf("no csrf-token meta on /approvals:\n%s", body)
	}
	pc.csrf = m[1]
}

// tryLogin fetches the login page for its CSRF value and posts the form.
func (pc *pageClient) tryLogin(name, password string) (int, http.Header, string) {
	pc.ps.t.Helper()
	_, _, page := pc.get("/login")
	m := loginCSRFPattern.FindStringSubmatch(page)
	if m == nil {
		pc.ps.t.Fatalf("no csrf_token on the login page:\n%s", page)
	}
	return pc.post("/login", url.Values{"csrf_token": {m[1]}, "name": {name}, "password": {password}, "next": {"/approvals"}})
}

// form is a page form's fields with the session's CSRF token.
func (pc *pageClient) form(kv ...string) url.Values {
	v := url.Values{"csrf_token": {pc.csrf}}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return v
}

// follow fetches the page a 303 points to and returns its body.
func (pc *pageClient) follow(h http.Header) string {
	pc.ps.t.Helper()
	loc := h.Get("Location")
	if loc == "" {
		pc.ps.t.Fatalf("no Location to follow")
	}
	status, _, body := pc.get(loc)
	if status != http.StatusOK {
		pc.ps.t.Fatalf("GET %s: got status %d; want 200", loc, status)
	}
	return body
}

// flashText is the text of the page's #flash, or "".
func flashText(body string) string {
	m := regexp.MustCompile(`(?s)<p id="flash" role="status"[^>]*>(.*?)</p>`).FindStringSubmatch(body)
	if m == nil {
		return ""
	}
	return html.UnescapeString(m[1])
}

func (ps *pageSite) approval(id string) store.Approval {
	ps.t.Helper()
	a, err := ps.st.GetApproval(context.Background(), id)
	if err != nil {
		ps.t.Fatalf("GetApproval(%s): %v", id, err)
	}
	return a
}

func TestApprovalsPageShowsPendingRequests(t *testing.T) {
	ps := newPageSite(t, nil)
	pc := ps.admin("alice")
	_, _, empty := pc.get("/approvals")
	if !strings.Contains(empty, `<section id="approvals"`) || !strings.Contains(empty, `id="no-approvals"`) {
		t.Errorf("empty approvals page: want section#approvals with p#no-approvals\n%s", empty)
	}
	a := ps.ask(ps.conn, "destructive", "rm -rf /srv/cache", 1)
	status, _, body := pc.get("/approvals")
	if status != http.StatusOK {
		t.Fatalf("got status %d; want 200", status)
	}
	for _, want := range []string{
		`<article class="approval" id="approval-` + a.ID + `" data-id="` + a.ID + `" data-class="destructive">`,
		`<dd class="agent">bot</dd>`,
		`<dd class="alias">web1 <span class="target" dir="ltr">deploy@`,
		`<dd class="env env-dev">dev</dd>`,
		`<dd class="class class-destructive">destructive</dd>`,
		`<dd class="kind">exec</dd>`,
		`<p class="command-size">1 line, 17 bytes</p>`,
		`<pre class="command" dir="ltr" tabindex="0"><code class="cmd">rm -rf /srv/cache</code></pre>`,
		`<select name="scope" class="scope"`,
		`<p class="reasons">rm deletes files</p>`,
		`class="countdown" data-expires="` + a.ExpiresAt.UTC().Format(time.RFC3339) + `"`,
		`>120 s<`,
		`<dd class="approvers">0 of 1</dd>`,
		`<form class="approve" method="post" action="/approvals/` + a.ID + `/approve">`,
		`<button type="submit" class="approve">Approve</button>`,
		`<form class="deny" method="post" action="/approvals/` + a.ID + `/deny">`,
		`<input name="note" class="note"`,
		`<button type="submit" class="deny">Deny</button>`,
		`<script src="/static/approvals.js" defer></script>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("approvals page lacks %s", want)
		}
	}
	if strings.Contains(body, `id="no-approvals"`) {
		t.Errorf("approvals page with a pending request shows #no-approvals")
	}
	// The fragment the script swaps in is the same markup, without the
	// layout.
	status, h, frag := pc.get("/approvals/list")
	if status != http.StatusOK || h.Get(fragmentHeader) != "approval-list" {
		t.Fatalf("GET /approvals/list: got status %d, %s %q; want 200 and approval-list", status, fragmentHeader, h.Get(fragmentHeader))
	}
	if strings.Contains(frag, "<html") || !strings.Contains(frag, `id="approval-`+a.ID+`"`) {
		t.Errorf("fragment: want the article without the layout\n%s", frag)
	}
}

func TestApproveAndDenyForms(t *testing.T) {
	ps := newPageSite(t, nil)
	pc := ps.admin("alice")
	for _, tc := range []struct {
		name       string
		action     string
		note       string
		wantStatus string
		wantFlash  string
	}{
		{"approve", "approve", "", store.ApprovalApproved, "Approved "},
		{"deny with note", "deny", "not on a Friday", store.ApprovalDenied, "Denied "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := ps.ask(ps.conn, "write", "touch /srv/"+tc.action, 1)
			status, h, _ := pc.post("/approvals/"+a.ID+"/"+tc.action, pc.form("note", tc.note, "next", "/approvals"))
			if status != http.StatusSeeOther {
				t.Fatalf("got status %d; want 303", status)
			}
			got := ps.approval(a.ID)
			if got.Status != tc.wantStatus || got.DecidedBy != "alice" || got.Reason != tc.note {
				t.Errorf("got status %s by %q reason %q; want %s by alice reason %q", got.Status, got.DecidedBy, got.Reason, tc.wantStatus, tc.note)
			}
			body := pc.follow(h)
			if f := flashText(body); !strings.HasPrefix(f, tc.wantFlash+a.ID) {
				t.Errorf("got flash %q; want %q", f, tc.wantFlash+a.ID+".")
			}
			if strings.Contains(body, `id="approval-`+a.ID+`"`) {
				t.Errorf("decided request still shown as pending")
			}
			// A second decision is told who won.
			_, h, _ = pc.post("/approvals/"+a.ID+"/approve", pc.form())
			if f := flashText(pc.follow(h)); !strings.Contains(f, "was already "+tc.wantStatus+" by alice") {
				t.Errorf("second decision: got flash %q; want it to say already %s by alice", f, tc.wantStatus)
			}
			// Its own page shows the final status.
			_, _, one := pc.get("/approvals/" + a.ID)
			if !strings.Contains(one, `id="approval-status"`) || !strings.Contains(one, `data-status="`+tc.wantStatus+`"`) {
				t.Errorf("request page: want #approval-status %s\n%s", tc.wantStatus, one)
			}
		})
	}
}

func TestApprovalExpiredDecision(t *testing.T) {
	ps := newPageSite(t, nil)
	pc := ps.admin("alice")
	a := ps.ask(ps.conn, "write", "touch /srv/late", 1)
	ps.clock.Advance(3 * time.Minute)
	_, h, _ := pc.post("/approvals/"+a.ID+"/approve", pc.form())
	if f := flashText(pc.follow(h)); !strings.Contains(f, "expired") {
		t.Errorf("got flash %q; want it to say the request expired", f)
	}
	if got := ps.approval(a.ID).Status; got != store.ApprovalExpired {
		t.Errorf("got status %s; want expired", got)
	}
}

func TestTwoPersonApproval(t *testing.T) {
	ps := newPageSite(t, nil)
	prod, _ := ps.addConnection("prod1", store.EnvProduction)
	ps.addAdmin("alice")
	ps.addAdmin("bob")
	alice, bob := ps.client(), ps.client()
	alice.loginAs("alice")
	bob.loginAs("bob")
	a := ps.ask(prod, "destructive", "rm -rf /srv/old", 2)

	_, h, _ := alice.post("/approvals/"+a.ID+"/approve", alice.form("next", "/approvals/"+a.ID))
	if got := h.Get("Location"); !strings.HasPrefix(got, "/approvals/"+a.ID+"?") {
		t.Errorf("got Location %q; want the request's own page", got)
	}
	body := alice.follow(h)
	if f := flashText(body); !strings.Contains(f, "1 of 2") {
		t.Errorf("first approval: got flash %q; want 1 of 2", f)
	}
	if !strings.Contains(body, `<dd class="approvers">1 of 2: alice</dd>`) {
		t.Errorf("request page after the first approval lacks approvers 1 of 2: alice\n%s", body)
	}
	if got := ps.approval(a.ID).Status; got != store.ApprovalPending {
		t.Errorf("after one of two approvals: got status %s; want pending", got)
	}
	_, h, _ = alice.post("/approvals/"+a.ID+"/approve", alice.form())
	if f := flashText(alice.follow(h)); !strings.Contains(f, "different admin") {
		t.Errorf("same approver twice: got flash %q; want it to ask for a different admin", f)
	}
	_, h, _ = bob.post("/approvals/"+a.ID+"/approve", bob.form())
	if f := flashText(bob.follow(h)); !strings.HasPrefix(f, "Approved") {
		t.Errorf("second approver: got flash %q; want Approved", f)
	}
	got := ps.approval(a.ID)
	if got.Status != store.ApprovalApproved || got.FirstApprover != "alice" || got.DecidedBy != "bob" {
		t.Errorf("got %s, first %q, decided by %q; want approved by alice then bob", got.Status, got.FirstApprover, got.DecidedBy)
	}
}

func TestCommandMarkupIsEscaped(t *testing.T) {
	ps := newPageSite(t, nil)
	pc := ps.admin("alice")
	a := ps.ask(ps.conn, "write", `echo "<script>alert(1)</script>" > /tmp/x`, 1)
	for _, path := range []string{"/approvals", "/approvals/list", "/approvals/" + a.ID} {
		_, _, body := pc.get(path)
		if strings.Contains(body, "<script>alert") {
			t.Errorf("%s contains the raw <script>alert", path)
		}
		if !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
			t.Errorf("%s lacks the escaped command", path)
		}
	}
}

func TestFlashNeedsSignature(t *testing.T) {
	ps := newPageSite(t, nil)
	pc := ps.admin("alice")
	_, _, body := pc.get("/approvals?flash=postern+moved+to+evil.example&flash_kind=ok&flash_sig=00")
	if f := flashText(body); f != "" {
		t.Errorf("forged flash shown: %q; want none", f)
	}
}

func TestEventStreamAnnouncesApprovals(t *testing.T) {
	ps := newPageSite(t, func(c *Config) { c.EventPoll = 5 * time.Millisecond })
	pc := ps.admin("alice")
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		ps.srv.Run(ctx)
	}()
	defer func() {
		cancel()
		select {
		case <-ran:
		case <-testwait.End(t):
			t.Errorf("the site's Run did not return by the test's deadline after its context's end")
		}
	}()

	reqCtx, reqCancel := context.WithCancel(context.Background())
	defer reqCancel()
	req, err := http.NewRequestWithContext(reqCtx, http.MethodGet, ps.ts.URL+"/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := pc.c.Do(req)
	if err != nil {
		t.Fatalf("GET /events: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("GET /events: got %d %q; want 200 text/event-stream", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		b := make([]byte, 4096)
		var buf string
		for {
			n, err := resp.Body.Read(b)
			buf += string(b[:n])
			for {
				i := strings.IndexByte(buf, '\n')
				if i < 0 {
					break
				}
				select {
				case lines <- buf[:i]:
				case <-reqCtx.Done():
					return
				}
				buf = buf[i+1:]
			}
			if err != nil {
				return
			}
		}
	}()
	// The stream opens with a comment; only then is the subscription
	// certain to be in place.
	if !waitLine(t, lines, ": connected") {
		t.Fatal("stream ended before its first comment")
	}
	ps.ask(ps.conn, "write", "touch /srv/live", 1)
	if !waitLine(t, lines, "event: approvals") {
		t.Fatal("stream ended before event: approvals")
	}
	reqCancel()
	for range lines { // the reader ends with the request
	}
}

// waitLine reads lines until want; false if the stream ended first. It
// fails t when want has not come by the test's deadline.
func waitLine(t *testing.T, lines <-chan string, want string) bool {
	t.Helper()
	end := testwait.End(t)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				return false
			}
			if l == want {
				return true
			}
		case <-end:
			t.Fatalf("no %q on the event stream by the test's deadline", want)
		}
	}
}

func TestLoginLogout(t *testing.T) {
	ps := newPageSite(t, nil)
	ps.addAdmin("alice")
	pc := ps.client()

	status, _, body := pc.tryLogin("alice", "wrong password here")
	if status != http.StatusUnauthorized || !strings.Contains(body, `id="login-error"`) {
		t.Errorf("wrong password: got status %d; want 401 with #login-error", status)
	}
	status, h, _ := pc.tryLogin("alice", pagePassword)
	if status != http.StatusSeeOther || h.Get("Location") != "/approvals" {
		t.Fatalf("right password: got %d to %q; want 303 to /approvals", status, h.Get("Location"))
	}
	if status, _, _ := pc.get("/approvals"); status != http.StatusOK {
		t.Fatalf("after login: got status %d for /approvals; want 200", status)
	}
	pc.readCSRF()
	status, h, _ = pc.post("/logout", pc.form())
	if status != http.StatusSeeOther || h.Get("Location") != "/login" {
		t.Errorf("logout: got %d to %q; want 303 to /login", status, h.Get("Location"))
	}
	if status, h, _ := pc.get("/approvals"); status != http.StatusSeeOther || !strings.HasPrefix(h.Get("Location"), "/login") {
		t.Errorf("after logout: got %d to %q; want 303 to /login", status, h.Get("Location"))
	}
}

func TestLoginLimit(t *testing.T) {
	ps := newPageSite(t, nil)
	ps.addAdmin("alice")
	pc := ps.client()
	for i := range loginAccountBurst {
		if status, _, _ := pc.tryLogin("alice", "wrong password here"); status != http.StatusUnauthorized {
			t.Fatalf("failure %d: got status %d; want 401", i+1, status)
		}
	}
	// The clock does not move: the limit stays, even for the right password.
	status, h, body := pc.tryLogin("alice", pagePassword)
	if status != http.StatusTooManyRequests {
		t.Fatalf("after %d failures: got status %d; want 429", loginAccountBurst, status)
	}
	if secs, err := strconv.Atoi(h.Get("Retry-After")); err != nil || secs < 1 {
		t.Errorf("got Retry-After %q; want a positive number of seconds", h.Get("Retry-After"))
	}
	if !strings.Contains(body, `id="login-error"`) {
		t.Errorf("429 page lacks #login-error")
	}
}

// pagePaths are the admin pages, each of which must render for an admin
// and send anyone else to the login page.
func pagePaths(approvalID string) []string {
	return []string{"/approvals", "/approvals?all=1", "/approvals/" + approvalID, "/approvals/list",
		"/connections", "/agents", "/grants", "/audit", "/recipes", "/recipes?q=cisco", "/tokens", "/notifications", "/admins"}
}

func TestPagesNeedLogin(t *testing.T) {
	ps := newPageSite(t, nil)
	ps.addAdmin("alice")
	a := ps.ask(ps.conn, "write", "touch /srv/x", 1)
	anon, admin := ps.client(), ps.client()
	admin.loginAs("alice")
	for _, p := range append(pagePaths(a.ID), "/", "/events") {
		t.Run(p, func(t *testing.T) {
			status, h, _ := anon.get(p)
			if want := "/login?next=" + url.QueryEscape(p); status != http.StatusSeeOther || h.Get("Location") != want {
				t.Errorf("without a session: got %d to %q; want 303 to %q", status, h.Get("Location"), want)
			}
			if p == "/events" {
				return // a stream: TestEventStreamAnnouncesApprovals
			}
			status, h, _ = admin.get(p)
			want := http.StatusOK
			if p == "/" {
				want = http.StatusSeeOther
			}
			if status != want {
				t.Errorf("as an admin: got status %d; want %d", status, want)
			}
			if p == "/" && h.Get("Location") != "/approvals" {
				t.Errorf("/ redirects to %q; want /approvals", h.Get("Location"))
			}
		})
	}
}

func TestPostsNeedCSRFToken(t *testing.T) {
	ps := newPageSite(t, withChecker(t, func(tg recipes.Target) recipes.Result {
		t.Errorf("a key check of %s ran for a post without its CSRF token", tg.Name)
		return recipes.Result{}
	}))
	pc := ps.admin("alice")
	a := ps.ask(ps.conn, "write", "touch /srv/x", 1)
	posts := []struct {
		path string
		form url.Values
	}{
		{"/approvals/" + a.ID + "/approve", url.Values{}},
		{"/approvals/" + a.ID + "/deny", url.Values{"note": {"no"}}},
		{"/grants", url.Values{"agent": {"bot"}, "alias": {"web1"}, "read": {"allow"}, "write": {"allow"}, "destructive": {"allow"}}},
		{"/grants/revoke", url.Values{"agent": {"bot"}, "alias": {"web1"}}},
		{"/connections/web1/check", url.Values{}},
		{"/logout", url.Values{}},
	}
	for _, tok := range []struct{ name, value string }{{"missing", ""}, {"wrong", "not-the-token"}} {
		for _, p := range posts {
			t.Run(tok.name+p.path, func(t *testing.T) {
				form := url.Values{}
				for k, v := range p.form {
					form[k] = v
				}
				if tok.value != "" {
					form.Set(csrfField, tok.value)
				}
				if status, _, _ := pc.post(p.path, form); status != http.StatusForbidden {
					t.Errorf("got status %d; want 403", status)
				}
			})
		}
	}
	if got := ps.approval(a.ID); got.Status != store.ApprovalPending {
		t.Errorf("approval is %s after refused posts; want pending", got.Status)
	}
	g, err := ps.st.GrantByNames(context.Background(), "bot", "web1")
	if err != nil {
		t.Fatalf("grant after refused posts: %v; want it kept", err)
	}
	if g.Rules.Write != store.RuleAsk {
		t.Errorf("grant write rule is %s after refused posts; want ask", g.Rules.Write)
	}
	if status, _, _ := pc.get("/approvals"); status != http.StatusOK {
		t.Errorf("session after a refused logout: got status %d; want 200", status)
	}
}

func TestSecurityHeaders(t *testing.T) {
	ps := newPageSite(t, nil)
	pc := ps.admin("alice")
	for _, p := range []string{"/login", "/approvals", "/static/approvals.js"} {
		_, h, _ := pc.get(p)
		csp := h.Get("Content-Security-Policy")
		if csp == "" || strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
			t.Errorf("%s: got CSP %q; want one without unsafe-inline or unsafe-eval", p, csp)
		}
		if !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("%s: got CSP %q; want script-src 'self' and frame-ancestors 'none'", p, csp)
		}
	}
}

// inlinePattern finds what the CSP would block: inline scripts, event
// handler attributes and style attributes or elements.
var inlinePattern = regexp.MustCompile(`(?i)<script>|<script [^>]*>[^<]|\son[a-z]+\s*=|\sstyle\s*=|<style`)

func TestPagesHaveNoInlineScriptOrStyle(t *testing.T) {
	ps := newPageSite(t, nil)
	ps.addAdmin("alice")
	pc := ps.client()
	a := ps.ask(ps.conn, "write", "touch /srv/x", 1)
	_, _, login := pc.get("/login")
	pc.loginAs("alice")
	pages := map[string]string{"/login": login}
	for _, p := range pagePaths(a.ID) {
		_, _, pages[p] = pc.get(p)
	}
	for p, body := range pages {
		if m := inlinePattern.FindString(body); m != "" {
			t.Errorf("%s has %q, which the CSP blocks", p, m)
		}
	}
}

func TestNoPageShowsPrivateKey(t *testing.T) {
	ps := newPageSite(t, withChecker(t, func(recipes.Target) recipes.Result {
		return recipes.Result{Status: recipes.StatusOK, Message: "accepted"}
	}))
	pc := ps.admin("alice")
	a := ps.ask(ps.conn, "write", "touch /srv/x", 1)
	_, h, _ := pc.post("/connections/web1/check", pc.form())
	afterCheck := pc.follow(h)
	block, _ := pem.Decode(ps.connKey)
	if block == nil {
		t.Fatal("test key is not PEM")
	}
	// Every line of the key file's body, and the key's own bytes in the
	// encodings a careless page might use.
	var secrets []string
	for _, l := range strings.Split(string(ps.connKey), "\n") {
		if len(l) >= 16 && !strings.HasPrefix(l, "-----") {
			secrets = append(secrets, l)
		}
	}
	raw, err := ssh.ParseRawPrivateKey(ps.connKey)
	if err != nil {
		t.Fatal(err)
	}
	seed := raw.(*ed25519.PrivateKey).Seed()
	secrets = append(secrets, base64.StdEncoding.EncodeToString(seed), hex.EncodeToString(seed), "PRIVATE KEY")
	pages := map[string]string{"connections after re-check": afterCheck}
	for _, p := range pagePaths(a.ID) {
		_, _, pages[p] = pc.get(p)
	}
	for p, body := range pages {
		body += html.UnescapeString(body)
		for _, sec := range secrets {
			if strings.Contains(body, sec) {
				t.Errorf("%s contains private key material %q", p, sec)
			}
		}
	}
	keys, err := ps.conn.PinnedKeys()
	if err != nil || len(keys) != 1 {
		t.Fatalf("PinnedKeys: %v, %d keys", err, len(keys))
	}
	if fp := ssh.FingerprintSHA256(keys[0]); !strings.Contains(html.UnescapeString(pages["/connections"]), fp) {
		t.Errorf("/connections lacks the pinned host key's fingerprint %s", fp)
	}
}

func TestConnectionsPageRecheck(t *testing.T) {
	for _, tc := range []struct {
		name      string
		check     fakeChecker
		wantFlash string
		wantKind  string
	}{
		{"ok", func(recipes.Target) recipes.Result {
			return recipes.Result{Status: recipes.StatusOK, Message: "exit status 0"}
		}, "Key check of web1: ok — exit status 0", "ok"},
		{"rejected", func(recipes.Target) recipes.Result {
			return recipes.Result{Status: recipes.StatusRejected, Message: "Permission denied (publickey)"}
		}, "Key check of web1: rejected — Permission denied (publickey)", "error"},
		{"unreachable", func(recipes.Target) recipes.Result {
			return recipes.Result{Status: recipes.StatusUnreachable, Message: "cannot reach 127.0.0.1:2022"}
		}, "Key check of web1: unreachable — cannot reach 127.0.0.1:2022", "error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := newPageSite(t, withChecker(t, tc.check))
			ps.addAdmin("alice")
			pc := ps.client()
			pc.loginAs("alice")
			_, _, body := pc.get("/connections")
			if !strings.Contains(body, `<tr id="conn-web1" `) || !strings.Contains(body, "127.0.0.1:2022") {
				t.Errorf("/connections lacks row conn-web1 with its address")
			}
			form := `<form class="recheck" method="post" action="/connections/web1/check">`
			if !strings.Contains(body, form) {
				t.Errorf("Re-check form not shown")
			}
			_, h, _ := pc.post("/connections/web1/check", pc.form())
			after := pc.follow(h)
			if got := flashText(after); got != tc.wantFlash {
				t.Errorf("got flash %q; want %q", got, tc.wantFlash)
			}
			if !strings.Contains(after, `class="flash flash-`+tc.wantKind+`"`) {
				t.Errorf("flash is not of kind %s", tc.wantKind)
			}
		})
	}
}

func TestAgentsPage(t *testing.T) {
	ps := newPageSite(t, nil)
	pc := ps.admin("alice")
	_, _, body := pc.get("/agents")
	row := html.UnescapeString(regexp.MustCompile(`(?s)<tr id="agent-bot">.*?</tr>`).FindString(body))
	if row == "" {
		t.Fatalf("/agents lacks row agent-bot\n%s", body)
	}
	for _, want := range []string{ps.agent.Keys[0].Fingerprint, "enabled", `<a href="/grants#agent-bot">1</a>`} {
		if !strings.Contains(row, want) {
			t.Errorf("agent-bot row lacks %q\n%s", want, row)
		}
	}
}

func TestGrantForms(t *testing.T) {
	ps := newPageSite(t, nil)
	ps.addConnection("prod1", store.EnvProduction)
	pc := ps.admin("alice")
	_, _, body := pc.get("/grants")
	for _, id := range []string{`id="grant-bot-web1" data-granted="true"`, `id="grant-bot-prod1" data-granted="false"`} {
		if !strings.Contains(body, id) {
			t.Errorf("/grants lacks cell %s", id)
		}
	}
	for _, tc := range []struct {
		name      string
		alias     string
		rules     store.Rules
		wantFlash string
		want      *store.Rules // nil: no grant afterwards
	}{
		{"edit dev", "web1", store.Rules{Read: "allow", Write: "allow", Destructive: "ask"},
			"Saved bot on web1: read=allow, write=allow, destructive=ask.",
			&store.Rules{Read: "allow", Write: "allow", Destructive: "ask"}},
		{"production destructive allow", "prod1", store.Rules{Read: "allow", Write: "ask", Destructive: "allow"},
			"Grant of bot on prod1 not saved: Destructive=allow is not permitted on a production connection",
			nil},
		// A new grant on production waits for a second admin
		// (TestPageDualControl has bob approve one).
		{"new production grant", "prod1", store.Rules{Read: "allow", Write: "ask", Destructive: "ask"},
			"Not changed yet: grant bot prod1: read=allow write=ask destructive=ask (new) waits for a second admin",
			nil},
		{"unknown rule", "web1", store.Rules{Read: "allow", Write: "maybe", Destructive: "ask"},
			"Grant of bot on web1 not saved: Write rule \"maybe\"",
			&store.Rules{Read: "allow", Write: "allow", Destructive: "ask"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, h, _ := pc.post("/grants", pc.form("agent", "bot", "alias", tc.alias,
				"read", string(tc.rules.Read), "write", string(tc.rules.Write), "destructive", string(tc.rules.Destructive)))
			if status != http.StatusSeeOther {
				t.Fatalf("got status %d; want 303", status)
			}
			if got := flashText(pc.follow(h)); !strings.HasPrefix(got, tc.wantFlash) {
				t.Errorf("got flash %q; want it to start %q", got, tc.wantFlash)
			}
			g, err := ps.st.GrantByNames(context.Background(), "bot", tc.alias)
			switch {
			case tc.want == nil && err == nil:
				t.Errorf("got grant %+v; want none", g.Rules)
			case tc.want != nil && err != nil:
				t.Errorf("got error %v; want grant %+v", err, *tc.want)
			case tc.want != nil && g.Rules != *tc.want:
				t.Errorf("got rules %+v; want %+v", g.Rules, *tc.want)
			}
		})
	}
	_, _, body = pc.get("/grants")
	cell := regexp.MustCompile(`(?s)<td class="grant" id="grant-bot-web1".*?</td>`).FindString(body)
	if !strings.Contains(cell, `<option value="allow" selected>allow</option><option value="ask">ask</option><option value="deny">deny</option></select>`+"\n"+`        <label for="g-bot-web1-destructive">`) {
		t.Errorf("cell grant-bot-web1 does not show write=allow selected\n%s", cell)
	}
	_, h, _ := pc.post("/grants/revoke", pc.form("agent", "bot", "alias", "web1"))
	if got := flashText(pc.follow(h)); got != "Revoked the grant of bot on web1." {
		t.Errorf("revoke: got flash %q", got)
	}
	if _, err := ps.st.GrantByNames(context.Background(), "bot", "web1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("after revoke: got %v; want ErrNotFound", err)
	}
	_, h, _ = pc.post("/grants/revoke", pc.form("agent", "bot", "alias", "web1"))
	if got := flashText(pc.follow(h)); !strings.Contains(got, "not revoked") {
		t.Errorf("revoking a missing grant: got flash %q; want not revoked", got)
	}
}

func TestRecipesPage(t *testing.T) {
	ps := newPageSite(t, nil)
	pc := ps.admin("alice")
	cat, err := recipes.Load()
	if err != nil {
		t.Fatal(err)
	}
	all := cat.PublicList(recipes.Filter{})
	if len(all) == 0 {
		t.Fatal("empty catalog")
	}
	one := all[0]
	for _, tc := range []struct {
		name string
		path string
		want []recipes.PublicRecipe
	}{
		{"all", "/recipes", all},
		{"q", "/recipes?q=" + url.QueryEscape(one.Key), cat.PublicList(recipes.Filter{Q: one.Key})},
		{"vendor", "/recipes?vendor=" + url.QueryEscape(one.Vendor), cat.PublicList(recipes.Filter{Vendor: one.Vendor})},
		{"host", "/recipes?host=github.com", cat.PublicList(recipes.Filter{Host: "github.com"})},
		{"nothing", "/recipes?q=no-such-recipe-anywhere", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, body := pc.get(tc.path)
			var got []string
			for _, m := range regexp.MustCompile(`<tr id="recipe-([^"]+)">`).FindAllStringSubmatch(body, -1) {
				got = append(got, m[1])
			}
			var want []string
			for _, r := range tc.want {
				want = append(want, r.Key)
			}
			if strings.Join(got, ",") != strings.Join(want, ",") {
				t.Errorf("got recipes %v; want %v", got, want)
			}
		})
	}
}

func TestEventHubAnnouncesOnlyApprovalChanges(t *testing.T) {
	ps := newPageSite(t, nil)
	prod, _ := ps.addConnection("prod1", store.EnvProduction)
	ctx := context.Background()
	// The store takes decisions from registered admins only.
	ps.addAdmin("alice")
	ps.addAdmin("bob")
	aliceID, bobID := ps.adminID("alice"), ps.adminID("bob")
	h := ps.srv.events
	_, unsubscribe := h.subscribe()
	defer unsubscribe()
	if _, err := h.check(ctx); err != nil { // the baseline
		t.Fatal(err)
	}
	var two store.Approval
	for _, step := range []struct {
		name string
		do   func() error
		want bool
	}{
		{"nothing committed", func() error { return nil }, false},
		{"new request", func() error { two = ps.ask(prod, "destructive", "rm -rf /srv/a", 2); return nil }, true},
		{"grant changed", func() error {
			_, err := ps.st.SetGrant(ctx, store.Unaudited(), "bot", "web1", store.DefaultRules())
			return err
		}, false},
		{"audit row", func() error {
			_, err := ps.eng.Audit(ctx, policy.Record{AgentID: ps.agent.ID, ConnectionID: ps.conn.ID,
				Class: policy.Read, Kind: policy.Exec, Outcome: policy.Allowed, Operation: "uptime"})
			return err
		}, false},
		{"first of two approvals", func() error {
			_, err := ps.eng.Approve(ctx, two.ID, policy.Decider{AdminID: aliceID, Name: "alice"}, policy.Scope{})
			return err
		}, true},
		{"denied", func() error {
			_, err := ps.eng.Deny(ctx, two.ID, policy.Decider{AdminID: bobID, Name: "bob"}, "")
			return err
		}, true},
		{"listing with nothing to expire", func() error { _, err := ps.eng.Approvals(ctx, false); return err }, false},
	} {
		if err := step.do(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		got, err := h.check(ctx)
		if err != nil {
			t.Fatalf("%s: check: %v", step.name, err)
		}
		if got != step.want {
			t.Errorf("%s: got announce %v; want %v", step.name, got, step.want)
		}
	}
}

// TestEventStreamEndsAtShutdown serves the site with Serve, as postern
// does, and checks that an open event stream ends when the server stops
// and that nothing it started is left running.
func TestEventStreamEndsAtShutdown(t *testing.T) {
	ps := newPageSite(t, func(c *Config) { c.EventPoll = 5 * time.Millisecond })
	ps.addAdmin("alice")
	// The store's and the httptest server's goroutines live until the
	// test's cleanup; everything Serve starts must end before it.
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx := context.Background()
	admin, err := ps.st.AdminByName(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	token, sha := NewToken("")
	if _, err := ps.st.CreateAdminSession(ctx, admin.ID, sha, "csrf", ps.clock.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	cert, err := LoadCertificate(t.TempDir(), "", "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveCtx, stop := context.WithCancel(ctx)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- ps.srv.Serve(serveCtx, ln, cert.TLS) }()

	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} // the test's own self-signed certificate
	defer tr.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodGet, "https://"+ln.Addr().String()+"/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.AddCookie(&http.Cookie{Name: sessionCookie, Value: token})
	resp, err := (&http.Client{Transport: tr, Timeout: testwait.Remaining(t)}).Do(req)
	if err != nil {
		t.Fatalf("GET /events: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /events: got status %d; want 200", resp.StatusCode)
	}
	first := make([]byte, len("retry: 3000\n: connected\n\n"))
	if _, err := io.ReadFull(resp.Body, first); err != nil {
		t.Fatalf("reading the stream's opening: %v", err)
	}
	stop()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		if errors.Is(err, context.DeadlineExceeded) || os.IsTimeout(err) {
			t.Fatalf("the event stream was still open at the test's deadline after shutdown: %v", err)
		}
		t.Logf("stream ended with %v", err)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve: %v; want nil after shutdown", err)
		}
	case <-testwait.End(t):
		t.Fatalf("Serve did not return by the test's deadline after its context's end")
	}
}
