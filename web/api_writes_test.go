package web

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/postern/postern/policy"
	"github.com/postern/postern/recipes"
	"github.com/postern/postern/store"
)

// The API's changes: scopes, agents, connections, grants and
// tokens, each checked against the OpenAPI document's schema for its
// status.

// checkDocumented fails t unless r's status is documented for the route
// and its body matches the schema given for it.
func checkDocumented(t *testing.T, doc openAPI, method, route string, r apiResp) {
	t.Helper()
	op := doc.operation(method, route)
	resp, _ := op["responses"].(map[string]any)
	spec, ok := resp[strconv.Itoa(r.status)]
	if !ok {
		t.Errorf("%s %s: status %d is not documented (%s)", method, route, r.status, r.body)
		return
	}
	var body any
	if err := json.Unmarshal(r.body, &body); err != nil {
		t.Fatal(err)
	}
	if err := doc.validate(responseSchema(t, doc, spec), body, "body"); err != nil {
		t.Errorf("%s %s: answer %d does not match the document: %v\n%s", method, route, r.status, err, r.body)
	}
}

// TestAPITokenScopes: read reads, approve also decides and checks, admin
// also changes; a narrower token is refused with 403 insufficient_scope
// and changes nothing.
func TestAPITokenScopes(t *testing.T) {
	as := newAPISite(t, withChecker(t, func(recipes.Target) recipes.Result {
		return recipes.Result{Status: recipes.StatusOK}
	}))
	reader := as.addScopedToken("reader", as.alice, store.ScopeRead)
	agent := `{"name": "new", "keys": ["` + newTestKeyPair(t).Authorized + `"]}`
	a := as.ask(as.web, "write", "touch /x", 1)
	tests := []struct {
		token, method, path, body string
		status                    int
	}{
		{reader, "GET", "/v1/agents", "", 200},
		{reader, "GET", "/v1/tokens", "", 200},
		{reader, "POST", "/v1/connections/web/check", "", 403},
		{reader, "POST", "/v1/approvals/" + a.ID + "/deny", "", 403},
		{reader, "POST", "/v1/agents", agent, 403},
		{as.ci, "POST", "/v1/agents", agent, 403},
		{as.ci, "DELETE", "/v1/agents/bot", "", 403},
		{as.ci, "POST", "/v1/tokens", `{"name": "more", "scope": "admin"}`, 403},
		{as.ci, "POST", "/v1/connections/web/check", "", 200},
		{as.root, "POST", "/v1/agents", agent, 201},
	}
	for _, tt := range tests {
		r := as.call(tt.method, tt.path, tt.token, tt.body)
		if r.status != tt.status {
			t.Errorf("%s %s: %d %s; want %d", tt.method, tt.path, r.status, r.body, tt.status)
			continue
		}
		if code, _ := r.errCode(t); tt.status == 403 && code != "insufficient_scope" {
			t.Errorf("%s %s: code %q; want insufficient_scope", tt.method, tt.path, code)
		}
	}
	if _, err := as.st.AgentByName(context.Background(), "bot"); err != nil {
		t.Errorf("bot after a refused delete: %v; want kept", err)
	}
	if got := as.get("/v1/approvals/" + a.ID).data(t)["status"]; got != "pending" {
		t.Errorf("approval after a refused denial: %v; want pending", got)
	}
}

// TestAPIAgentWrites: create, change, remove; Idempotency-Key replays;
// every change is the token's admin's, audited via api.
func TestAPIAgentWrites(t *testing.T) {
	as := newAPISite(t, nil)
	doc := loadOpenAPI(t)
	k1, k2 := newTestKeyPair(t), newTestKeyPair(t)
	body := `{"name": "ci", "keys": ["` + k1.Authorized + ` ci@runner"]}`
	r := as.call("POST", "/v1/agents", as.root, body, "Idempotency-Key", "add-ci")
	checkDocumented(t, doc, "POST", "/v1/agents", r)
	if r.status != 201 || r.data(t)["name"] != "ci" {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	again := as.call("POST", "/v1/agents", as.root, body, "Idempotency-Key", "add-ci")
	if again.status != 201 || again.header.Get("Idempotent-Replayed") != "true" || again.data(t)["id"] != r.data(t)["id"] {
		t.Errorf("retry with the same key: %d %v; want the first answer replayed", again.status, again.header)
	}
	other := as.call("POST", "/v1/agents", as.root, `{"name": "ci2", "keys": ["`+k2.Authorized+`"]}`, "Idempotency-Key", "add-ci")
	if code, _ := other.errCode(t); other.status != 422 || code != "idempotency_key_reused" {
		t.Errorf("the key reused for another body: %d %s; want 422", other.status, code)
	}
	for _, tt := range []struct {
		method, route, path, body string
		status                    int
		code                      string
	}{
		{"POST", "/v1/agents", "/v1/agents", body, 409, "already_exists"},
		{"POST", "/v1/agents", "/v1/agents", `{"name": "x", "keys": ["ssh-ed25519 !!!"]}`, 400, "invalid_body"},
		{"POST", "/v1/agents", "/v1/agents", `{"name": "x"}`, 400, "invalid_body"},
		{"POST", "/v1/agents", "/v1/agents", `{"name": "x", "keys": [], "colour": "red"}`, 400, "invalid_body"},
		{"PATCH", "/v1/agents/{id}", "/v1/agents/nobody", `{"disabled": true}`, 404, "not_found"},
		{"PATCH", "/v1/agents/{id}", "/v1/agents/ci", `{}`, 400, "invalid_body"},
		{"DELETE", "/v1/agents/{id}", "/v1/agents/ci", `{"why": 1}`, 400, "invalid_body"},
	} {
		r := as.call(tt.method, tt.path, as.root, tt.body)
		checkDocumented(t, doc, tt.method, tt.route, r)
		if code, _ := r.errCode(t); r.status != tt.status || code != tt.code {
			t.Errorf("%s %s %s: %d %s; want %d %s", tt.method, tt.path, tt.body, r.status, code, tt.status, tt.code)
		}
	}
	r = as.call("PATCH", "/v1/agents/ci", as.root, `{"disabled": true, "keys": ["`+k2.Authorized+`"]}`)
	checkDocumented(t, doc, "PATCH", "/v1/agents/{id}", r)
	d := r.data(t)
	keys, _ := d["keys"].([]any)
	if r.status != 200 || d["disabled"] != true || len(keys) != 1 || keys[0].(map[string]any)["fingerprint"] != ssh.FingerprintSHA256(k2.Public) {
		t.Errorf("patch: %d %s; want disabled with only the second key", r.status, r.body)
	}
	r = as.call("DELETE", "/v1/agents/ci", as.root, "")
	checkDocumented(t, doc, "DELETE", "/v1/agents/{id}", r)
	if r.status != 200 || as.call("GET", "/v1/agents/ci", as.root, "").status != 404 {
		t.Errorf("delete: %d; want 200 and the agent gone", r.status)
	}
	rows, err := as.st.ListAudit(context.Background(), store.AuditFilter{Kind: "admin"})
	if err != nil {
		t.Fatal(err)
	}
	var ops []string
	for _, row := range rows {
		if len(row.Deciders) != 1 || row.Deciders[0] != "alice" || row.Reason != "via api (token root)" || row.SourceAddr == "" {
			t.Errorf("audit row %d: deciders %v, reason %q, source %q; want alice via api (token root) from an address",
				row.Seq, row.Deciders, row.Reason, row.SourceAddr)
		}
		ops = append(ops, row.Operation)
	}
	want := []string{"agent add ci", "agent key add ci", "agent key remove ci", "agent disable ci", "agent remove ci"}
	if len(ops) != len(want) {
		t.Fatalf("admin rows %q; want %d (one per change; the replay and the refusals none)", ops, len(want))
	}
	for i := range want {
		if !strings.HasPrefix(ops[i], want[i]) {
			t.Errorf("admin row %d %q; want %q", i+1, ops[i], want[i])
		}
	}
}

// TestAPIConnectionWrites: a connection's create, update, pin, rotate
// and delete over the API follow the key check's rules: 422 and nothing
// stored for a key not proved (unless allow_unverified) or a host key
// mismatch (always).
func TestAPIConnectionWrites(t *testing.T) {
	result := recipes.Result{Status: recipes.StatusOK, Message: "ran true"}
	as := newAPISite(t, withChecker(t, func(recipes.Target) recipes.Result { return result }))
	doc := loadOpenAPI(t)
	key, host := newTestKeyPair(t), newTestKeyPair(t)
	as.keys = append(as.keys, key.PrivatePEM)
	create := func(alias string, extra string) string {
		keyJSON, _ := json.Marshal(string(key.PrivatePEM))
		return fmt.Sprintf(`{"alias": %q, "host": "10.0.0.7", "user": "deploy", "env": "staging", "host_keys": [%q],
			"private_key": %s%s}`, alias, host.Authorized, keyJSON, extra)
	}
	post := func(path, route, body string) apiResp {
		t.Helper()
		r := as.call("POST", path, as.root, body)
		checkDocumented(t, doc, "POST", route, r)
		return r
	}
	r := post("/v1/connections", "/v1/connections", create("api", ""))
	d := r.data(t)
	conn, _ := d["connection"].(map[string]any)
	check, _ := d["check"].(map[string]any)
	if r.status != 201 || d["stored"] != true || check["status"] != "ok" || conn["key_status"] != "ok" ||
		!strings.HasPrefix(conn["public_key"].(string), strings.TrimSpace(key.Authorized)) {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	id := conn["id"].(string)

	result = recipes.Result{Status: recipes.StatusRejected, Message: "Permission denied (publickey)"}
	for _, tt := range []struct {
		name, body, code string
		status           int
	}{
		{"rejected", create("rej", ""), "key_not_proved", 422},
		{"rejected, allowed", create("rej2", `, "allow_unverified": true`), "", 201},
	} {
		r := post("/v1/connections", "/v1/connections", tt.body)
		if code, _ := apiCode(t, r); r.status != tt.status || code != tt.code {
			t.Errorf("%s: %d %s; want %d %s", tt.name, r.status, r.body, tt.status, tt.code)
		}
	}
	if _, err := as.st.ConnectionByAlias(context.Background(), "rej"); err == nil {
		t.Error("a connection whose key was rejected was stored")
	}
	result = recipes.Result{Status: recipes.StatusHostKeyMismatch, Message: "the target presented ssh-ed25519 SHA256:x"}
	r = post("/v1/connections", "/v1/connections", create("mm", `, "allow_unverified": true`))
	if code, _ := r.errCode(t); r.status != 422 || code != "host_key_mismatch" {
		t.Errorf("mismatch, allowed: %d %s; want 422 host_key_mismatch", r.status, code)
	}
	result = recipes.Result{Status: recipes.StatusRejected, Message: "Permission denied (publickey)"}
	r = post("/v1/connections", "/v1/connections",
		fmt.Sprintf(`{"alias": "gen", "host": "10.0.0.8", "user": "deploy", "host_keys": [%q], "generate_key": true}`, host.Authorized))
	if d := r.data(t); r.status != 201 || d["connection"].(map[string]any)["public_key"] == "" ||
		d["check"].(map[string]any)["status"] != "rejected" {
		t.Errorf("generate: %d %s; want 201, stored with its public key, rejected", r.status, r.body)
	}

	result = recipes.Result{Status: recipes.StatusOK}
	// Not production: what follows (re-pin, rotate, remove) would wait
	// for a second admin there (TestAPIDualControl covers that).
	r = as.call("PATCH", "/v1/connections/"+id, as.root, `{"port": 2200, "env": "test"}`)
	checkDocumented(t, doc, "PATCH", "/v1/connections/{id}", r)
	d = r.data(t)
	if r.status != 200 || d["connection"].(map[string]any)["port"] != 2200.0 || d["previous"].(map[string]any)["port"] != 22.0 ||
		d["connection"].(map[string]any)["id"] != id {
		t.Errorf("patch: %d %s", r.status, r.body)
	}
	newHost := newTestKeyPair(t)
	r = post("/v1/connections/api/pin", "/v1/connections/{id}/pin", fmt.Sprintf(`{"host_keys": [%q]}`, newHost.Authorized))
	d = r.data(t)
	prevKeys := d["previous"].(map[string]any)["host_keys"].([]any)
	nowKeys := d["connection"].(map[string]any)["host_keys"].([]any)
	if r.status != 200 || prevKeys[0].(map[string]any)["fingerprint"] == nowKeys[0].(map[string]any)["fingerprint"] {
		t.Errorf("pin: %d %s; want the old and new fingerprints", r.status, r.body)
	}
	// Rotation in stages: staged beside the current key, a commit refused
	// while the target rejects it, made once it accepts it; abort.
	rotate := func(body string) apiResp {
		t.Helper()
		return post("/v1/connections/api/rotate-key", "/v1/connections/{id}/rotate-key", body)
	}
	r = rotate(`{"generate": true}`)
	d = r.data(t)
	staged, _ := d["connection"].(map[string]any)["staged_key"].(map[string]any)
	if r.status != 200 || d["rotation"] != "staged" || staged == nil ||
		d["connection"].(map[string]any)["public_key"] != d["previous"].(map[string]any)["public_key"] {
		t.Fatalf("stage: %d %s; want the key staged, the current one kept", r.status, r.body)
	}
	result = recipes.Result{Status: recipes.StatusRejected, Message: "Permission denied (publickey)"}
	r = rotate(`{"commit": true}`)
	if code, _ := r.errCode(t); r.status != 422 || code != "staged_key_not_proved" {
		t.Errorf("commit of a rejected key: %d %s; want 422 staged_key_not_proved", r.status, r.body)
	}
	result = recipes.Result{Status: recipes.StatusOK}
	r = rotate(`{"commit": true}`)
	d = r.data(t)
	if r.status != 200 || d["rotation"] != "committed" || d["connection"].(map[string]any)["public_key"] != staged["public_key"] ||
		d["connection"].(map[string]any)["staged_key"] != nil || d["staged_check"].(map[string]any)["status"] != "ok" {
		t.Errorf("commit: %d %s; want the staged key in use, none staged", r.status, r.body)
	}
	if r = rotate(`{"abort": true}`); r.status != 400 {
		t.Errorf("abort with nothing staged: %d %s; want 400", r.status, r.body)
	}
	rotate(`{"generate": true}`)
	r = rotate(`{"abort": true}`)
	if d = r.data(t); r.status != 200 || d["rotation"] != "aborted" || d["connection"].(map[string]any)["staged_key"] != nil {
		t.Errorf("abort: %d %s; want nothing staged", r.status, r.body)
	}
	for _, tt := range []struct{ path, route, body string }{
		{"/v1/connections/api/pin", "/v1/connections/{id}/pin", `{}`},
		{"/v1/connections/api/rotate-key", "/v1/connections/{id}/rotate-key", `{"generate": true, "private_key": "x"}`},
		{"/v1/connections/api/rotate-key", "/v1/connections/{id}/rotate-key", `{"commit": true, "abort": true}`},
		{"/v1/connections/api/rotate-key", "/v1/connections/{id}/rotate-key", `{"commit": true, "install": true}`},
		{"/v1/connections/api/rotate-key", "/v1/connections/{id}/rotate-key", `{}`},
	} {
		if r := post(tt.path, tt.route, tt.body); r.status != 400 {
			t.Errorf("POST %s %s: %d; want 400", tt.path, tt.body, r.status)
		}
	}
	r = as.call("DELETE", "/v1/connections/api", as.root, "")
	checkDocumented(t, doc, "DELETE", "/v1/connections/{id}", r)
	if r.status != 200 || as.get("/v1/connections/api").status != 404 {
		t.Errorf("delete: %d %s", r.status, r.body)
	}
}

// apiCode is errCode that tolerates a success.
func apiCode(t *testing.T, r apiResp) (string, string) {
	t.Helper()
	if r.status < 400 {
		return "", ""
	}
	return r.errCode(t)
}

// TestAPIGrantAndTokenWrites: grants are created (201) and changed (200)
// under the store's rules and revoked by id; a token made over the API
// works at once with its scope, its value is in the first answer only,
// and revoking it refuses its bearer.
func TestAPIGrantAndTokenWrites(t *testing.T) {
	as := newAPISite(t, nil)
	doc := loadOpenAPI(t)
	if err := as.st.RevokeGrant(context.Background(), store.Unaudited(), "bot", "web"); err != nil {
		t.Fatal(err)
	}
	r := as.call("POST", "/v1/grants", as.root, `{"agent": "bot", "connection": "web", "write": "ask"}`)
	checkDocumented(t, doc, "POST", "/v1/grants", r)
	if d := r.data(t); r.status != 201 || d["read"] != "allow" || d["write"] != "ask" || d["destructive"] != "deny" {
		t.Errorf("create grant: %d %s", r.status, r.body)
	}
	r = as.call("POST", "/v1/grants", as.root, `{"agent": "bot", "connection": "web", "destructive": "ask"}`)
	if d := r.data(t); r.status != 200 || d["write"] != "ask" || d["destructive"] != "ask" {
		t.Errorf("change grant: %d %s; want 200 with write kept", r.status, r.body)
	}
	id := r.data(t)["id"].(string)
	for _, tt := range []struct {
		body, code string
		status     int
	}{
		{`{"agent": "bot", "connection": "db", "destructive": "allow"}`, "invalid_body", 400},
		{`{"agent": "nobody", "connection": "web"}`, "not_found", 404},
		{`{"agent": "bot", "connection": "web", "read": "maybe"}`, "invalid_body", 400},
	} {
		r := as.call("POST", "/v1/grants", as.root, tt.body)
		checkDocumented(t, doc, "POST", "/v1/grants", r)
		if code, _ := r.errCode(t); r.status != tt.status || code != tt.code {
			t.Errorf("POST /v1/grants %s: %d %s; want %d %s", tt.body, r.status, code, tt.status, tt.code)
		}
	}
	r = as.call("DELETE", "/v1/grants/"+id, as.root, "")
	checkDocumented(t, doc, "DELETE", "/v1/grants/{id}", r)
	if r.status != 200 || as.call("DELETE", "/v1/grants/"+id, as.root, "").status != 404 {
		t.Errorf("revoke: %d; want 200, then 404", r.status)
	}

	r = as.call("POST", "/v1/tokens", as.root, `{"name": "reader", "scope": "read"}`, "Idempotency-Key", "tok-1")
	checkDocumented(t, doc, "POST", "/v1/tokens", r)
	d := r.data(t)
	value, _ := d["value"].(string)
	tok, _ := d["token"].(map[string]any)
	if r.status != 201 || !strings.HasPrefix(value, "pst_") || tok["scope"] != "read" || tok["admin"] != "alice" {
		t.Fatalf("create token: %d %s", r.status, r.body)
	}
	if got := as.call("GET", "/v1/agents", value, ""); got.status != 200 {
		t.Errorf("the new token reading: %d; want 200", got.status)
	}
	if got := as.call("POST", "/v1/connections/web/check", value, ""); got.status != 403 {
		t.Errorf("the new read token checking: %d; want 403", got.status)
	}
	replay := as.call("POST", "/v1/tokens", as.root, `{"name": "reader", "scope": "read"}`, "Idempotency-Key", "tok-1")
	if replay.status != 201 || replay.header.Get("Idempotent-Replayed") != "true" || replay.data(t)["value"] != "" ||
		strings.Contains(string(replay.body), value) {
		t.Errorf("replay of the token's creation: %d %s; want 201 without the value", replay.status, replay.body)
	}
	db, err := sql.Open("sqlite", as.path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var kept int
	if err := db.QueryRow(`SELECT COUNT(*) FROM idempotency_keys WHERE instr(body, ?) > 0`, value).Scan(&kept); err != nil || kept != 0 {
		t.Errorf("idempotency answers holding the token: %d (%v); want 0", kept, err)
	}
	r = as.call("GET", "/v1/tokens", as.root, "")
	checkDocumented(t, doc, "GET", "/v1/tokens", r)
	if strings.Contains(string(r.body), value) || strings.Contains(string(r.body), "token_sha256") {
		t.Error("the token list shows a token or a hash")
	}
	checkDocumented(t, doc, "GET", "/v1/admins", as.call("GET", "/v1/admins", as.root, ""))
	r = as.call("DELETE", "/v1/tokens/reader", as.root, "")
	checkDocumented(t, doc, "DELETE", "/v1/tokens/{id}", r)
	if r.status != 200 || as.call("GET", "/v1/agents", value, "").status != 401 {
		t.Errorf("revoke token: %d; want 200 and its bearer refused", r.status)
	}
	if v, err := policy.Verify(context.Background(), as.st); err != nil || v.Broken != nil {
		t.Errorf("audit chain after the changes: %v %v", err, v.Broken)
	}

}
