package metrics

import (
	"context"
	"database/sql"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// BuildInfo sets postern_build_info{version,commit,go_version} to 1: the
// conventional way to join a build to every other series of the process,
// and to see in one query which builds a fleet of replicas runs.
func (m *Metrics) BuildInfo(version, commit, goVersion string) error {
	if m == nil {
		return nil
	}
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "build_info",
		Help: "The build of this postern (always 1): module version, commit (\"\" outside a checkout) and Go version."},
		[]string{"version", "commit", "go_version"})
	if err := register(m.reg, g); err != nil {
		return err
	}
	g.WithLabelValues(version, commit, goVersion).Set(1)
	return nil
}

// Health is what the health gauges read at each scrape.
type Health struct {
	// Ping runs one round trip to the database.
	Ping func(ctx context.Context) error
	// Pool reports the database connection pool.
	Pool func() sql.DBStats
	// NotificationsQueued counts the notifications waiting to be sent
	// (queued or being sent).
	NotificationsQueued func(ctx context.Context) (int, error)
	// Timeout bounds the scrape's database work; a database that does not
	// answer within it is down for that scrape.
	Timeout time.Duration
}

// WatchHealth registers the gauges of h, read at each scrape:
//
//   - postern_database_up: 1 when the database answered a round trip
//     within the timeout, else 0 (the alert for an outage, which agents
//     otherwise see only as refused connections);
//   - postern_database_ping_seconds: how long that round trip took;
//   - postern_database_connections{state="in_use"|"idle"} and
//     postern_database_connections_max: the pool (a pool always in use up
//     to its max makes decisions wait);
//   - postern_database_waits_total, postern_database_wait_seconds_total:
//     how often and how long callers waited for a pooled connection;
//   - postern_notifications_queued: notifications not yet delivered (a
//     growing queue is a receiver that is down), absent for a scrape in
//     which the count failed.
func (m *Metrics) WatchHealth(h Health) error {
	if m == nil {
		return nil
	}
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(namespace, "", name), help, labels, nil)
	}
	c := &healthCollector{h: h,
		up:        desc("database_up", "1 when the database answered a round trip within the scrape's bound, else 0."),
		ping:      desc("database_ping_seconds", "How long the scrape's round trip to the database took."),
		conns:     desc("database_connections", "Pooled database connections by state (in_use, idle).", "state"),
		maxConns:  desc("database_connections_max", "The most database connections the pool opens (0: no bound)."),
		waits:     desc("database_waits_total", "Times a caller waited for a pooled database connection."),
		waitTotal: desc("database_wait_seconds_total", "Time callers spent waiting for a pooled database connection."),
		queued:    desc("notifications_queued", "Notifications queued or being sent, not yet delivered."),
	}
	return register(m.reg, c)
}

// healthCollector is the collector of WatchHealth.
type healthCollector struct {
	h                                                   Health
	up, ping, conns, maxConns, waits, waitTotal, queued *prometheus.Desc
}

func (c *healthCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.up, c.ping, c.conns, c.maxConns, c.waits, c.waitTotal, c.queued} {
		ch <- d
	}
}

func (c *healthCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.h.Timeout)
	defer cancel()
	start := time.Now()
	up := 0.0
	if c.h.Ping(ctx) == nil {
		up = 1
	}
	gauge(c.up, up)
	gauge(c.ping, time.Since(start).Seconds())
	st := c.h.Pool()
	gauge(c.conns, float64(st.InUse), "in_use")
	gauge(c.conns, float64(st.Idle), "idle")
	gauge(c.maxConns, float64(st.MaxOpenConnections))
	ch <- prometheus.MustNewConstMetric(c.waits, prometheus.CounterValue, float64(st.WaitCount))
	ch <- prometheus.MustNewConstMetric(c.waitTotal, prometheus.CounterValue, st.WaitDuration.Seconds())
	if up == 1 {
		if n, err := c.h.NotificationsQueued(ctx); err == nil {
			gauge(c.queued, float64(n))
		}
	}
}
