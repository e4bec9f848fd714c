package bastion

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// admission decides which unauthenticated connections may run their SSH
// handshake. A handshake holds a slot, bounded in total and per source
// address; connections beyond wait in a bounded queue.
//
// The first version queued first come, first served and dropped new
// connections when the queue was full. 500 idle TCP connections (or
// handshakes dripped a byte at a time) then held every slot and the whole
// queue until the handshake deadline, and a real agent arriving after them
// was dropped or waited out the deadline. Three rules keep the door open
// under such a flood, at no cost when there is none:
//
//   - A full queue drops its oldest connection, not the new one: a flood
//     that arrived first cannot keep later connections out.
//   - A freed slot goes to the newest waiting connection. Under overload the
//     oldest waiters are the likeliest to be idle or abandoned (their client
//     may have given up); a fresh connection is served while it is still
//     wanted.
//   - While connections wait, a handshake that has held its slot longer
//     than the lease loses it (its connection is closed), the one whose
//     lease ended first. An honest handshake takes a handful of round
//     trips; without waiters a slow one keeps its slot up to the handshake
//     deadline. A connection that has sent nothing at all has a quarter of
//     the lease: SSH clients send their version line as soon as they
//     connect (or, the few that wait, one round trip after the server's),
//     so silence that long is an idle connection, not a slow client.
//
// It is safe for concurrent use.
type admission struct {
	max       int           // slots in total
	perSource int           // slots per source address
	maxQueued int           // waiting connections
	lease     time.Duration // a slot's guaranteed time while others wait
	now       func() time.Time
	log       zerolog.Logger

	// mu guards the fields below and every handshake's state, slotAt and
	// preempted. Lock order: Server.mu is never held while taking it.
	mu      sync.Mutex
	closed  bool
	waiting []*handshake // in arrival order, the newest last
	holding []*handshake // connections in a handshake
	bySrc   map[string]int
	// freeing counts preempted holders whose slots are not back yet, so
	// that waiters do not preempt more holders than they need.
	freeing int
	// changed is closed and replaced when a slot is given back, so that
	// waiters look again at whom they may preempt.
	changed chan struct{}
	// preemptions counts slots taken back, for tests and measurements.
	preemptions int
}

// handshake is one unauthenticated connection.
type handshake struct {
	nc  net.Conn
	src string

	// read counts the bytes the client has sent; the handshake's
	// goroutine adds, preemptLocked reads.
	read atomic.Int64

	state     handshakeState
	ready     chan struct{} // closed when state leaves waiting
	slotAt    time.Time     // when it got its slot
	preempted bool          // its connection was closed to free the slot
}

type handshakeState int

const (
	waiting handshakeState = iota
	holding
	dropped
	finished
)

func newAdmission(max, perSource, maxQueued int, lease time.Duration, now func() time.Time, log zerolog.Logger) *admission {
	return &admission{max: max, perSource: perSource, maxQueued: maxQueued, lease: lease, now: now, log: log, bySrc: map[string]int{}, changed: make(chan struct{})}
}

// enqueue queues nc for a slot. When the queue is full, the oldest waiting
// connection is dropped to make room. It returns nil after close.
func (a *admission) enqueue(nc net.Conn) *handshake {
	h := &handshake{nc: nc, src: sourceOf(nc), ready: make(chan struct{})}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil
	}
	if a.maxQueued > 0 && len(a.waiting) >= a.maxQueued {
		oldest := a.waiting[0]
		a.waiting = a.waiting[1:]
		oldest.state = dropped
		close(oldest.ready)
		a.log.Warn().Str("source", oldest.src).Int("queued", a.maxQueued).Msg("connection dropped: handshake queue full; the oldest waiting one makes room")
	}
	a.waiting = append(a.waiting, h)
	a.dispatchLocked()
	return h
}

// dispatchLocked gives free slots to waiting connections, newest first.
func (a *admission) dispatchLocked() {
	for i := len(a.waiting) - 1; i >= 0 && len(a.holding) < a.max; i-- {
		h := a.waiting[i]
		if a.bySrc[h.src] >= a.perSource {
			continue
		}
		a.waiting = append(a.waiting[:i], a.waiting[i+1:]...)
		h.state, h.slotAt = holding, a.now()
		a.holding = append(a.holding, h)
		a.bySrc[h.src]++
		close(h.ready)
	}
}

// wait waits until h has a slot (true), or is dropped, ctx ends or deadline
// passes (false). While it waits, it takes slots from handshakes past their
// lease.
func (a *admission) wait(ctx context.Context, h *handshake, deadline time.Time) bool {
	expire := time.NewTimer(deadline.Sub(a.now()))
	defer expire.Stop()
	lease := time.NewTimer(time.Hour)
	defer lease.Stop()
	for {
		a.mu.Lock()
		if h.state != waiting {
			ok := h.state == holding
			a.mu.Unlock()
			return ok
		}
		next := a.preemptLocked(h)
		changed := a.changed
		a.mu.Unlock()
		var leaseC <-chan time.Time
		if next > 0 {
			lease.Reset(next)
			leaseC = lease.C
		}
		select {
		case <-h.ready:
		case <-changed:
		case <-leaseC:
		case <-expire.C:
			return a.giveUp(h, "connection dropped: no handshake slot before the deadline")
		case <-ctx.Done():
			return a.giveUp(h, "")
		}
	}
}

// giveUp takes h out of the queue, unless it got its slot meanwhile.
func (a *admission) giveUp(h *handshake, why string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if h.state == holding {
		return true
	}
	if h.state == waiting {
		for i, x := range a.waiting {
			if x == h {
				a.waiting = append(a.waiting[:i], a.waiting[i+1:]...)
				break
			}
		}
		h.state = dropped
		close(h.ready)
		if why != "" {
			a.log.Warn().Str("source", h.src).Msg(why)
		}
	}
	return false
}

// preemptLocked closes the oldest handshake that keeps h from a slot if it
// has held its slot for the lease, and there are fewer slots being freed
// than connections waiting. Otherwise it returns how long until that
// handshake's lease ends (0: nothing to wait for but a freed slot).
func (a *admission) preemptLocked(h *handshake) time.Duration {
	if a.freeing >= len(a.waiting) {
		return 0
	}
	sourceFull := a.bySrc[h.src] >= a.perSource
	if !sourceFull && len(a.holding) < a.max {
		return 0 // a slot is free: dispatch gives it to a newer waiter or to h
	}
	var first *handshake
	var firstEnd time.Time
	for _, x := range a.holding {
		if x.preempted || (sourceFull && x.src != h.src) {
			continue
		}
		if end := x.slotAt.Add(a.leaseOf(x)); first == nil || end.Before(firstEnd) {
			first, firstEnd = x, end
		}
	}
	if first == nil {
		return 0
	}
	if left := firstEnd.Sub(a.now()); left > 0 {
		return left
	}
	first.preempted = true
	a.freeing++
	a.preemptions++
	a.log.Info().Str("source", first.src).Dur("held", a.now().Sub(first.slotAt)).Int64("bytes", first.read.Load()).
		Msg("handshake slot taken back for a waiting connection")
	// Closing the connection ends its handshake, whose goroutine then gives
	// the slot back through done.
	first.nc.Close()
	return 0
}

// leaseOf is h's lease: a quarter of it while h has sent nothing.
func (a *admission) leaseOf(h *handshake) time.Duration {
	if h.read.Load() == 0 {
		return a.lease / 4
	}
	return a.lease
}

// countingReader counts the bytes read from a connection into n.
type countingReader struct {
	net.Conn
	n *atomic.Int64
}

func (c countingReader) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// done gives back h's slot once its handshake has ended, successfully or
// not, and hands it to a waiting connection.
func (a *admission) done(h *handshake) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if h.state != holding {
		return
	}
	h.state = finished
	for i, x := range a.holding {
		if x == h {
			a.holding = append(a.holding[:i], a.holding[i+1:]...)
			break
		}
	}
	if a.bySrc[h.src]--; a.bySrc[h.src] <= 0 {
		delete(a.bySrc, h.src)
	}
	if h.preempted {
		a.freeing--
	}
	a.dispatchLocked()
	close(a.changed)
	a.changed = make(chan struct{})
}

// close drops every waiting connection and refuses new ones.
func (a *admission) close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed = true
	for _, h := range a.waiting {
		h.state = dropped
		close(h.ready)
	}
	a.waiting = nil
}

// admissionStats describe the handshakes at one moment.
type admissionStats struct {
	holding, waiting int // connections in a handshake, and waiting for a slot
	preemptions      int // slots taken back so far
}

func (a *admission) stats() admissionStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	return admissionStats{holding: len(a.holding), waiting: len(a.waiting), preemptions: a.preemptions}
}
