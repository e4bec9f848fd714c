package bastion

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// TestUnauthenticatedLimits: connections that never finish the handshake
// are bounded per source and closed at the handshake deadline, and a real
// agent still logs in afterwards.
func TestUnauthenticatedLimits(t *testing.T) {
	h := newHarness(t, harnessOpts{config: func(c *Config) {
		c.MaxUnauthenticatedPerSource = 3
		c.HandshakeTimeout = time.Second
	}})
	var idle []net.Conn
	for i := 0; i < 3; i++ {
		c, err := net.Dial("tcp", h.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		buf := make([]byte, 64)
		if _, err := c.Read(buf); err != nil { // the server's version line
			t.Fatalf("idle connection %d: read banner: %v", i, err)
		}
		idle = append(idle, c)
	}
	extra, err := net.Dial("tcp", h.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	extra.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := extra.Read(make([]byte, 64)); !errors.Is(err, io.EOF) {
		t.Errorf("4th unauthenticated connection from one source: read %d bytes, err %v; want it closed (EOF)", n, err)
	}
	// The handshake deadline closes the idle ones.
	for i, c := range idle {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.Copy(io.Discard, c); err != nil {
			t.Errorf("idle connection %d: %v; want the server to close it at the handshake deadline", i, err)
		}
	}
	if got := h.ssh("", "127.0.0.1", "web", "echo ok"); got.code != 0 || got.stdout != "ok\n" {
		t.Errorf("agent after the flood: exit %d stdout %q stderr %q; want 0 and ok", got.code, got.stdout, got.stderr)
	}
}
