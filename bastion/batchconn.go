package bastion

import (
	"net"
	"sync"
	"time"
)

// closeFlushWait bounds how long Close waits for queued bytes to go out
// before it closes the connection under them: a peer that stopped reading
// must not hold a Close.
const closeFlushWait = 2 * time.Second

// maxBatch bounds the bytes a batchConn holds for its writer goroutine;
// a Write waits while the batch is full, which keeps the peer's pace.
const maxBatch = 1 << 20

// batchConn joins the writes made while a previous one is still in the
// kernel into one system call. x/crypto writes every SSH packet (at most
// 32 KiB, as OpenSSH peers ask) with its own write; relaying a transfer,
// those system calls were the largest share of postern's CPU. Write copies
// p and returns; a writer goroutine owned by the conn sends what gathered.
// A failed send is reported by the next Write and by Close. Reads pass
// through.
type batchConn struct {
	net.Conn

	// mu guards the fields below; cond signals changes of them.
	mu      sync.Mutex
	cond    *sync.Cond
	pending []byte
	spare   []byte
	err     error
	closed  bool
	done    chan struct{} // closed when the writer goroutine ends
}

func newBatchConn(c net.Conn) *batchConn {
	b := &batchConn{Conn: c, done: make(chan struct{})}
	b.cond = sync.NewCond(&b.mu)
	go b.writer()
	return b
}

// Write queues p for the writer goroutine.
func (b *batchConn) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for len(b.pending) >= maxBatch && b.err == nil && !b.closed {
		b.cond.Wait()
	}
	if b.err != nil {
		return 0, b.err
	}
	if b.closed {
		return 0, net.ErrClosed
	}
	b.pending = append(b.pending, p...)
	b.cond.Broadcast()
	return len(p), nil
}

// writer sends what gathered, one system call per batch, until the conn
// is closed and the batch is empty, or a send fails.
func (b *batchConn) writer() {
	defer close(b.done)
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		for len(b.pending) == 0 && !b.closed {
			b.cond.Wait()
		}
		if len(b.pending) == 0 {
			return // closed and everything sent
		}
		batch := b.pending
		b.pending = b.spare[:0]
		b.mu.Unlock()
		_, err := b.Conn.Write(batch)
		b.mu.Lock()
		b.spare = batch
		if err != nil {
			b.err = err
			b.cond.Broadcast()
			return
		}
		b.cond.Broadcast()
	}
}

// Close sends what is queued (the last packets of a session, a
// disconnect), then closes the connection.
func (b *batchConn) Close() error {
	b.mu.Lock()
	b.closed = true
	b.cond.Broadcast()
	b.mu.Unlock()
	t := time.NewTimer(closeFlushWait)
	defer t.Stop()
	select {
	case <-b.done:
	case <-t.C:
	}
	err := b.Conn.Close() // also ends a writer stuck in a send
	<-b.done
	return err
}
