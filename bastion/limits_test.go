package bastion

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/postern/postern/internal/testwait"
)

// TestUnauthenticatedLimits: handshakes in progress are bounded per source;
// excess connections queue for a slot, and a full queue drops its oldest
// connection rather than the newest; the handshake deadline closes
// connections that never finish; and a real agent still logs in afterwards.
func TestUnauthenticatedLimits(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{config: func(c *Config) {
		c.MaxUnauthenticatedPerSource = 3
		c.MaxQueuedHandshakes = 1
		c.HandshakeTimeout = 3 * time.Second
		c.HandshakeLease = time.Minute // no slot is taken back in this test
	}})
	dial := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", h.addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	banner := func(c net.Conn) error {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err := c.Read(make([]byte, 64))
		return err
	}
	var idle []net.Conn
	for i := 0; i < 3; i++ {
		c := dial()
		if err := banner(c); err != nil {
			t.Fatalf("idle connection %d: read banner: %v", i, err)
		}
		idle = append(idle, c)
	}
	older := dial() // waits for a slot: no banner yet
	h.waitAdmission(3, 1)
	newer := dial() // the queue (1) is full: the older one makes room
	if err := banner(older); !errors.Is(err, io.EOF) {
		t.Errorf("oldest waiting connection when the queue overflowed: read err %v; want it closed (EOF)", err)
	}
	idle[0].Close() // frees a slot: the waiting connection gets its turn
	if err := banner(newer); err != nil {
		t.Errorf("waiting connection: read banner after a slot freed: %v", err)
	}
	// The handshake deadline closes the ones that never authenticate.
	for i, c := range append(idle[1:], newer) {
		c.SetReadDeadline(time.Now().Add(15 * time.Second))
		if _, err := io.Copy(io.Discard, c); err != nil {
			t.Errorf("idle connection %d: %v; want the server to close it at the handshake deadline", i, err)
		}
	}
	if got := h.ssh("", "127.0.0.1", "web", "echo ok"); got.code != 0 || got.stdout != "ok\n" {
		t.Errorf("agent after the flood: exit %d stdout %q stderr %q; want 0 and ok", got.code, got.stdout, got.stderr)
	}
}

// waitAdmission waits until holding connections are in a handshake and
// waiting ones wait for a slot. Admission announces nothing: this polls.
func (h *harness) waitAdmission(holding, waiting int) {
	h.t.Helper()
	testwait.Until(h.t, fmt.Sprintf("%d handshakes holding a slot and %d waiting", holding, waiting), func() bool {
		st := h.srv.adm.stats()
		return st.holding == holding && st.waiting == waiting
	})
}

// TestConcurrentBurstOneSource: 50 agents from one address at once all get
// in, waiting for handshake slots rather than failing.
func TestConcurrentBurstOneSource(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{target: testsshdMaxSessions(100)})
	const n = 50
	results := make(chan sshResult, n)
	for i := 0; i < n; i++ {
		go func() { results <- h.ssh("", "127.0.0.1", "web", "sleep 1; echo ok") }()
	}
	failed := 0
	for i := 0; i < n; i++ {
		if r := <-results; r.code != 0 || r.stdout != "ok\n" {
			failed++
			t.Logf("failed: exit %d stderr %q", r.code, r.stderr)
		}
	}
	if failed != 0 {
		t.Errorf("%d of %d concurrent agents failed; want 0", failed, n)
	}
	t.Logf("handshake slots taken back: %d", h.srv.adm.stats().preemptions)
}

// floodResult is what floodLogin measured.
type floodResult struct {
	baseline    time.Duration // the same before the flood (upstream pool warm)
	login       time.Duration // the real agent's ssh, from start to exit
	heapPerConn float64       // heap growth per flood connection, in bytes
}

// floodLogin opens idle TCP connections that never speak and drip
// connections that send a handshake one byte at a time, all from the
// agent's own address, against the bastion with its default limits; then
// the real ssh client logs in as the agent and runs a command. It returns
// the login's duration, the same before the flood, and the heap growth per
// flood connection, measured while the flood is up.
func floodLogin(tb testing.TB, h *harness, idle, drip int) floodResult {
	tb.Helper()
	login := func() time.Duration {
		tb.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, "ssh", append(h.clientOpts("-p"), "127.0.0.1", "web", "echo in")...)
		start := time.Now()
		out, err := cmd.Output()
		took := time.Since(start)
		if err != nil || string(out) != "in\n" {
			var stderr string
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				stderr = string(ee.Stderr)
			}
			tb.Fatalf("agent login: %v, stdout %q, stderr %q; want in", err, out, strings.TrimSpace(stderr))
		}
		return took
	}
	var res floodResult
	res.baseline = login()

	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)

	var conns []net.Conn
	tb.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for i := 0; i < idle+drip; i++ {
		c, err := net.Dial("tcp", h.addr)
		if err != nil {
			tb.Fatalf("flood connection %d: %v", i, err)
		}
		conns = append(conns, c)
	}
	// The drip: a version line, then the start of a binary packet that
	// claims 32 KiB, one byte per connection in turn, so that each handshake
	// is always just about to make progress.
	stream := []byte("SSH-2.0-drip\r\n")
	stream = binary.BigEndian.AppendUint32(stream, 32<<10)
	stream = append(stream, make([]byte, 4096)...)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	tb.Cleanup(func() { cancel(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			c := conns[idle+i%drip]
			pos := i / drip
			if pos >= len(stream) {
				pos = len(stream) - 1
			}
			c.SetWriteDeadline(time.Now().Add(time.Second))
			c.Write(stream[pos : pos+1]) // a dropped connection fails; the drip goes on
		}
	}()
	// Every flood connection has been accepted when the slots of the
	// source and the whole queue are taken.
	h.waitAdmission(DefaultMaxUnauthenticatedPerSource, DefaultMaxQueuedHandshakes)

	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	growth := float64(after.HeapAlloc) - float64(before.HeapAlloc)
	res.heapPerConn = max(growth, 0) / float64(idle+drip)
	res.login = login()
	return res
}

// TestLoginUnderFlood: 500 idle TCP connections and 20 slow-drip handshakes
// from the agent's own address, against the default limits; a real agent
// still logs in and runs a command, and the flood costs a bounded amount of
// memory per connection. The login time is logged, not asserted (see
// BenchmarkLoginUnderFlood for the measurement).
func TestLoginUnderFlood(t *testing.T) {
	leakCheck(t)
	h := newHarness(t, harnessOpts{})
	res := floodLogin(t, h, 500, 20)
	t.Logf("login and command under the flood: %v (before it: %v); heap growth per flood connection: %.0f B", res.login, res.baseline, res.heapPerConn)
	// A handshake in progress costs x/crypto's transport state; a waiting
	// connection a goroutine and its timers. 64 KiB each is far above
	// either, and far below what an unbounded buffer would cost.
	if res.heapPerConn > 64<<10 {
		t.Errorf("heap growth per flood connection = %.0f B; want at most %d", res.heapPerConn, 64<<10)
	}
	if got := h.ssh("", "127.0.0.1", "web", "echo again"); got.code != 0 {
		t.Errorf("second login under the flood: exit %d stderr %q; want 0", got.code, got.stderr)
	}
}

// BenchmarkLoginUnderFlood reports a real agent's login-and-command time
// under 500 idle and 20 slow-drip connections, and the heap per flood
// connection. Run it with -benchtime 1x: each iteration builds its own
// bastion and flood.
func BenchmarkLoginUnderFlood(b *testing.B) {
	var login, baseline time.Duration
	var heap float64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		h := newHarness(b, harnessOpts{})
		b.StartTimer()
		res := floodLogin(b, h, 500, 20)
		login += res.login
		baseline += res.baseline
		heap += res.heapPerConn
	}
	b.ReportMetric(float64(login.Milliseconds())/float64(b.N), "ms/login")
	b.ReportMetric(float64(baseline.Milliseconds())/float64(b.N), "ms/login-before")
	b.ReportMetric(heap/float64(b.N), "B/flood-conn")
}
