package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestAuditSinks: one series per configured sink from the start, at 0; a
// name outside the configured ones is counted as "other"; a nil *Metrics
// gives a nil *AuditSinkMetrics that records nothing.
func TestAuditSinks(t *testing.T) {
	var nilMetrics *Metrics
	none, err := nilMetrics.AuditSinks([]string{"a"})
	if err != nil || none != nil {
		t.Fatalf("nil Metrics: got %v, %v; want nil, nil", none, err)
	}
	none.Behind("a", 3) // records nothing, does not panic
	none.SendFailure("a")

	m, reg := newTest(t)
	a, err := m.AuditSinks([]string{"siem", "file"})
	if err != nil {
		t.Fatal(err)
	}
	a.Behind("siem", 12)
	a.SendFailure("siem")
	a.SendFailure("siem")
	a.SendFailure("unknown")
	want := `
# HELP postern_audit_sink_rows_behind Audit rows not yet delivered to the sink, as last seen by the replica that ships it.
# TYPE postern_audit_sink_rows_behind gauge
postern_audit_sink_rows_behind{sink="file"} 0
postern_audit_sink_rows_behind{sink="siem"} 12
# HELP postern_audit_sink_send_failures_total Failed attempts to deliver a batch of audit rows to the sink (each is retried).
# TYPE postern_audit_sink_send_failures_total counter
postern_audit_sink_send_failures_total{sink="file"} 0
postern_audit_sink_send_failures_total{sink="other"} 1
postern_audit_sink_send_failures_total{sink="siem"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "postern_audit_sink_rows_behind", "postern_audit_sink_send_failures_total"); err != nil {
		t.Error(err)
	}
}
