package web

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/postern/postern/store"
)

// TestAPILocks: POST /v1/locks locks an agent (201, audited as the token's
// admin, its pending request denied with the lock's words), GET lists it,
// DELETE removes it; a viewer's or an approver's admin token is refused
// 403 insufficient_role and nothing changes.
func TestAPILocks(t *testing.T) {
	as := newAPISite(t, nil)
	ctx := context.Background()
	req := as.ask(as.web, "write", "touch /x", 1)
	for _, role := range []store.Role{store.RoleViewer, store.RoleApprover} {
		name := "r-" + string(role)
		a, err := as.st.CreateAdmin(ctx, store.Unaudited(), name, "$argon2id$unused", role)
		if err != nil {
			t.Fatal(err)
		}
		tok := as.addScopedToken(name, a.ID, store.ScopeAdmin)
		r := as.call("POST", "/v1/locks", tok, `{"kind": "agent", "name": "bot", "reason": "incident 7"}`)
		wantRole(t, r, false, string(role)+" locking")
	}
	if locks, err := as.st.ActiveLocks(ctx); err != nil || len(locks) != 0 {
		t.Fatalf("after refused locks: ActiveLocks = %v, %v; want none", locks, err)
	}

	r := as.call("POST", "/v1/locks", as.root, `{"kind": "agent", "name": "bot", "for": "1h", "reason": "incident 7"}`)
	if r.status != http.StatusCreated {
		t.Fatalf("POST /v1/locks: %d %s; want 201", r.status, r.body)
	}
	d := r.data(t)
	if d["kind"] != "agent" || d["name"] != "bot" || d["reason"] != "incident 7" || d["expires_at"] == nil {
		t.Errorf("lock = %v; want agent bot, incident 7, with an end", d)
	}
	got := as.get("/v1/approvals/" + req.ID).data(t)
	if got["status"] != "denied" || !strings.Contains(got["reason"].(string), "agent bot is locked") {
		t.Errorf("pending request after the lock: %v; want denied with the lock's words", got)
	}
	rows, _, _ := as.get("/v1/locks?kind=agent").list(t)
	if len(rows) != 1 || rows[0]["id"] != d["id"] {
		t.Errorf("GET /v1/locks = %v; want the lock", rows)
	}
	audit, err := as.st.ListAudit(ctx, store.AuditFilter{Agent: "bot", Kind: "admin"})
	if err != nil {
		t.Fatal(err)
	}
	if len(audit) == 0 || !strings.Contains(audit[0].Operation, "lock agent bot for 1h0m0s: incident 7") ||
		len(audit[0].Deciders) == 0 || audit[0].Deciders[0] != "alice" {
		t.Errorf("newest admin row of bot = %+v; want alice's lock with its reason", audit)
	}

	if r := as.call("DELETE", "/v1/locks/nosuch", as.root, ""); r.status != http.StatusNotFound {
		t.Errorf("DELETE /v1/locks/nosuch: %d; want 404", r.status)
	}
	if r := as.call("DELETE", "/v1/locks/"+d["id"].(string), as.root, ""); r.status != http.StatusOK {
		t.Fatalf("DELETE /v1/locks/ID: %d %s; want 200", r.status, r.body)
	}
	if locks, err := as.st.ActiveLocks(ctx); err != nil || len(locks) != 0 {
		t.Errorf("after DELETE: ActiveLocks = %v, %v; want none", locks, err)
	}
	if r := as.call("POST", "/v1/locks", as.root, `{"kind": "agent", "name": "nobody"}`); r.status != http.StatusNotFound {
		t.Errorf("locking an unknown agent: %d %s; want 404", r.status, r.body)
	}
	if r := as.call("POST", "/v1/locks", as.root, `{"kind": "agent", "name": "bot", "reason": "ok\u001b[2Jpostern: approved"}`); r.status != http.StatusBadRequest {
		t.Errorf("a reason with an escape: %d %s; want 400", r.status, r.body)
	}
	if r := as.call("POST", "/v1/locks", as.root, `{"kind": "grant", "name": "bot"}`); r.status != http.StatusBadRequest {
		t.Errorf("locking a grant: %d %s; want 400", r.status, r.body)
	}
}

// TestPageLocks: on the Locks page an admin locks the agent for a time
// with a reason, sees the lock listed, and unlocks it; a viewer and an
// approver see the page and are refused both forms (403), and nothing is
// locked by them.
func TestPageLocks(t *testing.T) {
	ps := newPageSite(t, nil)
	ctx := context.Background()
	for _, tc := range roleCases() {
		t.Run(string(tc.role), func(t *testing.T) {
			name := "l-" + string(tc.role)
			ps.addAdminRole(name, tc.role)
			pc := ps.client()
			pc.loginAs(name)
			if status, _, body := pc.get("/locks"); status != http.StatusOK || !strings.Contains(body, `value="agent:bot"`) {
				t.Fatalf("GET /locks: %d; want 200 with agent bot to lock\n%s", status, body)
			}
			status, h, _ := pc.post("/locks", pc.form("target", "agent:bot", "for", "2h", "reason", "incident "+name))
			wantPage(t, status, tc.configure, "lock")
			locks, err := ps.st.ActiveLocks(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(locks) == 1 && locks[0].Reason == "incident "+name; got != tc.configure {
				t.Fatalf("after %s's lock: %+v; want locked %v", tc.role, locks, tc.configure)
			}
			if !tc.configure {
				if _, err := ps.st.SetLock(ctx, store.Unaudited(), store.LockInput{Kind: store.LockAgent, Name: "bot", CreatedBy: "x"}); err != nil {
					t.Fatal(err)
				}
				defer ps.st.RemoveLock(ctx, store.Unaudited(), store.LockAgent, "bot")
			} else {
				if f := flashText(pc.follow(h)); !strings.Contains(f, "agent bot is locked until") {
					t.Errorf("flash %q; want the lock", f)
				}
				if _, _, body := pc.get("/locks"); !strings.Contains(body, `id="lock-agent-bot"`) || !strings.Contains(body, "incident "+name) {
					t.Errorf("the page does not list the lock:\n%s", body)
				}
			}
			status, _, _ = pc.post("/locks/agent/bot/remove", pc.form())
			wantPage(t, status, tc.configure, "unlock")
			locks, err = ps.st.ActiveLocks(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if (len(locks) == 0) != tc.configure {
				t.Errorf("after %s's unlock: %d locks; want unlocked %v", tc.role, len(locks), tc.configure)
			}
		})
	}
}
