package sftpgate

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"
)

// upstream is one SFTP session to one alias's target: the version exchange
// done, a reader goroutine that hands each answer back to the session, and
// the requests it waits for. Only the session's dispatcher writes to it, so
// requests reach the target in the order the agent sent them.
type upstream struct {
	alias string
	conn  io.ReadWriter
	close func() error
	r     *bufio.Reader
	// extList are the target's extensions that postern serves, in the
	// order the target advertised them; exts the same as a set.
	extList []extension
	exts    map[string]bool
	// done is closed when the reader has ended and every request it
	// waited for has been answered.
	done chan struct{}

	// closed is closed once the first shut has closed the session, and
	// closeErr is then its close's error. A second shut waits on the
	// channel, not on a sync.Once's mutex: closing waits for the
	// target's end of the session, and a wait on a channel is one a
	// testing/synctest bubble sees as blocked, so the fuzz test's fake
	// time still runs while the reader and the gate both shut.
	closed   chan struct{}
	closeErr error
	// shutting is set by the first shut, under mu.
	shutting bool

	// mu protects pending, nextID and err.
	mu      sync.Mutex
	pending map[uint32]pending
	nextID  uint32
	err     error // why the session ended; nil while it runs
}

// answerKind says what the session does with an answer before the agent
// sees it.
type answerKind uint8

const (
	answerAsIs     answerKind = iota // only the id restored
	answerHandle                     // an open: record the handle (and rename it in the virtual root)
	answerRealpath                   // realpath, expand-path: the name in the agent's view
	answerReadlink                   // readlink: an absolute content in the agent's view
	answerLimits                     // limits: capped at what postern accepts
	answerInternal                   // the gate's own request: handed to wait
)

// pending is a request forwarded to a target and not yet answered.
type pending struct {
	agentID uint32
	kind    answerKind
	// finish, if set, records the decided operation's outcome.
	finish Finish
	// open is what an answerHandle request opened.
	open *handle
	// wait receives the answer to an answerInternal request (nil if the
	// session ended first).
	wait chan []byte
	// slot is set when the request holds one of the session's
	// outstanding-request tokens.
	slot bool
	// ride, if set, is the write this request rides on: its answer, with
	// note saying what the request was, goes on that write's row.
	ride *handle
	note string
	// on, if set, is the file whose handle this read, write or close
	// (onTyp) goes through: its answer is counted on the file's row
	// (through), wrote being a write's length.
	on    *handle
	onTyp byte
	wrote uint32
}

// errUpstreamClosed ends a session postern closed itself.
var errUpstreamClosed = errors.New("sftpgate: upstream session closed")

// startUpstream does the version exchange on a dialed session (sending
// init, the agent's own in the fixed view, else version 3 with no
// extension data) and starts its reader. timeout bounds the exchange: a
// target that does not answer is closed.
func (s *session) startUpstream(alias string, u *Upstream, init []byte, timeout time.Duration) (*upstream, error) {
	up := &upstream{
		alias:   alias,
		conn:    u.Conn,
		close:   func() error { return closeUpstream(u) },
		r:       bufio.NewReaderSize(u.Conn, 32<<10),
		done:    make(chan struct{}),
		closed:  make(chan struct{}),
		pending: make(map[uint32]pending),
		nextID:  1,
	}
	if init == nil {
		init = finish(appendU32(newPacket(fxpInit, 4), sftpVersion))
	}
	timer := time.AfterFunc(timeout, func() { up.shut() })
	exts, err := up.exchange(init)
	up.extList = exts
	stopped := timer.Stop()
	if err == nil && !stopped {
		err = fmt.Errorf("no answer within %v", timeout)
	}
	if err != nil {
		up.shut()
		close(up.done)
		return nil, fmt.Errorf("sftpgate: %s: version exchange: %w", alias, err)
	}
	up.exts = map[string]bool{}
	for _, e := range exts {
		up.exts[e.name] = true
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		up.readLoop(s)
	}()
	if u.Stderr != nil {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.copyStderr(u.Stderr)
		}()
	}
	return up, nil
}

// copyStderr copies a target session's stderr to the agent's, a read at a
// time and never inside one of the gate's own lines, until it ends.
func (s *session) copyStderr(r io.Reader) {
	buf := make([]byte, 4096)
	for {
		n, err := r.Read(buf)
		if n > 0 && s.cfg.Stderr != nil {
			s.agent.mu.Lock()
			_, _ = s.cfg.Stderr.Write(buf[:n])
			s.agent.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// exchange sends init and reads the target's version packet, keeping the
// extensions postern serves.
func (up *upstream) exchange(init []byte) ([]extension, error) {
	if _, err := up.conn.Write(init); err != nil {
		return nil, err
	}
	frame, err := readPacket(up.r, nil, maxUpstreamPacket)
	if err != nil {
		return nil, err
	}
	d := &decoder{b: frame, off: 5}
	if frame[4] != fxpVersion {
		return nil, fmt.Errorf("the target answered init with %s", packetName(frame[4]))
	}
	if v := d.u32(); d.err == nil && v != sftpVersion {
		return nil, fmt.Errorf("the target speaks SFTP version %d; postern relays version %d only", v, sftpVersion)
	}
	var exts []extension
	for d.err == nil && d.rest() > 0 {
		name, _ := d.str()
		data, _ := d.str()
		if d.err == nil && extensionVersion(name) == data && !slices.ContainsFunc(exts, func(e extension) bool { return e.name == name }) {
			exts = append(exts, extension{name, data})
		}
	}
	if d.err != nil {
		return nil, fmt.Errorf("malformed version packet: %w", d.err)
	}
	return exts, nil
}

// supports reports whether the target advertised ext.
func (up *upstream) supports(ext string) bool { return up.exts[ext] }

// send forwards frame to the target with an id of the upstream's own (the
// agent's is kept in p), so that the gate's own requests and several
// agents' ids never collide. The frame's id field is overwritten. An error
// means the request did not reach the target and p was not answered: the
// caller answers the agent.
func (up *upstream) send(frame []byte, p pending) error {
	up.mu.Lock()
	if up.err != nil {
		err := up.err
		up.mu.Unlock()
		return err
	}
	id := up.nextID
	for {
		if _, busy := up.pending[id]; !busy && id != 0 {
			break
		}
		id++
	}
	up.nextID = id + 1
	up.pending[id] = p
	up.mu.Unlock()

	binary.BigEndian.PutUint32(frame[5:9], id)
	if _, err := up.conn.Write(frame); err != nil {
		up.mu.Lock()
		_, still := up.pending[id]
		delete(up.pending, id)
		up.mu.Unlock()
		up.shut()
		if still {
			return fmt.Errorf("sftpgate: %s: send: %w", up.alias, err)
		}
		// The reader failed it meanwhile and answered the agent.
	}
	return nil
}

// call sends one of the gate's own requests and waits for its answer,
// at most timeout.
func (up *upstream) call(ctx context.Context, frame []byte, timeout time.Duration) ([]byte, error) {
	wait := make(chan []byte, 1)
	if err := up.send(frame, pending{kind: answerInternal, wait: wait}); err != nil {
		return nil, err
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case ans := <-wait:
		if ans == nil {
			return nil, fmt.Errorf("sftpgate: %s: session ended", up.alias)
		}
		return ans, nil
	case <-timer.C:
		return nil, fmt.Errorf("sftpgate: %s: no answer within %v", up.alias, timeout)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// readLoop hands every answer to the session until the target's stream
// ends, then fails what is still waiting.
func (up *upstream) readLoop(s *session) {
	var buf []byte
	var err error
	for {
		var frame []byte
		frame, err = readPacket(up.r, buf, maxUpstreamPacket)
		if err != nil {
			break
		}
		buf = frame[:0]
		if len(frame) < 9 {
			err = fmt.Errorf("packet of %d bytes from the target has no id", len(frame)-4)
			break
		}
		id := binary.BigEndian.Uint32(frame[5:9])
		up.mu.Lock()
		p, ok := up.pending[id]
		delete(up.pending, id)
		up.mu.Unlock()
		if !ok {
			s.log.Warn().Str("alias", up.alias).Uint32("id", id).Msg("sftp target answered a request postern did not send; dropped")
			continue
		}
		s.answer(up, p, frame)
	}
	if errors.Is(err, io.EOF) {
		err = fmt.Errorf("sftpgate: %s ended the sftp session", up.alias)
	} else {
		err = fmt.Errorf("sftpgate: %s: %w", up.alias, err)
	}
	up.fail(s, err)
}

// fail marks the session ended with err, answers every request still
// waiting with SSH_FX_CONNECTION_LOST, and closes the session.
func (up *upstream) fail(s *session, err error) {
	up.mu.Lock()
	if up.err == nil {
		up.err = err
	}
	err = up.err
	waiting := up.pending
	up.pending = map[uint32]pending{}
	up.mu.Unlock()
	up.shut()
	for _, p := range waiting {
		if p.kind == answerInternal {
			close(p.wait)
			continue
		}
		s.lost(up, p)
	}
	close(up.done)
	s.upstreamEnded(up, err)
}

// shut closes the session once; the reader then ends. Every caller
// returns once the session is closed, with its close's error.
func (up *upstream) shut() error {
	up.mu.Lock()
	first := !up.shutting
	up.shutting = true
	if up.err == nil {
		up.err = errUpstreamClosed
	}
	up.mu.Unlock()
	if first {
		if up.close != nil {
			up.closeErr = up.close()
		}
		close(up.closed)
	}
	<-up.closed
	return up.closeErr
}

// ended reports the session's error, nil while it runs.
func (up *upstream) ended() error {
	up.mu.Lock()
	defer up.mu.Unlock()
	return up.err
}

// upstream returns alias's session, dialing it on first use (the virtual
// root opens nothing until an alias is used). The dialer's error is logged,
// not sent: it may name hosts and users the agent is not meant to learn.
func (s *session) upstream(alias string) (*upstream, error) {
	if s.fixed != "" {
		if err := s.fixedUp.ended(); err != nil {
			return nil, err
		}
		return s.fixedUp, nil
	}
	if up := s.openUpstream(alias); up != nil {
		return up, nil
	}
	u, err := s.cfg.Dial(s.ctx, alias)
	if err == nil && (u == nil || u.Conn == nil) {
		err = errors.New("dialer returned no session")
	}
	if err != nil {
		s.log.Warn().Str("alias", alias).Err(err).Msg("sftp upstream unavailable")
		return nil, err
	}
	up, err := s.startUpstream(alias, u, nil, s.cfg.TargetTimeout)
	if err != nil {
		s.log.Warn().Str("alias", alias).Err(err).Msg("sftp upstream unavailable")
		return nil, err
	}
	if !s.register(up) {
		return nil, errUpstreamClosed
	}
	return up, nil
}

// openUpstream returns alias's session if one is open.
func (s *session) openUpstream(alias string) *upstream {
	if s.fixed != "" {
		if s.fixedUp == nil || s.fixedUp.ended() != nil {
			return nil
		}
		return s.fixedUp
	}
	s.upMu.Lock()
	up := s.ups[alias]
	s.upMu.Unlock()
	if up == nil || up.ended() != nil {
		return nil
	}
	return up
}

// register keeps up among the session's upstreams; if the session is
// closing it closes up instead and reports false.
func (s *session) register(up *upstream) bool {
	s.upMu.Lock()
	closed := s.closed
	if !closed {
		s.ups[up.alias] = up
	}
	s.upMu.Unlock()
	if closed {
		up.shut()
	}
	return !closed
}

// closeUpstreams closes every upstream; later dials are closed at once.
func (s *session) closeUpstreams() {
	s.upMu.Lock()
	s.closed = true
	ups := make([]*upstream, 0, len(s.ups))
	for _, up := range s.ups {
		ups = append(ups, up)
	}
	s.upMu.Unlock()
	for _, up := range ups {
		if err := up.shut(); err != nil {
			s.log.Debug().Str("alias", up.alias).Err(err).Msg("sftp upstream close")
		}
	}
}

// upstreamEnded forgets an upstream whose session ended: the virtual root
// dials again on the next use of its alias; the fixed view, whose one
// target ended the session, ends too.
func (s *session) upstreamEnded(up *upstream, err error) {
	s.upMu.Lock()
	if s.ups[up.alias] == up {
		delete(s.ups, up.alias)
	}
	closing := s.closed
	s.upMu.Unlock()
	why := "the session to " + up.alias + " ended before the file was closed"
	if closing {
		why = "the session ended before the file was closed"
	}
	s.dropHandles(up, why)
	if s.fixed != "" && !closing {
		s.die(err)
	}
}

// closeUpstream ends a dialed session that never started.
func closeUpstream(u *Upstream) error {
	if u.Close != nil {
		return u.Close()
	}
	if c, ok := u.Conn.(io.Closer); ok {
		return c.Close()
	}
	return nil
}
