package web

import (
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/postern/postern/internal/testwait"
	"github.com/postern/postern/notify"
	"github.com/postern/postern/store"
)

// Secrets the notification tests give channels; no page, flash, API answer
// or log line may hold them.
const (
	hookToken  = "Zq7hookTokenInPath"
	hookSecret = "Zq7hookSigningSecret"
)

// hookReceiver is a local webhook (httptest on 127.0.0.1) that answers
// with status and records the bodies it got.
type hookReceiver struct {
	srv *httptest.Server
	// mu guards status and bodies.
	mu     sync.Mutex
	status int
	bodies [][]byte
}

func newHookReceiver(t *testing.T) *hookReceiver {
	t.Helper()
	h := &hookReceiver{status: http.StatusOK}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		h.bodies = append(h.bodies, b)
		code := h.status
		h.mu.Unlock()
		w.WriteHeader(code)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hookReceiver) url() string { return h.srv.URL + "/hooks/" + hookToken }

func (h *hookReceiver) setStatus(code int) {
	h.mu.Lock()
	h.status = code
	h.mu.Unlock()
}

func (h *hookReceiver) received() [][]byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([][]byte(nil), h.bodies...)
}

// lockedLog is a zerolog sink that tests read.
type lockedLog struct {
	// mu guards b.
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// withNotifier gives a site's Config a dispatcher over its store and a
// logger writing to log. A delivery's timeout is t's remaining time: a
// receiver on loopback is never cut short by a busy machine.
func withNotifier(t *testing.T, log *lockedLog) func(*Config) {
	return func(c *Config) {
		c.Logger = zerolog.New(log)
		d, err := notify.New(notify.Config{Store: c.Store, BaseURL: "https://postern.test", Now: c.Now,
			Logger: zerolog.New(log), Timeout: testwait.Remaining(t)})
		if err != nil {
			panic(err)
		}
		c.Notifier = d
	}
}

// checkNoHookSecret fails if text holds the hook's URL token or secret.
func checkNoHookSecret(t *testing.T, place, text string) {
	t.Helper()
	for _, s := range []string{hookToken, hookSecret} {
		if strings.Contains(text, s) {
			t.Errorf("%s holds a channel secret (%s…)", place, s[:6])
		}
	}
}

// TestNotificationsPage: an admin adds a channel on the page, sees it with
// its URL's path left out and its secret as "set", tests it (delivered,
// then refused), and removes it; nothing the page, its flashes or the log
// show holds the URL's token or the secret.
func TestNotificationsPage(t *testing.T) {
	log := &lockedLog{}
	ps := newPageSite(t, withNotifier(t, log))
	pc := ps.admin("alice")
	hook := newHookReceiver(t)
	var seen strings.Builder // every page and flash, for the leak check

	_, _, body := pc.get("/notifications")
	seen.WriteString(body)
	if !strings.Contains(body, `id="no-channels"`) || !strings.Contains(body, `id="add-channel"`) {
		t.Fatalf("empty notifications page lacks the empty note or the add form:\n%s", body)
	}
	if m := inlinePattern.FindString(body); m != "" {
		t.Errorf("the page has %q, which the CSP blocks", m)
	}

	// A refused add names the fault without echoing the URL.
	status, h, _ := pc.post("/notifications", pc.form("name", "ops", "url", "ftp://x/"+hookToken, "format", "json",
		"events", "pending"))
	bad := flashText(pc.follow(h))
	seen.WriteString(h.Get("Location") + bad)
	if status != http.StatusSeeOther || !strings.Contains(bad, "not added") || !strings.Contains(bad, "https://") {
		t.Errorf("bad URL: %d, flash %q; want a refusal saying https://", status, bad)
	}

	form := pc.form("name", "ops", "url", hook.url(), "format", "json", "secret", hookSecret)
	form["events"] = []string{"pending", "decided"}
	status, h, _ = pc.post("/notifications", form)
	page := pc.follow(h)
	seen.WriteString(h.Get("Location") + page)
	shown := "http://" + hook.srv.Listener.Addr().String() + "/…"
	if f := flashText(page); status != http.StatusSeeOther || f != "Added channel ops: json to "+shown+"." {
		t.Errorf("add: %d, flash %q; want the channel added to %s", status, f, shown)
	}
	row := regexpRow(page, "channel-ops")
	for _, want := range []string{shown, ">set<", "pending, decided", ">never<"} {
		if !strings.Contains(row, want) {
			t.Errorf("channel row lacks %q:\n%s", want, row)
		}
	}
	ch, err := ps.st.NotifyChannel(context.Background(), "ops")
	if err != nil || !ch.HasSecret || !ch.OnPending || !ch.OnDecided {
		t.Fatalf("stored channel = %+v, %v; want ops with a secret and both events", ch, err)
	}

	// Test: delivered, then refused, each in the flash and on the row.
	_, h, _ = pc.post("/notifications/ops/test", pc.form())
	page = pc.follow(h)
	seen.WriteString(h.Get("Location") + page)
	if f := flashText(page); f != "The test message to ops was delivered (HTTP 200)." {
		t.Errorf("test flash %q; want delivered", f)
	}
	if got := hook.received(); len(got) != 1 || !strings.Contains(string(got[0]), `"event":"test"`) {
		t.Errorf("the receiver got %q; want one test event", got)
	}
	hook.setStatus(http.StatusInternalServerError)
	_, h, _ = pc.post("/notifications/ops/test", pc.form())
	page = pc.follow(h)
	seen.WriteString(h.Get("Location") + page)
	if f := flashText(page); !strings.Contains(f, "was not delivered: HTTP 500") {
		t.Errorf("test flash %q; want not delivered with HTTP 500", f)
	}
	if row := regexpRow(page, "channel-ops"); !strings.Contains(row, "HTTP 500 Internal Server Error") {
		t.Errorf("channel row does not show the failure:\n%s", row)
	}

	// Remove.
	_, h, _ = pc.post("/notifications/ops/remove", pc.form())
	page = pc.follow(h)
	seen.WriteString(h.Get("Location") + page)
	if f := flashText(page); !strings.Contains(f, "Removed channel ops") || !strings.Contains(page, `id="no-channels"`) {
		t.Errorf("remove: flash %q; want removed and the list empty", f)
	}
	_, h, _ = pc.post("/notifications/ops/remove", pc.form())
	if f := flashText(pc.follow(h)); !strings.Contains(f, "not removed") {
		t.Errorf("removing again: flash %q; want a refusal", f)
	}
	checkNoHookSecret(t, "the pages and flashes", seen.String())
	checkNoHookSecret(t, "the log", log.String())
}

// regexpRow is the <tr id=id> of page, or "".
func regexpRow(page, id string) string {
	i := strings.Index(page, `<tr id="`+id+`"`)
	if i < 0 {
		return ""
	}
	j := strings.Index(page[i:], "</tr>")
	if j < 0 {
		return page[i:]
	}
	return page[i : i+j]
}

// TestNotificationsPageDeliveryLog: the page lists recent deliveries with
// their state and error.
func TestNotificationsPageDeliveryLog(t *testing.T) {
	log := &lockedLog{}
	ps := newPageSite(t, withNotifier(t, log))
	pc := ps.admin("alice")
	hook := newHookReceiver(t)
	hook.setStatus(http.StatusBadGateway)
	if _, err := ps.st.CreateNotifyChannel(context.Background(), store.Unaudited(), store.NewNotifyChannel{Name: "ops", URL: hook.url(),
		OnPending: true}); err != nil {
		t.Fatal(err)
	}
	a := ps.ask(ps.conn, "write", "touch /srv/x", 1)
	if _, err := ps.srv.cfg.Notifier.DeliverDue(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, _, page := pc.get("/notifications")
	row := page[strings.Index(page, `id="deliveries"`):]
	for _, want := range []string{a.ID, "pending", `status-queued`, "HTTP 502 Bad Gateway"} {
		if !strings.Contains(row, want) {
			t.Errorf("delivery log lacks %q", want)
		}
	}
	checkNoHookSecret(t, "the page", page)
}

// TestNotificationsPageNeedsLoginAndCSRF: the page needs a session and its
// forms the session's CSRF token.
func TestNotificationsPageNeedsLoginAndCSRF(t *testing.T) {
	ps := newPageSite(t, withNotifier(t, &lockedLog{}))
	hook := newHookReceiver(t)
	if _, err := ps.st.CreateNotifyChannel(context.Background(), store.Unaudited(), store.NewNotifyChannel{Name: "ops", URL: hook.url(),
		OnPending: true}); err != nil {
		t.Fatal(err)
	}
	anon := ps.client()
	if status, h, _ := anon.get("/notifications"); status != http.StatusSeeOther || !strings.HasPrefix(h.Get("Location"), "/login") {
		t.Errorf("without a session: %d to %q; want 303 to the login page", status, h.Get("Location"))
	}
	pc := ps.admin("alice")
	for _, p := range []struct {
		path string
		form url.Values
	}{
		{"/notifications", url.Values{"name": {"x"}, "url": {"https://example.com/"}, "events": {"pending"}}},
		{"/notifications/ops/test", url.Values{}},
		{"/notifications/ops/remove", url.Values{}},
	} {
		if status, _, _ := pc.post(p.path, p.form); status != http.StatusForbidden {
			t.Errorf("POST %s without the CSRF token: %d; want 403", p.path, status)
		}
	}
	if chs, _ := ps.st.ListNotifyChannels(context.Background()); len(chs) != 1 || chs[0].Name != "ops" {
		t.Errorf("channels after refused posts: %v; want only ops", chs)
	}
	if len(hook.received()) != 0 {
		t.Error("a refused test post sent a message")
	}
}

// TestApprovalsTitleCountsPending: the approvals page's title says how many
// requests wait, and the offer to turn on browser notifications is on the
// page, hidden until approvals.js shows it.
func TestApprovalsTitleCountsPending(t *testing.T) {
	ps := newPageSite(t, nil)
	pc := ps.admin("alice")
	_, _, page := pc.get("/approvals")
	if !strings.Contains(page, "<title>Approvals · postern</title>") {
		t.Errorf("no request pending: title not plain; page head:\n%s", page[:min(len(page), 400)])
	}
	if !strings.Contains(page, `<p id="notify-offer" class="notify-offer" hidden>`) {
		t.Error("the page lacks the hidden notification offer")
	}
	ps.ask(ps.conn, "write", "touch /srv/a", 1)
	ps.ask(ps.conn, "write", "touch /srv/b", 1)
	_, _, page = pc.get("/approvals")
	if !strings.Contains(page, "<title>(2) Approvals · postern</title>") {
		t.Errorf("two pending: want the title (2) Approvals · postern")
	}
}

// notifyAPI calls the API and decodes data.
func (as *apiSite) notifyCall(method, path, token, body string) (apiResp, map[string]any) {
	as.t.Helper()
	r := as.call(method, path, token, body, "Content-Type", "application/json")
	var env map[string]any
	if err := json.Unmarshal(r.body, &env); err != nil {
		as.t.Fatalf("%s %s: %d %s: not JSON", method, path, r.status, r.body)
	}
	data, _ := env["data"].(map[string]any)
	return r, data
}

// TestNotificationsAPI: add, list, read, test and remove a channel over
// REST; answers match the OpenAPI document, and none holds the URL's token
// or the secret.
func TestNotificationsAPI(t *testing.T) {
	log := &lockedLog{}
	as := newAPISite(t, withNotifier(t, log))
	doc := loadOpenAPI(t)
	hook := newHookReceiver(t)
	var seen strings.Builder
	check := func(route string, r apiResp) {
		t.Helper()
		seen.Write(r.body)
		op := strings.SplitN(route, " ", 2)
		resp, _ := doc.operation(op[0], op[1])["responses"].(map[string]any)
		spec, ok := resp[strconv.Itoa(r.status)]
		if !ok {
			t.Errorf("%s answered %d, which is not documented", route, r.status)
			return
		}
		var body any
		if err := json.Unmarshal(r.body, &body); err != nil {
			t.Fatal(err)
		}
		if err := doc.validate(responseSchema(t, doc, spec), body, "body"); err != nil {
			t.Errorf("%s %d does not match the document: %v\n%s", route, r.status, err, r.body)
		}
	}

	body := `{"name": "ops", "url": "` + hook.url() + `", "format": "json", "secret": "` + hookSecret + `", "events": ["pending"]}`
	r, data := as.notifyCall("POST", "/v1/notifications", as.root, body)
	check("POST /v1/notifications", r)
	if r.status != http.StatusCreated || data["name"] != "ops" || data["secret_set"] != true ||
		data["url"] != "http://"+hook.srv.Listener.Addr().String()+"/…" || data["last_delivery_at"] != nil {
		t.Fatalf("add: %d %s; want 201 with ops, secret set, URL elided", r.status, r.body)
	}
	id, _ := data["id"].(string)
	if ev, _ := data["events"].([]any); len(ev) != 1 || ev[0] != "pending" {
		t.Errorf("events = %v; want [pending]", data["events"])
	}

	r, _ = as.notifyCall("POST", "/v1/notifications", as.root, body)
	check("POST /v1/notifications", r)
	if code, field := r.errCode(t); r.status != http.StatusConflict || code != "already_exists" || field != "name" {
		t.Errorf("second add: %d %s %s; want 409 already_exists on name", r.status, code, field)
	}
	for _, tt := range []struct{ body, field string }{
		{`{"name": "x", "url": "ftp://h/` + hookToken + `"}`, "url"},
		{`{"name": "x", "url": "https://h/", "format": "xml"}`, "format"},
		{`{"name": "x", "url": "https://h/", "events": ["expired"]}`, "events"},
		{`{"name": "x", "url": "https://h/", "format": "slack", "secret": "s"}`, "secret"},
		{`{"name": "x", "url": "https://h/", "colour": "red"}`, "colour"},
	} {
		r, _ := as.notifyCall("POST", "/v1/notifications", as.root, tt.body)
		check("POST /v1/notifications", r)
		if code, field := r.errCode(t); r.status != http.StatusBadRequest || field != tt.field {
			t.Errorf("add %s: %d %s on %q; want 400 on %s", tt.body, r.status, code, field, tt.field)
		}
	}

	r = as.get("/v1/notifications")
	check("GET /v1/notifications", r)
	if recs, _, _ := r.list(t); len(recs) != 1 || recs[0]["id"] != id {
		t.Errorf("list = %s; want the one channel", r.body)
	}
	r = as.get("/v1/notifications?format=slack")
	if recs, _, _ := r.list(t); len(recs) != 0 {
		t.Errorf("list of slack channels = %s; want none", r.body)
	}
	r = as.get("/v1/notifications/ops")
	check("GET /v1/notifications/{id}", r)
	if r.data(t)["id"] != id {
		t.Errorf("get by name = %s; want the channel", r.body)
	}

	r, data = as.notifyCall("POST", "/v1/notifications/"+id+"/test", as.ci, "")
	check("POST /v1/notifications/{id}/test", r)
	if r.status != http.StatusOK || data["delivered"] != true || data["status"] != 200.0 {
		t.Errorf("test: %d %s; want delivered with 200", r.status, r.body)
	}
	hook.setStatus(http.StatusForbidden)
	r, data = as.notifyCall("POST", "/v1/notifications/ops/test", as.ci, "")
	check("POST /v1/notifications/{id}/test", r)
	if data["delivered"] != false || data["status"] != 403.0 || !strings.Contains(data["error"].(string), "403") {
		t.Errorf("test against a 403: %s; want not delivered, 403", r.body)
	}
	if got := hook.received(); len(got) != 2 {
		t.Errorf("receiver got %d messages; want the two tests", len(got))
	}

	r = as.call("DELETE", "/v1/notifications/ops", as.root, "")
	check("DELETE /v1/notifications/{id}", r)
	if r.status != http.StatusOK || r.data(t)["id"] != id {
		t.Errorf("remove: %d %s; want the removed channel", r.status, r.body)
	}
	for _, c := range []struct{ method, path string }{
		{"GET", "/v1/notifications/ops"}, {"DELETE", "/v1/notifications/ops"}, {"POST", "/v1/notifications/ops/test"},
	} {
		r := as.call(c.method, c.path, as.root, "")
		check(c.method+" "+strings.Replace(c.path, "/ops", "/{id}", 1), r)
		if r.status != http.StatusNotFound {
			t.Errorf("%s %s after removal: %d; want 404", c.method, c.path, r.status)
		}
	}
	checkNoHookSecret(t, "the API's answers", seen.String())
	checkNoHookSecret(t, "the log", log.String())
}

// TestNotificationsAPIChangesNeedAnAdminToken: a token that belongs to no
// admin can list channels but not change or test them.
func TestNotificationsAPIChangesNeedAnAdminToken(t *testing.T) {
	as := newAPISite(t, withNotifier(t, &lockedLog{}))
	// Scope admin, so that what refuses it is its lack of an owner.
	tok, sha := NewConsoleToken()
	if _, err := as.st.CreateConsoleToken(context.Background(), store.Unaudited(), "old", sha, as.alice, store.ScopeAdmin); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", as.path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE console_tokens SET admin_id = NULL WHERE name = 'old'`); err != nil {
		t.Fatal(err)
	}
	if _, err := as.st.CreateNotifyChannel(context.Background(), store.Unaudited(), store.NewNotifyChannel{Name: "ops",
		URL: "https://hooks.example/x", OnPending: true}); err != nil {
		t.Fatal(err)
	}
	if r := as.call("GET", "/v1/notifications", tok, ""); r.status != http.StatusOK {
		t.Errorf("list with an unowned token: %d; want 200", r.status)
	}
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/v1/notifications", `{"name": "x", "url": "https://hooks.example/y"}`},
		{"POST", "/v1/notifications/ops/test", ""},
		{"DELETE", "/v1/notifications/ops", ""},
	} {
		r := as.call(c.method, c.path, tok, c.body)
		if code, _ := r.errCode(t); r.status != http.StatusForbidden || code != "token_without_admin" {
			t.Errorf("%s %s with an unowned token: %d %s; want 403 token_without_admin", c.method, c.path, r.status, code)
		}
	}
	if chs, _ := as.st.ListNotifyChannels(context.Background()); len(chs) != 1 {
		t.Errorf("channels: %d; want the one, unchanged", len(chs))
	}
}
