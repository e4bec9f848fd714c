package sftpgate

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// handle is an open file or directory as the gate knows it. Requests on a
// handle ride on the decision of the open that made it; a handle the agent
// names that the gate did not hand out is refused, so that no request on a
// handle reaches a target undecided.
type handle struct {
	up     *upstream // nil for the virtual root's own listing of "/"
	remote string    // the target's handle
	alias  string
	path   string // the path on the target
	shown  string // the path as decisions show it
	dir    bool
	// write is set when the open was decided as a write (any of write,
	// append, create, truncate, exclusive): writes, fsync and an fsetstat
	// of modes and times ride on it.
	write bool
	// op is the open as it was decided, for Config.Ride.
	op Op
	// end is where the handle's writes so far end (the largest offset
	// plus length). Only the dispatcher reads and writes it.
	end uint64
	// entries is the listing of "/" taken when it was opened, and next
	// the entry to send next. Only the dispatcher reads and writes them.
	entries []rootEntry
	next    int

	// A file's record, kept until the handle is closed, every read and
	// write through it has been answered, and (for a write) what rides on
	// it has been answered too (see settle). Guarded by session.mu.
	fin     Finish  // the open's; nil once called, or if it had none
	outcome Outcome // the open's, with Rode added as rides are answered
	riding  int     // rides forwarded and not yet answered
	settled bool    // no more rides come: fin is called once riding and busy are 0
	dropped int     // rides answered beyond maxRideNotes
	// busy counts the reads, writes and the close forwarded on the
	// handle and not yet answered: its row waits for them, so that its
	// counts are whole.
	busy int
	// read and written are the data the handle's reads carried to the
	// agent and the data of its writes the target acknowledged.
	read, written int64
	// opened is when the target answered the open; closed when it
	// answered the close (or the close was lost), zero until then.
	opened, closed time.Time
}

// maxRideNotes bounds what one write's row says rode on it: an agent may
// send any number of fsetstats on one handle.
const maxRideNotes = 16

// lookup returns the handle the agent named.
func (s *session) lookup(name string) *handle {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.handles[name]
}

// forget drops a handle the agent closed.
func (s *session) forget(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.handles, name)
}

// tooManyHandles reports whether the session holds maxHandles handles.
func (s *session) tooManyHandles() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.handles) >= maxHandles
}

// addHandle records h and returns the name the agent will use for it: the
// target's own in the fixed view (a pass-through), a name of the gate's in
// the virtual root, where handles of several targets share one session and
// must not collide or be usable on another alias.
func (s *session) addHandle(h *handle) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	name := h.remote
	if s.fixed == "" {
		s.nextHandle++
		name = strconv.FormatUint(s.nextHandle, 10)
	}
	s.handles[name] = h
	return name
}

// dropHandles forgets every handle on up, whose session ended; the rows of
// the writes among them are written now, saying why.
func (s *session) dropHandles(up *upstream, why string) {
	s.mu.Lock()
	var dropped []*handle
	for name, h := range s.handles {
		if h.up == up {
			delete(s.handles, name)
			dropped = append(dropped, h)
		}
	}
	s.mu.Unlock()
	for _, h := range dropped {
		s.settle(h, why)
	}
}

// opened records the handle a target answered an open with, and returns
// the answer as the agent gets it (in the virtual root, with the gate's
// handle name). An answer that is not a handle (a refusal) passes as it is.
// A file's Finish (fin, with the open's outcome o) is kept with its handle
// until the handle is closed, to be called with what went through it; kept
// reports that it was. A directory's is not: nothing is transferred.
func (s *session) opened(h *handle, frame []byte, fin Finish, o Outcome) (answer []byte, kept bool) {
	if frame[4] != fxpHandle {
		return frame, false
	}
	d := &decoder{b: frame, off: 9}
	remote, at := d.str()
	if d.err != nil {
		return statusPacket(binary.BigEndian.Uint32(frame[5:9]), fxFailure, "sftpgate: the target answered with a malformed handle"), false
	}
	h.remote = remote
	kept = !h.dir
	if kept {
		// Before the handle is added: the agent may use it (and a read's
		// answer reach the counts) as soon as it is.
		h.fin, h.outcome, h.opened = fin, o, s.cfg.Now()
	}
	name := s.addHandle(h)
	if name == remote {
		return frame, kept
	}
	return splice(frame, edit{at, strField(name)}), kept
}

// startThrough counts a read, write or close of file h about to be
// forwarded: h's Finish waits for its answer. It returns what the pending
// request carries, so that its answer is counted (through).
func (s *session) startThrough(h *handle, r *request) pending {
	s.mu.Lock()
	h.busy++
	s.mu.Unlock()
	p := pending{kind: answerAsIs, on: h, onTyp: r.typ}
	if r.typ == fxpWrite {
		p.wrote = r.length
	}
	return p
}

// through counts the answer ans (nil if none came) to a read, write or
// close of a file's handle (p.on), and calls the handle's Finish if that
// was the last answer it waited for.
func (s *session) through(p pending, ans []byte) {
	h := p.on
	now := s.cfg.Now()
	s.mu.Lock()
	h.busy--
	switch p.onTyp {
	case fxpRead:
		if ans != nil && ans[4] == fxpData && len(ans) >= 13 {
			// The data's length, as far as the answer holds it (a
			// malformed answer reaches the agent as it is, and is
			// counted as what it carries).
			n := min(int64(binary.BigEndian.Uint32(ans[9:13])), int64(len(ans)-13))
			h.read += n
		}
	case fxpWrite:
		if ans != nil && ans[4] == fxpStatus && len(ans) >= 13 && binary.BigEndian.Uint32(ans[9:13]) == fxOK {
			h.written += int64(p.wrote)
		}
	case fxpClose:
		h.closed = now
		if o := answerOutcome(ans); o.Status != fxOK && h.fin != nil {
			// A failed close may mean data never reached the disk
			// (close(2) reports a write-back error): the row says so.
			h.outcome.Rode = append(h.outcome.Rode, rideNote("close", o))
		}
	}
	fin, out := s.takeFinish(h)
	s.mu.Unlock()
	s.record(fin, out)
}

// answerOutcome is the outcome of ans, or of no answer when ans is nil.
func answerOutcome(ans []byte) Outcome {
	if ans == nil {
		return Outcome{Status: fxConnectionLost, Message: "the session ended"}
	}
	return outcomeOf(ans)
}

// noteRide adds one ride's answer to h's outcome, and calls h's Finish if
// h is settled and that was the last ride awaited.
func (s *session) noteRide(h *handle, note string, o Outcome) {
	note = rideNote(note, o)
	s.mu.Lock()
	if len(h.outcome.Rode) < maxRideNotes {
		h.outcome.Rode = append(h.outcome.Rode, note)
	} else {
		h.dropped++
	}
	h.riding--
	fin, out := s.takeFinish(h)
	s.mu.Unlock()
	s.record(fin, out)
}

// rideNote is note, what rode on a write, with how the target answered it.
func rideNote(note string, o Outcome) string {
	switch {
	case !o.Answered:
		return note + ": no answer (" + o.Message + ")"
	case o.Status == fxOK:
		return note + ": status 0"
	default:
		return note + fmt.Sprintf(": status %d %s", o.Status, printable(o.Message))
	}
}

// startRide counts a ride about to be forwarded on h: h's Finish waits for
// its answer.
func (s *session) startRide(h *handle) {
	s.mu.Lock()
	h.riding++
	s.mu.Unlock()
}

// settle says that nothing more rides on h (its file's time right after
// the close has passed, or its session ended, as why says if set): h's
// Finish is called now, or when the last ride forwarded is answered.
func (s *session) settle(h *handle, why string) {
	s.mu.Lock()
	if why != "" && !h.settled && h.fin != nil {
		h.outcome.Rode = append(h.outcome.Rode, why)
	}
	h.settled = true
	fin, out := s.takeFinish(h)
	s.mu.Unlock()
	s.record(fin, out)
}

// takeFinish returns h's Finish and outcome, with what went through h,
// when they are due, and clears it so that it runs once. The caller holds
// s.mu.
func (s *session) takeFinish(h *handle) (Finish, Outcome) {
	if !h.settled || h.riding > 0 || h.busy > 0 || h.fin == nil {
		return nil, Outcome{}
	}
	fin, out := h.fin, h.outcome
	h.fin = nil
	if h.dropped > 0 {
		out.Rode = append(slices.Clone(out.Rode), fmt.Sprintf("and %d more", h.dropped))
	}
	t := &Transfer{Read: h.read, Written: h.written, Closed: !h.closed.IsZero()}
	end := h.closed
	if !t.Closed {
		// Left open: it was held until now, the session's end (or its
		// target's).
		end = s.cfg.Now()
	}
	t.Held = end.Sub(h.opened)
	out.Transfer = t
	return fin, out
}
