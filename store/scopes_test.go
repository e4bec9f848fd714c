package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"
)

func sha(text string) string {
	sum := sha256.Sum256([]byte(text))
	return hex.EncodeToString(sum[:])
}

// requestFor writes a pending request for text by agentID on connID.
func requestFor(t *testing.T, s *Store, agentID, connID, class, text string, needed int) Approval {
	t.Helper()
	a, _, err := s.RequestApproval(context.Background(), Approval{AgentID: agentID, ConnectionID: connID,
		Class: class, Kind: "exec", Operation: text, OperationSHA256: sha(text), ApprovalsNeeded: needed,
		AgentReason: "deploy 42", SourceAddr: "127.0.0.1:5555"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

var alice = Decider{AdminID: "adm_alice", Name: "alice"}

func TestApprovalScopes(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		s, clk, _ := openDecidingStore(t)
		ctx := context.Background()
		agent, _ := mustCreateAgent(t, s, "bot")
		other, _ := mustCreateAgent(t, s, "other")
		conn, _ := mustCreateConnection(t, s, "web", "dev")
		askWrites := Rules{Read: RuleAllow, Write: RuleAsk, Destructive: RuleAsk}
		for _, name := range []string{"bot", "other"} {
			if _, err := s.SetGrant(ctx, Unaudited(), name, "web", askWrites); err != nil {
				t.Fatal(err)
			}
		}

		op := requestFor(t, s, agent.ID, conn.ID, "write", "touch /tmp/a", 1)
		if op.AgentReason != "deploy 42" || op.SourceAddr != "127.0.0.1:5555" || op.Scope != ScopeRequest {
			t.Errorf("new request = %+v; want the agent's reason and address kept, scope request", op)
		}
		if op.TargetHost == "" || op.TargetPort == 0 || op.TargetUser == "" {
			t.Errorf("new request target = %s@%s:%d; want the connection's", op.TargetUser, op.TargetHost, op.TargetPort)
		}
		end := clk.Now().Add(30 * time.Minute)
		got, outcome, err := s.DecideApproval(ctx, Decision{ID: op.ID, Approve: true, By: alice, Scope: ScopeOperation, ScopeExpiresAt: end})
		if err != nil || outcome != DecideApproved {
			t.Fatalf("DecideApproval(operation scope) = %v, %v; want approved", outcome, err)
		}
		if got.Scope != ScopeOperation || !got.ScopeExpiresAt.Equal(end) || got.DecidedByID != alice.AdminID {
			t.Errorf("approved = %+v; want operation scope until %v by %s", got, end, alice.AdminID)
		}

		cls := requestFor(t, s, agent.ID, conn.ID, "write", "mkdir /srv/x", 1)
		if _, _, err := s.DecideApproval(ctx, Decision{ID: cls.ID, Approve: true, By: alice, Scope: ScopeClass, ScopeExpiresAt: clk.Now().Add(10 * time.Minute)}); err != nil {
			t.Fatal(err)
		}

		tests := []struct {
			name        string
			agent       string
			class, text string
			want        string // approval id, or "" for none
		}{
			{"same operation under the operation scope (it lasts longer)", agent.ID, "write", "touch /tmp/a", op.ID},
			{"another write under the class scope", agent.ID, "write", "touch /tmp/b", cls.ID},
			{"another class", agent.ID, "destructive", "rm /tmp/a", ""},
			{"another agent", other.ID, "write", "touch /tmp/a", ""},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				a, ok, err := s.ActiveScope(ctx, tc.agent, conn.ID, tc.class, sha(tc.text))
				if err != nil {
					t.Fatal(err)
				}
				if got := map[bool]string{true: a.ID}[ok]; got != tc.want {
					t.Errorf("ActiveScope(%s %q) = %q; want %q", tc.class, tc.text, got, tc.want)
				}
			})
		}

		list, err := s.ListScopes(ctx, true)
		if err != nil || len(list) != 2 {
			t.Fatalf("ListScopes(active) = %d, %v; want 2", len(list), err)
		}
		if _, err := s.RevokeScope(ctx, cls.ID, Decider{AdminID: "adm_bob", Name: "bob"}); err != nil {
			t.Fatalf("RevokeScope: %v", err)
		}
		if _, ok, _ := s.ActiveScope(ctx, agent.ID, conn.ID, "write", sha("touch /tmp/b")); ok {
			t.Error("a revoked class scope still lets operations through")
		}
		if _, err := s.RevokeScope(ctx, cls.ID, alice); !errors.Is(err, ErrInvalid) {
			t.Errorf("RevokeScope twice = %v; want ErrInvalid", err)
		}

		clk.Advance(31 * time.Minute)
		if _, ok, _ := s.ActiveScope(ctx, agent.ID, conn.ID, "write", sha("touch /tmp/a")); ok {
			t.Error("an operation scope outlived its end")
		}
		if list, _ := s.ListScopes(ctx, true); len(list) != 0 {
			t.Errorf("ListScopes(active) after the ends = %d; want 0", len(list))
		}
		if list, _ := s.ListScopes(ctx, false); len(list) != 2 {
			t.Errorf("ListScopes(all) = %d; want 2 (ended and revoked are history)", len(list))
		}
	})
}

func TestDecisionRefusals(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		s, clk, _ := openDecidingStore(t)
		ctx := context.Background()
		agent, _ := mustCreateAgent(t, s, "bot")
		conn, _ := mustCreateConnection(t, s, "db", "production")
		two := requestFor(t, s, agent.ID, conn.ID, "destructive", "rm -rf /srv/old", 2)
		one := requestFor(t, s, agent.ID, conn.ID, "write", "touch /srv/x", 1)
		end := clk.Now().Add(time.Hour)
		tests := []struct {
			name string
			d    Decision
		}{
			{"no admin", Decision{ID: one.ID, Approve: true}},
			{"admin without a name", Decision{ID: one.ID, Approve: true, By: Decider{AdminID: "adm_x"}}},
			{"unknown scope", Decision{ID: one.ID, Approve: true, By: alice, Scope: "forever", ScopeExpiresAt: end}},
			{"scope without an end", Decision{ID: one.ID, Approve: true, By: alice, Scope: ScopeClass}},
			{"request with an end", Decision{ID: one.ID, Approve: true, By: alice, Scope: ScopeRequest, ScopeExpiresAt: end}},
			{"scope on a two-person request", Decision{ID: two.ID, Approve: true, By: alice, Scope: ScopeOperation, ScopeExpiresAt: end}},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				if _, _, err := s.DecideApproval(ctx, tc.d); !errors.Is(err, ErrInvalid) {
					t.Errorf("DecideApproval(%+v) = %v; want ErrInvalid", tc.d, err)
				}
			})
		}
		if a, _ := s.GetApproval(ctx, two.ID); a.Status != ApprovalPending || a.FirstApprover != "" {
			t.Errorf("after refusals the request is %+v; want untouched", a)
		}
	})
}

// TestTwoPersonRuleComparesIdentity: the second approval must come from
// another admin id, whatever the names say.
func TestTwoPersonRuleComparesIdentity(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		s, _, _ := openDecidingStore(t)
		ctx := context.Background()
		agent, _ := mustCreateAgent(t, s, "bot")
		conn, _ := mustCreateConnection(t, s, "db", "production")
		a := requestFor(t, s, agent.ID, conn.ID, "destructive", "rm -rf /srv/old", 2)
		if _, outcome, err := s.DecideApproval(ctx, Decision{ID: a.ID, Approve: true, By: alice}); err != nil || outcome != DecideFirstApproval {
			t.Fatalf("first approval = %v, %v", outcome, err)
		}
		// Same admin under another display name (a token, another case).
		if _, outcome, err := s.DecideApproval(ctx, Decision{ID: a.ID, Approve: true, By: Decider{AdminID: alice.AdminID, Name: "ALICE"}}); err != nil || outcome != DecideSameApprover {
			t.Errorf("second approval by the same id = %v, %v; want DecideSameApprover", outcome, err)
		}
		got, outcome, err := s.DecideApproval(ctx, Decision{ID: a.ID, Approve: true, By: Decider{AdminID: "adm_bob", Name: "alice"}})
		if err != nil || outcome != DecideApproved {
			t.Fatalf("second approval by another id with the same name = %v, %v; want approved", outcome, err)
		}
		if got.FirstApproverID != alice.AdminID || got.DecidedByID != "adm_bob" {
			t.Errorf("approvers = %s, %s; want adm_alice, adm_bob", got.FirstApproverID, got.DecidedByID)
		}
	})
}

// TestScopesFollowTheRule (issue 23): setting a rule to deny ends every
// scope of its class under the grant, with the change's audit row naming
// them, so that the rule going back to ask does not bring them back; no
// scope is made while the rule is deny; revoking the grant ends the rest,
// and a grant given again is not elevated by a scope of the one before.
func TestScopesFollowTheRule(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		s, clk, _ := openDecidingStore(t)
		ctx := context.Background()
		agent, _ := mustCreateAgent(t, s, "bot")
		conn, _ := mustCreateConnection(t, s, "web", "dev")
		ask := Rules{Read: RuleAllow, Write: RuleAsk, Destructive: RuleAsk}
		if _, err := s.SetGrant(ctx, Unaudited(), "bot", "web", ask); err != nil {
			t.Fatal(err)
		}
		end := clk.Now().Add(time.Hour)
		scoped := func(class, text string, scope Scope) Approval {
			t.Helper()
			r := requestFor(t, s, agent.ID, conn.ID, class, text, 1)
			a, _, err := s.DecideApproval(ctx, Decision{ID: r.ID, Approve: true, By: alice, Scope: scope, ScopeExpiresAt: end})
			if err != nil {
				t.Fatal(err)
			}
			return a
		}
		cls := scoped("write", "touch /srv/a", ScopeClass)
		op := scoped("write", "touch /srv/b", ScopeOperation)
		del := scoped("destructive", "rm /srv/c", ScopeClass)
		active := func(class, text string) bool {
			t.Helper()
			_, ok, err := s.ActiveScope(ctx, agent.ID, conn.ID, class, sha(text))
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}
		if !active("write", "touch /srv/z") || !active("write", "touch /srv/b") || !active("destructive", "rm /srv/z") {
			t.Fatal("the scopes are not active after their approvals")
		}

		clk.Advance(time.Minute)
		p := pendingRow("grant bot web: write=deny")
		deny := ask
		deny.Write = RuleDeny
		if _, err := s.SetGrant(ctx, Audited(p), "bot", "web", deny); err != nil {
			t.Fatal(err)
		}
		row := p.Stored()
		if row == nil {
			t.Fatal("the rule change was not audited")
		}
		for _, id := range []string{cls.ID, op.ID} {
			if !strings.Contains(row.Operation, "setting write=deny ends scopes") || !strings.Contains(row.Operation, id) {
				t.Errorf("audit row %q; want it to say setting write=deny ends scope %s", row.Operation, id)
			}
			a, err := s.GetApproval(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if a.ScopeActive(clk.Now()) || a.ScopeRevokedBy != "alice, setting write=deny" {
				t.Errorf("scope %s after write=deny: revoked at %v by %q; want ended by alice, setting write=deny", id, a.ScopeRevokedAt, a.ScopeRevokedBy)
			}
		}
		if strings.Contains(row.Operation, del.ID) {
			t.Errorf("audit row %q names the destructive scope, which write=deny does not end", row.Operation)
		}

		// No scope is made while the rule is deny: approving a request
		// that was waiting when it changed lets that one through only.
		waiting := requestFor(t, s, agent.ID, conn.ID, "write", "touch /srv/d", 1)
		if _, _, err := s.DecideApproval(ctx, Decision{ID: waiting.ID, Approve: true, By: alice, Scope: ScopeClass, ScopeExpiresAt: end}); !errors.Is(err, ErrInvalid) {
			t.Errorf("a class scope approved under write=deny: %v; want ErrInvalid", err)
		}

		if _, err := s.SetGrant(ctx, Unaudited(), "bot", "web", ask); err != nil {
			t.Fatal(err)
		}
		if active("write", "touch /srv/z") || active("write", "touch /srv/b") {
			t.Error("a write scope came back when the rule went from deny to ask again")
		}
		if !active("destructive", "rm /srv/z") {
			t.Error("the destructive scope ended with the write rule")
		}

		// Revoking the grant ends the rest, and a grant given again (as
		// ask) is not elevated by them, even by one that a store before
		// this fix left active.
		p = pendingRow("grant revoke bot web")
		if err := s.RevokeGrant(ctx, Audited(p), "bot", "web"); err != nil {
			t.Fatal(err)
		}
		if row := p.Stored(); row == nil || !strings.Contains(row.Operation, "revoking the grant ends scope "+del.ID) {
			t.Errorf("audit row of the revoke %+v; want it to name scope %s", row, del.ID)
		}
		if a, _ := s.GetApproval(ctx, del.ID); a.ScopeActive(clk.Now()) {
			t.Error("the destructive scope outlived its grant")
		}
		if _, err := s.db.ExecContext(ctx, `UPDATE approvals SET scope_revoked_at = '', scope_revoked_by = '' WHERE id = ?`, del.ID); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Minute)
		if _, err := s.SetGrant(ctx, Unaudited(), "bot", "web", ask); err != nil {
			t.Fatal(err)
		}
		if active("destructive", "rm /srv/z") {
			t.Error("a scope of the revoked grant elevates the grant given again")
		}
		if list, err := s.ListScopes(ctx, true); err != nil || len(list) != 0 {
			t.Errorf("ListScopes(active) = %d, %v; want none", len(list), err)
		}
	})
}
