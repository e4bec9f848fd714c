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

// refuse answers a refused request with permission denied and the reason,
// which also goes to Stderr.
func (s *session) refuse(id uint32, err error) error {
	s.notice(err.Error())
	return s.reply(id, fxPermissionDenied, err.Error())
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
var errNoSuchFile = errors.New("sftpgate: no such alias")

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

// refusePath answers a request whose path resolve refused.
func (s *session) refusePath(id uint32, err error) error {
	if errors.Is(err, errNoSuchFile) {
		return s.reply(id, fxNoSuchFile, "No such file")
	}
	return s.refuse(id, err)
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
	up, err := s.upstream(alias)
	if err != nil {
		return s.answerLocal(r.id, fxNoConnection, "sftpgate: cannot reach "+alias, fin)
	}
	if r.typ == fxpExtended && !up.supports(r.ext) {
		return s.answerLocal(r.id, fxOpUnsupported, fmt.Sprintf("sftpgate: %s's sftp server does not support %s", alias, r.ext), fin)
	}
	return s.send(up, r, frame, p, fin)
}

// send forwards frame on up, holding one of the session's outstanding
// slots until the answer.
func (s *session) send(up *upstream, r *request, frame []byte, p pending, fin Finish) error {
	select {
	case s.slots <- struct{}{}:
	case <-s.ctx.Done():
		if fin != nil {
			fin(Outcome{Status: fxConnectionLost, Message: "sftpgate: the session ended"})
		}
		return s.ctx.Err()
	}
	p.agentID, p.finish, p.slot = r.id, fin, true
	if err := up.send(frame, p); err != nil {
		<-s.slots
		s.log.Info().Str("alias", up.alias).Err(err).Msg("sftp upstream write failed")
		return s.answerLocal(r.id, fxConnectionLost, "sftpgate: the session to "+up.alias+" ended", fin)
	}
	return nil
}

// answerLocal answers a request the gate could not forward after it was
// decided, and records that outcome.
func (s *session) answerLocal(id, code uint32, msg string, fin Finish) error {
	err := s.reply(id, code, msg)
	if fin != nil {
		fin(Outcome{Status: code, Message: msg})
	}
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
		return s.refuse(r.id, err)
	}
	return s.forward(r, op.Alias, frame, p, fin)
}

// open: class read when opened only for reading, write otherwise.
func (s *session) open(r *request) error {
	write := r.pflags&(fxfWrite|fxfAppend|fxfCreat|fxfTrunc|fxfExcl) != 0
	t, err := s.resolve(r.path, write)
	if err != nil {
		return s.refusePath(r.id, err)
	}
	if t.root {
		return s.reply(r.id, fxFailure, "sftpgate: / is a directory")
	}
	if s.tooManyHandles() {
		return s.reply(r.id, fxFailure, fmt.Sprintf("sftpgate: %d handles open; close some", maxHandles))
	}
	op := Op{Alias: t.alias, Class: policy.Read, Method: "get", Paths: []string{t.shown}}
	if write {
		op.Class, op.Method = policy.Write, "put"
		if r.pflags&fxfRead != 0 {
			op.Method = "open"
		}
		op.Detail = openFlagsText(r.pflags)
		if r.attrs.flags&attrPermissions != 0 {
			op.Detail += fmt.Sprintf(", mode %04o", r.attrs.perm&0o7777)
		}
	}
	h := &handle{alias: t.alias, path: t.path, shown: t.shown, write: write}
	return s.decideAndForward(r, op, withPaths(r, t.path, r.path2), pending{kind: answerHandle, open: h})
}

// opendir: "/" is listed by the gate; anything else by its target.
func (s *session) opendir(r *request) error {
	t, err := s.resolve(r.path, false)
	if err != nil {
		return s.refusePath(r.id, err)
	}
	if s.tooManyHandles() {
		return s.reply(r.id, fxFailure, fmt.Sprintf("sftpgate: %d handles open; close some", maxHandles))
	}
	if t.root {
		name := s.addHandle(&handle{dir: true})
		b := newPacket(fxpHandle, 8+len(name))
		b = appendU32(b, r.id)
		b = appendStr(b, name)
		return s.agent.write(finish(b))
	}
	op := Op{Alias: t.alias, Class: policy.Read, Method: "list", Paths: []string{t.shown}}
	h := &handle{alias: t.alias, path: t.path, shown: t.shown, dir: true}
	return s.decideAndForward(r, op, withPaths(r, t.path, r.path2), pending{kind: answerHandle, open: h})
}

// handleOf returns the handle r names, answering the agent (and returning
// nil) when it names none the session holds or one whose target session
// ended.
func (s *session) handleOf(r *request, name string) (*handle, error) {
	h := s.lookup(name)
	if h == nil {
		return nil, s.reply(r.id, fxFailure, "sftpgate: invalid handle")
	}
	if h.up != nil && h.up.ended() != nil {
		s.forget(name)
		return nil, s.reply(r.id, fxConnectionLost, "sftpgate: the session to "+h.alias+" ended; open the file again")
	}
	return h, nil
}

// withHandle returns r's frame with its handle (and copy-data's second)
// renamed to the target's.
func withHandle(r *request, h, h2 *handle) []byte {
	var edits []edit
	if h.remote != r.handle {
		edits = append(edits, edit{r.handleAt, strField(h.remote)})
	}
	if h2 != nil && h2.remote != r.handle2 {
		edits = append(edits, edit{r.handle2At, strField(h2.remote)})
	}
	if len(edits) == 0 {
		return r.frame
	}
	return splice(r.frame, edits...)
}

// closeHandle: the handle is forgotten at once (as OpenSSH's sftp-server
// forgets it whatever close(2) says) and the close rides on its open.
func (s *session) closeHandle(r *request) error {
	h, err := s.handleOf(r, r.handle)
	if h == nil {
		return err
	}
	s.forget(r.handle)
	if h.up == nil {
		return s.reply(r.id, fxOK, "Success")
	}
	return s.send(h.up, r, withHandle(r, h, nil), pending{kind: answerAsIs}, nil)
}

// onHandle forwards read, write, fstat, readdir, fsync and fstatvfs: they
// ride on the decision of the handle's open.
func (s *session) onHandle(r *request) error {
	h, err := s.handleOf(r, r.handle)
	if h == nil {
		return err
	}
	if h.up == nil {
		switch {
		case r.typ == fxpReaddir:
			return s.agent.write(s.rootReaddir(r.id, h))
		case r.ext == extFstatVFS:
			return s.reply(r.id, fxOpUnsupported, "sftpgate: the virtual root has no file system; try /ALIAS")
		}
		return s.reply(r.id, fxFailure, "sftpgate: / is a directory")
	}
	if r.typ == fxpExtended && !h.up.supports(r.ext) {
		return s.reply(r.id, fxOpUnsupported, fmt.Sprintf("sftpgate: %s's sftp server does not support %s", h.alias, r.ext))
	}
	if r.typ == fxpWrite {
		h.end = max(h.end, r.offset+uint64(r.length))
	}
	return s.send(h.up, r, withHandle(r, h, nil), pending{kind: answerAsIs}, nil)
}

// fsetstat: a size is a truncation, decided as destructive, except the one
// that ends the file where this handle's writes end: an upload in place
// (OpenSSH's scp writes over the file, then truncates it there), which
// leaves what an open with the truncate flag, a write, leaves. Modes and
// times on a handle opened for writing ride on its open too; anything else
// is decided as a write.
func (s *session) fsetstat(r *request) error {
	h, err := s.handleOf(r, r.handle)
	if h == nil {
		return err
	}
	if h.up == nil {
		return s.refuse(r.id, errReadOnlyRoot)
	}
	frame := withHandle(r, h, nil)
	rest := r.attrs
	rest.flags &^= attrSize
	endsWrite := r.attrs.flags&attrSize == 0 || r.attrs.size == h.end
	if h.write && endsWrite && rest.ridesOnWrite() {
		return s.send(h.up, r, frame, pending{kind: answerAsIs}, nil)
	}
	op := Op{Alias: h.alias, Class: policy.Write, Method: "fsetstat", Paths: []string{h.shown}, Detail: r.attrs.describe()}
	if r.attrs.flags&attrSize != 0 {
		op.Class = policy.Destructive
	}
	return s.decideAndForward(r, op, frame, pending{kind: answerAsIs})
}

// stat and lstat: "/" and "/ALIAS" are answered by the gate.
func (s *session) stat(r *request) error {
	t, err := s.resolve(r.path, false)
	if err != nil {
		return s.refusePath(r.id, err)
	}
	if t.root || t.top {
		return s.agent.write(s.rootAttrs(r.id, t))
	}
	op := Op{Alias: t.alias, Class: policy.Read, Method: packetName(r.typ), Paths: []string{t.shown}}
	return s.decideAndForward(r, op, withPaths(r, t.path, r.path2), pending{kind: answerAsIs})
}

// setstat and lsetstat: a size is a truncation, decided as destructive;
// modes and times on a file this session opened for writing ride on that
// open (`scp -p` sets them after the data); anything else is a write.
func (s *session) setstat(r *request, method string) error {
	t, err := s.resolve(r.path, true)
	if err != nil {
		return s.refusePath(r.id, err)
	}
	frame := withPaths(r, t.path, r.path2)
	if r.attrs.ridesOnWrite() && s.wroteTo(t.alias, t.path) {
		return s.forward(r, t.alias, frame, pending{kind: answerAsIs}, nil)
	}
	op := Op{Alias: t.alias, Class: policy.Write, Method: method, Paths: []string{t.shown}, Detail: r.attrs.describe()}
	if r.attrs.flags&attrSize != 0 {
		op.Class = policy.Destructive
	}
	return s.decideAndForward(r, op, frame, pending{kind: answerAsIs})
}

// change decides and forwards mkdir, rmdir and remove.
func (s *session) change(r *request, class policy.Class, method, detail string) error {
	t, err := s.resolve(r.path, true)
	if err != nil {
		return s.refusePath(r.id, err)
	}
	op := Op{Alias: t.alias, Class: class, Method: method, Paths: []string{t.shown}, Detail: detail}
	return s.decideAndForward(r, op, withPaths(r, t.path, r.path2), pending{kind: answerAsIs})
}

// realpath canonicalises p on its target and answers in the agent's view;
// "/" and "/ALIAS" are answered by the gate.
func (s *session) realpath(r *request, p string) error {
	t, err := s.resolve(p, false)
	if err != nil {
		return s.refusePath(r.id, err)
	}
	if t.root || t.top {
		return s.agent.write(nameAnswer(r.id, virtualPath(location{Alias: t.alias, Path: t.path})))
	}
	method := "realpath"
	if r.typ == fxpExtended {
		method = r.ext[:strings.IndexByte(r.ext, '@')]
	}
	op := Op{Alias: t.alias, Class: policy.Read, Method: method, Paths: []string{t.shown}}
	return s.decideAndForward(r, op, withPaths(r, t.path, r.path2), pending{kind: answerRealpath})
}

// expandPath is realpath with "~" expanded. In the virtual root "~" is the
// root itself, the session's start directory; other users' homes are not
// in it.
func (s *session) expandPath(r *request) error {
	if s.fixed != "" {
		return s.realpath(r, r.path)
	}
	p := r.path
	switch {
	case p == "~":
		p = "/"
	case strings.HasPrefix(p, "~/"):
		p = "/" + p[2:]
	case strings.HasPrefix(p, "~"):
		return s.reply(r.id, fxNoSuchFile, "sftpgate: the virtual root holds no user's home directory; try /ALIAS")
	}
	return s.realpath(r, p)
}

// readlink answers an absolute link content in the agent's view.
func (s *session) readlink(r *request) error {
	t, err := s.resolve(r.path, false)
	if err != nil {
		return s.refusePath(r.id, err)
	}
	if t.root || t.top {
		return s.reply(r.id, fxFailure, "sftpgate: "+virtualPath(location{Alias: t.alias, Path: t.path})+" is not a symbolic link")
	}
	op := Op{Alias: t.alias, Class: policy.Read, Method: "readlink", Paths: []string{t.shown}}
	return s.decideAndForward(r, op, withPaths(r, t.path, r.path2), pending{kind: answerReadlink})
}

// statvfs: the virtual root has no file system.
func (s *session) statvfs(r *request) error {
	t, err := s.resolve(r.path, false)
	if err != nil {
		return s.refusePath(r.id, err)
	}
	if t.root {
		return s.reply(r.id, fxOpUnsupported, "sftpgate: the virtual root has no file system; try /ALIAS")
	}
	op := Op{Alias: t.alias, Class: policy.Read, Method: "statvfs", Paths: []string{t.shown}}
	return s.decideAndForward(r, op, withPaths(r, t.path, r.path2), pending{kind: answerAsIs})
}

// rename, posix-rename and hardlink: both paths on one target. The approver
// is told whether the destination exists (and so whether a posix-rename
// replaces it).
func (s *session) rename(r *request, method string) error {
	src, err := s.resolve(r.path, true)
	if err != nil {
		return s.refusePath(r.id, err)
	}
	dst, err := s.resolve(r.path2, true)
	if err != nil {
		return s.refusePath(r.id, err)
	}
	if src.alias != dst.alias {
		return s.reply(r.id, fxFailure, fmt.Sprintf("sftpgate: cannot %s across aliases (%s to %s); copy instead", method, src.alias, dst.alias))
	}
	op := Op{Alias: src.alias, Class: policy.Write, Method: method, Paths: []string{src.shown, dst.shown}}
	if method != "hardlink" { // which never replaces anything
		op.Detail = s.destination(dst, method == "posix-rename")
	}
	return s.decideAndForward(r, op, withPaths(r, src.path, dst.path), pending{kind: answerAsIs})
}

// destination says what lies at a rename's destination, by an lstat of the
// gate's own: not decided or audited, since it only informs the decision
// and its answer goes to the Decider, never to the agent. "" when nothing
// lies there or the target cannot say.
func (s *session) destination(dst target, replaces bool) string {
	up := s.openUpstream(dst.alias)
	if up == nil {
		// Not dialed yet: dialing before a decision would log in to a
		// target for a request that may be refused.
		return ""
	}
	b := newPacket(fxpLstat, 8+len(dst.path))
	b = appendU32(b, 0)
	b = appendStr(b, dst.path)
	ans, err := up.call(s.ctx, finish(b), s.cfg.TargetTimeout)
	if err != nil || ans[4] != fxpAttrs {
		return ""
	}
	d := &decoder{b: ans, off: 9}
	a := d.attrs()
	if d.err != nil {
		return ""
	}
	what := "a file"
	switch a.perm & 0o170000 {
	case 0o040000:
		what = "a directory"
	case 0o120000:
		what = "a symbolic link"
	}
	if a.flags&attrSize != 0 && a.perm&0o170000 == 0o100000 {
		what = fmt.Sprintf("a file of %d bytes", a.size)
	}
	if replaces {
		return "replaces " + what
	}
	return "destination exists: " + what
}

// symlink: OpenSSH's order, the link's target first and the link second
// (see docs/sftp.md for why every common client sends that order to
// postern). In the virtual root an absolute target is mapped like any
// path and must lie on the link's own alias.
func (s *session) symlink(r *request) error {
	link, err := s.resolve(r.path2, true)
	if err != nil {
		return s.refusePath(r.id, err)
	}
	content := r.path
	if s.fixed == "" {
		content, err = mapLinkTarget(link.alias, r.path)
	} else {
		err = checkPath(content)
	}
	if err != nil {
		return s.refuse(r.id, err)
	}
	op := Op{Alias: link.alias, Class: policy.Write, Method: "symlink", Paths: []string{content, link.shown}}
	return s.decideAndForward(r, op, withPaths(r, content, link.path), pending{kind: answerAsIs})
}

// limits: the fixed view asks the target (and caps its answer at what
// postern accepts); the virtual root, which may reach any target, answers
// the draft's guaranteed minimums.
func (s *session) limits(r *request) error {
	if s.fixed == "" {
		b := newPacket(fxpExtendedReply, 36)
		b = appendU32(b, r.id)
		b = appendU64(b, 34000)      // max-packet-length
		b = appendU64(b, 32768)      // max-read-length
		b = appendU64(b, 32768)      // max-write-length
		b = appendU64(b, maxHandles) // max-open-handles
		return s.agent.write(finish(b))
	}
	op := Op{Alias: s.fixed, Class: policy.Read, Method: "limits"}
	return s.decideAndForward(r, op, r.frame, pending{kind: answerLimits})
}

// copyData copies between two handles on one target. It rides on the
// destination's open when that was decided as a write.
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
	if src.up != dst.up {
		return s.reply(r.id, fxFailure, fmt.Sprintf("sftpgate: cannot copy across aliases (%s to %s)", src.alias, dst.alias))
	}
	frame := withHandle(r, src, dst)
	if dst.write {
		if !dst.up.supports(extCopyData) {
			return s.reply(r.id, fxOpUnsupported, fmt.Sprintf("sftpgate: %s's sftp server does not support %s", dst.alias, extCopyData))
		}
		return s.send(dst.up, r, frame, pending{kind: answerAsIs}, nil)
	}
	op := Op{Alias: dst.alias, Class: policy.Write, Method: "copy-data", Paths: []string{src.shown, dst.shown},
		Detail: fmt.Sprintf("%d bytes from offset %d to offset %d", r.readLen, r.readOff, r.writeOff)}
	return s.decideAndForward(r, op, frame, pending{kind: answerAsIs})
}

// homeDirectory: in the virtual root the agent's own home is the root.
func (s *session) homeDirectory(r *request) error {
	if s.fixed == "" {
		if r.path == "" {
			return s.agent.write(nameAnswer(r.id, "/"))
		}
		return s.reply(r.id, fxFailure, "sftpgate: the virtual root holds no user's home directory; try /ALIAS")
	}
	if err := checkPath(r.path); err != nil {
		return s.refuse(r.id, err)
	}
	op := Op{Alias: s.fixed, Class: policy.Read, Method: "home-directory", Paths: []string{r.path}}
	return s.decideAndForward(r, op, r.frame, pending{kind: answerAsIs})
}

// usersGroups names user and group ids. The virtual root spans targets
// whose ids mean different users, so it names none (an empty name is the
// protocol's "unknown": clients show the number).
func (s *session) usersGroups(r *request) error {
	if s.fixed != "" {
		op := Op{Alias: s.fixed, Class: policy.Read, Method: "users-groups-by-id"}
		return s.decideAndForward(r, op, r.frame, pending{kind: answerAsIs})
	}
	d := &decoder{b: r.frame, off: 9}
	d.str() // the extension's name
	uids, _ := d.str()
	gids, _ := d.str()
	empty := func(ids string) []byte {
		var b []byte
		for i := 0; i+4 <= len(ids); i += 4 {
			b = appendStr(b, "")
		}
		return b
	}
	b := newPacket(fxpExtendedReply, 16+len(uids)+len(gids))
	b = appendU32(b, r.id)
	b = appendStr(b, string(empty(uids)))
	b = appendStr(b, string(empty(gids)))
	return s.agent.write(finish(b))
}
