package metrics

import (
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestReadCommand: reads are counted by how they ran, every value exported
// at zero from the start, and a value outside the set counts as other.
func TestReadCommand(t *testing.T) {
	m, _ := newTest(t)
	if got := testutil.CollectAndCount(m.readCommands); got != len(readRuns()) {
		t.Errorf("read command series at start: %d; want %d", got, len(readRuns()))
	}
	m.ReadCommand("bwrap")
	m.ReadCommand("bwrap")
	m.ReadCommand("refused")
	m.ReadCommand("firejail")
	for label, want := range map[string]float64{"bwrap": 2, "unshare": 0, "none": 0, "refused": 1, other: 1} {
		if got := testutil.ToFloat64(m.readCommands.WithLabelValues(label)); got != want {
			t.Errorf("read_commands_total{sandbox=%q} = %v; want %v", label, got, want)
		}
	}
	var nilM *Metrics
	nilM.ReadCommand("bwrap")
	if err := nilM.WatchReadSandboxes(nil); err != nil {
		t.Errorf("WatchReadSandboxes on nil Metrics: %v; want nil", err)
	}
}

// TestWatchReadSandboxes: the gauge counts connections by environment,
// setting and probe outcome at each scrape, bounds unknown values, and a
// list that fails gives no series rather than a failed scrape.
func TestWatchReadSandboxes(t *testing.T) {
	m, reg := newTest(t)
	var states []ReadSandboxState
	var listErr error
	if err := m.WatchReadSandboxes(func() ([]ReadSandboxState, error) { return states, listErr }); err != nil {
		t.Fatal(err)
	}
	states = []ReadSandboxState{
		{"production", "auto", "none"}, {"production", "auto", "none"}, {"production", "require", "bwrap"},
		{"dev", "off", "unprobed"}, {"prod-web", "auto", "firejail"},
	}
	want := `
# HELP postern_connections_read_sandbox Connections by environment, read sandbox setting (auto, require, off) and what the last probe of the target found (bwrap, unshare, none, unprobed).
# TYPE postern_connections_read_sandbox gauge
postern_connections_read_sandbox{env="dev",found="unprobed",setting="off"} 1
postern_connections_read_sandbox{env="other",found="other",setting="auto"} 1
postern_connections_read_sandbox{env="production",found="bwrap",setting="require"} 1
postern_connections_read_sandbox{env="production",found="none",setting="auto"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "postern_connections_read_sandbox"); err != nil {
		t.Error(err)
	}
	listErr = errors.New("database is locked")
	if n, err := testutil.GatherAndCount(reg, "postern_connections_read_sandbox"); n != 0 || err != nil {
		t.Errorf("with a failing list: %d series, %v; want none and no error", n, err)
	}
}
