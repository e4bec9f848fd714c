package sftpgate

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/postern/postern/policy"
)

// copy-data (OpenSSH's PROTOCOL §4.10) copies from one open handle to
// another. OpenSSH's sftp sends it for `cp`, after opening the destination
// with the truncate flag: once that open is answered the destination is
// empty, so a copy-data refused after it would leave the agent an emptied
// file. In the virtual root the two handles may lie on two aliases, which
// no target can copy between; the gate then carries the copy out itself,
// reading from one target and writing to the other, as the agent's own get
// and put would (docs/sftp.md). The result is the copy, or an error on the
// request that names what failed; the destination is never refused after
// its truncation.

// Bounds of a copy the gate carries out.
const (
	// copyChunk is the size of each read and write: 32 KiB, which the
	// SFTP drafts guarantee every server accepts.
	copyChunk = 32 << 10
	// copyWindow bounds the reads, and the writes, in flight at once
	// (512 KiB of data each way), so that a copy over a slow link is not
	// one round trip per chunk.
	copyWindow = 16
)

// copyData copies between two handles. On one target the request is
// forwarded: it rides on the destination's open when that was decided as
// a write (and is noted on that write's row), and is decided as a write
// otherwise. Across two aliases the gate carries it out (copyAcross), riding
// on the destination's write; a destination not opened for writing is
// refused before anything is read, since no write to it could succeed.
func (s *session) copyData(r *request) error {
	src, err := s.handleOf(r, r.handle)
	if src == nil {
		return err
	}
	dst, err := s.handleOf(r, r.handle2)
	if dst == nil {
		return err
	}
	if src.up == nil || dst.up == nil {
		return s.reply(r.id, fxFailure, "sftpgate: / is a directory")
	}
	if src.alias != dst.alias {
		if !dst.write {
			return s.refuseOp(r.id, fxFailure, Op{Class: policy.Write, Method: "copy-data",
				Paths:  []string{virtualPath(location{Alias: src.alias, Path: src.path}), virtualPath(location{Alias: dst.alias, Path: dst.path})},
				Detail: copyRange(r)}, "sftpgate: copy-data into a file not opened for writing")
		}
		o := s.copyAcross(r, src, dst)
		s.startRide(dst)
		s.noteRide(dst, fmt.Sprintf("copy-data from %q on %s (%s)", src.shown, src.alias, copyRange(r)), o)
		msg := o.Message
		if o.Status == fxOK {
			msg = "Success"
		}
		return s.reply(r.id, o.Status, msg)
	}
	if !dst.up.supports(extCopyData) {
		return s.reply(r.id, fxOpUnsupported, fmt.Sprintf("sftpgate: %s's sftp server does not support %s", dst.alias, extCopyData))
	}
	frame := withHandle(r, src, dst)
	if dst.write {
		s.startRide(dst)
		return s.send(dst.up, r, frame, pending{kind: answerAsIs, ride: dst, note: fmt.Sprintf("copy-data from %q (%s)", src.shown, copyRange(r))}, nil)
	}
	op := Op{Alias: dst.alias, Class: policy.Write, Method: "copy-data", Paths: []string{src.shown, dst.shown}, Detail: copyRange(r)}
	return s.decideAndForward(r, op, frame, pending{kind: answerAsIs})
}

// copyRange says what a copy-data copies, for a decision and a row.
func copyRange(r *request) string {
	if r.readLen == 0 {
		return fmt.Sprintf("to the end from offset %d to offset %d", r.readOff, r.writeOff)
	}
	return fmt.Sprintf("%d bytes from offset %d to offset %d", r.readLen, r.readOff, r.writeOff)
}

// copyAcross carries out copy-data r from src to dst, handles on two
// targets: reads of src, each answer written to dst at the same distance
// from the write offset, with up to copyWindow of each in flight. It ends
// as OpenSSH's sftp-server does: SSH_FX_OK when the length was copied (or,
// for length 0, everything up to the end of src), SSH_FX_EOF when src ended
// first, or the first error either target answered, with its message. It
// holds the dispatcher: requests behind it wait, as they would behind an
// sftp-server's own copy.
func (s *session) copyAcross(r *request, src, dst *handle) Outcome {
	c := copier{s: s, src: src, dst: dst, from: r.readOff, to: r.writeOff, next: r.readOff, end: math.MaxUint64}
	untilEOF := r.readLen == 0
	if !untilEOF && r.readLen <= math.MaxUint64-r.readOff {
		c.end = r.readOff + r.readLen
	}
	o := c.run()
	switch {
	case o.Status != fxOK:
	case c.eof && !untilEOF:
		o = Outcome{Answered: true, Status: fxEOF, Message: "End of file"}
	}
	if c.high > dst.end {
		dst.end = c.high
	}
	return o
}

// copier is one copy across aliases in progress.
type copier struct {
	s        *session
	src, dst *handle
	from, to uint64 // the read and write offsets the agent asked for
	next     uint64 // the next offset to read
	end      uint64 // where reading stops
	eof      bool   // src answered end of file
	high     uint64 // where the writes so far end on dst

	reads  []copyRead
	writes []chan []byte
}

// copyRead is one read in flight.
type copyRead struct {
	off  uint64
	n    uint32
	wait chan []byte
}

// errCopy is a copy's failure as the agent gets it.
type errCopy struct {
	code uint32
	msg  string
}

func (e *errCopy) Error() string { return e.msg }

func (c *copier) run() Outcome {
	// lost is a read that could not be sent (src's session ended). The
	// reads sent before it are still taken and what they read written, so
	// that dst holds what was read before the loss, whichever moment the
	// loss is noticed in; then the copy fails with it.
	var lost error
	for {
		for lost == nil && !c.eof && c.next < c.end && len(c.reads) < copyWindow {
			n := uint32(min(uint64(copyChunk), c.end-c.next))
			if err := c.read(c.next, n); err != nil {
				lost = err
				break
			}
			c.next += uint64(n)
		}
		if len(c.reads) == 0 {
			break
		}
		rd := c.reads[0]
		c.reads = c.reads[1:]
		ans, err := c.await(rd.wait, c.src)
		if err != nil {
			return c.fail(err)
		}
		if err := c.took(rd, ans); err != nil {
			return c.fail(err)
		}
	}
	for len(c.writes) > 0 {
		if err := c.written(); err != nil {
			return c.fail(err)
		}
	}
	if lost != nil {
		return c.fail(lost)
	}
	return Outcome{Answered: true, Status: fxOK}
}

// took handles src's answer to read rd: data is written to dst (and what a
// short read left is read again); end of file stops further reads.
func (c *copier) took(rd copyRead, ans []byte) error {
	switch ans[4] {
	case fxpData:
		d := &decoder{b: ans, off: 9}
		data, _ := d.str()
		switch {
		case d.err != nil || uint64(len(data)) > uint64(rd.n):
			return &errCopy{fxBadMessage, "sftpgate: " + c.src.alias + " answered a read with malformed data"}
		case len(data) == 0:
			c.eof = true
			return nil
		}
		if err := c.write(rd.off, data); err != nil {
			return err
		}
		if got := uint32(len(data)); got < rd.n {
			// A short read before the end: read the rest again.
			return c.read(rd.off+uint64(got), rd.n-got)
		}
		return nil
	case fxpStatus:
		o := outcomeOf(ans)
		if o.Status == fxEOF {
			c.eof = true
			return nil
		}
		return &errCopy{o.Status, o.Message}
	}
	return &errCopy{fxBadMessage, "sftpgate: " + c.src.alias + " answered a read with " + packetName(ans[4])}
}

// read sends a read of n bytes at off to src's target.
func (c *copier) read(off uint64, n uint32) error {
	b := newPacket(fxpRead, 24+len(c.src.remote))
	b = appendU32(b, 0)
	b = appendStr(b, c.src.remote)
	b = appendU64(b, off)
	b = appendU32(b, n)
	wait, err := c.send(c.src, finish(b))
	if err != nil {
		return err
	}
	c.reads = append(c.reads, copyRead{off: off, n: n, wait: wait})
	return nil
}

// write sends data, read at offset off of src, to its place on dst, first
// waiting for the oldest write when copyWindow are in flight.
func (c *copier) write(off uint64, data string) error {
	for len(c.writes) >= copyWindow {
		if err := c.written(); err != nil {
			return err
		}
	}
	at := c.to + (off - c.from)
	b := newPacket(fxpWrite, 24+len(c.dst.remote)+len(data))
	b = appendU32(b, 0)
	b = appendStr(b, c.dst.remote)
	b = appendU64(b, at)
	b = appendStr(b, data)
	wait, err := c.send(c.dst, finish(b))
	if err != nil {
		return err
	}
	c.writes = append(c.writes, wait)
	c.high = max(c.high, at+uint64(len(data)))
	return nil
}

// written waits for the oldest write's status.
func (c *copier) written() error {
	wait := c.writes[0]
	c.writes = c.writes[1:]
	ans, err := c.await(wait, c.dst)
	if err != nil {
		return err
	}
	if o := outcomeOf(ans); o.Status != fxOK {
		return &errCopy{o.Status, o.Message}
	}
	return nil
}

// send forwards one of the copy's requests on h's session; its answer
// comes on the channel returned.
func (c *copier) send(h *handle, frame []byte) (chan []byte, error) {
	wait := make(chan []byte, 1)
	if err := h.up.send(frame, pending{kind: answerInternal, wait: wait}); err != nil {
		return nil, &errCopy{fxConnectionLost, "sftpgate: the session to " + h.alias + " ended"}
	}
	return wait, nil
}

// await waits for the answer on wait from h's target, at most
// TargetTimeout, and no longer than the session.
func (c *copier) await(wait chan []byte, h *handle) ([]byte, error) {
	timer := time.NewTimer(c.s.cfg.TargetTimeout)
	defer timer.Stop()
	select {
	case ans := <-wait:
		if ans == nil {
			return nil, &errCopy{fxConnectionLost, "sftpgate: the session to " + h.alias + " ended"}
		}
		return ans, nil
	case <-timer.C:
		return nil, &errCopy{fxFailure, fmt.Sprintf("sftpgate: %s did not answer within %v", h.alias, c.s.cfg.TargetTimeout)}
	case <-c.s.ctx.Done():
		return nil, &errCopy{fxConnectionLost, "sftpgate: the session ended"}
	}
}

// fail ends the copy with err. Reads and writes still in flight are left
// to be answered into their buffered channels, which nobody reads.
func (c *copier) fail(err error) Outcome {
	var ce *errCopy
	if !errors.As(err, &ce) {
		ce = &errCopy{fxFailure, "sftpgate: " + err.Error()}
	}
	return Outcome{Answered: true, Status: ce.code, Message: ce.msg}
}
