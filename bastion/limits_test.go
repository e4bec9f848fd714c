package bastion

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// TestUnauthenticatedLimits: handshakes in progress are bounded per source;
// excess connections queue for a slot (bounded too, beyond which they are
// dropped); the handshake deadline closes connections that never finish;
// and a real agent still logs in afterwards.
func TestUnauthenticatedLimits(t *testing.T) {
	h := newHarness(t, harnessOpts{config: func(c *Config) {
		c.MaxUnauthenticatedPerSource = 3
		c.MaxQueuedHandshakes = 1
		c.HandshakeTimeout = 3 * time.Second
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
	queued := dial() // waits for a slot: no banner yet
	time.Sleep(100 * time.Millisecond)
	dropped := dial() // the queue (1) is full: closed at once
	if err := banner(dropped); !errors.Is(err, io.EOF) {
		t.Errorf("connection past the queue: read err %v; want it closed (EOF)", err)
	}
	idle[0].Close() // frees a slot: the queued connection gets its turn
	if err := banner(queued); err != nil {
		t.Errorf("queued connection: read banner after a slot freed: %v", err)
	}
	// The handshake deadline closes the ones that never authenticate.
	for i, c := range append(idle[1:], queued) {
		c.SetReadDeadline(time.Now().Add(15 * time.Second))
		if _, err := io.Copy(io.Discard, c); err != nil {
			t.Errorf("idle connection %d: %v; want the server to close it at the handshake deadline", i, err)
		}
	}
	if got := h.ssh("", "127.0.0.1", "web", "echo ok"); got.code != 0 || got.stdout != "ok\n" {
		t.Errorf("agent after the flood: exit %d stdout %q stderr %q; want 0 and ok", got.code, got.stdout, got.stderr)
	}
}

// TestConcurrentBurstOneSource: 50 agents from one address at once all get
// in, waiting for handshake slots rather than failing.
func TestConcurrentBurstOneSource(t *testing.T) {
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
}
