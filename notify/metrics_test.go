package notify

import (
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/postern/postern/metrics"
	"github.com/postern/postern/store"
)

// TestMetricsCountDeliveries: each attempt is counted under its outcome,
// a failure that will be retried apart from a delivery.
func TestMetricsCountDeliveries(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		m, err := metrics.New(reg)
		if err != nil {
			t.Fatal(err)
		}
		r := newRig(t)
		rc := newReceiver(t)
		rc.setAnswer(func(n int, w http.ResponseWriter, _ *http.Request) {
			if n == 1 {
				w.WriteHeader(http.StatusServiceUnavailable)
			}
		})
		r.channel(store.NewNotifyChannel{Name: "ops", URL: rc.url(), Secret: []byte(hmacSecret), OnPending: true})
		r.ask("rm -rf /srv/app", 2*time.Minute)
		d := r.dispatcher(nil, func(c *Config) { c.Metrics = m })
		if n := r.deliverDue(d); n != 1 {
			t.Fatalf("first round: %d attempts; want 1", n)
		}
		r.clock.Advance(time.Second) // the first backoff, with the rig's identity jitter
		if n := r.deliverDue(d); n != 1 {
			t.Fatalf("second round: %d attempts; want 1", n)
		}
		tests := []struct {
			outcome string
			want    float64
		}{
			{metrics.NotifyRetry, 1},
			{metrics.NotifyDelivered, 1},
			{metrics.NotifyFailed, 0},
		}
		for _, tt := range tests {
			got, err := counterValue(reg, "postern_notifications_total", "outcome", tt.outcome)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("notifications{outcome=%q} = %v; want %v", tt.outcome, got, tt.want)
			}
		}
	})
}

// counterValue reads one series of a counter from g.
func counterValue(g prometheus.Gatherer, name, label, value string) (float64, error) {
	mfs, err := g.Gather()
	if err != nil {
		return 0, err
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					return m.GetCounter().GetValue(), nil
				}
			}
		}
	}
	return 0, nil
}
