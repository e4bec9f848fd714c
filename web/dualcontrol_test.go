package web

import (
	"context"
	"errors"
	"html"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/postern/postern/store"
)

// Issue 23: dual control over loosening production. A change that loosens
// a production connection (a new grant, an environment away from
// production, ...) or makes an approve or admin token is not made when an
// admin asks: it waits in the approvals queue as a change request (kind
// change) until a second admin approves it. The admin who asked cannot be
// the second, through any door or with any of their tokens.

// changeIDPattern finds a change request's id in a message.
var changeIDPattern = regexp.MustCompile(`chg_[a-z0-9]+`)

// changeIDIn is the first change request id in text, or "".
func changeIDIn(text string) string { return changeIDPattern.FindString(text) }

// heldChange checks that r is a 202 whose data is a pending change request
// and returns its id.
func (as *apiSite) heldChange(t *testing.T, r apiResp) string {
	t.Helper()
	if r.status != http.StatusAccepted {
		t.Fatalf("got %d %s; want 202 with a change request", r.status, r.body)
	}
	d := r.data(t)
	id, _ := d["id"].(string)
	if !store.IsChangeID(id) || d["kind"] != "change" || d["status"] != "pending" {
		t.Fatalf("202 data: id %q, kind %v, status %v; want a pending change request", id, d["kind"], d["status"])
	}
	return id
}

// approveChange approves change request id with token, which must succeed.
func (as *apiSite) approveChange(t *testing.T, token, id string) {
	t.Helper()
	r := as.call("POST", "/v1/approvals/"+id+"/approve", token, "")
	if r.status != http.StatusOK || r.data(t)["status"] != "approved" {
		t.Fatalf("approving %s: %d %s; want 200 approved", id, r.status, r.body)
	}
}

// setRole changes an admin's role in the store, as an owner would.
func setRole(t testing.TB, st *store.Store, name string, role store.Role) {
	t.Helper()
	if _, err := st.SetAdminRole(context.Background(), store.Unaudited(), name, role); err != nil {
		t.Fatalf("SetAdminRole(%s, %s): %v", name, role, err)
	}
}

// auditDeciders returns the deciders of the admin audit row whose
// operation mentions text, and whether there is one.
func auditDeciders(t testing.TB, st *store.Store, text string) ([]string, bool) {
	t.Helper()
	rows, err := st.ListAudit(context.Background(), store.AuditFilter{Kind: "admin"})
	if err != nil {
		t.Fatalf("ListAudit: %v", err)
	}
	for _, row := range rows {
		if strings.Contains(row.Operation, text) && row.Decision == "changed" {
			return row.Deciders, true
		}
	}
	return nil, false
}

// TestAPIDualControl: alice (admin) gives bot a grant on the production
// connection over REST. It is answered 202 and not in effect; alice
// cannot approve it with the token that asked nor with another of hers;
// bob's approval makes it, and the audit row that records it names both.
func TestAPIDualControl(t *testing.T) {
	as := newAPISite(t, nil)
	ctx := context.Background()
	setRole(t, as.st, "alice", store.RoleAdmin)
	if err := as.st.RevokeGrant(ctx, store.Unaudited(), "bot", "db"); err != nil {
		t.Fatal(err)
	}
	doc := loadOpenAPI(t)

	r := as.call("POST", "/v1/grants", as.root, `{"agent": "bot", "connection": "db", "write": "ask"}`)
	checkDocumented(t, doc, "POST", "/v1/grants", r)
	id := as.heldChange(t, r)
	d := r.data(t)
	if d["requested_by"] != "alice" || d["connection"] != "db" || d["before"] != "no grant" ||
		!strings.Contains(d["after"].(string), "write=ask") {
		t.Errorf("the change: %v; want alice's, on db, from no grant to write=ask", d)
	}
	if _, err := as.st.GrantByNames(ctx, "bot", "db"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("grant of bot on db before a second admin: %v; want none", err)
	}

	// The queue holds it, and shows it alone without what it would write.
	recs, _, _ := as.get("/v1/approvals?kind=change&status=pending").list(t)
	if len(recs) != 1 || recs[0]["id"] != id {
		t.Errorf("GET /v1/approvals?kind=change&status=pending: %v; want %s only", recs, id)
	}
	one := as.get("/v1/approvals/" + id)
	checkDocumented(t, doc, "GET", "/v1/approvals/{id}", one)
	if one.status != http.StatusOK || one.data(t)["kind"] != "change" || strings.Contains(string(one.body), "payload") {
		t.Errorf("GET /v1/approvals/%s: %d %s; want the change, without its payload", id, one.status, one.body)
	}

	for _, tc := range []struct{ name, token string }{
		{"the token that asked", as.root},
		{"another token of alice's", as.ci},
	} {
		r := as.call("POST", "/v1/approvals/"+id+"/approve", tc.token, "")
		checkDocumented(t, doc, "POST", "/v1/approvals/{id}/approve", r)
		if code, _ := apiCode(t, r); r.status != http.StatusConflict || code != "same_approver" {
			t.Errorf("alice approving her own change with %s: %d %s; want 409 same_approver", tc.name, r.status, r.body)
		}
	}
	if _, err := as.st.GrantByNames(ctx, "bot", "db"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("grant of bot on db after alice's attempts: %v; want none", err)
	}
	if r := as.call("POST", "/v1/approvals/"+id+"/approve", as.ops, `{"scope": "class", "for": "30m"}`); r.status != http.StatusBadRequest {
		t.Errorf("approving a change with a class scope: %d %s; want 400", r.status, r.body)
	}

	r = as.call("POST", "/v1/approvals/"+id+"/approve", as.ops, "")
	checkDocumented(t, doc, "POST", "/v1/approvals/{id}/approve", r)
	if r.status != http.StatusOK || r.data(t)["status"] != "approved" || r.data(t)["decided_by"] != "bob" {
		t.Fatalf("bob approving: %d %s; want 200 approved by bob", r.status, r.body)
	}
	g, err := as.st.GrantByNames(ctx, "bot", "db")
	if err != nil || g.Rules.Write != store.RuleAsk {
		t.Fatalf("grant of bot on db after bob's approval: %+v, %v; want write=ask", g, err)
	}
	if deciders, ok := auditDeciders(t, as.st, id); !ok || !slices.Equal(deciders, []string{"alice", "bob"}) {
		t.Errorf("audit row of %s: deciders %v (found %v); want alice, bob", id, deciders, ok)
	}
	if r := as.call("POST", "/v1/approvals/"+id+"/approve", as.ops, ""); r.status != http.StatusConflict {
		t.Errorf("approving %s again: %d %s; want 409", id, r.status, r.body)
	}

	// A denial changes nothing, and keeps its reason.
	r = as.call("DELETE", "/v1/connections/db", as.root, "")
	checkDocumented(t, doc, "DELETE", "/v1/connections/{id}", r)
	rm := as.heldChange(t, r)
	r = as.call("POST", "/v1/approvals/"+rm+"/deny", as.ops, `{"reason": "db stays"}`)
	if r.status != http.StatusOK || r.data(t)["status"] != "denied" || r.data(t)["reason"] != "db stays" {
		t.Errorf("bob denying %s: %d %s; want 200 denied with the reason", rm, r.status, r.body)
	}
	if _, err := as.st.ConnectionByAlias(ctx, "db"); err != nil {
		t.Errorf("db after a denied removal: %v; want it kept", err)
	}
	recs, _, _ = as.get("/v1/approvals?kind=change&status=denied").list(t)
	if len(recs) != 1 || recs[0]["id"] != rm {
		t.Errorf("GET /v1/approvals?kind=change&status=denied: %v; want %s", recs, rm)
	}
}

// TestAPIChangeDecidersNeedTheRole: a viewer cannot approve a change,
// whatever the scope of the token (403); an approve token whose making
// waited for a second admin opens nothing (401) until it is approved, and
// then works.
func TestAPIChangeDecidersNeedTheRole(t *testing.T) {
	as := newAPISite(t, nil)
	ctx := context.Background()
	vic, err := as.st.CreateAdmin(ctx, store.Unaudited(), "vic", "$argon2id$unused", store.RoleViewer)
	if err != nil {
		t.Fatal(err)
	}
	vicRead := as.addScopedToken("vic-read", vic.ID, store.ScopeRead)
	// A token wider than its admin's role, as one made before the role was
	// lowered would be.
	vicApprove := as.addScopedToken("vic-approve", vic.ID, store.ScopeApprove)

	r := as.call("POST", "/v1/tokens", as.root, `{"name": "late", "scope": "approve"}`)
	checkDocumented(t, loadOpenAPI(t), "POST", "/v1/tokens", r)
	if r.status != http.StatusAccepted {
		t.Fatalf("POST /v1/tokens (approve): %d %s; want 202", r.status, r.body)
	}
	change, _ := r.data(t)["change"].(map[string]any)
	id, _ := change["id"].(string)
	if !store.IsChangeID(id) || change["kind"] != "change" || change["status"] != "pending" {
		t.Fatalf("POST /v1/tokens (approve): change %v; want a pending change request", change)
	}
	value, _ := r.data(t)["value"].(string)
	if !strings.HasPrefix(value, tokenPrefix) {
		t.Fatalf("POST /v1/tokens (approve): value %q; want the token, shown once", value)
	}

	for _, tc := range []struct {
		name, token, code string
	}{
		{"viewer's read token", vicRead, "insufficient_scope"},
		{"viewer's approve token", vicApprove, "insufficient_role"},
	} {
		r := as.call("POST", "/v1/approvals/"+id+"/approve", tc.token, "")
		if code, _ := apiCode(t, r); r.status != http.StatusForbidden || code != tc.code {
			t.Errorf("%s approving %s: %d %s; want 403 %s", tc.name, id, r.status, r.body, tc.code)
		}
	}
	if r := as.call("GET", "/v1/agents", value, ""); r.status != http.StatusUnauthorized {
		t.Errorf("the waiting token before approval: %d %s; want 401", r.status, r.body)
	}
	as.approveChange(t, as.ops, id)
	if r := as.call("GET", "/v1/agents", value, ""); r.status != http.StatusOK {
		t.Errorf("the token after bob's approval: %d %s; want 200", r.status, r.body)
	}
	// A replay of the 202 (Idempotency-Key) never shows the value again.
	first := as.call("POST", "/v1/tokens", as.root, `{"name": "later", "scope": "approve"}`, "Idempotency-Key", "k-later")
	again := as.call("POST", "/v1/tokens", as.root, `{"name": "later", "scope": "approve"}`, "Idempotency-Key", "k-later")
	if first.status != http.StatusAccepted || again.status != http.StatusAccepted || again.data(t)["value"] != "" ||
		first.data(t)["value"] == "" {
		t.Errorf("replayed 202: first %d value %v, replay %d value %v; want the value in the first only",
			first.status, first.data(t)["value"], again.status, again.data(t)["value"])
	}
}

// TestPageDualControl: on the page, alice (admin) moves a production
// connection to staging; she is told it waits for a second admin and it
// stays production. The approvals page shows the change (before and
// after, who asked) to both; alice's approval is refused, bob's makes it.
func TestPageDualControl(t *testing.T) {
	ps := newPageSite(t, nil)
	ctx := context.Background()
	ps.addConnection("prod1", store.EnvProduction)
	ps.addAdminRole("alice", store.RoleAdmin)
	alice := ps.client()
	alice.loginAs("alice")

	status, h, _ := alice.post("/connections/prod1/update", alice.form("host", "127.0.0.1", "port", "2022",
		"user", "deploy", "env", "staging"))
	if status != http.StatusSeeOther {
		t.Fatalf("alice's edit: got status %d; want 303", status)
	}
	page := alice.follow(h)
	flash := flashText(page)
	id := changeIDIn(flash)
	if id == "" || !strings.Contains(flash, "waits for a second admin") || !strings.Contains(page, `class="flash flash-notice"`) {
		t.Fatalf("alice's edit: flash %q; want a notice that it waits for a second admin, with the change id", flash)
	}
	if c, _ := ps.st.ConnectionByAlias(ctx, "prod1"); c.Env != store.EnvProduction {
		t.Fatalf("prod1 is %s before a second admin approved; want production", c.Env)
	}

	_, _, list := alice.get("/approvals")
	card := regexp.MustCompile(`(?s)<article class="approval change" id="approval-` + id + `".*?</article>`).FindString(list)
	for _, want := range []string{`data-kind="change"`, `<dd class="requested-by">alice</dd>`,
		`env=production`, `env=staging`, `class="before"`, `class="after"`, `You asked for this change`} {
		if !strings.Contains(card, want) {
			t.Errorf("alice's card of %s lacks %s\n%s", id, want, card)
		}
	}
	if strings.Contains(card, `action="/approvals/`+id+`/approve"`) {
		t.Errorf("alice's card of her own change has an Approve form")
	}
	if got := alice.decide(id, true); !strings.Contains(got, "a different admin must decide it") {
		t.Errorf("alice approving her own change: flash %q; want it refused", got)
	}
	if c, _ := ps.st.ConnectionByAlias(ctx, "prod1"); c.Env != store.EnvProduction {
		t.Fatalf("prod1 is %s after alice approved her own change; want production", c.Env)
	}

	bob := ps.admin("bob")
	_, _, list = bob.get("/approvals/" + id)
	if !strings.Contains(list, `action="/approvals/`+id+`/approve"`) || !strings.Contains(list, `action="/approvals/`+id+`/deny"`) {
		t.Errorf("bob's page of %s has no decision forms", id)
	}
	if got := bob.decide(id, true); !strings.Contains(got, "Approved change "+id) {
		t.Fatalf("bob approving: flash %q; want it approved", got)
	}
	if c, _ := ps.st.ConnectionByAlias(ctx, "prod1"); c.Env != store.EnvStaging {
		t.Errorf("prod1 is %s after bob's approval; want staging", c.Env)
	}
	if deciders, ok := auditDeciders(t, ps.st, id); !ok || !slices.Equal(deciders, []string{"alice", "bob"}) {
		t.Errorf("audit row of %s: deciders %v (found %v); want alice, bob", id, deciders, ok)
	}
	_, _, done := bob.get("/approvals/" + id)
	if !strings.Contains(done, `data-status="approved"`) {
		t.Errorf("the page of %s after approval does not say approved", id)
	}
}

// TestPageTokenWaitsForSecondAdmin: an approve token made on the page is
// shown with a notice that it waits for a second admin, opens nothing
// until then, and works once another admin approves it.
func TestPageTokenWaitsForSecondAdmin(t *testing.T) {
	ps := newPageSite(t, nil)
	alice := ps.admin("alice")
	status, _, page := alice.post("/tokens", alice.form("name", "ci", "scope", "approve"))
	m := regexp.MustCompile(`id="new-token-value" class="token" readonly size="60" value="(pst_[^"]+)"`).FindStringSubmatch(page)
	if status != http.StatusOK || m == nil || !strings.Contains(page, `id="held-token"`) {
		t.Fatalf("make an approve token: %d; want 200 showing the token and that it waits\n%s", status, page)
	}
	id := changeIDIn(page)
	call := func() int {
		req, err := http.NewRequest("GET", ps.ts.URL+"/v1/agents", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+m[1])
		resp, err := ps.ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := call(); got != http.StatusUnauthorized {
		t.Errorf("the waiting token: got %d; want 401", got)
	}
	bob := ps.admin("bob")
	if got := bob.decide(id, true); !strings.Contains(got, "Approved change "+id) {
		t.Fatalf("bob approving %s: flash %q", id, got)
	}
	if got := call(); got != http.StatusOK {
		t.Errorf("the token after bob's approval: got %d; want 200", got)
	}
}

// TestPageChangeCardEscapesHostileText: what a change card shows (summary,
// before, after, who asked) goes through the page's visible escaping, as an
// operation does: markup is escaped and an invisible or bidi character is
// shown as its code point.
func TestPageChangeCardEscapesHostileText(t *testing.T) {
	ps := newPageSite(t, nil)
	ctx := context.Background()
	c, err := ps.st.CreateChangeRequest(ctx, store.Unaudited(), store.ChangeRequest{Kind: "grant",
		Summary: "grant bot <script>alert(1)</script> \u202etxt.exe", Before: "no grant\u200b", After: "read=allow\u202e",
		RequestedBy: "mallory\u2066", Payload: []byte(`{}`)}, 3600e9)
	if err != nil {
		t.Fatalf("CreateChangeRequest: %v", err)
	}
	bob := ps.admin("bob")
	for _, path := range []string{"/approvals", "/approvals/" + c.ID, "/approvals/list"} {
		_, _, body := bob.get(path)
		if !strings.Contains(body, c.ID) {
			t.Fatalf("%s does not show %s", path, c.ID)
		}
		for _, bad := range []string{"<script>", "\u202e", "\u200b", "\u2066"} {
			if strings.Contains(body, bad) {
				t.Errorf("%s shows %q raw", path, bad)
			}
		}
		// Unescaped once, as the browser shows it: the markup as text,
		// each hidden character as its code point.
		shown := html.UnescapeString(body)
		for _, want := range []string{"<script>alert(1)</script> <U+202E>txt.exe", "no grant<U+200B>", "read=allow<U+202E>",
			"mallory<U+2066>"} {
			if !strings.Contains(shown, want) {
				t.Errorf("%s does not show %s", path, want)
			}
		}
	}
}
