package manage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/postern/postern/internal/testpg"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
)

// TestRuleDenyEndsScopes (issue 23): a rule set to deny through the one
// layer of configuration changes ends every scope of its class under the
// grant, and the change's audit row names them; the rule back at ask does
// not bring them back. Revoking the grant ends the others, and a grant
// given again is not elevated by them.
func TestRuleDenyEndsScopes(t *testing.T) {
	testpg.ForEachDB(t, func(t *testing.T) {
		m, st, _ := newTestManager(t)
		ctx := context.Background()
		carol := registered(t, st, store.RoleApprover, "carol")[0]
		key, _ := newKey(t)
		res, err := m.AddConnection(ctx, alice, ConnectionSpec{Alias: "web", Host: "h", User: "u", PrivateKey: key,
			HostKeys: []string{hostKeyLine(t)}}, CheckOptions{})
		if err != nil {
			t.Fatal(err)
		}
		conn := res.Conn
		_, agentPub := newKey(t)
		agent, err := m.AddAgent(ctx, alice, "bot", []string{strings.TrimSpace(string(ssh.MarshalAuthorizedKey(agentPub)))})
		if err != nil {
			t.Fatal(err)
		}
		ask, deny := store.RuleAsk, store.RuleDeny
		if _, err := m.SetGrant(ctx, alice, "bot", "web", RulesChange{Write: &ask, Destructive: &ask}); err != nil {
			t.Fatal(err)
		}
		sha := func(text string) string {
			sum := sha256.Sum256([]byte(text))
			return hex.EncodeToString(sum[:])
		}
		scoped := func(class, text string, scope store.Scope) store.Approval {
			t.Helper()
			r, _, err := st.RequestApproval(ctx, store.Approval{AgentID: agent.ID, ConnectionID: conn.ID, Class: class,
				Kind: "exec", Operation: text, OperationSHA256: sha(text), ApprovalsNeeded: 1}, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			a, _, err := st.DecideApproval(ctx, store.Decision{ID: r.ID, Approve: true,
				By: store.Decider{AdminID: carol.AdminID, Name: carol.Name}, Scope: scope, ScopeExpiresAt: time.Now().Add(time.Hour)})
			if err != nil {
				t.Fatal(err)
			}
			return a
		}
		active := func(class, text string) bool {
			t.Helper()
			_, ok, err := st.ActiveScope(ctx, agent.ID, conn.ID, class, sha(text))
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}
		cls := scoped("write", "mkdir /srv/a", store.ScopeClass)
		op := scoped("write", "touch /srv/b", store.ScopeOperation)
		del := scoped("destructive", "rm /srv/c", store.ScopeClass)
		if !active("write", "mkdir /srv/z") || !active("destructive", "rm /srv/z") {
			t.Fatal("the scopes are not active after their approvals")
		}

		if _, err := m.SetGrant(ctx, alice, "bot", "web", RulesChange{Write: &deny}); err != nil {
			t.Fatal(err)
		}
		if _, err := m.SetGrant(ctx, alice, "bot", "web", RulesChange{Write: &ask}); err != nil {
			t.Fatal(err)
		}
		if active("write", "mkdir /srv/z") || active("write", "touch /srv/b") {
			t.Error("a write scope is back with the rule at ask after deny")
		}
		if !active("destructive", "rm /srv/z") {
			t.Error("write=deny ended the destructive scope too")
		}
		if _, err := m.RevokeGrant(ctx, alice, "bot", "web"); err != nil {
			t.Fatal(err)
		}
		if _, err := m.SetGrant(ctx, alice, "bot", "web", RulesChange{Write: &ask, Destructive: &ask}); err != nil {
			t.Fatal(err)
		}
		if active("destructive", "rm /srv/z") {
			t.Error("a scope of the revoked grant elevates the grant given again")
		}
		for _, id := range []string{cls.ID, op.ID, del.ID} {
			if a, err := st.GetApproval(ctx, id); err != nil || !strings.HasPrefix(a.ScopeRevokedBy, "alice, ") {
				t.Errorf("scope %s: revoked by %q, %v; want by alice's change", id, a.ScopeRevokedBy, err)
			}
		}

		v, err := policy.Verify(ctx, st)
		if err != nil || v.Broken != nil {
			t.Fatalf("audit chain: %v %v", err, v.Broken)
		}
		rows, err := st.ListAudit(ctx, store.AuditFilter{Kind: string(policy.Admin)})
		if err != nil {
			t.Fatal(err)
		}
		var denyRow, revokeRow string
		for _, r := range rows {
			switch {
			case strings.Contains(r.Operation, "write=deny destructive=ask (was"):
				denyRow = r.Operation
			case strings.HasPrefix(r.Operation, "grant revoke bot web"):
				revokeRow = r.Operation
			}
		}
		if !strings.Contains(denyRow, "; setting write=deny ends scopes ") || !strings.Contains(denyRow, cls.ID+" (class write)") ||
			!strings.Contains(denyRow, op.ID+" (operation write)") || strings.Contains(denyRow, del.ID) {
			t.Errorf("audit row of write=deny %q; want it to name the write scopes %s and %s, and only them", denyRow, cls.ID, op.ID)
		}
		if !strings.Contains(revokeRow, "revoking the grant ends scope "+del.ID+" (class destructive)") {
			t.Errorf("audit row of the revoke %q; want it to name scope %s", revokeRow, del.ID)
		}
	})
}
