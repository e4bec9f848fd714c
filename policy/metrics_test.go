package policy

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/postern/postern/metrics"
	"github.com/postern/postern/store"
)

// TestMetricsCountDecisions: Authorize counts each decision under its
// class, the grant's rule and its outcome, keeps the pending gauge while a
// session waits, observes the wait, and times every audit write.
func TestMetricsCountDecisions(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		m, err := metrics.New(reg)
		if err != nil {
			t.Fatal(err)
		}
		te := newTestEnv(t, nil, Options{Metrics: m})
		c := te.conn("web", store.EnvDev, Rules{Read: Allow, Write: Ask, Destructive: Deny})
		ctx := context.Background()
		if _, err := te.eng.Authorize(ctx, te.op(c, Read, "uptime"), nil); err != nil {
			t.Fatalf("Authorize(read): %v", err)
		}
		if _, err := te.eng.Authorize(ctx, te.op(c, Destructive, "rm -rf /srv"), nil); err == nil {
			t.Fatal("Authorize(destructive): got nil; want denied")
		}
		a, done := authorizeAsync(t, ctx, te.eng, te.op(c, Write, "touch /etc/motd"))
		if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP postern_approvals_pending Approval requests that this process's sessions are waiting on now.
# TYPE postern_approvals_pending gauge
postern_approvals_pending 1
`), "postern_approvals_pending"); err != nil {
			t.Errorf("while waiting: %v", err)
		}
		if _, err := te.eng.Deny(ctx, a.ID, te.admin("alice"), "no"); err != nil {
			t.Fatalf("Deny: %v", err)
		}
		if r := result(t, done); r.auth.Outcome != Denied {
			t.Fatalf("Authorize(write) = %s; want denied", r.auth.Outcome)
		}
		if _, err := te.eng.Audit(ctx, Record{AgentID: te.agent.ID, Class: Read, Kind: Exec, Outcome: Allowed, Operation: "uptime"}); err != nil {
			t.Fatalf("Audit: %v", err)
		}
		want := `
# HELP postern_decisions_total Operations decided by the policy engine, by class, the grant's rule and outcome.
# TYPE postern_decisions_total counter
postern_decisions_total{class="destructive",outcome="denied",rule="deny"} 1
postern_decisions_total{class="read",outcome="allowed",rule="allow"} 1
postern_decisions_total{class="write",outcome="denied",rule="ask"} 1
# HELP postern_approvals_pending Approval requests that this process's sessions are waiting on now.
# TYPE postern_approvals_pending gauge
postern_approvals_pending 0
`
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "postern_decisions_total", "postern_approvals_pending"); err != nil {
			t.Error(err)
		}
		tests := []struct {
			name string
			want uint64
		}{
			{"postern_approval_wait_seconds", 1},
			{"postern_audit_write_seconds", 1},
		}
		for _, tt := range tests {
			if got := histogramCount(t, reg, tt.name); got != tt.want {
				t.Errorf("%s count = %d; want %d", tt.name, got, tt.want)
			}
		}
	})
}

// histogramCount is the observation count of the histogram name, summed
// over its series.
func histogramCount(t *testing.T, g prometheus.Gatherer, name string) uint64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			n += m.GetHistogram().GetSampleCount()
		}
	}
	return n
}
