package sftpgate

import (
	"errors"
	"io"
	"sync"

	"github.com/pkg/sftp"
)

// The request server relays at most 8 reads or writes of a session at once
// (pkg/sftp's SftpServerWorkerCount, a constant), each as small as the
// agent's client sends them: OpenSSH's are 32 KiB, with 64 in flight. One
// upstream request per downstream one would cap a relayed transfer at a
// quarter of the client's pipeline and four times the round trips. So a
// relayed file reads ahead in large chunks when reads are sequential, and
// writes behind: writes are queued, joined when contiguous, and sent in
// large requests, with their errors reported by a later write or the close.
const (
	// chunkSize is one upstream read or write: the most OpenSSH's
	// sftp-server serves in one message (its limits@openssh.com value).
	chunkSize = 255 << 10
	// aheadChunks is how far reads run ahead: about 2 MiB, OpenSSH's own
	// pipeline (64 × 32 KiB).
	aheadChunks = 8
	// maxChunks bounds the chunks a file keeps, read or still being read.
	maxChunks = 2 * aheadChunks
	// behindWrites bounds the writes in flight to the target.
	behindWrites = 8
	// writeBufSize is the capacity of a write-behind buffer: a chunk and
	// the one agent write that fills it (OpenSSH's are 32 KiB), so that
	// joining writes never grows the buffer by copying it.
	writeBufSize = chunkSize + 64<<10
)

// bufPool keeps the buffers of one file's transfer for reuse: a relayed
// file of 256 MiB would otherwise allocate (and the collector scan) about
// a thousand chunk buffers. It holds at most cap(free) idle buffers, which
// the file's own bounds (maxChunks, behindWrites) already allow in flight.
type bufPool struct {
	size int
	free chan []byte
}

func newBufPool(size, keep int) *bufPool {
	return &bufPool{size: size, free: make(chan []byte, keep)}
}

// get returns an empty buffer with capacity size.
func (p *bufPool) get() []byte {
	select {
	case b := <-p.free:
		return b[:0]
	default:
		return make([]byte, 0, p.size)
	}
}

// put keeps b for a later get, unless enough are kept already or b grew
// (an unusually large agent write) or shrank out of shape.
func (p *bufPool) put(b []byte) {
	if cap(b) != p.size {
		return
	}
	select {
	case p.free <- b:
	default:
	}
}

// chunk is one read-ahead read of [off, off+len(buf)).
type chunk struct {
	off  int64
	buf  []byte
	n    int
	err  error
	done chan struct{} // closed when the read finished
	used int           // bytes handed out; the chunk goes once all are
	// readers counts the reads that took the chunk and have not finished
	// copying out of it (guarded by readAhead.mu): the buffer goes back to
	// the pool only once the chunk has left the map and readers is 0.
	readers int
}

// readAhead serves sequential reads of an upstream file from chunks read
// ahead of them; other reads go straight to the target.
type readAhead struct {
	f    *sftp.File
	bufs *bufPool // chunk buffers
	// mu guards chunks, eof and next.
	mu     sync.Mutex
	chunks map[int64]*chunk // by offset, a multiple of chunkSize
	eof    int64            // offset where the file ended, -1 until seen
	next   int64            // end of the last read that went straight through
	wg     sync.WaitGroup   // fetches in flight; Close waits for them
}

func newReadAhead(f *sftp.File) *readAhead {
	return &readAhead{f: f, bufs: newBufPool(chunkSize, maxChunks), chunks: map[int64]*chunk{}, eof: -1}
}

// ReadAt reads p at off. A read inside or right after the chunks held, at
// the start of the file, or right after the last read is sequential and
// served from chunks, and the chunks ahead of it are started; any other
// read goes to the target as is.
func (r *readAhead) ReadAt(p []byte, off int64) (int, error) {
	base := off - off%chunkSize
	r.mu.Lock()
	_, held := r.chunks[base]
	_, prev := r.chunks[base-chunkSize]
	sequential := held || prev || off == 0 || off == r.next
	if !sequential || len(p) > chunkSize {
		r.next = off + int64(len(p))
		r.mu.Unlock()
		return r.f.ReadAt(p, off)
	}
	if r.eof >= 0 && off >= r.eof {
		r.mu.Unlock()
		return 0, io.EOF
	}
	for i := int64(0); i <= aheadChunks; i++ {
		r.start(base + i*chunkSize)
	}
	c := r.chunks[base]
	c.readers++
	r.mu.Unlock()

	<-c.done
	n, err := r.copyOut(c, p, off)
	if n < len(p) && err == nil {
		// The read spans two chunks.
		var m int
		m, err = r.ReadAt(p[n:], off+int64(n))
		n += m
	}
	return n, err
}

// start begins reading the chunk at off unless it is held, past the end, or
// the file holds too many. It is called with r.mu held.
func (r *readAhead) start(off int64) {
	if _, ok := r.chunks[off]; ok || r.eof >= 0 && off >= r.eof || len(r.chunks) >= maxChunks {
		return
	}
	c := &chunk{off: off, buf: r.bufs.get()[:chunkSize], done: make(chan struct{})}
	r.chunks[off] = c
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer close(c.done)
		c.n, c.err = r.f.ReadAt(c.buf, off)
		if errors.Is(c.err, io.EOF) {
			r.mu.Lock()
			if end := off + int64(c.n); r.eof < 0 || end < r.eof {
				r.eof = end
			}
			r.mu.Unlock()
		}
	}()
}

// copyOut copies the part of chunk c at off into p and drops the chunk
// once every byte of it was handed out.
func (r *readAhead) copyOut(c *chunk, p []byte, off int64) (int, error) {
	start := int(off - c.off)
	if start >= c.n {
		r.drop(c, 0)
		if c.err != nil {
			return 0, c.err
		}
		return 0, io.EOF
	}
	n := copy(p, c.buf[start:c.n])
	r.drop(c, n)
	if n < len(p) && c.err != nil {
		return n, c.err
	}
	return n, nil
}

// drop records that a read has copied n bytes out of c and no longer
// touches it, and lets go of the chunks that are finished with.
func (r *readAhead) drop(c *chunk, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c.used += n
	c.readers--
	if c.used >= c.n {
		r.removeLocked(c) // every byte was handed out
	}
	// Chunks far behind the reader are not coming back.
	for off, old := range r.chunks {
		if off < c.off-aheadChunks*chunkSize && old.isDone() {
			r.removeLocked(old)
		}
	}
	r.recycleLocked(c)
}

// removeLocked takes c out of the map and recycles its buffer if no read
// holds it. Called with r.mu held.
func (r *readAhead) removeLocked(c *chunk) {
	if r.chunks[c.off] == c {
		delete(r.chunks, c.off)
	}
	r.recycleLocked(c)
}

// recycleLocked gives c's buffer back, once, when nothing can touch it
// again: the chunk has left the map, no read is copying out of it, and its
// fetch (which writes into it) has finished. Called with r.mu held.
func (r *readAhead) recycleLocked(c *chunk) {
	if c.buf == nil || c.readers > 0 || r.chunks[c.off] == c || !c.isDone() {
		return
	}
	r.bufs.put(c.buf)
	c.buf = nil
}

func (c *chunk) isDone() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// wait lets the fetches in flight finish.
func (r *readAhead) wait() { r.wg.Wait() }

// writeBehind queues writes to an upstream file, joins contiguous ones into
// chunkSize requests, and keeps up to behindWrites of them in flight. The
// first error is reported by the next WriteAt, and by Flush.
type writeBehind struct {
	f     *sftp.File
	bufs  *bufPool      // buffers of writeBufSize
	slots chan struct{} // a token per write in flight
	wg    sync.WaitGroup
	// mu guards buf, bufOff and err.
	mu     sync.Mutex
	buf    []byte // contiguous data not yet sent, starting at bufOff
	bufOff int64
	err    error
}

func newWriteBehind(f *sftp.File) *writeBehind {
	return &writeBehind{f: f, bufs: newBufPool(writeBufSize, behindWrites+1), slots: make(chan struct{}, behindWrites)}
}

// WriteAt queues p for off. The data is copied; p may be reused at once.
func (w *writeBehind) WriteAt(p []byte, off int64) (int, error) {
	w.mu.Lock()
	if w.err != nil {
		err := w.err
		w.mu.Unlock()
		return 0, err
	}
	// sendLocked lets go of mu while it waits for a slot, and another
	// write may have started a buffer meanwhile: check again each time.
	for len(w.buf) > 0 && off != w.bufOff+int64(len(w.buf)) {
		w.sendLocked()
	}
	if len(w.buf) == 0 {
		w.bufOff = off
		if w.buf == nil {
			w.buf = w.bufs.get()
		}
	}
	w.buf = append(w.buf, p...)
	if len(w.buf) >= chunkSize {
		w.sendLocked()
	}
	w.mu.Unlock()
	return len(p), nil
}

// sendLocked sends the buffered data; called with w.mu held. It waits for a
// slot, which bounds memory and keeps the agent's client paced by the
// target.
func (w *writeBehind) sendLocked() {
	data, off := w.buf, w.bufOff
	w.buf = nil
	w.mu.Unlock()
	w.slots <- struct{}{}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer func() { <-w.slots }()
		_, err := w.f.WriteAt(data, off)
		// pkg/sftp has copied data into its packets by the time WriteAt
		// returns, so the buffer is free again.
		w.bufs.put(data)
		if err != nil {
			w.mu.Lock()
			if w.err == nil {
				w.err = err
			}
			w.mu.Unlock()
		}
	}()
	w.mu.Lock()
}

// Flush sends what is buffered, waits for every write, and returns the
// first error.
func (w *writeBehind) Flush() error {
	w.mu.Lock()
	if len(w.buf) > 0 {
		w.sendLocked()
	}
	w.mu.Unlock()
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}
