package sftpgate

import (
	"fmt"
	"strings"

	"github.com/postern/postern/policy"
)

// The extensions postern understands, with the version string OpenSSH's
// sftp-server advertises for each (PROTOCOL §4.3–4.12). A target's
// extension with another version, or any other name, is not advertised to
// the agent, and a request for it is refused: postern forwards only what it
// can parse and decide.
const (
	extPosixRename = "posix-rename@openssh.com"
	extStatVFS     = "statvfs@openssh.com"
	extFstatVFS    = "fstatvfs@openssh.com"
	extHardlink    = "hardlink@openssh.com"
	extFsync       = "fsync@openssh.com"
	extLsetstat    = "lsetstat@openssh.com"
	extLimits      = "limits@openssh.com"
	extExpandPath  = "expand-path@openssh.com"
	extCopyData    = "copy-data"
	extHomeDir     = "home-directory"
	extUsersGroups = "users-groups-by-id@openssh.com"
)

// extension is an extension's name and version as a version packet
// advertises it.
type extension struct{ name, version string }

// knownExtensions are the extensions postern serves with their versions, in
// the order OpenSSH's sftp-server advertises them.
var knownExtensions = []extension{
	{extPosixRename, "1"},
	{extStatVFS, "2"},
	{extFstatVFS, "2"},
	{extHardlink, "1"},
	{extFsync, "1"},
	{extLsetstat, "1"},
	{extLimits, "1"},
	{extExpandPath, "1"},
	{extCopyData, "1"},
	{extHomeDir, "1"},
	{extUsersGroups, "1"},
}

// extensionVersion returns the version postern serves of name, or "".
func extensionVersion(name string) string {
	for _, e := range knownExtensions {
		if e.name == name {
			return e.version
		}
	}
	return ""
}

// request is one packet from the agent, decoded as far as the gate needs
// to decide and route it. frame is the packet as it came (length field
// included); the spans point into it, so that the virtual root can replace
// a path or a handle and forward every other byte untouched.
type request struct {
	frame []byte
	typ   byte
	id    uint32
	ext   string // the name of an SSH_FXP_EXTENDED request

	// path and path2 are the request's paths: the one path, or the source
	// and destination of a rename or hard link. For SSH_FXP_SYMLINK, path
	// is the link's target and path2 the link (OpenSSH's order, see
	// docs/sftp.md). home-directory's user name is path too.
	path, path2     string
	pathAt, path2At span
	// handle and handle2: the handle, or copy-data's source and
	// destination.
	handle, handle2     string
	handleAt, handle2At span

	pflags uint32
	attrs  attrs
	// offset and length of a read or write.
	offset uint64
	length uint32
	// copy-data's offsets and length.
	readOff, readLen, writeOff uint64
}

// name is the request's name for messages: the packet type or extension.
func (r *request) name() string {
	if r.typ == fxpExtended {
		return r.ext
	}
	return packetName(r.typ)
}

// packetName names a request packet type.
func packetName(typ byte) string {
	names := map[byte]string{
		fxpInit: "init", fxpOpen: "open", fxpClose: "close", fxpRead: "read", fxpWrite: "write",
		fxpLstat: "lstat", fxpFstat: "fstat", fxpSetstat: "setstat", fxpFsetstat: "fsetstat",
		fxpOpendir: "opendir", fxpReaddir: "readdir", fxpRemove: "remove", fxpMkdir: "mkdir",
		fxpRmdir: "rmdir", fxpRealpath: "realpath", fxpStat: "stat", fxpRename: "rename",
		fxpReadlink: "readlink", fxpSymlink: "symlink", fxpExtended: "extended",
	}
	if n, ok := names[typ]; ok {
		return n
	}
	return fmt.Sprintf("packet type %d", typ)
}

// errUnknownRequest is a packet type or extension postern does not serve;
// it is answered SSH_FX_OP_UNSUPPORTED.
type errUnknownRequest struct{ what string }

func (e errUnknownRequest) Error() string { return "sftpgate: unsupported request " + e.what }

// parseRequest decodes a frame from the agent (not SSH_FXP_INIT). A frame
// too short to hold an id returns ok false: it cannot be answered. Any
// other malformed request returns its id and an error to answer with
// SSH_FX_BAD_MESSAGE; a request for an unknown type or extension returns
// errUnknownRequest.
func parseRequest(frame []byte) (r request, ok bool, err error) {
	r.frame = frame
	if len(frame) < 9 {
		return r, false, fmt.Errorf("sftpgate: packet of %d bytes has no request id", len(frame)-4)
	}
	r.typ = frame[4]
	d := &decoder{b: frame, off: 5}
	r.id = d.u32()
	path := func() { r.path, r.pathAt = d.str() }
	path2 := func() { r.path2, r.path2At = d.str() }
	handle := func() { r.handle, r.handleAt = d.str() }
	switch r.typ {
	case fxpOpen:
		path()
		r.pflags = d.u32()
		r.attrs = d.attrs()
	case fxpClose, fxpReaddir, fxpFstat:
		handle()
	case fxpRead:
		handle()
		r.offset = d.u64()
		r.length = d.u32()
	case fxpWrite:
		handle()
		r.offset = d.u64()
		// The data is checked for length, not copied.
		if r.length = d.u32(); d.err == nil && uint64(r.length) > uint64(d.rest()) {
			d.fail(errShort)
		}
	case fxpLstat, fxpStat, fxpOpendir, fxpRemove, fxpRmdir, fxpRealpath, fxpReadlink:
		path()
	case fxpSetstat, fxpMkdir:
		path()
		r.attrs = d.attrs()
	case fxpFsetstat:
		handle()
		r.attrs = d.attrs()
	case fxpRename, fxpSymlink:
		path()
		path2()
	case fxpExtended:
		r.ext, _ = d.str()
		if d.err != nil {
			break
		}
		switch r.ext {
		case extPosixRename, extHardlink:
			path()
			path2()
		case extStatVFS, extExpandPath, extHomeDir:
			path()
		case extFstatVFS, extFsync:
			handle()
		case extLsetstat:
			path()
			r.attrs = d.attrs()
		case extLimits:
		case extCopyData:
			handle()
			r.readOff = d.u64()
			r.readLen = d.u64()
			r.handle2, r.handle2At = d.str()
			r.writeOff = d.u64()
		case extUsersGroups:
			d.str()
			d.str()
		default:
			return r, true, errUnknownRequest{fmt.Sprintf("%q", printable(r.ext))}
		}
	default:
		return r, true, errUnknownRequest{packetName(r.typ)}
	}
	if d.err != nil {
		return r, true, fmt.Errorf("sftpgate: malformed %s request: %w", r.name(), d.err)
	}
	return r, true, nil
}

// printable replaces control bytes, so that a hostile name cannot forge
// log lines or drive a terminal, and cuts it at 100 bytes.
func printable(s string) string {
	if len(s) > 100 {
		s = s[:100]
	}
	b := []byte(s)
	for i, c := range b {
		if c < 0x20 || c == 0x7f {
			b[i] = '?'
		}
	}
	return string(b)
}

// opName names r's packet type for the operations metric: the SFTP
// packet type in lower case without SSH_FXP_, or an extended request's
// extension name. The metrics package counts any name outside its fixed
// set (an extension postern does not serve) as other, so an agent cannot
// make up label values.
func opName(r *request) string {
	switch r.typ {
	case fxpOpen:
		return "open"
	case fxpClose:
		return "close"
	case fxpRead:
		return "read"
	case fxpWrite:
		return "write"
	case fxpLstat:
		return "lstat"
	case fxpFstat:
		return "fstat"
	case fxpSetstat:
		return "setstat"
	case fxpFsetstat:
		return "fsetstat"
	case fxpOpendir:
		return "opendir"
	case fxpReaddir:
		return "readdir"
	case fxpRemove:
		return "remove"
	case fxpMkdir:
		return "mkdir"
	case fxpRmdir:
		return "rmdir"
	case fxpRealpath:
		return "realpath"
	case fxpStat:
		return "stat"
	case fxpRename:
		return "rename"
	case fxpReadlink:
		return "readlink"
	case fxpSymlink:
		return "symlink"
	case fxpExtended:
		if extensionVersion(r.ext) != "" {
			return r.ext
		}
	}
	return "other"
}

// agentOp is r as the agent sent it, for the record of a refusal the gate
// makes itself: its class and method as a decision would name them, and
// its paths as sent (asSent).
func agentOp(r *request) Op {
	op := Op{Class: policy.Write, Method: opName(r)}
	paths := []string{r.path}
	switch r.typ {
	case fxpOpen:
		op.Method, op.Class = "get", policy.Read
		if r.pflags&(fxfWrite|fxfAppend|fxfCreat|fxfTrunc|fxfExcl) != 0 {
			op.Method, op.Class, op.Detail = "put", policy.Write, openFlagsText(r.pflags)
		}
	case fxpOpendir:
		op.Method, op.Class = "list", policy.Read
	case fxpStat, fxpLstat, fxpRealpath, fxpReadlink:
		op.Class = policy.Read
	case fxpRemove, fxpRmdir:
		op.Class = policy.Destructive
	case fxpSetstat, fxpMkdir:
		op.Detail = r.attrs.describe()
		if r.attrs.flags&attrSize != 0 {
			op.Class = policy.Destructive
		}
	case fxpRename, fxpSymlink:
		paths = append(paths, r.path2)
	case fxpExtended:
		switch r.ext {
		case extPosixRename, extHardlink:
			paths = append(paths, r.path2)
		case extLsetstat:
			op.Detail = r.attrs.describe()
			if r.attrs.flags&attrSize != 0 {
				op.Class = policy.Destructive
			}
		case extStatVFS, extExpandPath, extHomeDir, extLimits, extUsersGroups:
			op.Class = policy.Read
		}
		op.Method = strings.TrimSuffix(r.ext, "@openssh.com")
	}
	for _, p := range paths {
		op.Paths = append(op.Paths, asSent(p))
	}
	return op
}

// maxShownPath bounds a path as a refusal's record shows it: a path the
// gate refused for its length is shown cut.
const maxShownPath = 512

// asSent is a path the agent sent as a record may show it: control bytes
// replaced, so that it cannot forge lines, and cut at maxShownPath bytes.
func asSent(p string) string {
	cut := len(p) > maxShownPath
	if cut {
		p = p[:maxShownPath]
	}
	p = printableLine(p)
	if cut {
		p += "..."
	}
	return p
}
