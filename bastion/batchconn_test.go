package bastion

import (
	"bytes"
	"io"
	"net"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

// TestBatchConnOrderAndFlush: bytes written in many small writes arrive in
// order and whole, including those still queued when Close is called.
func TestBatchConnOrderAndFlush(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- nil
			return
		}
		b, _ := io.ReadAll(c)
		c.Close()
		got <- b
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c := newBatchConn(raw)
	var want bytes.Buffer
	for i := 0; i < 5000; i++ {
		p := bytes.Repeat([]byte{byte(i)}, 1+i%700)
		want.Write(p)
		if _, err := c.Write(p); err != nil {
			t.Fatal(err)
		}
		p[0] ^= 0xff // the caller may reuse p at once
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if b := <-got; !bytes.Equal(b, want.Bytes()) {
		t.Errorf("peer read %d bytes differing from the %d written", len(b), want.Len())
	}
	if _, err := c.Write([]byte("x")); err == nil {
		t.Error("Write after Close succeeded; want an error")
	}
}

// TestBatchConnCloseStuckPeer: a peer that never reads cannot hold Close
// (net.Pipe has no buffer: the writer blocks until its bound). It runs in
// a synctest bubble: Close's bound passes on the bubble's fake clock, the
// test checks that Close waited exactly that long, and the bubble's end
// checks that the writer goroutine ended.
func TestBatchConnCloseStuckPeer(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		a, b := net.Pipe()
		defer b.Close()
		c := newBatchConn(a)
		if _, err := c.Write([]byte("never read")); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := c.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if got := time.Since(start); got != closeFlushWait {
			t.Errorf("Close took %v on the bubble's clock; want closeFlushWait, %v", got, closeFlushWait)
		}
	})
}
