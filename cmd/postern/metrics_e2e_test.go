package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/postern/postern/internal/testwait"
)

// TestMetricsEndToEnd runs `postern serve --metrics-listen` against a real
// sshd, drives it with the real ssh and sftp clients (an allowed read, a
// denied destructive command, an SFTP upload and download), then scrapes
// /metrics over HTTP and checks the counters those made, and that no label
// carries the commands' text, their paths, the agent or the alias. The web
// listener's probes answer 200 meanwhile.
func TestMetricsEndToEnd(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigConfig{conns: []rigConn{{"web", "dev"}}, grant: []string{"--read", "allow", "--write", "allow", "--destructive", "deny"}})
	scratch, agent := r.scratch, r.agent
	p := r.serve("--metrics-listen", "127.0.0.1:0")
	metricsURL, _ := p.waitLog("metrics serving")["url"].(string)
	if !strings.HasPrefix(metricsURL, "http://127.0.0.1:") {
		t.Fatalf("metrics URL %q; want http://127.0.0.1:PORT/metrics", metricsURL)
	}

	// marker is in every command and path the agent sends, so that a label
	// carrying one of them is found.
	const marker = "pmarker7f3a"
	readFile := filepath.Join(scratch, marker+"-read.txt")
	if err := os.WriteFile(readFile, []byte("read through postern\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	read := agent.ssh(t, p.sshAddr, "web", "cat "+readFile)
	read.wait(t)
	if read.code != 0 || read.stdout != "read through postern\n" {
		t.Fatalf("cat: exit %d, stdout %q, stderr %q; want 0 and the file", read.code, read.stdout, read.stderr)
	}
	victim := filepath.Join(scratch, marker+"-keep.txt")
	if err := os.WriteFile(victim, []byte("keep\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rm := agent.ssh(t, p.sshAddr, "web", "rm -f "+victim)
	rm.wait(t)
	if rm.code != 126 {
		t.Fatalf("rm: exit %d, stderr %q; want 126 (denied)", rm.code, rm.stderr)
	}
	const size = 96 << 10
	payload := make([]byte, size)
	rand.Read(payload)
	local := filepath.Join(t.TempDir(), marker+"-local.bin")
	if err := os.WriteFile(local, payload, 0o600); err != nil {
		t.Fatal(err)
	}
	remote := "/web" + filepath.Join(scratch, marker+"-put.bin")
	fetched := filepath.Join(t.TempDir(), "fetched.bin")
	tr := agent.sftp(t, p.sshAddr, "bot", fmt.Sprintf("put %s %s\nget %s %s\n", local, remote, remote, fetched))
	tr.wait(t)
	if tr.code != 0 {
		t.Fatalf("sftp: exit %d, stderr %q; want 0", tr.code, tr.stderr)
	}
	if b, err := os.ReadFile(fetched); err != nil || !bytes.Equal(b, payload) {
		t.Fatalf("sftp get: %d bytes, %v; want the %d uploaded", len(b), err, size)
	}

	// The server sees each client's end a moment after the client does:
	// scrape until the three agent connections are closed.
	var fams map[string]*dto.MetricFamily
	testwait.Until(t, "the agent connections to close", func() bool {
		fams = scrape(t, metricsURL)
		return value(fams, "postern_ssh_connections_active") == 0
	})

	exact := []struct {
		name   string
		labels []string // name, value pairs
		want   float64
	}{
		{"postern_ssh_connections_total", []string{"outcome", "accepted"}, 3},
		{"postern_ssh_connections_total", []string{"outcome", "refused"}, 0},
		{"postern_ssh_handshakes_total", []string{"outcome", "ok"}, 3},
		{"postern_ssh_handshakes_total", []string{"outcome", "auth_failed"}, 0},
		{"postern_decisions_total", []string{"class", "destructive", "rule", "deny", "outcome", "denied"}, 1},
		{"postern_approvals_pending", nil, 0},
		{"postern_upstream_dial_errors_total", []string{"reason", "unreachable"}, 0},
		{"postern_notifications_total", []string{"outcome", "delivered"}, 0},
		// The one connection, whatever its target's probe found: serve
		// wires the gauge to the store.
		{"postern_connections_read_sandbox", []string{"env", "dev", "setting", "auto"}, 1},
		// The cat, the one read command, in whatever sandbox it ran.
		{"postern_read_commands_total", nil, 1},
		// Health (issue 25): the database answers, and nothing waits
		// to be sent (no channel).
		{"postern_database_up", nil, 1},
		{"postern_notifications_queued", nil, 0},
	}
	for _, tt := range exact {
		if got := value(fams, tt.name, tt.labels...); got != tt.want {
			t.Errorf("%s%v = %v; want %v", tt.name, tt.labels, got, tt.want)
		}
	}
	atLeast := []struct {
		name   string
		labels []string
		want   float64
	}{
		// The cat, and the SFTP get's open and stat.
		{"postern_decisions_total", []string{"class", "read", "rule", "allow", "outcome", "allowed"}, 2},
		// The SFTP put's open for writing.
		{"postern_decisions_total", []string{"class", "write", "rule", "allow", "outcome", "allowed"}, 1},
		{"postern_sftp_bytes_total", []string{"direction", "from_agent"}, size},
		{"postern_sftp_bytes_total", []string{"direction", "to_agent"}, size},
		{"postern_sftp_operations_total", []string{"op", "open"}, 2},
		{"postern_sftp_operations_total", []string{"op", "write"}, 1},
		{"postern_sftp_operations_total", []string{"op", "read"}, 1},
		{"postern_sftp_operations_total", []string{"op", "close"}, 2},
		{"postern_upstream_clients", nil, 1},
		{"postern_database_connections_max", nil, 1},
	}
	for _, tt := range atLeast {
		if got := value(fams, tt.name, tt.labels...); got < tt.want {
			t.Errorf("%s%v = %v; want at least %v", tt.name, tt.labels, got, tt.want)
		}
	}
	// The build, joined to every series by its labels.
	if bi := fams["postern_build_info"]; bi == nil || len(bi.GetMetric()) != 1 || bi.GetMetric()[0].GetGauge().GetValue() != 1 ||
		!hasLabels(bi.GetMetric()[0], []string{"go_version", runtime.Version()}) {
		t.Errorf("postern_build_info = %v; want one series of 1 with go_version %s", bi, runtime.Version())
	}
	if _, ok := fams["postern_database_connections"]; !ok {
		t.Error("postern_database_connections missing; want the pool's in_use and idle")
	}

	// Every operation decided was audited: the cat, the rm, and the SFTP
	// session's operations.
	if got, decided := float64(histogramCount(fams, "postern_audit_write_seconds")), sum(fams, "postern_decisions_total"); got < decided || decided < 4 {
		t.Errorf("audit writes observed %v, decisions %v; want at least one write per decision, and at least 4 decisions", got, decided)
	}

	// No label value carries what the agent sent, or who and where.
	for name, mf := range fams {
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				v := lp.GetValue()
				if strings.Contains(v, marker) || strings.Contains(v, scratch) || strings.Contains(v, "cat ") || strings.Contains(v, "rm ") ||
					strings.HasPrefix(name, "postern_") && (strings.Contains(v, "bot") || strings.Contains(v, "web")) {
					t.Errorf("%s{%s=%q}: a label carries a command, path, agent or alias", name, lp.GetName(), v)
				}
			}
		}
	}

	// The probes on the web listener. A readiness check has a bound of its
	// own (web.DefaultReadyTimeout, 2 s for a write to the database), which
	// a busy machine may overrun: a 503 that says so is the probe doing its
	// job, so the test asks again until the answer is 200; any other 503
	// fails it at once.
	wc := p.web(t)
	ctx := testwait.Context(t)
	if status, body := apiCall(ctx, wc, "", http.MethodGet, "/healthz", ""); status != http.StatusOK || body != "ok\n" {
		t.Errorf("GET /healthz = %d %q; want 200 ok", status, body)
	}
	var status int
	var body string
	testwait.Until(t, "GET /readyz to answer 200", func() bool {
		status, body = apiCall(ctx, wc, "", http.MethodGet, "/readyz", "")
		if status != http.StatusOK && !strings.Contains(body, "no answer within") {
			t.Fatalf("GET /readyz = %d %q; want 200 ok", status, body)
		}
		return status == http.StatusOK
	})
	if body != "ok\n" {
		t.Errorf("GET /readyz = %d %q; want 200 ok", status, body)
	}
	if code := p.end(syscall.SIGTERM); code != 0 {
		t.Errorf("serve exit status after SIGTERM = %d; want 0", code)
	}
}

// scrape GETs /metrics and parses the text exposition format.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	ctx, cancel := context.WithDeadline(context.Background(), testwait.Deadline(t))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d, %v", url, resp.StatusCode, err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parse %s: %v\n%s", url, err, body)
	}
	return fams
}

// value is the counter's or gauge's value of the series of name with the
// labels (name, value pairs; others may be there too), summed over the
// series that match; 0 when none does.
func value(fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	var v float64
	for _, m := range fams[name].GetMetric() {
		if !hasLabels(m, labels) {
			continue
		}
		v += m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue()
	}
	return v
}

// sum is value over every series of name.
func sum(fams map[string]*dto.MetricFamily, name string) float64 { return value(fams, name) }

// histogramCount is the histogram's observation count over its series.
func histogramCount(fams map[string]*dto.MetricFamily, name string) uint64 {
	var n uint64
	for _, m := range fams[name].GetMetric() {
		n += m.GetHistogram().GetSampleCount()
	}
	return n
}

func hasLabels(m *dto.Metric, labels []string) bool {
	for i := 0; i+1 < len(labels); i += 2 {
		found := false
		for _, lp := range m.GetLabel() {
			if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}
