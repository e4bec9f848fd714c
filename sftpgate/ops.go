package sftpgate

import (
	"fmt"
	"strings"

	"github.com/postern/postern/policy"
	"github.com/postern/postern/shellclass"
)

// noFileSystem is the answer to a statvfs of the virtual root.
const noFileSystem = "sftpgate: the virtual root has no file system; try /ALIAS"

// The handlers of each request: classify, map, decide (or ride on a
// handle's decision), forward. See docs/sftp.md for the classes.

// open: class read when opened only for reading, write otherwise.
func (s *session) open(r *request) error {
	write := r.pflags&(fxfWrite|fxfAppend|fxfCreat|fxfTrunc|fxfExcl) != 0
	t, err := s.resolve(r.path, write)
	if err != nil {
		return s.refusePath(r, err)
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
	if dev, ok := shellclass.SideEffectDevice(t.path); ok {
		// Opening it acts on the machine, read or not: as destructive as
		// the command that opens it (docs/classification.md).
		op.Class = policy.Destructive
		op.Detail = strings.TrimPrefix(op.Detail+"; ", "; ") + dev + ": " + shellclass.SideEffectDeviceWhy
	}
	h := &handle{alias: t.alias, path: t.path, shown: t.shown, write: write, op: op}
	return s.decideAndForward(r, op, withPaths(r, t.path, r.path2), pending{kind: answerHandle, open: h})
}

// opendir: "/" is listed by the gate; anything else by its target.
func (s *session) opendir(r *request) error {
	t, err := s.resolve(r.path, false)
	if err != nil {
		return s.refusePath(r, err)
	}
	if s.tooManyHandles() {
		return s.reply(r.id, fxFailure, fmt.Sprintf("sftpgate: %d handles open; close some", maxHandles))
	}
	if t.root {
		name := s.addHandle(&handle{dir: true, entries: s.rootEntries()})
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
		s.settle(h, "the session to "+h.alias+" ended before the file was closed")
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
// forgets it whatever close(2) says) and the close rides on its open. A
// write's file is then the one a setstat of modes and times may ride on
// (`put -p` in asyncssh, a chmod after paramiko's put), until the agent
// asks for anything but a stat or setstat of it.
//
// A file's row is written once the close is answered: for a read at once,
// for a write when what may ride on it has passed too.
func (s *session) closeHandle(r *request) error {
	if s.lookup(r.handle) == nil {
		// Closing a handle that is not open (closed already, or never
		// opened) gets OpenSSH's answer: its sftp-server fails the close
		// with ENOENT, SSH_FX_NO_SUCH_FILE "No such file", where every
		// other request on such a handle gets SSH_FX_FAILURE.
		return s.reply(r.id, fxNoSuchFile, "No such file")
	}
	h, err := s.handleOf(r, r.handle)
	if h == nil {
		return err
	}
	s.forget(r.handle)
	if h.up == nil {
		return s.reply(r.id, fxOK, "Success")
	}
	p := pending{kind: answerAsIs}
	if !h.dir {
		p = s.startThrough(h, r)
	}
	if h.write {
		s.justClosed = h
	}
	err = s.send(h.up, r, withHandle(r, h, nil), p, nil)
	if !h.dir && !h.write {
		s.settle(h, "")
	}
	return err
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
			return s.refuseOp(r.id, fxOpUnsupported, Op{Class: policy.Read, Method: "fstatvfs", Paths: []string{"/"}}, noFileSystem)
		}
		return s.reply(r.id, fxFailure, "sftpgate: / is a directory")
	}
	if r.typ == fxpExtended && !h.up.supports(r.ext) {
		return s.reply(r.id, fxOpUnsupported, fmt.Sprintf("sftpgate: %s's sftp server does not support %s", h.alias, r.ext))
	}
	if r.typ == fxpWrite {
		h.end = max(h.end, r.offset+uint64(r.length))
	}
	p := pending{kind: answerAsIs}
	if !h.dir && (r.typ == fxpRead || r.typ == fxpWrite) {
		// Counted on the file's row: what it transferred.
		p = s.startThrough(h, r)
	}
	return s.send(h.up, r, withHandle(r, h, nil), p, nil)
}

// fsetstat: a size is a truncation, decided as destructive, except the one
// that ends the file where this handle's writes end: an upload in place
// (OpenSSH's scp writes over the file, then truncates it there), which
// leaves what an open with the truncate flag, a write, leaves. Modes and
// times on a handle opened for writing ride on its open too, while the
// rule that let the open through still does (Config.Ride); anything else
// is decided, as a write.
func (s *session) fsetstat(r *request) error {
	h, err := s.handleOf(r, r.handle)
	if h == nil {
		return err
	}
	if h.up == nil {
		return s.refuseOp(r.id, fxPermissionDenied, Op{Class: policy.Write, Method: "fsetstat", Paths: []string{"/"}, Detail: r.attrs.describe()}, errReadOnlyRoot.Error())
	}
	frame := withHandle(r, h, nil)
	op := Op{Alias: h.alias, Class: policy.Write, Method: "fsetstat", Paths: []string{h.shown}, Detail: r.attrs.describe()}
	if r.attrs.flags&attrSize != 0 {
		op.Class = policy.Destructive
	}
	rest := r.attrs
	rest.flags &^= attrSize
	endsWrite := r.attrs.flags&attrSize == 0 || r.attrs.size == h.end
	if h.write && endsWrite && rest.ridesOnWrite() && s.rides(h, op) {
		return s.rideOn(r, h, h.up, frame, "fsetstat ("+op.Detail+")")
	}
	return s.decideAndForward(r, op, frame, pending{kind: answerAsIs})
}

// rides reports whether op may ride on the write of handle w: the Rider
// says whether the rule that let w's open through still does.
func (s *session) rides(w *handle, op Op) bool {
	return s.cfg.Ride != nil && s.cfg.Ride(s.decideCtx, w.op, op)
}

// rideOn forwards r, undecided, on the decision of w's open (on up, or to
// w's alias if up is nil); its answer is noted on w's row.
func (s *session) rideOn(r *request, w *handle, up *upstream, frame []byte, note string) error {
	s.startRide(w)
	p := pending{kind: answerAsIs, ride: w, note: note}
	if up != nil {
		return s.send(up, r, frame, p, nil)
	}
	return s.forward(r, w.alias, frame, p, nil)
}

// stat and lstat: "/" and "/ALIAS" are answered by the gate.
func (s *session) stat(r *request) error {
	t, err := s.resolve(r.path, false)
	if err != nil {
		return s.refusePath(r, err)
	}
	if t.root || t.top {
		return s.agent.write(s.rootAttrs(r.id, t))
	}
	op := Op{Alias: t.alias, Class: policy.Read, Method: packetName(r.typ), Paths: []string{t.shown}}
	return s.decideAndForward(r, op, withPaths(r, t.path, r.path2), pending{kind: answerAsIs})
}

// setstat and lsetstat: a size is a truncation, decided as destructive;
// modes and times of the file of the write handle the agent has just
// closed ride on that write while its rule still lets it through (asyncssh's
// put with preserve, a chmod right after paramiko's put); anything else is
// a write.
func (s *session) setstat(r *request, method string) error {
	t, err := s.resolve(r.path, true)
	if err != nil {
		return s.refusePath(r, err)
	}
	frame := withPaths(r, t.path, r.path2)
	op := Op{Alias: t.alias, Class: policy.Write, Method: method, Paths: []string{t.shown}, Detail: r.attrs.describe()}
	if r.attrs.flags&attrSize != 0 {
		op.Class = policy.Destructive
	}
	if w := s.justClosed; w != nil && r.attrs.ridesOnWrite() && w.alias == t.alias && w.shown == t.shown && s.rides(w, op) {
		return s.rideOn(r, w, nil, frame, method+" ("+op.Detail+")")
	}
	return s.decideAndForward(r, op, frame, pending{kind: answerAsIs})
}

// change decides and forwards mkdir, rmdir and remove. A mkdir of "/" or
// of an alias's directory answers as a server does for a directory that
// exists (asyncssh's makedirs tries every component from "/" down, and
// goes on past one that exists).
func (s *session) change(r *request, class policy.Class, method, detail string) error {
	if method == "mkdir" && s.fixed == "" && checkPath(r.path) == nil {
		if t, err := s.resolve(r.path, false); err == nil && (t.root || t.top) {
			return s.reply(r.id, fxFailure, "sftpgate: "+virtualPath(location{Alias: t.alias, Path: t.path})+" already exists")
		}
	}
	t, err := s.resolve(r.path, true)
	if err != nil {
		return s.refusePath(r, err)
	}
	op := Op{Alias: t.alias, Class: class, Method: method, Paths: []string{t.shown}, Detail: detail}
	return s.decideAndForward(r, op, withPaths(r, t.path, r.path2), pending{kind: answerAsIs})
}

// realpath canonicalises p on its target and answers in the agent's view;
// "/" and "/ALIAS" are answered by the gate.
func (s *session) realpath(r *request, p string) error {
	t, err := s.resolve(p, false)
	if err != nil {
		return s.refusePath(r, err)
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
		return s.refusePath(r, err)
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
		return s.refusePath(r, err)
	}
	if t.root {
		return s.refuseOp(r.id, fxOpUnsupported, agentOp(r), noFileSystem)
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
		return s.refusePath(r, err)
	}
	dst, err := s.resolve(r.path2, true)
	if err != nil {
		return s.refusePath(r, err)
	}
	if src.alias != dst.alias {
		return s.refuseOp(r.id, fxFailure, agentOp(r), fmt.Sprintf("sftpgate: cannot %s across aliases (%s to %s); copy instead", method, src.alias, dst.alias))
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
		return s.refusePath(r, err)
	}
	content := r.path
	if s.fixed == "" {
		content, err = mapLinkTarget(link.alias, r.path)
	} else {
		err = checkPath(content)
	}
	if err != nil {
		return s.refuseOp(r.id, fxPermissionDenied, agentOp(r), err.Error())
	}
	op := Op{Alias: link.alias, Class: policy.Write, Method: "symlink", Paths: []string{content, link.shown}}
	if dev, ok := shellclass.SideEffectDevice(content); ok {
		// A link to it makes the next open of the link, a read, open it.
		op.Class, op.Detail = policy.Destructive, "links to "+dev+": "+shellclass.SideEffectDeviceWhy
	}
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

// homeDirectory: in the virtual root the agent's own home is the root.
func (s *session) homeDirectory(r *request) error {
	if s.fixed == "" {
		if r.path == "" {
			return s.agent.write(nameAnswer(r.id, "/"))
		}
		return s.reply(r.id, fxFailure, "sftpgate: the virtual root holds no user's home directory; try /ALIAS")
	}
	if err := checkPath(r.path); err != nil {
		return s.refuseOp(r.id, fxPermissionDenied, agentOp(r), err.Error())
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
