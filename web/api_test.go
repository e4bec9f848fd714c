package web

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/crypto/ssh"

	"github.com/postern/postern/internal/fakeclock"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/recipes"
	"github.com/postern/postern/store"
)

// apiSite is a server over a fresh store, called through its Handler with
// httptest recorders, with two console tokens ("ci" and "ops"), one agent
// "bot", a dev connection "web" and a production connection "db", both
// with real ed25519 private keys and granted to bot.
type apiSite struct {
	t     testing.TB
	clock *fakeclock.Clock
	st    *store.Store
	eng   *policy.Engine
	srv   *Server
	agent *store.Agent
	web   *store.Connection
	db    *store.Connection
	// keys holds every connection's private key file: no answer may
	// contain any of it.
	keys [][]byte
	ci   string // the "ci" token, alice's, of the default scope (approve)
	ops  string // the "ops" token, bob's
	root string // the "root" token, alice's, of scope admin: it may change things
	// alice and bob are the admin ids of the tokens' owners.
	alice, bob string
	path       string // the database file, for tests that tamper with it
}

// newAPISite builds the site. The limiter runs on the fake clock, which
// never moves on its own, so the default burst would refuse a long test:
// the burst is effectively unlimited unless edit sets one.
func newAPISite(t testing.TB, edit func(*Config)) *apiSite {
	t.Helper()
	ctx := context.Background()
	clock := fakeclock.New()
	b := newTestBackend(t, clock)
	st, eng, path := b.st, b.eng, b.path
	cfg := Config{Store: st, Engine: eng, Catalog: b.cat, Now: clock.Now, Logger: zerolog.Nop(),
		APIRate: 1, APIBurst: 1 << 30}
	if edit != nil {
		edit(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	as := &apiSite{t: t, clock: clock, st: st, eng: eng, srv: srv, path: path}
	as.alice, as.bob = as.addAdmin("alice"), as.addAdmin("bob")
	as.ci, as.ops = as.addToken("ci", as.alice), as.addToken("ops", as.bob)
	as.root = as.addScopedToken("root", as.alice, store.ScopeAdmin)
	if as.agent, err = st.CreateAgent(ctx, store.Unaudited(), "bot", newTestKeyPair(t).Authorized+" bot@test"); err != nil {
		t.Fatalf("CreateAgent: %v", err)
	}
	as.web = as.addConnection("web", store.EnvDev)
	as.db = as.addConnection("db", store.EnvProduction)
	for _, alias := range []string{"web", "db"} {
		if _, err := st.SetGrant(ctx, store.Unaudited(), "bot", alias, store.Rules{Read: store.RuleAllow, Write: store.RuleAsk,
			Destructive: store.RuleAsk}); err != nil {
			t.Fatalf("SetGrant: %v", err)
		}
	}
	return as
}

// addToken makes a console token of admin adminID and returns it.
func (as *apiSite) addToken(name, adminID string) string {
	as.t.Helper()
	return as.addScopedToken(name, adminID, "")
}

// addScopedToken makes a console token of admin adminID with scope.
func (as *apiSite) addScopedToken(name, adminID string, scope store.TokenScope) string {
	as.t.Helper()
	tok, sha := NewConsoleToken()
	if _, err := as.st.CreateConsoleToken(context.Background(), store.Unaudited(), name, sha, adminID, scope); err != nil {
		as.t.Fatalf("CreateConsoleToken: %v", err)
	}
	return tok
}

// addAdmin registers an admin and returns its id.
func (as *apiSite) addAdmin(name string) string {
	as.t.Helper()
	a, err := as.st.CreateAdmin(context.Background(), store.Unaudited(), name, "$argon2id$unused", store.RoleOwner)
	if err != nil {
		as.t.Fatalf("CreateAdmin: %v", err)
	}
	return a.ID
}

func (as *apiSite) addConnection(alias string, env store.Env) *store.Connection {
	as.t.Helper()
	c, key := addTestConnection(as.t, as.st, alias, env)
	as.keys = append(as.keys, key)
	return c
}

// ask stores an approval request of bot on c, needing needed approvals.
func (as *apiSite) ask(c *store.Connection, class, text string, needed int) store.Approval {
	as.t.Helper()
	a, _, err := as.st.RequestApproval(context.Background(), store.Approval{
		AgentID: as.agent.ID, ConnectionID: c.ID, Class: class, Kind: "exec", Operation: text,
		OperationSHA256: policy.OperationHash(text), ApprovalsNeeded: needed,
	}, policy.DefaultApprovalLifetime)
	if err != nil {
		as.t.Fatalf("RequestApproval: %v", err)
	}
	return a
}

// audit appends an audit row of bot on c.
func (as *apiSite) audit(c *store.Connection, class policy.Class, outcome policy.Outcome, text string) int64 {
	as.t.Helper()
	seq, err := as.eng.Audit(context.Background(), policy.Record{AgentID: as.agent.ID, AgentName: "bot",
		ConnectionID: c.ID, ConnectionAlias: c.Alias, Class: class, Kind: policy.Exec, Outcome: outcome, Operation: text,
		SessionID: "ses_" + c.Alias})
	if err != nil {
		as.t.Fatalf("Audit: %v", err)
	}
	return seq
}

// apiResp is one answer.
type apiResp struct {
	status int
	header http.Header
	body   []byte
}

// call sends a request through the handler. token "" sends none; hdr are
// extra header name, value pairs.
func (as *apiSite) call(method, target, token, body string, hdr ...string) apiResp {
	as.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, "https://postern.test"+target, rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	as.srv.Handler().ServeHTTP(rec, req)
	res := rec.Result()
	b, _ := io.ReadAll(res.Body)
	resp := apiResp{status: res.StatusCode, header: res.Header, body: b}
	as.checkNoKey(method+" "+target, resp)
	return resp
}

// get is call with GET and the ci token.
func (as *apiSite) get(target string) apiResp {
	as.t.Helper()
	return as.call("GET", target, as.ci, "")
}

// checkNoKey fails if an answer contains any connection's private key.
func (as *apiSite) checkNoKey(what string, r apiResp) {
	as.t.Helper()
	if leak := keyLeak(as.keys, string(r.body)+fmt.Sprint(r.header)); leak != "" {
		as.t.Errorf("%s: answer contains %s", what, leak)
	}
}

// keyLeak says what part of a private key text holds — its armour or any
// line of its base64 body — or "" for none.
func keyLeak(keys [][]byte, text string) string {
	if strings.Contains(text, "PRIVATE KEY") {
		return "PRIVATE KEY"
	}
	for _, k := range keys {
		for _, line := range strings.Split(string(k), "\n") {
			if len(line) >= 16 && !strings.HasPrefix(line, "-----") && strings.Contains(text, line) {
				return "a line of a connection's private key"
			}
		}
	}
	return ""
}

// decode parses an answer's JSON body into a generic object, after checking
// its envelope (see checkEnvelope).
func (r apiResp) decode(t testing.TB) map[string]any {
	t.Helper()
	m, err := checkEnvelope(r)
	if err != nil {
		t.Fatalf("answer %d %s: %v", r.status, r.body, err)
	}
	return m
}

// checkEnvelope checks the shape of every JSON answer: a success is
// {"data", "request_id"} (lists add has_more and next_cursor) and its
// records have an id and modified_at; an error is {"error": {"code",
// "message", "field"?}, "request_id"} with a 4xx or 5xx status; the
// request_id is the X-Request-Id header's.
func checkEnvelope(r apiResp) (map[string]any, error) {
	if ct := r.header.Get("Content-Type"); ct != "application/json; charset=utf-8" {
		return nil, fmt.Errorf("Content-Type %q; want application/json; charset=utf-8", ct)
	}
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		return nil, fmt.Errorf("body is not a JSON object: %v", err)
	}
	rid, _ := m["request_id"].(string)
	if !strings.HasPrefix(rid, "req_") {
		return nil, fmt.Errorf("request_id %v; want req_...", m["request_id"])
	}
	if r.header.Get("Idempotent-Replayed") == "" && rid != r.header.Get("X-Request-Id") {
		return nil, fmt.Errorf("request_id %s; want the X-Request-Id header %s", rid, r.header.Get("X-Request-Id"))
	}
	keys := slices.Sorted(mapKeys(m))
	if r.status >= 400 {
		if !slices.Equal(keys, []string{"error", "request_id"}) {
			return nil, fmt.Errorf("error answer has keys %v; want error, request_id", keys)
		}
		e, ok := m["error"].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("error is %T; want an object", m["error"])
		}
		for k, v := range e {
			if _, isStr := v.(string); !isStr || !slices.Contains([]string{"code", "message", "field"}, k) {
				return nil, fmt.Errorf("error.%s = %v; want only the strings code, message, field", k, v)
			}
		}
		if e["code"] == "" || e["code"] == nil || e["message"] == "" || e["message"] == nil {
			return nil, fmt.Errorf("error %v lacks a code or message", e)
		}
		return m, nil
	}
	if r.status != http.StatusOK && r.status != http.StatusCreated && r.status != http.StatusAccepted {
		return nil, fmt.Errorf("success status %d; the API answers 200, 201 for a record it created, or 202 for a change that waits for a second admin", r.status)
	}
	switch {
	case slices.Equal(keys, []string{"data", "request_id"}):
		if rec, ok := m["data"].(map[string]any); ok {
			if err := checkRecord(rec); err != nil {
				return nil, err
			}
		}
	case slices.Equal(keys, []string{"data", "has_more", "next_cursor", "request_id"}):
		list, ok := m["data"].([]any)
		if !ok {
			return nil, fmt.Errorf("list data is %T; want an array", m["data"])
		}
		more, ok := m["has_more"].(bool)
		if !ok {
			return nil, fmt.Errorf("has_more is %T; want a boolean", m["has_more"])
		}
		if next, isStr := m["next_cursor"].(string); more != (isStr && next != "") || (!isStr && m["next_cursor"] != nil) {
			return nil, fmt.Errorf("has_more %v with next_cursor %v; want a cursor exactly when there is more", more, m["next_cursor"])
		}
		for _, it := range list {
			rec, ok := it.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("list item is %T; want an object", it)
			}
			if err := checkRecord(rec); err != nil {
				return nil, err
			}
		}
	default:
		return nil, fmt.Errorf("answer has keys %v; want data, request_id (and has_more, next_cursor for a list)", keys)
	}
	return m, nil
}

// checkRecord checks a record's id and modified_at (null only for recipes,
// which the binary carries), and that every *_at field is RFC 3339 UTC.
func checkRecord(rec map[string]any) error {
	if _, isCheck := rec["connection"].(map[string]any); isCheck { // a key check's or a change's result
		return checkRecord(rec["connection"].(map[string]any))
	}
	if tok, isNew := rec["token"].(map[string]any); isNew { // a token just made, with its value
		return checkRecord(tok)
	}
	if ch, isHeld := rec["change"].(map[string]any); isHeld { // a token that waits for a second admin, with its value
		return checkRecord(ch)
	}
	if _, isChain := rec["intact"]; isChain {
		return nil
	}
	if id, _ := rec["id"].(string); id == "" {
		return fmt.Errorf("record %v has no id", rec)
	}
	if _, ok := rec["modified_at"]; !ok {
		return fmt.Errorf("record %v has no modified_at", rec["id"])
	}
	if rec["modified_at"] == nil && rec["key"] == nil {
		return fmt.Errorf("record %v: modified_at is null", rec["id"])
	}
	for k, v := range rec {
		if !strings.HasSuffix(k, "_at") && k != "time" || v == nil {
			continue
		}
		s, _ := v.(string)
		tm, err := time.Parse(time.RFC3339Nano, s)
		if err != nil || !strings.HasSuffix(s, "Z") || tm.IsZero() {
			return fmt.Errorf("record %v: %s = %v; want an RFC 3339 UTC time", rec["id"], k, v)
		}
	}
	return nil
}

func mapKeys(m map[string]any) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// errCode returns an error answer's code and field, after checking the
// envelope.
func (r apiResp) errCode(t testing.TB) (code, field string) {
	t.Helper()
	m := r.decode(t)
	e, _ := m["error"].(map[string]any)
	code, _ = e["code"].(string)
	field, _ = e["field"].(string)
	return code, field
}

// errMessage is an error answer's message.
func (r apiResp) errMessage(t testing.TB) string {
	t.Helper()
	e, _ := r.decode(t)["error"].(map[string]any)
	msg, _ := e["message"].(string)
	return msg
}

// data is a success answer's data object.
func (r apiResp) data(t testing.TB) map[string]any {
	t.Helper()
	d, ok := r.decode(t)["data"].(map[string]any)
	if !ok {
		t.Fatalf("data of %s is not an object", r.body)
	}
	return d
}

// list is a list answer's records, has_more and next_cursor.
func (r apiResp) list(t testing.TB) ([]map[string]any, bool, string) {
	t.Helper()
	m := r.decode(t)
	var out []map[string]any
	for _, it := range m["data"].([]any) {
		out = append(out, it.(map[string]any))
	}
	next, _ := m["next_cursor"].(string)
	return out, m["has_more"].(bool), next
}

// field collects one string field of records.
func field(recs []map[string]any, name string) []string {
	var out []string
	for _, r := range recs {
		out = append(out, fmt.Sprint(r[name]))
	}
	return out
}

// TestAPIAuth: every route but the document needs a known bearer token;
// a refusal is 401 with WWW-Authenticate and the error shape.
func TestAPIAuth(t *testing.T) {
	as := newAPISite(t, nil)
	removed := as.addToken("gone", as.alice)
	if err := as.st.RemoveConsoleToken(context.Background(), store.Unaudited(), "gone"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		header string
		want   int
	}{
		{"no header", "", http.StatusUnauthorized},
		{"basic scheme", "Basic " + as.ci, http.StatusUnauthorized},
		{"bearer without token", "Bearer ", http.StatusUnauthorized},
		{"unknown token", "Bearer pst_nosuchtoken", http.StatusUnauthorized},
		{"removed token", "Bearer " + removed, http.StatusUnauthorized},
		{"overlong token", "Bearer " + strings.Repeat("x", 300), http.StatusUnauthorized},
		{"valid token", "Bearer " + as.ci, http.StatusOK},
		{"lower-case scheme", "bearer " + as.ops, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var hdr []string
			if tt.header != "" {
				hdr = []string{"Authorization", tt.header}
			}
			r := as.call("GET", "/v1/agents", "", "", hdr...)
			if r.status != tt.want {
				t.Fatalf("status %d; want %d (%s)", r.status, tt.want, r.body)
			}
			if tt.want != http.StatusUnauthorized {
				return
			}
			if code, _ := r.errCode(t); code != "unauthorized" {
				t.Errorf("code %q; want unauthorized", code)
			}
			if got := r.header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") {
				t.Errorf("WWW-Authenticate %q; want Bearer ...", got)
			}
		})
	}
	// The document itself needs no token.
	if r := as.call("GET", "/v1/openapi.json", "", ""); r.status != http.StatusOK {
		t.Errorf("GET /v1/openapi.json without a token: %d; want 200", r.status)
	}
}

// TestAPIRateLimit: each token has its own bucket; an exhausted one answers
// 429 with Retry-After; failed authentications are limited per address.
func TestAPIRateLimit(t *testing.T) {
	as := newAPISite(t, func(c *Config) { c.APIRate, c.APIBurst = 0.5, 2 })
	for i := range 2 {
		if r := as.get("/v1/agents"); r.status != http.StatusOK {
			t.Fatalf("request %d: %d; want 200", i+1, r.status)
		}
	}
	r := as.get("/v1/agents")
	if r.status != http.StatusTooManyRequests {
		t.Fatalf("third request: %d; want 429", r.status)
	}
	if code, _ := r.errCode(t); code != "rate_limited" {
		t.Errorf("code %q; want rate_limited", code)
	}
	if got := r.header.Get("Retry-After"); got != "2" {
		t.Errorf("Retry-After %q; want 2 (one token at 0.5 a second)", got)
	}
	if r := as.call("GET", "/v1/agents", as.ops, ""); r.status != http.StatusOK {
		t.Errorf("another token: %d; want 200 (its own bucket)", r.status)
	}
	as.clock.Advance(2 * time.Second)
	if r := as.get("/v1/agents"); r.status != http.StatusOK {
		t.Errorf("after the wait: %d; want 200", r.status)
	}

	// Wrong tokens drain the address's bucket; then even the lookup is
	// refused.
	for i := range 2 {
		if r := as.call("GET", "/v1/agents", "pst_wrong", ""); r.status != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: %d; want 401", i+1, r.status)
		}
	}
	r = as.call("GET", "/v1/agents", "pst_wrong", "")
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" {
		t.Errorf("third wrong token: %d, Retry-After %q; want 429 with Retry-After", r.status, r.header.Get("Retry-After"))
	}
}

// TestAPIRoutesAnswer calls every route once with good input.
func TestAPIRoutesAnswer(t *testing.T) {
	as := newAPISite(t, withChecker(t, func(recipes.Target) recipes.Result {
		return recipes.Result{Status: recipes.StatusOK, Message: "ok"}
	}))
	a1 := as.ask(as.web, "write", "touch /tmp/x", 1)
	a2 := as.ask(as.web, "destructive", "rm -rf /tmp/y", 1)
	as.audit(as.web, policy.Read, policy.Allowed, "uptime")
	tests := []struct {
		method, path string
	}{
		{"GET", "/v1/openapi.json"},
		{"GET", "/v1/recipes"},
		{"GET", "/v1/recipes/debian"},
		{"GET", "/v1/agents"},
		{"GET", "/v1/agents/" + as.agent.ID},
		{"GET", "/v1/agents/bot"},
		{"GET", "/v1/connections"},
		{"GET", "/v1/connections/" + as.web.ID},
		{"GET", "/v1/connections/db"},
		{"POST", "/v1/connections/web/check"},
		{"GET", "/v1/grants"},
		{"GET", "/v1/approvals"},
		{"GET", "/v1/approvals/" + a1.ID},
		{"POST", "/v1/approvals/" + a1.ID + "/approve"},
		{"POST", "/v1/approvals/" + a2.ID + "/deny"},
		{"GET", "/v1/audit"},
		{"GET", "/v1/audit/verify"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			r := as.call(tt.method, tt.path, as.ci, "")
			if r.status != http.StatusOK {
				t.Fatalf("status %d; want 200 (%s)", r.status, r.body)
			}
			if tt.path == "/v1/openapi.json" {
				if !bytes.Equal(r.body, openAPIDocument) {
					t.Error("the served document is not the embedded one")
				}
				return
			}
			r.decode(t)
		})
	}
}

// TestAPIRecordFields pins what each record shows, key material aside
// (TestAPINeverShowsPrivateKey).
func TestAPIRecordFields(t *testing.T) {
	as := newAPISite(t, nil)
	a := as.ask(as.db, "destructive", "rm -rf /srv/<b>data</b>", 2)

	conn := as.get("/v1/connections/web").data(t)
	for k, want := range map[string]any{"id": as.web.ID, "alias": "web", "host": "127.0.0.1", "port": 2022.0,
		"user": "deploy", "env": "dev", "recipe": "", "key_status": "unchecked", "key_message": "", "key_checked_at": nil} {
		if conn[k] != want {
			t.Errorf("connection %s = %v; want %v", k, conn[k], want)
		}
	}
	hks, _ := conn["host_keys"].([]any)
	pinned, _ := as.web.PinnedKeys()
	if len(hks) != 1 || hks[0].(map[string]any)["fingerprint"] != ssh.FingerprintSHA256(pinned[0]) ||
		hks[0].(map[string]any)["type"] != "ssh-ed25519" {
		t.Errorf("host_keys = %v; want one ssh-ed25519 key with fingerprint %s", hks, ssh.FingerprintSHA256(pinned[0]))
	}

	agent := as.get("/v1/agents/bot").data(t)
	keys, _ := agent["keys"].([]any)
	if agent["name"] != "bot" || agent["disabled"] != false || len(keys) != 1 {
		t.Fatalf("agent = %v; want bot, enabled, one key", agent)
	}
	k := keys[0].(map[string]any)
	if k["fingerprint"] != as.agent.Keys[0].Fingerprint || k["authorized_key"] != as.agent.Keys[0].AuthorizedKey {
		t.Errorf("agent key = %v; want fingerprint %s and the authorized key line", k, as.agent.Keys[0].Fingerprint)
	}

	ap := as.get("/v1/approvals/" + a.ID).data(t)
	for k, want := range map[string]any{"status": "pending", "agent": "bot", "connection": "db", "env": "production",
		"class": "destructive", "kind": "exec", "operation": "rm -rf /srv/<b>data</b>", "approvals_needed": 2.0,
		"first_approver": "", "decided_by": "", "reason": ""} {
		if ap[k] != want {
			t.Errorf("approval %s = %v; want %v", k, ap[k], want)
		}
	}
	if !bytes.Contains(as.get("/v1/approvals/"+a.ID).body, []byte(`\u003cb\u003e`)) {
		t.Error("markup in an operation is not escaped in the JSON text")
	}

	g, _, _ := as.get("/v1/grants?agent=bot&connection=db").list(t)
	if len(g) != 1 || g[0]["read"] != "allow" || g[0]["write"] != "ask" || g[0]["destructive"] != "ask" || g[0]["env"] != "production" {
		t.Errorf("grants of bot on db = %v; want one with allow, ask, ask in production", g)
	}

	rc := as.get("/v1/recipes/debian").data(t)
	if rc["id"] != "debian" || rc["key"] != "debian" {
		t.Errorf("recipe id, key = %v, %v; want debian, debian", rc["id"], rc["key"])
	}
}

// TestAPIApprovalExpiryShows: a pending request past its expiry shows as
// expired on GET, and lists find it under status=expired.
func TestAPIApprovalExpiryShows(t *testing.T) {
	as := newAPISite(t, nil)
	a := as.ask(as.web, "write", "touch /x", 1)
	as.clock.Advance(policy.DefaultApprovalLifetime)
	if got := as.get("/v1/approvals/" + a.ID).data(t)["status"]; got != "expired" {
		t.Errorf("status after expiry %v; want expired", got)
	}
	recs, _, _ := as.get("/v1/approvals?status=expired").list(t)
	if got := field(recs, "id"); !slices.Equal(got, []string{a.ID}) {
		t.Errorf("status=expired lists %v; want [%s]", got, a.ID)
	}
}

// TestAPINotFoundAndMethods: unknown ids are 404 not_found, unknown /v1
// paths 404 route_not_found, a known path with another method 405 with
// Allow.
func TestAPINotFoundAndMethods(t *testing.T) {
	as := newAPISite(t, withChecker(t, func(recipes.Target) recipes.Result {
		return recipes.Result{Status: recipes.StatusUnreachable, Message: "cannot reach"}
	}))
	tests := []struct {
		method, path string
		status       int
		code, allow  string
	}{
		{"GET", "/v1/recipes/nosuch", 404, "not_found", ""},
		{"GET", "/v1/agents/nosuch", 404, "not_found", ""},
		{"GET", "/v1/connections/nosuch", 404, "not_found", ""},
		{"POST", "/v1/connections/nosuch/check", 404, "not_found", ""},
		{"GET", "/v1/approvals/apr_nosuch", 404, "not_found", ""},
		{"POST", "/v1/approvals/apr_nosuch/approve", 404, "not_found", ""},
		{"POST", "/v1/approvals/apr_nosuch/deny", 404, "not_found", ""},
		{"GET", "/v1/nosuch", 404, "route_not_found", ""},
		{"GET", "/v1/", 404, "route_not_found", ""},
		{"GET", "/v1/agents/bot/keys", 404, "route_not_found", ""},
		{"GET", "/v1/agents/", 404, "route_not_found", ""},
		{"PUT", "/v1/agents/bot", 405, "method_not_allowed", "DELETE, GET, HEAD, PATCH"},
		{"PUT", "/v1/agents", 405, "method_not_allowed", "GET, HEAD, POST"},
		{"GET", "/v1/approvals/x/approve", 405, "method_not_allowed", "POST"},
		{"PUT", "/v1/openapi.json", 405, "method_not_allowed", "GET, HEAD"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			r := as.call(tt.method, tt.path, as.ci, "")
			if r.status != tt.status {
				t.Fatalf("status %d; want %d (%s)", r.status, tt.status, r.body)
			}
			if code, _ := r.errCode(t); code != tt.code {
				t.Errorf("code %q; want %q", code, tt.code)
			}
			if got := r.header.Get("Allow"); got != tt.allow {
				t.Errorf("Allow %q; want %q", got, tt.allow)
			}
		})
	}
}

// TestAPIKeyCheck: the answer carries the check's result and the
// connection as recorded, whatever the result.
func TestAPIKeyCheck(t *testing.T) {
	var checked []string
	as := newAPISite(t, withChecker(t, func(tg recipes.Target) recipes.Result {
		checked = append(checked, tg.Name)
		return recipes.Result{Status: recipes.StatusRejected, Message: "Permission denied (publickey)"}
	}))
	d := as.call("POST", "/v1/connections/"+as.web.ID+"/check", as.ci, "").data(t)
	conn, _ := d["connection"].(map[string]any)
	check, _ := d["check"].(map[string]any)
	if check["status"] != "rejected" || conn["key_status"] != "rejected" || conn["key_checked_at"] == nil ||
		conn["key_message"] != "Permission denied (publickey)" {
		t.Errorf("check answer %v; want status rejected and the connection with key_status rejected and a time", d)
	}
	if !slices.Equal(checked, []string{"web"}) {
		t.Errorf("checks ran for %v; want [web]", checked)
	}
}

// TestAPINeverShowsPrivateKey runs every route, successes and failures,
// and checks (in call, through checkNoKey) that no answer holds any part
// of a connection's private key.
func TestAPINeverShowsPrivateKey(t *testing.T) {
	as := newAPISite(t, withChecker(t, func(recipes.Target) recipes.Result {
		return recipes.Result{Status: recipes.StatusUnreachable, Message: "cannot reach 127.0.0.1:2022"}
	}))
	a := as.ask(as.db, "destructive", "rm -rf /srv", 1)
	as.audit(as.db, policy.Destructive, policy.Denied, "rm -rf /srv")
	paths := []string{"/v1/recipes", "/v1/agents", "/v1/agents/bot", "/v1/connections", "/v1/connections/web",
		"/v1/connections/db", "/v1/connections/" + as.db.ID, "/v1/grants", "/v1/approvals", "/v1/approvals/" + a.ID,
		"/v1/audit", "/v1/audit/verify", "/v1/connections?env=production", "/v1/connections?sort=-host"}
	for _, p := range paths {
		if r := as.get(p); r.status != http.StatusOK {
			t.Errorf("GET %s: %d; want 200", p, r.status)
		}
	}
	for _, p := range []string{"/v1/connections/web/check", "/v1/connections/db/check",
		"/v1/approvals/" + a.ID + "/approve", "/v1/approvals/" + a.ID + "/deny"} {
		as.call("POST", p, as.ci, "")
	}
	// The test would pass vacuously if keyLeak could not see a key.
	for _, k := range as.keys {
		body := bytes.Join(bytes.Split(k, []byte("\n"))[1:3], nil) // armour removed, lines joined
		if keyLeak(as.keys, string(k)) == "" || keyLeak(as.keys, string(body)) == "" {
			t.Error("keyLeak does not notice a private key")
		}
	}
}

// TestAPIBodyAndMediaLimits: decision bodies are bounded, must be JSON and
// must hold only known fields.
func TestAPIBodyAndMediaLimits(t *testing.T) {
	as := newAPISite(t, nil)
	a := as.ask(as.web, "write", "touch /x", 1)
	deny := "/v1/approvals/" + a.ID + "/deny"
	approve := "/v1/approvals/" + a.ID + "/approve"
	tests := []struct {
		name, path, body string
		hdr              []string
		status           int
		code, field      string
	}{
		{"not JSON", deny, "reason=x", nil, 400, "invalid_body", ""},
		{"JSON array", deny, `["x"]`, nil, 400, "invalid_body", ""},
		{"unknown field", deny, `{"reasn": "x"}`, nil, 400, "invalid_body", "reasn"},
		{"wrong type", deny, `{"reason": 3}`, nil, 400, "invalid_body", "reason"},
		{"two objects", deny, `{} {}`, nil, 400, "invalid_body", ""},
		{"reason on approve", approve, `{"reason": "x"}`, nil, 400, "invalid_body", "reason"},
		{"reason too long", deny, `{"reason": "` + strings.Repeat("x", 1001) + `"}`, nil, 400, "invalid_body", "reason"},
		{"reason with newline", deny, `{"reason": "a\nb"}`, nil, 400, "invalid_body", "reason"},
		{"form content type", deny, `{}`, []string{"Content-Type", "application/x-www-form-urlencoded"}, 415,
			"unsupported_media_type", "Content-Type"},
		{"over 64 KiB", deny, `{"reason": "` + strings.Repeat("x", 70<<10) + `"}`, nil, 413, "body_too_large", ""},
		{"query parameter", deny + "?reason=x", "", nil, 400, "unknown_parameter", "reason"},
		{"bad idempotency key", deny, "", []string{"Idempotency-Key", "has space"}, 400, "invalid_parameter", "Idempotency-Key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := as.call("POST", tt.path, as.ci, tt.body, tt.hdr...)
			if r.status != tt.status {
				t.Fatalf("status %d; want %d (%s)", r.status, tt.status, r.body)
			}
			if code, f := r.errCode(t); code != tt.code || f != tt.field {
				t.Errorf("code, field = %q, %q; want %q, %q", code, f, tt.code, tt.field)
			}
		})
	}
	if got := as.get("/v1/approvals/" + a.ID).data(t)["status"]; got != "pending" {
		t.Errorf("after refused bodies the request is %v; want pending", got)
	}
	// A JSON body with its type, and an empty object, are fine.
	r := as.call("POST", deny, as.ci, `{"reason": "not on a Friday"}`, "Content-Type", "application/json; charset=utf-8")
	if d := r.data(t); d["status"] != "denied" || d["reason"] != "not on a Friday" || d["decided_by"] != "alice" {
		t.Errorf("deny answer %v; want denied by alice (token ci) with the reason", d)
	}
}

// TestAPIDecisions: approve, deny, and the 409s, whose messages say who
// decided.
func TestAPIDecisions(t *testing.T) {
	as := newAPISite(t, nil)
	a := as.ask(as.web, "write", "touch /x", 1)
	r := as.call("POST", "/v1/approvals/"+a.ID+"/approve", as.ci, "{}")
	if d := r.data(t); d["status"] != "approved" || d["decided_by"] != "alice" || d["decided_at"] == nil {
		t.Fatalf("approve answer %v; want approved by alice (token ci)", d)
	}
	for _, verb := range []string{"approve", "deny"} {
		r := as.call("POST", "/v1/approvals/"+a.ID+"/"+verb, as.ops, "")
		code, _ := r.errCode(t)
		if r.status != http.StatusConflict || code != "already_decided" {
			t.Errorf("%s after approval: %d %s; want 409 already_decided", verb, r.status, code)
		}
		if msg := r.errMessage(t); !strings.Contains(msg, "approved by alice") {
			t.Errorf("%s after approval: message %q; want it to say approved by alice", verb, msg)
		}
	}

	e := as.ask(as.web, "write", "touch /late", 1)
	as.clock.Advance(policy.DefaultApprovalLifetime + time.Second)
	for i := range 2 { // first the decision finds it overdue, then marked expired
		r := as.call("POST", "/v1/approvals/"+e.ID+"/approve", as.ci, "")
		if code, _ := r.errCode(t); r.status != http.StatusConflict || code != "approval_expired" {
			t.Errorf("approve expired request (try %d): %d %s; want 409 approval_expired", i+1, r.status, code)
		}
	}
}

// TestAPITwoPersonRule: a request that needs two approvals takes tokens of
// two different admins; the same token twice, or a second token of the same
// admin, is refused.
func TestAPITwoPersonRule(t *testing.T) {
	as := newAPISite(t, nil)
	ci2 := as.addToken("ci-two", as.alice)
	a := as.ask(as.db, "destructive", "rm -rf /srv/data", 2)
	approve := "/v1/approvals/" + a.ID + "/approve"
	if d := as.call("POST", approve, as.ci, "").data(t); d["status"] != "pending" || d["first_approver"] != "alice" {
		t.Fatalf("first approval answer %v; want pending with first_approver alice", d)
	}
	for _, tok := range []string{as.ci, ci2} {
		r := as.call("POST", approve, tok, "")
		if code, _ := r.errCode(t); r.status != http.StatusConflict || code != "same_approver" {
			t.Fatalf("alice's token again: %d %s; want 409 same_approver", r.status, code)
		}
		if msg := r.errMessage(t); !strings.Contains(msg, "alice") {
			t.Errorf("same_approver message %q; want it to name alice", msg)
		}
	}
	if d := as.call("POST", approve, as.ops, "").data(t); d["status"] != "approved" || d["decided_by"] != "bob" {
		t.Errorf("second approval answer %v; want approved by bob (token ops)", d)
	}
}

// TestAPITokenWithoutAdmin: a token made before tokens had owners cannot
// decide, and is told how to be assigned; it can still read.
func TestAPITokenWithoutAdmin(t *testing.T) {
	as := newAPISite(t, nil)
	tok, sha := NewConsoleToken()
	if _, err := as.st.CreateConsoleToken(context.Background(), store.Unaudited(), "old", sha, as.alice, ""); err != nil {
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
	a := as.ask(as.web, "write", "touch /x", 1)
	r := as.call("POST", "/v1/approvals/"+a.ID+"/approve", tok, "")
	if code, _ := r.errCode(t); r.status != http.StatusForbidden || code != "token_without_admin" {
		t.Fatalf("approve with an unowned token: %d %s; want 403 token_without_admin", r.status, code)
	}
	if msg := r.errMessage(t); !strings.Contains(msg, "postern token assign old --as ADMIN") {
		t.Errorf("message %q; want it to say how to assign the token", msg)
	}
	if got := as.get("/v1/approvals/" + a.ID).data(t)["status"]; got != "pending" {
		t.Errorf("request after the refused decision is %v; want pending", got)
	}
}

// TestAPIApproveWithScope: an approval's scope through the API, and the
// refusals: a scope on a production destructive request, one too long, a
// scope on a denial.
func TestAPIApproveWithScope(t *testing.T) {
	as := newAPISite(t, nil)
	a := as.ask(as.web, "write", "touch /x", 1)
	d := as.call("POST", "/v1/approvals/"+a.ID+"/approve", as.ci, `{"scope": "class", "for": "30m"}`).data(t)
	if d["status"] != "approved" || d["scope"] != "class" || d["scope_expires_at"] == nil {
		t.Fatalf("approve with class scope: %v; want approved with a class scope and its end", d)
	}
	prod := as.ask(as.db, "destructive", "rm -rf /srv/data", 2)
	b := as.ask(as.web, "write", "touch /y", 1)
	tests := []struct {
		name, path, body string
		status           int
		code             string
	}{
		{"production destructive", "/v1/approvals/" + prod.ID + "/approve", `{"scope": "operation", "for": "5m"}`, 422, "scope_not_allowed"},
		{"longer than 8h", "/v1/approvals/" + b.ID + "/approve", `{"scope": "class", "for": "9h"}`, 422, "scope_not_allowed"},
		{"no duration", "/v1/approvals/" + b.ID + "/approve", `{"scope": "class"}`, 400, "invalid_body"},
		{"unknown scope", "/v1/approvals/" + b.ID + "/approve", `{"scope": "forever", "for": "1h"}`, 400, "invalid_body"},
		{"scope on a denial", "/v1/approvals/" + b.ID + "/deny", `{"scope": "class", "for": "1h"}`, 400, "invalid_body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := as.call("POST", tt.path, as.ci, tt.body)
			if code, _ := r.errCode(t); r.status != tt.status || code != tt.code {
				t.Errorf("%s: %d %s; want %d %s (%s)", tt.name, r.status, code, tt.status, tt.code, r.body)
			}
		})
	}
	for _, id := range []string{prod.ID, b.ID} {
		if got := as.get("/v1/approvals/" + id).data(t)["status"]; got != "pending" {
			t.Errorf("%s after refused scopes is %v; want pending", id, got)
		}
	}
}

// TestAPIIdempotentApprove: a retry with the same Idempotency-Key replays
// the first answer; the key with another request is a 422; keys are per
// token.
func TestAPIIdempotentApprove(t *testing.T) {
	as := newAPISite(t, nil)
	a := as.ask(as.web, "write", "touch /x", 1)
	b := as.ask(as.web, "write", "touch /y", 1)
	approve := "/v1/approvals/" + a.ID + "/approve"
	first := as.call("POST", approve, as.ci, "", "Idempotency-Key", "k-1")
	if first.status != http.StatusOK || first.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("first call: %d, replayed %q; want 200, not replayed", first.status, first.header.Get("Idempotent-Replayed"))
	}
	again := as.call("POST", approve, as.ci, "", "Idempotency-Key", "k-1")
	if again.status != http.StatusOK || again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry: %d, replayed %q; want 200, true", again.status, again.header.Get("Idempotent-Replayed"))
	}
	if !bytes.Equal(again.body, first.body) {
		t.Errorf("retry body\n%s\nwant the first answer\n%s", again.body, first.body)
	}
	again.decode(t)

	// Without the key, the same call is a new decision, and conflicts.
	if r := as.call("POST", approve, as.ci, ""); r.status != http.StatusConflict {
		t.Errorf("same call without the key: %d; want 409", r.status)
	}

	reuse := []struct {
		name, path, body string
	}{
		{"other approval", "/v1/approvals/" + b.ID + "/approve", ""},
		{"other verb", "/v1/approvals/" + a.ID + "/deny", ""},
		{"other body", approve, "{}"},
	}
	for _, tt := range reuse {
		t.Run(tt.name, func(t *testing.T) {
			r := as.call("POST", tt.path, as.ci, tt.body, "Idempotency-Key", "k-1")
			if code, f := r.errCode(t); r.status != http.StatusUnprocessableEntity || code != "idempotency_key_reused" || f != "Idempotency-Key" {
				t.Errorf("got %d %s %s; want 422 idempotency_key_reused Idempotency-Key", r.status, code, f)
			}
		})
	}
	if got := as.get("/v1/approvals/" + b.ID).data(t)["status"]; got != "pending" {
		t.Errorf("approval %s after a reused key: %v; want pending (not decided)", b.ID, got)
	}

	// Another token's key space is its own: the same key decides b.
	r := as.call("POST", "/v1/approvals/"+b.ID+"/approve", as.ops, "", "Idempotency-Key", "k-1")
	if r.status != http.StatusOK || r.header.Get("Idempotent-Replayed") != "" {
		t.Errorf("other token, same key: %d, replayed %q; want a fresh 200", r.status, r.header.Get("Idempotent-Replayed"))
	}

	// A refusal is kept too: its retry gets the same 409, replayed.
	c := as.ask(as.web, "write", "touch /z", 1)
	as.call("POST", "/v1/approvals/"+c.ID+"/deny", as.ops, "")
	r1 := as.call("POST", "/v1/approvals/"+c.ID+"/approve", as.ci, "", "Idempotency-Key", "k-2")
	r2 := as.call("POST", "/v1/approvals/"+c.ID+"/approve", as.ci, "", "Idempotency-Key", "k-2")
	if r1.status != http.StatusConflict || r2.status != http.StatusConflict || r2.header.Get("Idempotent-Replayed") != "true" ||
		!bytes.Equal(r1.body, r2.body) {
		t.Errorf("kept refusal: %d then %d (replayed %q); want 409 twice, the second replayed", r1.status, r2.status,
			r2.header.Get("Idempotent-Replayed"))
	}
}

// TestAPIConcurrentApprove: several tokens approve one request at once;
// exactly one wins and the others get 409 naming the winner.
func TestAPIConcurrentApprove(t *testing.T) {
	as := newAPISite(t, nil)
	tokens := []string{as.ci, as.ops, as.addToken("t3", as.bob), as.addToken("t4", as.bob), as.addToken("t5", as.bob), as.addToken("t6", as.bob)}
	a := as.ask(as.web, "destructive", "rm /x", 1)
	results := make(chan apiResp, len(tokens))
	start := make(chan struct{})
	for _, tok := range tokens {
		go func() {
			<-start
			req := httptest.NewRequest("POST", "https://postern.test/v1/approvals/"+a.ID+"/approve", nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			rec := httptest.NewRecorder()
			as.srv.Handler().ServeHTTP(rec, req)
			results <- apiResp{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
		}()
	}
	close(start)
	var codes []int
	var winner string
	var losers []apiResp
	for range tokens {
		r := <-results
		codes = append(codes, r.status)
		if r.status == http.StatusOK {
			winner, _ = r.data(t)["decided_by"].(string)
		} else {
			losers = append(losers, r)
		}
	}
	sort.Ints(codes)
	want := []int{200, 409, 409, 409, 409, 409}
	if !slices.Equal(codes, want) {
		t.Fatalf("statuses %v; want %v", codes, want)
	}
	for _, r := range losers {
		if msg := r.errMessage(t); !strings.Contains(msg, "by "+winner) {
			t.Errorf("loser's message %q; want it to name the winner %s", msg, winner)
		}
	}
	if got := as.get("/v1/approvals/" + a.ID).data(t)["decided_by"]; got != winner {
		t.Errorf("stored decider %v; want the winner %s", got, winner)
	}
}

// TestAPIIdempotentConcurrentRetries: copies of one request with one
// Idempotency-Key sent together all get the one decision's answer — the
// first fresh, the rest replayed — never a 409 about their own success.
func TestAPIIdempotentConcurrentRetries(t *testing.T) {
	as := newAPISite(t, nil)
	a := as.ask(as.web, "write", "touch /x", 1)
	const n = 6
	results := make(chan apiResp, n)
	start := make(chan struct{})
	for range n {
		go func() {
			<-start
			req := httptest.NewRequest("POST", "https://postern.test/v1/approvals/"+a.ID+"/approve", nil)
			req.Header.Set("Authorization", "Bearer "+as.ci)
			req.Header.Set("Idempotency-Key", "retry-1")
			rec := httptest.NewRecorder()
			as.srv.Handler().ServeHTTP(rec, req)
			results <- apiResp{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
		}()
	}
	close(start)
	fresh := 0
	var first []byte
	for range n {
		r := <-results
		if r.status != http.StatusOK {
			t.Fatalf("status %d; want 200 for every copy (%s)", r.status, r.body)
		}
		if r.header.Get("Idempotent-Replayed") != "true" {
			fresh++
		}
		if first == nil {
			first = r.body
		} else if !bytes.Equal(r.body, first) {
			t.Errorf("bodies differ:\n%s\n%s", r.body, first)
		}
	}
	if fresh != 1 {
		t.Errorf("%d fresh answers; want 1 and the rest replayed", fresh)
	}
}

// TestAPIRevokeScope: a scope ends through the API, and the grants list
// shows it while it lasts.
func TestAPIRevokeScope(t *testing.T) {
	as := newAPISite(t, nil)
	a := as.ask(as.web, "write", "touch /x", 1)
	as.call("POST", "/v1/approvals/"+a.ID+"/approve", as.ci, `{"scope": "operation", "for": "1h"}`).data(t)
	grants := string(as.get("/v1/grants").body)
	if !strings.Contains(grants, `"scopes":[{"id":"`+a.ID+`"`) {
		t.Errorf("grants list %s; want web's grant to carry scope %s", grants, a.ID)
	}
	d := as.call("POST", "/v1/approvals/"+a.ID+"/revoke-scope", as.ops, "").data(t)
	if d["scope_revoked_by"] != "bob" || d["scope_revoked_at"] == nil {
		t.Errorf("revoke answer %v; want revoked by bob", d)
	}
	r := as.call("POST", "/v1/approvals/"+a.ID+"/revoke-scope", as.ops, "")
	if code, _ := r.errCode(t); r.status != http.StatusConflict || code != "no_active_scope" {
		t.Errorf("revoke twice: %d %s; want 409 no_active_scope", r.status, code)
	}
	if r := as.call("POST", "/v1/approvals/apr_nosuch/revoke-scope", as.ops, ""); r.status != http.StatusNotFound {
		t.Errorf("revoke unknown: %d; want 404", r.status)
	}
}
