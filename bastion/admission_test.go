package bastion

import (
	"net"
	"testing"
	"time"

	"github.com/postern/postern/internal/fakeclock"
	"github.com/rs/zerolog"
)

// pipeConn returns one end of a net.Pipe, closed when the test ends.
func pipeConn(t *testing.T) net.Conn {
	t.Helper()
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	return a
}

func TestAdmissionOrder(t *testing.T) {
	t.Parallel()
	clk := fakeclock.New()
	// The lease is of the fake clock, which this test never moves.
	a := newAdmission(1, 1, 2, 2*time.Second, clk.Now, zerolog.Nop())
	h1 := a.enqueue(pipeConn(t))
	h2 := a.enqueue(pipeConn(t))
	h3 := a.enqueue(pipeConn(t))
	if h1.state != holding || h2.state != waiting || h3.state != waiting {
		t.Fatalf("states %v %v %v; want holding, waiting, waiting", h1.state, h2.state, h3.state)
	}
	h4 := a.enqueue(pipeConn(t)) // the queue (2) is full
	if h2.state != dropped || h3.state != waiting || h4.state != waiting {
		t.Fatalf("after an overflow: states %v %v %v; want the oldest waiting dropped", h2.state, h3.state, h4.state)
	}
	a.done(h1)
	if h4.state != holding || h3.state != waiting {
		t.Fatalf("after a slot freed: h3 %v h4 %v; want the newest (h4) holding", h3.state, h4.state)
	}
	if st := a.stats(); st.holding != 1 || st.waiting != 1 {
		t.Errorf("stats %+v; want 1 holding, 1 waiting", st)
	}
	a.close()
	if h3.state != dropped || a.enqueue(pipeConn(t)) != nil {
		t.Errorf("after close: h3 %v; want dropped and no new connection queued", h3.state)
	}
}

func TestAdmissionLease(t *testing.T) {
	t.Parallel()
	const lease = 2 * time.Second // of the fake clock, which each case sets
	tests := []struct {
		name      string
		read      int64         // bytes the holder has sent
		held      time.Duration // how long it has held its slot
		wantLeft  time.Duration // what preemptLocked returns
		preempted bool
	}{
		{"silent, within a quarter lease", 0, lease/4 - time.Millisecond, time.Millisecond, false},
		{"silent, past a quarter lease", 0, lease / 4, 0, true},
		{"talking, past a quarter lease", 100, lease / 4, lease - lease/4, false},
		{"talking, past the lease", 100, lease, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := fakeclock.New()
			a := newAdmission(1, 1, 8, lease, clk.Now, zerolog.Nop())
			holder := a.enqueue(pipeConn(t))
			holder.read.Store(tt.read)
			waiter := a.enqueue(pipeConn(t))
			clk.Advance(tt.held)
			a.mu.Lock()
			left := a.preemptLocked(waiter)
			again := a.preemptLocked(waiter) // one waiter frees one slot at most
			a.mu.Unlock()
			if left != tt.wantLeft || holder.preempted != tt.preempted {
				t.Errorf("preemptLocked = %v, preempted %v; want %v, %v", left, holder.preempted, tt.wantLeft, tt.preempted)
			}
			if tt.preempted {
				if again != 0 || a.stats().preemptions != 1 {
					t.Errorf("second call: %v, preemptions %d; want 0 and 1", again, a.stats().preemptions)
				}
				if _, err := holder.nc.Read(make([]byte, 1)); err == nil {
					t.Error("preempted connection still open; want it closed")
				}
				a.done(holder)
				if waiter.state != holding {
					t.Errorf("waiter %v after the preempted slot came back; want holding", waiter.state)
				}
			}
		})
	}
}

// TestAdmissionPerSourcePreemption: a waiter blocked by its own source's
// limit takes a slot back only from its own source.
func TestAdmissionPerSourcePreemption(t *testing.T) {
	t.Parallel()
	clk := fakeclock.New()
	a := newAdmission(4, 1, 8, time.Second, clk.Now, zerolog.Nop())
	other := &handshake{nc: pipeConn(t), src: "10.0.0.2", ready: make(chan struct{})}
	mine := &handshake{nc: pipeConn(t), src: "10.0.0.1", ready: make(chan struct{})}
	waiter := &handshake{nc: pipeConn(t), src: "10.0.0.1", ready: make(chan struct{})}
	a.mu.Lock()
	a.waiting = []*handshake{other, mine}
	a.dispatchLocked()
	a.waiting = append(a.waiting, waiter)
	clk.Advance(time.Hour)
	a.preemptLocked(waiter)
	a.mu.Unlock()
	if other.preempted || !mine.preempted {
		t.Errorf("preempted: other source %v, same source %v; want only the same source's", other.preempted, mine.preempted)
	}
}
