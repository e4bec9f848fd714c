package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestAuditHead: no head series before the first publish; after each,
// exactly one head, the newest, so that a scrape never sees two.
func TestAuditHead(t *testing.T) {
	var nilMetrics *Metrics
	nilMetrics.AuditHead(1, "ab", time.Unix(1, 0)) // records nothing, does not panic

	m, reg := newTest(t)
	names := []string{"postern_audit_head_seq", "postern_audit_head_info", "postern_audit_head_published_timestamp_seconds"}
	if n, err := testutil.GatherAndCount(reg, names...); err != nil || n != 0 {
		t.Errorf("before a publish: got %d head series, %v; want 0", n, err)
	}
	m.AuditHead(3, "aa", time.Unix(1000, 0))
	m.AuditHead(7, "bb", time.Unix(1900, 500_000_000))
	want := `
# HELP postern_audit_head_info The audit head last published, as labels (seq, hash); always 1. Keep it to check with postern audit verify --from SEQ:HASH.
# TYPE postern_audit_head_info gauge
postern_audit_head_info{hash="bb",seq="7"} 1
# HELP postern_audit_head_published_timestamp_seconds When the audit head was last published, in seconds since the Unix epoch.
# TYPE postern_audit_head_published_timestamp_seconds gauge
postern_audit_head_published_timestamp_seconds 1900.5
# HELP postern_audit_head_seq Sequence number of the newest audit row when the head was last published.
# TYPE postern_audit_head_seq gauge
postern_audit_head_seq 7
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Errorf("after two publishes: %v", err)
	}
}
