package sftpgate

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"

	"github.com/postern/postern/policy"
)

// run is the dispatcher: the version exchange, then every packet of the
// agent in order. It returns nil when the agent ended its stream, or the
// error that ended the session.
func (s *session) run(fixed *Upstream) error {
	init, err := s.next()
	if err != nil {
		if fixed != nil {
			closeUpstream(fixed)
		}
		if err == io.EOF {
			// The agent left before it began.
			return nil
		}
		return err
	}
	if init[4] != fxpInit {
		if fixed != nil {
			closeUpstream(fixed)
		}
		return fmt.Errorf("sftpgate: the agent sent %s before init", packetName(init[4]))
	}
	if fixed != nil {
		err = s.startFixed(fixed, init)
	} else {
		err = s.agent.write(s.rootVersion())
	}
	s.putBuf(init)
	if err != nil {
		return err
	}
	for {
		frame, err := s.next()
		if err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
		err = s.handle(frame)
		s.putBuf(frame)
		if err != nil {
			return err
		}
	}
}

// next returns the agent's next packet; io.EOF when its stream ended
// cleanly.
func (s *session) next() ([]byte, error) {
	select {
	case frame, ok := <-s.queue:
		if ok {
			return frame, nil
		}
		switch err := s.agentEnd; {
		case err == io.EOF:
			return nil, io.EOF
		case errors.Is(err, errFraming):
			return nil, err
		case errors.Is(err, io.ErrUnexpectedEOF):
			return nil, errors.New("sftpgate: the agent's stream ended inside a packet")
		default:
			return nil, fmt.Errorf("sftpgate: read from the agent: %w", err)
		}
	case <-s.dead:
		return nil, s.deadErr
	}
}

// startFixed does the fixed view's version exchange: the agent's init goes
// to the target (with the version capped at 3), and the target's answer
// comes back with only the extensions postern serves. Then the gate asks
// the target for its start directory, to show relative paths.
func (s *session) startFixed(fixed *Upstream, init []byte) error {
	fwd := bytes.Clone(init)
	if len(fwd) >= 9 && binary.BigEndian.Uint32(fwd[5:9]) > sftpVersion {
		binary.BigEndian.PutUint32(fwd[5:9], sftpVersion)
	}
	up, err := s.startUpstream(s.fixed, fixed, fwd, s.cfg.TargetTimeout)
	if err != nil {
		return err
	}
	if !s.register(up) {
		return errUpstreamClosed
	}
	s.fixedUp = up
	b := newPacket(fxpVersion, 256)
	b = appendU32(b, sftpVersion)
	for _, e := range up.extList {
		b = appendStr(b, e.name)
		b = appendStr(b, e.version)
	}
	if err := s.agent.write(finish(b)); err != nil {
		return err
	}
	s.home = s.targetHome(up)
	return nil
}

// targetHome asks the target where relative paths start (realpath "."),
// "/" if it cannot tell.
func (s *session) targetHome(up *upstream) string {
	b := newPacket(fxpRealpath, 8)
	b = appendU32(b, 0)
	b = appendStr(b, ".")
	ans, err := up.call(s.ctx, finish(b), s.cfg.TargetTimeout)
	if err != nil || ans[4] != fxpName {
		return "/"
	}
	d := &decoder{b: ans, off: 9}
	if d.u32() < 1 {
		return "/"
	}
	home, _ := d.str()
	if d.err != nil || !path.IsAbs(home) || checkPath(home) != nil {
		return "/"
	}
	return path.Clean(home)
}

// rootVersion is the virtual root's version answer: every extension postern
// serves. Targets are dialed only when an alias is used, so a request for
// an extension an alias's target lacks is answered SSH_FX_OP_UNSUPPORTED.
func (s *session) rootVersion() []byte {
	b := newPacket(fxpVersion, 256)
	b = appendU32(b, sftpVersion)
	for _, e := range knownExtensions {
		b = appendStr(b, e.name)
		b = appendStr(b, e.version)
	}
	return finish(b)
}

// handle serves one request. It returns an error only when the session
// cannot go on (the agent is gone or broke the protocol); a request that
// fails is answered, and the session goes on.
func (s *session) handle(frame []byte) error {
	if frame[4] == fxpInit {
		return errors.New("sftpgate: the agent sent init twice")
	}
	r, ok, err := parseRequest(frame)
	if !ok {
		return err
	}
	if err != nil {
		var unknown errUnknownRequest
		if errors.As(err, &unknown) {
			// Refused with OpenSSH's own answer to a request it does not
			// know, so that a client cannot tell the two apart.
			s.log.Debug().Str("request", unknown.what).Msg("sftp request unknown to postern refused")
			return s.reply(r.id, fxOpUnsupported, "Operation unsupported")
		}
		return s.reply(r.id, fxBadMessage, err.Error())
	}
	s.cfg.Metrics.SFTPOperation(opName(&r))
	if w := s.justClosed; w != nil && !s.aboutFile(&r, w) {
		// The time right after the close has passed: nothing more rides
		// on that write, and its row is written.
		s.justClosed = nil
		s.settle(w, "")
	}
	switch r.typ {
	case fxpOpen:
		return s.open(&r)
	case fxpOpendir:
		return s.opendir(&r)
	case fxpClose:
		return s.closeHandle(&r)
	case fxpRead, fxpWrite, fxpFstat, fxpReaddir:
		return s.onHandle(&r)
	case fxpFsetstat:
		return s.fsetstat(&r)
	case fxpStat, fxpLstat:
		return s.stat(&r)
	case fxpSetstat:
		return s.setstat(&r, "setstat")
	case fxpMkdir:
		return s.change(&r, policy.Write, "mkdir", r.attrs.describe())
	case fxpRmdir:
		return s.change(&r, policy.Destructive, "rmdir", "")
	case fxpRemove:
		return s.change(&r, policy.Destructive, "remove", "")
	case fxpRealpath:
		return s.realpath(&r, r.path)
	case fxpReadlink:
		return s.readlink(&r)
	case fxpRename:
		return s.rename(&r, "rename")
	case fxpSymlink:
		return s.symlink(&r)
	}
	switch r.ext {
	case extPosixRename:
		return s.rename(&r, "posix-rename")
	case extHardlink:
		return s.rename(&r, "hardlink")
	case extStatVFS:
		return s.statvfs(&r)
	case extFstatVFS, extFsync:
		return s.onHandle(&r)
	case extLsetstat:
		return s.setstat(&r, "lsetstat")
	case extLimits:
		return s.limits(&r)
	case extExpandPath:
		return s.expandPath(&r)
	case extCopyData:
		return s.copyData(&r)
	case extHomeDir:
		return s.homeDirectory(&r)
	case extUsersGroups:
		return s.usersGroups(&r)
	}
	// parseRequest returns errUnknownRequest for anything else.
	return s.reply(r.id, fxOpUnsupported, "Operation unsupported")
}

// reply answers the agent with a status of the gate's own.
func (s *session) reply(id, code uint32, msg string) error {
	return s.agent.write(statusPacket(id, code, msg))
}

// refuse answers a request the Decider refused with permission denied and
// the reason, which also goes to Stderr. The Decider has recorded it.
func (s *session) refuse(id uint32, err error) error {
	s.notice(err.Error())
	return s.reply(id, fxPermissionDenied, err.Error())
}

// refuseDecided answers a request the Decider refused: as for a missing
// path when the agent holds no grant for the alias (ErrNoSuchAlias), which
// then leaves the virtual root; with the reason otherwise.
func (s *session) refuseDecided(id uint32, alias string, err error) error {
	if errors.Is(err, ErrNoSuchAlias) {
		s.dropAlias(alias)
		return s.reply(id, fxNoSuchFile, "No such file")
	}
	return s.refuse(id, err)
}

// refuseOp answers a request the gate refuses itself, with code and
// reason: the reason goes in the status message and on Stderr (OpenSSH's
// sftp shows only a code's generic text, and `df` not even that), and op
// is recorded through Config.Refused. Nothing reaches a target.
func (s *session) refuseOp(id, code uint32, op Op, reason string) error {
	if s.fixed != "" {
		op.Alias = s.fixed
	}
	s.notice(reason)
	if s.cfg.Refused != nil {
		refused := s.cfg.Refused
		s.outcomes <- func() { refused(op, reason) }
	}
	return s.reply(id, code, reason)
}

// notice writes one line on Config.Stderr. Its failure is ignored: the
// refusal still reaches the agent as the status of its request.
func (s *session) notice(line string) {
	if s.cfg.Stderr == nil {
		return
	}
	s.agent.mu.Lock() // one line at a time, never inside a packet's write
	defer s.agent.mu.Unlock()
	_, _ = io.WriteString(s.cfg.Stderr, printableLine(line)+"\n")
}

// printableLine replaces control bytes so that the line stays one line.
func printableLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, s)
}

// decide asks the Decider about op.
func (s *session) decide(op Op) (Finish, error) {
	fin, err := s.cfg.Decide(s.decideCtx, op)
	if err != nil {
		s.log.Debug().Str("alias", op.Alias).Str("class", string(op.Class)).Str("method", op.Method).
			Strs("paths", op.Paths).Err(err).Msg("sftp operation refused")
		return nil, err
	}
	return fin, nil
}

// target is where a path the agent sent leads.
type target struct {
	alias string
	// path is what the target is sent: the agent's own bytes in the fixed
	// view, the mapped absolute path in the virtual root.
	path string
	// shown is the path in decisions: the target's absolute path (a
	// relative one of the fixed view joined to the start directory).
	shown string
	root  bool // the virtual root "/" itself
	top   bool // an alias's directory "/ALIAS" of the virtual root
}

// errNoSuchFile answers a path in the virtual root that no alias holds:
// to the agent, a directory it holds no grant for does not exist.
var errNoSuchFile = ErrNoSuchAlias

// errReadOnlyRoot refuses a change to the virtual root itself.
var errReadOnlyRoot = errors.New("sftpgate: the virtual root is read-only; work inside /ALIAS/")

// resolve maps p for an operation that reads (write false) or changes it.
// The errors are for the agent: a hostile path, errNoSuchFile, or
// errReadOnlyRoot.
func (s *session) resolve(p string, write bool) (target, error) {
	if err := checkPath(p); err != nil {
		return target{}, err
	}
	if s.fixed != "" {
		return target{alias: s.fixed, path: p, shown: s.shown(p)}, nil
	}
	loc, err := mapPath(p)
	if err != nil {
		return target{}, err
	}
	if loc.Alias == "" || loc.isAliasDir() || !s.aliases[loc.Alias] {
		// An answer about the root itself, or an alias not held when
		// last read: read the grants as they are now.
		s.refreshAliases()
	}
	t := target{alias: loc.Alias, path: loc.Path, shown: loc.Path, root: loc.Alias == "", top: loc.isAliasDir()}
	switch {
	case write && (t.root || t.top || !s.aliases[t.alias]):
		return target{}, errReadOnlyRoot
	case !t.root && !s.aliases[t.alias]:
		return target{}, errNoSuchFile
	}
	return t, nil
}

// shown is a fixed view path as decisions show it: absolute, relative ones
// joined to the start directory; cleaned of "." and doubled slashes, but
// not of "..", which the target resolves after symbolic links.
func (s *session) shown(p string) string {
	switch {
	case p == "" || p == ".":
		return s.home
	case !path.IsAbs(p):
		p = s.home + "/" + p
	}
	if !slices.Contains(strings.Split(p, "/"), "..") {
		p = path.Clean(p)
	}
	return p
}

// refusePath answers a request whose path resolve refused: as for a
// missing path when no alias holds it, else as the gate's own refusal,
// recorded.
func (s *session) refusePath(r *request, err error) error {
	if errors.Is(err, errNoSuchFile) {
		return s.reply(r.id, fxNoSuchFile, "No such file")
	}
	return s.refuseOp(r.id, fxPermissionDenied, agentOp(r), err.Error())
}

// aboutFile reports whether r is a stat or a setstat of w's file: the
// requests that may come between a write's close and a setstat that rides
// on it (paramiko's put stats the file it wrote).
func (s *session) aboutFile(r *request, w *handle) bool {
	switch {
	case r.typ == fxpStat, r.typ == fxpLstat, r.typ == fxpSetstat, r.ext == extLsetstat:
	default:
		return false
	}
	if checkPath(r.path) != nil {
		return false
	}
	if s.fixed != "" {
		return w.alias == s.fixed && w.shown == s.shown(r.path)
	}
	loc, err := mapPath(r.path)
	return err == nil && loc.Alias == w.alias && loc.Path == w.path
}

// withPath returns r's frame with its first path (second if second) set to
// p; the frame itself when p is what the agent sent.
func withPaths(r *request, p1, p2 string) []byte {
	var edits []edit
	if p1 != r.path {
		edits = append(edits, edit{r.pathAt, strField(p1)})
	}
	if p2 != r.path2 {
		edits = append(edits, edit{r.path2At, strField(p2)})
	}
	if len(edits) == 0 {
		return r.frame
	}
	return splice(r.frame, edits...)
}

// forward sends frame for request r to alias's target and arranges for p
// to handle the answer. The decision's finish (which may be nil) is called
// with the outcome, whatever happens.
func (s *session) forward(r *request, alias string, frame []byte, p pending, fin Finish) error {
	p.finish = fin
	up, err := s.upstream(alias)
	if err != nil {
		return s.answerLocal(r.id, fxNoConnection, "sftpgate: cannot reach "+alias, p)
	}
	if r.typ == fxpExtended && !up.supports(r.ext) {
		return s.answerLocal(r.id, fxOpUnsupported, fmt.Sprintf("sftpgate: %s's sftp server does not support %s", alias, r.ext), p)
	}
	return s.send(up, r, frame, p, fin)
}

// send forwards frame on up, holding one of the session's outstanding
// slots until the answer.
func (s *session) send(up *upstream, r *request, frame []byte, p pending, fin Finish) error {
	p.agentID, p.finish = r.id, fin
	select {
	case s.slots <- struct{}{}:
	case <-s.ctx.Done():
		s.unanswered(p, Outcome{Status: fxConnectionLost, Message: "sftpgate: the session ended"})
		return s.ctx.Err()
	}
	p.slot = true
	if err := up.send(frame, p); err != nil {
		<-s.slots
		s.log.Info().Str("alias", up.alias).Err(err).Msg("sftp upstream write failed")
		return s.answerLocal(r.id, fxConnectionLost, "sftpgate: the session to "+up.alias+" ended", p)
	}
	return nil
}

// answerLocal answers a request the gate could not forward after it was
// decided, and records that outcome (p's decision's, and the write's it
// rides on).
func (s *session) answerLocal(id, code uint32, msg string, p pending) error {
	err := s.reply(id, code, msg)
	s.unanswered(p, Outcome{Status: code, Message: msg})
	return err
}

// decideAndForward decides op and forwards frame on an allow.
func (s *session) decideAndForward(r *request, op Op, frame []byte, p pending) error {
	// A target already open that lacks an extension is told before
	// anyone is asked about it.
	if r.typ == fxpExtended {
		if up := s.openUpstream(op.Alias); up != nil && !up.supports(r.ext) {
			return s.reply(r.id, fxOpUnsupported, fmt.Sprintf("sftpgate: %s's sftp server does not support %s", op.Alias, r.ext))
		}
	}
	fin, err := s.decide(op)
	if err != nil {
		return s.refuseDecided(r.id, op.Alias, err)
	}
	return s.forward(r, op.Alias, frame, p, fin)
}
