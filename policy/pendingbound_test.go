package policy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/postern/postern/internal/testwait"
	"github.com/postern/postern/store"
)

// authorizeResult is what one of many background Authorize calls returned.
type authorizeResult struct {
	op   Operation
	auth Authorization
	err  error
}

// otherAgent registers an agent with rules on c, and returns it.
func (te *testEnv) otherAgent(name string, c *store.Connection, rules Rules) *store.Agent {
	te.t.Helper()
	a, err := te.st.CreateAgent(context.Background(), store.Unaudited(), name, newKeyPair(te.t).Authorized)
	if err != nil {
		te.t.Fatalf("CreateAgent(%s): %v", name, err)
	}
	if _, err := te.st.SetGrant(context.Background(), store.Unaudited(), name, c.Alias, rules); err != nil {
		te.t.Fatalf("SetGrant(%s): %v", name, err)
	}
	return a
}

// authorizeRefused runs Authorize for an operation the test expects to be
// refused at once: should it be asked instead, the test fails and the
// wait ends at once rather than at the request's expiry.
func authorizeRefused(t *testing.T, ctx context.Context, e *Engine, op Operation) (Authorization, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	return e.Authorize(ctx, op, func(a Approval) {
		t.Errorf("%s: stored request %s; want it refused", op.Text, a.ID)
		cancel()
	})
}

// checkTooMany fails t unless r is a denial by the bound on waiting
// requests, with nothing stored.
func checkTooMany(t *testing.T, what string, auth Authorization, err error) {
	t.Helper()
	var de *DeniedError
	if !errors.As(err, &de) || de.Reason != TooManyPendingReason || auth.Outcome != Denied || auth.Approval != nil {
		t.Errorf("%s: outcome %s, %v; want denied at once with %q and no request", what, auth.Outcome, err, TooManyPendingReason)
	}
}

// TestPendingBoundUnderLoad: 200 asked operations of one agent at once
// leave at most the default 10 waiting; the other 190 are denied at once
// with the reason and audited so. Another agent is still asked, a
// decision frees a place, and the agent is refused again once it is
// filled.
func TestPendingBoundUnderLoad(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		te := newTestEnv(t, nil, Options{})
		c := te.conn("web", store.EnvDev, askAll)
		other := te.otherAgent("other", c, askAll)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()

		const n = 200
		asked := make(chan Approval, n)
		done := make(chan authorizeResult, n)
		for i := range n {
			op := te.op(c, Write, fmt.Sprintf("touch /tmp/f%d", i))
			go func() {
				auth, err := te.eng.Authorize(ctx, op, func(a Approval) { asked <- a })
				done <- authorizeResult{op, auth, err}
			}()
		}
		var waiting []Approval
		var refused []authorizeResult
		for len(waiting)+len(refused) < n {
			select {
			case a := <-asked:
				waiting = append(waiting, a)
			case r := <-done:
				refused = append(refused, r)
			case <-testwait.End(t):
				t.Fatalf("by the test's deadline: %d asked, %d returned; want %d in all", len(waiting), len(refused), n)
			}
		}
		if len(waiting) != DefaultMaxPendingPerAgent || len(refused) != n-DefaultMaxPendingPerAgent {
			t.Fatalf("%d waiting, %d returned; want %d and %d", len(waiting), len(refused), DefaultMaxPendingPerAgent, n-DefaultMaxPendingPerAgent)
		}
		for _, r := range refused {
			checkTooMany(t, r.op.Text, r.auth, r.err)
			if _, err := te.eng.Audit(context.Background(), r.auth.Record(r.op)); err != nil {
				t.Fatalf("Audit: %v", err)
			}
		}
		audited := 0
		err := te.st.ScanAudit(context.Background(), func(row store.AuditRow) error {
			if row.Decision == string(Denied) && row.AgentID == te.agent.ID && row.Class == "write" &&
				strings.Contains(row.Reason, TooManyPendingReason) {
				audited++
			}
			return nil
		})
		if err != nil || audited != n-DefaultMaxPendingPerAgent {
			t.Errorf("audit: %d denials with the reason, %v; want %d", audited, err, n-DefaultMaxPendingPerAgent)
		}
		if res, err := Verify(context.Background(), te.st); err != nil || res.Broken != nil {
			t.Errorf("Verify = %+v, %v; want an intact chain", res, err)
		}

		// Another agent is still asked.
		otherOp := Operation{AgentID: other.ID, ConnectionID: c.ID, Class: Write, Kind: Exec, Text: "touch /tmp/other"}
		if a, _ := authorizeAsync(t, ctx, te.eng, otherOp); a.AgentID != other.ID || a.Status != store.ApprovalPending {
			t.Errorf("the other agent's request = %+v; want pending", a)
		}

		// Denying one frees its place: the next request waits, and the
		// one after it is refused again.
		if _, err := te.eng.Deny(context.Background(), waiting[0].ID, te.admin("alice"), "not now"); err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-done:
			if !errors.Is(r.err, ErrDenied) || r.auth.Approval == nil || r.auth.Approval.ID != waiting[0].ID {
				t.Errorf("the denied waiter: %v; want %s denied by alice", r.err, waiting[0].ID)
			}
		case <-testwait.End(t):
			t.Fatal("the denied waiter did not return by the test's deadline")
		}
		if a, _ := authorizeAsync(t, ctx, te.eng, te.op(c, Write, "touch /tmp/after")); a.Status != store.ApprovalPending {
			t.Errorf("after a denial: %+v; want a pending request", a)
		}
		auth, err := authorizeRefused(t, ctx, te.eng, te.op(c, Write, "touch /tmp/refused"))
		checkTooMany(t, "once the place is taken again", auth, err)
	})
}

// TestPendingBounds: the bounds as configured, per agent and per
// connection across agents.
func TestPendingBounds(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		// asks are the agents (0 bot, 1 other) asking in turn on one
		// connection; refused are the indexes of asks that are refused.
		asks    []int
		refused []int
	}{
		{"per agent", Options{MaxPendingPerAgent: 2}, []int{0, 0, 0, 1, 1, 1}, []int{2, 5}},
		{"per connection across agents", Options{MaxPendingPerAgent: 5, MaxPendingPerConnection: 3}, []int{0, 1, 0, 1, 0}, []int{3, 4}},
		{"the defaults", Options{}, []int{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, []int{10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			forEachDB(t, func(t *testing.T) {
				te := newTestEnv(t, nil, tt.opts)
				c := te.conn("web", store.EnvDev, askAll)
				agents := []string{te.agent.ID, te.otherAgent("other", c, askAll).ID}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				for i, who := range tt.asks {
					op := Operation{AgentID: agents[who], ConnectionID: c.ID, Class: Write, Kind: Exec, Text: fmt.Sprintf("touch /tmp/%d", i)}
					if !slices.Contains(tt.refused, i) {
						authorizeAsync(t, ctx, te.eng, op)
						continue
					}
					auth, err := authorizeRefused(t, ctx, te.eng, op)
					checkTooMany(t, fmt.Sprintf("ask %d", i), auth, err)
				}
			})
		})
	}
}

// TestPendingBoundNegative: a negative bound is a configuration error.
func TestPendingBoundNegative(t *testing.T) {
	for _, opts := range []Options{{MaxPendingPerAgent: -1}, {MaxPendingPerConnection: -1}} {
		opts.Store = failingStore{}
		if e, err := New(opts); err == nil {
			e.Close()
			t.Errorf("New(%+v) = nil error; want one", opts)
		}
	}
}
