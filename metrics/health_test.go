package metrics

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// TestWatchHealth: each scrape asks the database: up 1 with the pool and
// the queue when it answers; up 0 and no queue series when it does not
// (the count would only wait for the same outage). The build info is one
// series of 1.
func TestWatchHealth(t *testing.T) {
	m, reg := newTest(t)
	var pingErr error
	pool := sql.DBStats{MaxOpenConnections: 8, InUse: 3, Idle: 2, WaitCount: 5, WaitDuration: 1500 * time.Millisecond}
	if err := m.WatchHealth(Health{
		Ping:                func(context.Context) error { return pingErr },
		Pool:                func() sql.DBStats { return pool },
		NotificationsQueued: func(context.Context) (int, error) { return 4, nil },
		Timeout:             time.Second,
	}); err != nil {
		t.Fatal(err)
	}
	if err := m.BuildInfo("v1.2.3", "abc123", "go1.99"); err != nil {
		t.Fatal(err)
	}
	gather := func() map[string][]*dto.Metric {
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][]*dto.Metric{}
		for _, f := range fams {
			out[f.GetName()] = f.GetMetric()
		}
		return out
	}
	one := func(fams map[string][]*dto.Metric, name string) (float64, bool) {
		ms := fams[name]
		if len(ms) != 1 {
			return 0, false
		}
		if g := ms[0].GetGauge(); g != nil {
			return g.GetValue(), true
		}
		return ms[0].GetCounter().GetValue(), true
	}

	fams := gather()
	for name, want := range map[string]float64{"postern_database_up": 1, "postern_notifications_queued": 4,
		"postern_database_connections_max": 8, "postern_database_waits_total": 5, "postern_database_wait_seconds_total": 1.5,
		"postern_build_info": 1} {
		if got, ok := one(fams, name); !ok || got != want {
			t.Errorf("%s = %v (present %v); want %v", name, got, ok, want)
		}
	}
	states := map[string]float64{}
	for _, mt := range fams["postern_database_connections"] {
		states[mt.GetLabel()[0].GetValue()] = mt.GetGauge().GetValue()
	}
	if states["in_use"] != 3 || states["idle"] != 2 || len(states) != 2 {
		t.Errorf("postern_database_connections = %v; want in_use 3, idle 2", states)
	}
	labels := map[string]string{}
	for _, lp := range fams["postern_build_info"][0].GetLabel() {
		labels[lp.GetName()] = lp.GetValue()
	}
	if labels["version"] != "v1.2.3" || labels["commit"] != "abc123" || labels["go_version"] != "go1.99" {
		t.Errorf("postern_build_info labels %v; want version v1.2.3, commit abc123, go_version go1.99", labels)
	}

	pingErr = errors.New("connection refused")
	fams = gather()
	if got, ok := one(fams, "postern_database_up"); !ok || got != 0 {
		t.Errorf("postern_database_up with the database down = %v (present %v); want 0", got, ok)
	}
	if _, ok := fams["postern_notifications_queued"]; ok {
		t.Error("postern_notifications_queued present with the database down; want absent")
	}

	var nilM *Metrics
	if err := nilM.WatchHealth(Health{}); err != nil || nilM.BuildInfo("", "", "") != nil {
		t.Errorf("WatchHealth, BuildInfo on nil Metrics: %v; want nil", err)
	}
}
