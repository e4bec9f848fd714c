package metrics

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// auditHeadCollector exports the audit log's head as serve last published
// it: postern_audit_head_seq, postern_audit_head_info{seq,hash} (always 1)
// and postern_audit_head_published_timestamp_seconds. A scraper that keeps
// its series keeps the heads outside postern's database, which is what
// catches rows removed from the end of the log (docs/deploy.md, Keeping the audit head elsewhere). It is a
// collector of its own, not a GaugeVec, so that the info series of the old
// head and of the new one are swapped in one step: a scrape sees exactly
// one head, never none or two.
type auditHeadCollector struct {
	seqDesc, infoDesc, timeDesc *prometheus.Desc

	// mu protects the fields below it.
	mu        sync.Mutex
	published bool // false until the first AuditHead: no series before
	seq       int64
	hash      string
	at        time.Time
}

func newAuditHeadCollector() *auditHeadCollector {
	return &auditHeadCollector{
		seqDesc: prometheus.NewDesc(prometheus.BuildFQName(namespace, "audit", "head_seq"),
			"Sequence number of the newest audit row when the head was last published.", nil, nil),
		infoDesc: prometheus.NewDesc(prometheus.BuildFQName(namespace, "audit", "head_info"),
			"The audit head last published, as labels (seq, hash); always 1. Keep it to check with postern audit verify --from SEQ:HASH.",
			[]string{"seq", "hash"}, nil),
		timeDesc: prometheus.NewDesc(prometheus.BuildFQName(namespace, "audit", "head_published_timestamp_seconds"),
			"When the audit head was last published, in seconds since the Unix epoch.", nil, nil),
	}
}

func (c *auditHeadCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.seqDesc
	ch <- c.infoDesc
	ch <- c.timeDesc
}

func (c *auditHeadCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	published, seq, hash, at := c.published, c.seq, c.hash, c.at
	c.mu.Unlock()
	if !published {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.seqDesc, prometheus.GaugeValue, float64(seq))
	ch <- prometheus.MustNewConstMetric(c.infoDesc, prometheus.GaugeValue, 1, strconv.FormatInt(seq, 10), hash)
	ch <- prometheus.MustNewConstMetric(c.timeDesc, prometheus.GaugeValue, float64(at.UnixNano())/1e9)
}

// AuditHead records the audit head that serve published at at: the newest
// row's seq and its hash in hex.
func (m *Metrics) AuditHead(seq int64, hash string, at time.Time) {
	if m == nil {
		return
	}
	c := m.auditHead
	c.mu.Lock()
	defer c.mu.Unlock()
	c.published, c.seq, c.hash, c.at = true, seq, hash, at
}
