package web

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/postern/postern/store"
)

// Issue 23: roles. Each role is refused what it may not do, through the
// REST door and the page: a viewer decides and configures nothing, an
// approver decides but does not configure, an admin and an owner do both.

// addAdminRole creates an admin of role with pagePassword.
func (ps *pageSite) addAdminRole(name string, role store.Role) {
	ps.t.Helper()
	if _, err := ps.st.CreateAdmin(context.Background(), store.Unaudited(), name, cheapHash(pagePassword), role); err != nil {
		ps.t.Fatalf("CreateAdmin(%s, %s): %v", name, role, err)
	}
}

// adminID is the id of the admin called name.
func (ps *pageSite) adminID(name string) string {
	ps.t.Helper()
	a, err := ps.st.AdminByName(context.Background(), name)
	if err != nil {
		ps.t.Fatalf("AdminByName(%s): %v", name, err)
	}
	return a.ID
}

// decide posts the approve or deny form of request id, follows the 303 and
// returns the flash.
func (pc *pageClient) decide(id string, approve bool) string {
	pc.ps.t.Helper()
	verb := "deny"
	if approve {
		verb = "approve"
	}
	status, h, body := pc.post("/approvals/"+id+"/"+verb, pc.form("next", "/approvals"))
	if status != http.StatusSeeOther {
		pc.ps.t.Fatalf("POST /approvals/%s/%s: got status %d; want 303\n%s", id, verb, status, body)
	}
	return flashText(pc.follow(h))
}

// roleCases is what each role may do.
func roleCases() []struct {
	role              store.Role
	decide, configure bool
} {
	return []struct {
		role              store.Role
		decide, configure bool
	}{
		{store.RoleViewer, false, false},
		{store.RoleApprover, true, false},
		{store.RoleAdmin, true, true},
		{store.RoleOwner, true, true},
	}
}

// TestAPIRoles: over REST, with a token of scope admin for every admin
// (made in the store, as a token made before its admin's role was lowered
// would be), what the token may do is its admin's role: deciding needs
// approver, configuring admin, and the refusal is 403 insufficient_role.
func TestAPIRoles(t *testing.T) {
	as := newAPISite(t, nil)
	ctx := context.Background()
	for _, tc := range roleCases() {
		t.Run(string(tc.role), func(t *testing.T) {
			name := "r-" + string(tc.role)
			a, err := as.st.CreateAdmin(ctx, store.Unaudited(), name, "$argon2id$unused", tc.role)
			if err != nil {
				t.Fatal(err)
			}
			tok := as.addScopedToken(name, a.ID, store.ScopeAdmin)
			if r := as.call("GET", "/v1/approvals", tok, ""); r.status != http.StatusOK {
				t.Errorf("%s reading approvals: %d %s; want 200", tc.role, r.status, r.body)
			}
			req := as.ask(as.web, "write", "touch /tmp/"+name, 1)
			r := as.call("POST", "/v1/approvals/"+req.ID+"/approve", tok, "")
			wantRole(t, r, tc.decide, "decide")
			if got := as.get("/v1/approvals/" + req.ID).data(t)["status"]; (got == "approved") != tc.decide {
				t.Errorf("%s deciding: request is %v; want approved %v", tc.role, got, tc.decide)
			}
			r = as.call("POST", "/v1/agents", tok, `{"name": "`+name+`", "keys": ["`+newTestKeyPair(t).Authorized+`"]}`)
			wantRole(t, r, tc.configure, "configure")
			if _, err := as.st.AgentByName(ctx, name); (err == nil) != tc.configure {
				t.Errorf("%s configuring: agent %s stored %v; want %v", tc.role, name, err == nil, tc.configure)
			}
		})
	}
}

// wantRole checks that r succeeded (a 2xx) if allowed, else that it is
// 403 insufficient_role.
func wantRole(t *testing.T, r apiResp, allowed bool, what string) {
	t.Helper()
	if allowed {
		if r.status < 200 || r.status > 299 {
			t.Errorf("%s: %d %s; want it allowed", what, r.status, r.body)
		}
		return
	}
	if code, _ := apiCode(t, r); r.status != http.StatusForbidden || code != "insufficient_role" {
		t.Errorf("%s: %d %s; want 403 insufficient_role", what, r.status, r.body)
	}
}

// TestAPIRoleLoweredCountsAtOnce: a token of scope admin whose admin is
// lowered to approver is refused configuration at its next call, keeps
// deciding, and GET /v1/admins shows the role.
func TestAPIRoleLoweredCountsAtOnce(t *testing.T) {
	as := newAPISite(t, nil)
	agent := func(name string) string {
		return `{"name": "` + name + `", "keys": ["` + newTestKeyPair(t).Authorized + `"]}`
	}
	if r := as.call("POST", "/v1/agents", as.root, agent("before")); r.status != http.StatusCreated {
		t.Fatalf("alice (owner) adding an agent: %d %s; want 201", r.status, r.body)
	}
	setRole(t, as.st, "alice", store.RoleApprover)
	r := as.call("POST", "/v1/agents", as.root, agent("after"))
	if code, _ := apiCode(t, r); r.status != http.StatusForbidden || code != "insufficient_role" {
		t.Errorf("alice's admin token after she became an approver: %d %s; want 403 insufficient_role", r.status, r.body)
	}
	if _, err := as.st.AgentByName(context.Background(), "after"); err == nil {
		t.Error("agent after was stored")
	}
	// The route refuses the token before its handler reads the body: a
	// body the handler would answer 400 is 403 here.
	r = as.call("POST", "/v1/agents", as.root, `{"name": "nokeys"}`)
	if code, _ := apiCode(t, r); r.status != http.StatusForbidden || code != "insufficient_role" {
		t.Errorf("alice's admin token, body without keys: %d %s; want 403 insufficient_role from the route", r.status, r.body)
	}
	req := as.ask(as.web, "write", "touch /x", 1)
	if r := as.call("POST", "/v1/approvals/"+req.ID+"/approve", as.root, ""); r.status != http.StatusOK {
		t.Errorf("alice (approver) deciding: %d %s; want 200", r.status, r.body)
	}
	recs, _, _ := as.get("/v1/admins?name=alice").list(t)
	if len(recs) != 1 || recs[0]["role"] != "approver" {
		t.Errorf("GET /v1/admins?name=alice: %v; want role approver", recs)
	}
}

// TestPageRoles: on the page every role sees every page; a viewer's forms
// are all refused (403) but logout, an approver decides and re-checks but
// is refused configuration, an admin and an owner configure.
func TestPageRoles(t *testing.T) {
	ps := newPageSite(t, nil)
	ctx := context.Background()
	for _, tc := range roleCases() {
		t.Run(string(tc.role), func(t *testing.T) {
			name := "r-" + string(tc.role)
			ps.addAdminRole(name, tc.role)
			pc := ps.client()
			pc.loginAs(name)
			for _, path := range []string{"/approvals", "/connections", "/agents", "/grants", "/audit", "/tokens", "/notifications", "/admins"} {
				if status, _, _ := pc.get(path); status != http.StatusOK {
					t.Errorf("%s GET %s: got status %d; want 200", tc.role, path, status)
				}
			}
			req := ps.ask(ps.conn, "write", "touch /tmp/"+name, 1)
			_, _, list := pc.get("/approvals")
			if hasForm := strings.Contains(list, `action="/approvals/`+req.ID+`/approve"`); hasForm != tc.decide {
				t.Errorf("%s: approve form shown %v; want %v", tc.role, hasForm, tc.decide)
			}
			status, _, _ := pc.post("/approvals/"+req.ID+"/approve", pc.form("next", "/approvals"))
			wantPage(t, status, tc.decide, "decide")
			if got := ps.approval(req.ID).Status; (got == store.ApprovalApproved) != tc.decide {
				t.Errorf("%s deciding: request is %s; want approved %v", tc.role, got, tc.decide)
			}
			status, _, _ = pc.post("/agents", pc.form("name", name, "keys", newTestKeyPair(t).Authorized))
			wantPage(t, status, tc.configure, "configure")
			if _, err := ps.st.AgentByName(ctx, name); (err == nil) != tc.configure {
				t.Errorf("%s configuring: agent %s stored %v; want %v", tc.role, name, err == nil, tc.configure)
			}
			if tc.role == store.RoleViewer {
				for _, path := range []string{"/connections/web1/check", "/tokens", "/grants/revoke", "/scopes/" + req.ID + "/revoke"} {
					if status, _, _ := pc.post(path, pc.form("name", "v", "agent", "bot", "alias", "web1")); status != http.StatusForbidden {
						t.Errorf("viewer POST %s: got status %d; want 403", path, status)
					}
				}
				if _, err := ps.st.GrantByNames(ctx, "bot", "web1"); err != nil {
					t.Errorf("the viewer's revoke took the grant away: %v", err)
				}
				if status, h, _ := pc.post("/logout", pc.form()); status != http.StatusSeeOther || h.Get("Location") != "/login" {
					t.Errorf("viewer logout: got status %d to %q; want 303 to /login", status, h.Get("Location"))
				}
			}
		})
	}
}

// wantPage checks a form's status: a 303 back to the page if allowed, 403
// if not.
func wantPage(t *testing.T, status int, allowed bool, what string) {
	t.Helper()
	want := http.StatusForbidden
	if allowed {
		want = http.StatusSeeOther
	}
	if status != want {
		t.Errorf("%s: got status %d; want %d", what, status, want)
	}
}

// TestPageRoleLoweredCountsAtOnce: an admin's open session loses the
// configuration forms at the next click once the role is lowered.
func TestPageRoleLoweredCountsAtOnce(t *testing.T) {
	ps := newPageSite(t, nil)
	ps.addAdminRole("ada", store.RoleAdmin)
	pc := ps.client()
	pc.loginAs("ada")
	if status, _, _ := pc.post("/agents", pc.form("name", "one", "keys", newTestKeyPair(t).Authorized)); status != http.StatusSeeOther {
		t.Fatalf("ada (admin) adding an agent: got status %d; want 303", status)
	}
	setRole(t, ps.st, "ada", store.RoleApprover)
	if status, _, _ := pc.post("/agents", pc.form("name", "two", "keys", newTestKeyPair(t).Authorized)); status != http.StatusForbidden {
		t.Errorf("ada (now approver) adding an agent: got status %d; want 403", status)
	}
	if _, err := ps.st.AgentByName(context.Background(), "two"); err == nil {
		t.Error("agent two was stored")
	}
}
