package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// AuditSinkMetrics are the collectors of serve's streaming audit sinks
// (package auditsink): postern_audit_sink_rows_behind{sink} and
// postern_audit_sink_send_failures_total{sink}. The sink label is the name
// the operator gave each --audit-sink: a set fixed at start, as long as
// the flags, so it cannot grow while serve runs. A nil *AuditSinkMetrics
// records nothing.
type AuditSinkMetrics struct {
	behind   *prometheus.GaugeVec
	failures *prometheus.CounterVec
	names    []string
}

// AuditSinks registers the sink collectors for the sinks named names,
// each series at 0. It is called once, by serve, with the configured sinks;
// a nil *Metrics returns a nil *AuditSinkMetrics.
func (m *Metrics) AuditSinks(names []string) (*AuditSinkMetrics, error) {
	if m == nil {
		return nil, nil
	}
	a := &AuditSinkMetrics{
		behind: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Name: "audit_sink_rows_behind",
			Help: "Audit rows not yet delivered to the sink, as last seen by the replica that ships it.",
		}, []string{"sink"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "audit_sink_send_failures_total",
			Help: "Failed attempts to deliver a batch of audit rows to the sink (each is retried).",
		}, []string{"sink"}),
		names: names,
	}
	if err := register(m.reg, a.behind, a.failures); err != nil {
		return nil, err
	}
	for _, n := range names {
		a.behind.WithLabelValues(n)
		a.failures.WithLabelValues(n)
	}
	return a, nil
}

// Behind records that sink is n rows behind the newest audit row.
func (a *AuditSinkMetrics) Behind(sink string, n int64) {
	if a == nil {
		return
	}
	a.behind.WithLabelValues(bounded(sink, a.names)).Set(float64(n))
}

// SendFailure counts a failed delivery attempt to sink.
func (a *AuditSinkMetrics) SendFailure(sink string) {
	if a == nil {
		return
	}
	a.failures.WithLabelValues(bounded(sink, a.names)).Inc()
}
