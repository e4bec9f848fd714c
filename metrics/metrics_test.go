package metrics

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func newTest(t *testing.T) (*Metrics, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := New(reg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m, reg
}

// TestNilSafe: every method of a nil *Metrics does nothing, so that the
// packages that take one need none in tests and one-shot commands.
func TestNilSafe(t *testing.T) {
	var m *Metrics
	m.SSHConnection(ConnAccepted)
	m.SSHHandshake(HandshakeOK)
	m.SSHConnectionOpened()
	m.SSHConnectionClosed()
	m.Decision("read", "allow", "allowed")
	m.ApprovalWaitStarted()
	m.ApprovalWaitEnded("approved", time.Second)
	m.UpstreamClientAdded()
	m.UpstreamClientRemoved()
	m.UpstreamDialError(DialUnreachable)
	m.SFTPBytes(FromAgent, 10)
	m.SFTPOperation("open")
	m.AuditWrite(time.Millisecond)
	m.Notification(NotifyDelivered)
}

// TestRegisterTwice: a second Metrics on the same registry is refused with
// an error, not a panic.
func TestRegisterTwice(t *testing.T) {
	_, reg := newTest(t)
	if _, err := New(reg); err == nil {
		t.Fatal("second New on one registry: got nil error; want a registration error")
	}
}

// TestLabelsBounded: a value outside a label's set is counted as other,
// whatever a caller passes.
func TestLabelsBounded(t *testing.T) {
	tests := []struct {
		name   string
		record func(m *Metrics)
		vec    func(m *Metrics) *prometheus.CounterVec
		labels []string
		want   float64
	}{
		{"known op", func(m *Metrics) { m.SFTPOperation("write"); m.SFTPOperation("write") },
			func(m *Metrics) *prometheus.CounterVec { return m.sftpOps }, []string{"write"}, 2},
		{"path as op", func(m *Metrics) { m.SFTPOperation("/etc/passwd") },
			func(m *Metrics) *prometheus.CounterVec { return m.sftpOps }, []string{other}, 1},
		{"command as class", func(m *Metrics) { m.Decision("rm -rf /", "allow", "allowed") },
			func(m *Metrics) *prometheus.CounterVec { return m.decisions }, []string{other, "allow", "allowed"}, 1},
		{"decision", func(m *Metrics) { m.Decision("destructive", "ask", "expired") },
			func(m *Metrics) *prometheus.CounterVec { return m.decisions }, []string{"destructive", "ask", "expired"}, 1},
		{"unknown direction", func(m *Metrics) { m.SFTPBytes("sideways", 7) },
			func(m *Metrics) *prometheus.CounterVec { return m.sftpBytes }, []string{other}, 7},
		{"bytes", func(m *Metrics) { m.SFTPBytes(ToAgent, 7); m.SFTPBytes(ToAgent, 0); m.SFTPBytes(ToAgent, -3) },
			func(m *Metrics) *prometheus.CounterVec { return m.sftpBytes }, []string{ToAgent}, 7},
		{"handshake", func(m *Metrics) { m.SSHHandshake(HandshakeAuthFailed) },
			func(m *Metrics) *prometheus.CounterVec { return m.sshHandshakes }, []string{HandshakeAuthFailed}, 1},
		{"alias as dial reason", func(m *Metrics) { m.UpstreamDialError("prod-web") },
			func(m *Metrics) *prometheus.CounterVec { return m.upstreamDialErrors }, []string{other}, 1},
		{"notification", func(m *Metrics) { m.Notification(NotifyRetry) },
			func(m *Metrics) *prometheus.CounterVec { return m.notifications }, []string{NotifyRetry}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, _ := newTest(t)
			tt.record(m)
			if got := testutil.ToFloat64(tt.vec(m).WithLabelValues(tt.labels...)); got != tt.want {
				t.Errorf("%v = %v; want %v", tt.labels, got, tt.want)
			}
		})
	}
}

// TestGauges: the maintained gauges go up and down with their pairs, and
// the approval wait is observed under its outcome.
func TestGauges(t *testing.T) {
	m, reg := newTest(t)
	m.SSHConnectionOpened()
	m.SSHConnectionOpened()
	m.SSHConnectionClosed()
	m.UpstreamClientAdded()
	m.ApprovalWaitStarted()
	m.ApprovalWaitStarted()
	m.ApprovalWaitEnded("approved", 3*time.Second)
	want := `
# HELP postern_ssh_connections_active Authenticated agent connections open now.
# TYPE postern_ssh_connections_active gauge
postern_ssh_connections_active 1
# HELP postern_upstream_clients SSH connections to targets held by the upstream pool now.
# TYPE postern_upstream_clients gauge
postern_upstream_clients 1
# HELP postern_approvals_pending Approval requests that this process's sessions are waiting on now.
# TYPE postern_approvals_pending gauge
postern_approvals_pending 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"postern_ssh_connections_active", "postern_upstream_clients", "postern_approvals_pending"); err != nil {
		t.Error(err)
	}
	if got := testutil.CollectAndCount(m.approvalWait, "postern_approval_wait_seconds"); got != 1 {
		t.Errorf("approval wait series = %d; want 1", got)
	}
	m.AuditWrite(2 * time.Millisecond)
	if got := testutil.CollectAndCount(m.auditWrite); got != 1 {
		t.Errorf("audit write series = %d; want 1", got)
	}
}

// TestZeroSeries: the small label sets are exported at zero before
// anything happens, so that rate() works from the first scrape.
func TestZeroSeries(t *testing.T) {
	m, _ := newTest(t)
	tests := []struct {
		name string
		c    prometheus.Collector
		want int
	}{
		{"connections", m.sshConnections, len(connOutcomes())},
		{"handshakes", m.sshHandshakes, len(handshakeOutcomes())},
		{"dial errors", m.upstreamDialErrors, len(dialReasons())},
		{"sftp bytes", m.sftpBytes, len(directions())},
		{"notifications", m.notifications, len(notifyOutcomes())},
		{"decisions", m.decisions, 0},
	}
	for _, tt := range tests {
		if got := testutil.CollectAndCount(tt.c); got != tt.want {
			t.Errorf("%s: %d series; want %d", tt.name, got, tt.want)
		}
	}
}

// TestServe: Serve answers /metrics in the exposition format over a real
// listener, 404 elsewhere, and returns nil once its context ends.
func TestServe(t *testing.T) {
	m, reg := newTest(t)
	m.SFTPOperation("open")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, ln, reg) }()
	base := "http://" + ln.Addr().String()

	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /metrics: status %d; want 200", resp.StatusCode)
	}
	if !strings.Contains(string(body), `postern_sftp_operations_total{op="open"} 1`) {
		t.Errorf("GET /metrics: body lacks the open counter:\n%s", body)
	}
	resp, err = http.Get(base + "/other")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /other: status %d; want 404", resp.StatusCode)
	}
	cancel()
	if err := <-served; err != nil {
		t.Errorf("Serve after cancel: got %v; want nil", err)
	}
	if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		c.Close()
		t.Error("the listener still accepts after Serve returned")
	}
}
