package sftpgate

import (
	"bytes"
	"encoding/binary"
	"time"
)

// answer hands a target's answer to the agent: the agent's id restored,
// then for a few kinds the answer adapted (a handle renamed, a path put in
// the agent's view, limits capped); every other byte as the target sent
// it. Then the decided operation's outcome is recorded. It runs on the
// upstream's reader.
func (s *session) answer(up *upstream, p pending, frame []byte) {
	if p.kind == answerInternal {
		p.wait <- bytes.Clone(frame)
		return
	}
	binary.BigEndian.PutUint32(frame[5:9], p.agentID)
	out := frame
	fin := p.finish
	var o Outcome
	if fin != nil || p.ride != nil {
		// Decoded only for a decided operation or a ride: a write's
		// status is not.
		o = outcomeOf(frame)
	}
	switch p.kind {
	case answerHandle:
		p.open.up = up
		var kept bool
		if out, kept = s.opened(p.open, frame, fin, o); kept {
			fin = nil // called when the handle is closed
		} else if fin != nil {
			o = outcomeOf(out)
		}
	case answerRealpath, answerReadlink:
		out = s.nameInView(up.alias, p.kind, frame)
		if fin != nil {
			o = outcomeOf(out)
		}
	case answerLimits:
		out = capLimits(frame)
	}
	if err := s.agent.write(out); err != nil {
		s.log.Debug().Err(err).Msg("sftp answer to the agent failed")
	}
	s.record(fin, o)
	if p.ride != nil {
		s.noteRide(p.ride, p.note, o)
	}
	if p.on != nil {
		s.through(p, frame)
	}
	if p.slot {
		<-s.slots
	}
}

// lost answers a request whose target session ended before its answer.
func (s *session) lost(up *upstream, p pending) {
	msg := "sftpgate: the session to " + up.alias + " ended"
	if err := s.reply(p.agentID, fxConnectionLost, msg); err != nil {
		s.log.Debug().Err(err).Msg("sftp answer to the agent failed")
	}
	s.unanswered(p, Outcome{Status: fxConnectionLost, Message: msg})
	if p.slot {
		<-s.slots
	}
}

// unanswered records the outcome of a request that got no answer from its
// target: its decision's, and the write's it rode on.
func (s *session) unanswered(p pending, o Outcome) {
	s.record(p.finish, o)
	if p.ride != nil {
		s.noteRide(p.ride, p.note, o)
	}
	if p.on != nil {
		s.through(p, nil)
	}
}

// record hands an outcome to the recorder goroutine, which calls fin with
// it (an audit row: a database write). Recording off the upstream reader
// keeps that write out of the way of the answers that follow (a file
// upload's write statuses after its open). The queue is bounded: a
// recorder that falls behind holds the reader back.
func (s *session) record(fin Finish, o Outcome) {
	if fin != nil {
		s.outcomes <- func() { fin(o) }
	}
}

// recordOutcomes runs the recorded outcomes in order until the session
// closes the queue.
func (s *session) recordOutcomes() {
	for f := range s.outcomes {
		f()
	}
}

// outcomeOf is the outcome an answer reports.
func outcomeOf(frame []byte) Outcome {
	if frame[4] != fxpStatus {
		return Outcome{Answered: true, Status: fxOK}
	}
	d := &decoder{b: frame, off: 9}
	code := d.u32()
	msg, _ := d.str()
	if d.err != nil {
		return Outcome{Answered: true, Status: fxBadMessage, Message: "sftpgate: malformed status from the target"}
	}
	if code == fxOK {
		msg = ""
	}
	return Outcome{Answered: true, Status: code, Message: msg}
}

// nameInView rewrites the one name of a realpath, expand-path or readlink
// answer into the agent's view of the virtual root (in the fixed view the
// answer passes as it is). Its long name, which OpenSSH's sftp-server sets
// to the name itself, follows when it equals the name.
func (s *session) nameInView(alias string, kind answerKind, frame []byte) []byte {
	if s.fixed != "" || frame[4] != fxpName {
		return frame
	}
	id := binary.BigEndian.Uint32(frame[5:9])
	d := &decoder{b: frame, off: 9}
	if n := d.u32(); d.err != nil || n < 1 {
		return statusPacket(id, fxFailure, "sftpgate: the target answered with no name")
	}
	name, nameAt := d.str()
	long, longAt := d.str()
	if d.err != nil {
		return statusPacket(id, fxFailure, "sftpgate: the target answered with a malformed name")
	}
	var shown string
	if kind == answerReadlink {
		if checkPath(name) != nil {
			return statusPacket(id, fxFailure, "sftpgate: the link's content holds control bytes")
		}
		shown = agentLinkTarget(alias, name)
	} else {
		var ok bool
		if shown, ok = s.virtualName(alias, name); !ok {
			return statusPacket(id, fxFailure, "sftpgate: the target answered with an unusable path")
		}
	}
	edits := []edit{{nameAt, strField(shown)}}
	if long == name {
		edits = append(edits, edit{longAt, strField(shown)})
	}
	return splice(frame, edits...)
}

// capLimits caps a limits@openssh.com answer at what postern accepts from
// the agent, so that a client that sizes its requests by the answer never
// sends a packet postern must refuse.
func capLimits(frame []byte) []byte {
	if frame[4] != fxpExtendedReply || len(frame) < 9+32 {
		return frame
	}
	caps := []uint64{MaxPacket, MaxPacket - 1024, MaxPacket - 1024}
	for i, c := range caps {
		at := 9 + 8*i
		if v := binary.BigEndian.Uint64(frame[at:]); v == 0 || v > c {
			// 0 means "no limit": postern has one.
			binary.BigEndian.PutUint64(frame[at:], c)
		}
	}
	return frame
}

// die ends the session because it cannot go on (the fixed view's target
// ended it); the dispatcher returns err.
func (s *session) die(err error) {
	s.dieOnce.Do(func() {
		s.deadErr = err
		close(s.dead)
	})
}

// end stops the session: no more packets are taken; on a clean end the
// answers still due are awaited (at most Drain) so that their outcomes are
// recorded; then every upstream is closed, and the agent's channel too if
// a goroutine could still be blocked on it. It returns when every goroutine
// of the session has ended.
func (s *session) end(err error) {
	close(s.stop)
	s.cancelDecide()
	drained := err == nil && s.drain()
	s.closeUpstreams()
	if err != nil && s.ctx.Err() == nil {
		// Said here because the channel may be closed below, before the
		// caller could say it.
		s.notice(err.Error())
	}
	select {
	case <-s.readerDone:
	default:
		// Still reading: only closing the channel ends that read.
		drained = false
	}
	if !drained {
		s.rwc.Close()
	}
	s.wg.Wait()
	// Every reader has ended: the writes still open, and the one just
	// closed, get their rows now; then no outcome is left to queue.
	s.settleAll()
	close(s.outcomes)
	<-s.recorded
	s.cancel()
}

// drain waits until no forwarded request awaits its answer, at most Drain.
func (s *session) drain() bool {
	timer := time.NewTimer(s.cfg.Drain)
	defer timer.Stop()
	for range cap(s.slots) {
		select {
		case s.slots <- struct{}{}:
		case <-timer.C:
			return false
		case <-s.ctx.Done():
			return false
		}
	}
	return true
}

// settleAll writes the rows of the files whose record is still kept: the
// handles the agent left open, with what went through them until now, and
// the write it closed last. It runs once the dispatcher and every reader
// have ended.
func (s *session) settleAll() {
	if w := s.justClosed; w != nil {
		s.justClosed = nil
		s.settle(w, "")
	}
	s.mu.Lock()
	var open []*handle
	for _, h := range s.handles {
		if !h.dir {
			open = append(open, h)
		}
	}
	s.mu.Unlock()
	for _, h := range open {
		s.settle(h, "the session ended before the file was closed")
	}
}
