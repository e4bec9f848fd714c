package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
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
		s, clk, _ := openTestStore(t)
		ctx := context.Background()
		agent, _ := mustCreateAgent(t, s, "bot")
		other, _ := mustCreateAgent(t, s, "other")
		conn, _ := mustCreateConnection(t, s, "web", "dev")

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
		s, clk, _ := openTestStore(t)
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
		s, _, _ := openTestStore(t)
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
