package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// readRuns are the values of read_commands_total's sandbox label: the
// mechanisms of package readsandbox, none (the read ran on the
// classifier's verdict alone) and refused (its connection requires a
// sandbox and its target has none).
func readRuns() []string { return []string{"bwrap", "unshare", "none", "refused"} }

// ReadCommand counts a command allowed as read by how it runs: in the
// sandbox named (bwrap, unshare), without one (none), or refused.
func (m *Metrics) ReadCommand(sandbox string) {
	if m == nil {
		return
	}
	m.readCommands.WithLabelValues(bounded(sandbox, readRuns())).Inc()
}

// ReadSandboxState is one connection's read sandbox as
// postern_connections_read_sandbox counts it: its environment, the setting
// (auto, require, off) and what the last probe of its target found (bwrap,
// unshare, none, unprobed).
type ReadSandboxState struct {
	Env, Setting, Found string
}

// WatchReadSandboxes registers the gauge postern_connections_read_sandbox:
// the number of connections by environment, read sandbox setting and what
// the probe found, read from list at each scrape, so that an alert can
// name production connections whose reads rely on the classifier alone
// (setting auto or off, found none or unprobed). A list that fails gives
// no series for that scrape rather than failing the whole scrape.
func (m *Metrics) WatchReadSandboxes(list func() ([]ReadSandboxState, error)) error {
	if m == nil {
		return nil
	}
	c := &readSandboxCollector{list: list, desc: prometheus.NewDesc(
		prometheus.BuildFQName(namespace, "", "connections_read_sandbox"),
		"Connections by environment, read sandbox setting (auto, require, off) and what the last probe of the target found (bwrap, unshare, none, unprobed).",
		[]string{"env", "setting", "found"}, nil)}
	return register(m.reg, c)
}

// readSandboxCollector is the collector of WatchReadSandboxes.
type readSandboxCollector struct {
	list func() ([]ReadSandboxState, error)
	desc *prometheus.Desc
}

func (c *readSandboxCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *readSandboxCollector) Collect(ch chan<- prometheus.Metric) {
	states, err := c.list()
	if err != nil {
		return
	}
	counts := map[ReadSandboxState]int{}
	for _, s := range states {
		s.Env = bounded(s.Env, envs())
		s.Setting = bounded(s.Setting, sandboxSettings())
		s.Found = bounded(s.Found, sandboxFounds())
		counts[s]++
	}
	for s, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), s.Env, s.Setting, s.Found)
	}
}

// envs, sandboxSettings and sandboxFounds mirror store's Env, ReadSandbox
// and SandboxFound values (this package may not import store).
func envs() []string { return []string{"dev", "test", "staging", "production"} }

func sandboxSettings() []string { return []string{"auto", "require", "off"} }

func sandboxFounds() []string { return []string{"unprobed", "bwrap", "unshare", "none"} }
