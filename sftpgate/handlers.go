package sftpgate

import (
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pkg/sftp"
	"github.com/postern/postern/policy"
	"github.com/rs/zerolog"
)

// gate implements every pkg/sftp handler interface for one agent session.
// Each handler maps its paths (mapPath), asks the Decider, and only then
// relays the operation to the target with the alias's upstream client.
type gate struct {
	// ctx ends when the agent goes away or Serve's ctx ends, so that an
	// operation waiting for an approval stops waiting.
	ctx     context.Context
	fixed   string          // Config.Fixed
	start   string          // the start directory, in the agent's view
	aliases map[string]bool // the virtual root's directories
	names   []string        // the same, sorted
	decide  Decider
	ups     *upstreams
	log     zerolog.Logger
	stderr  io.Writer // Config.Stderr; nil for none
	// stderrMu serialises lines on stderr.
	stderrMu sync.Mutex
	started  time.Time // the virtual directories' modification time
}

var (
	_ sftp.FileReader           = (*gate)(nil)
	_ sftp.OpenFileWriter       = (*gate)(nil)
	_ sftp.PosixRenameFileCmder = (*gate)(nil)
	_ sftp.StatVFSFileCmder     = (*gate)(nil)
	_ sftp.LstatFileLister      = (*gate)(nil)
	_ sftp.RealPathFileLister   = (*gate)(nil)
	_ sftp.ReadlinkFileLister   = (*gate)(nil)
)

// requestContext is the context of one operation: it ends with the session
// or with the request. The request server gives a request made from a
// handle (fstat, fsetstat) or an extension (posix-rename, statvfs) no
// context of its own, so the session's is always the base.
func (g *gate) requestContext(r *sftp.Request) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(g.ctx)
	stop := context.AfterFunc(r.Context(), cancel)
	return ctx, func() { stop(); cancel() }
}

// locate maps p for an operation that only reads. A top directory that is
// not one of the agent's aliases does not exist.
func (g *gate) locate(p string) (location, error) {
	loc, err := mapPath(g.fixed, g.start, p)
	if err != nil {
		return location{}, refuse(err.Error())
	}
	if g.fixed == "" && loc.Alias != "" && !g.aliases[loc.Alias] {
		return location{}, notFound()
	}
	return loc, nil
}

// locateWritable maps p for an operation that changes what p names. In the
// virtual root, "/" and its alias directories are made up by the gate and
// cannot be created, removed, renamed or changed.
func (g *gate) locateWritable(p string) (location, error) {
	loc, err := mapPath(g.fixed, g.start, p)
	if err != nil {
		return location{}, refuse(err.Error())
	}
	if g.fixed == "" && (loc.Alias == "" || loc.Path == "/" || !g.aliases[loc.Alias]) {
		return location{}, refuse("sftpgate: the virtual root is read-only; work inside /ALIAS/")
	}
	return loc, nil
}

// allow asks the Decider about one operation. A refusal is answered with
// permission denied and the Decider's reason as the message.
func (g *gate) allow(ctx context.Context, alias string, class policy.Class, method string, paths ...string) error {
	op := Op{Alias: alias, Class: class, Method: method, Paths: paths}
	if err := g.decide(ctx, op); err != nil {
		g.log.Debug().Str("alias", alias).Str("class", string(class)).Str("method", method).
			Strs("paths", paths).Err(err).Msg("sftp operation refused")
		g.notice(fmt.Sprintf("sftp: %s %s on %s refused: %s", method, strings.Join(paths, " "), alias, err))
		return refuse(err.Error())
	}
	return nil
}

// notice writes one line on Config.Stderr. Its failure is ignored: the
// refusal itself still reaches the agent as the status of its request.
func (g *gate) notice(line string) {
	if g.stderr == nil {
		return
	}
	line = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, line)
	g.stderrMu.Lock()
	defer g.stderrMu.Unlock()
	_, _ = io.WriteString(g.stderr, line+"\n")
}

// client returns alias's upstream client, dialing it on first use. The
// dialer's error is logged, not sent: it may name hosts and users the agent
// is not meant to learn.
func (g *gate) client(ctx context.Context, alias string) (*sftp.Client, error) {
	c, err := g.ups.client(ctx, alias)
	if err != nil {
		g.log.Warn().Str("alias", alias).Err(err).Msg("sftp upstream unavailable")
		return nil, &statusError{code: sftp.ErrSSHFxNoConnection, msg: "sftpgate: cannot reach " + alias}
	}
	return c, nil
}

// Fileread opens a file for reading (method Get).
func (g *gate) Fileread(r *sftp.Request) (io.ReaderAt, error) {
	return g.open(r, "Get", policy.Read)
}

// Filewrite opens a file for writing, creating, truncating or appending
// (method Put).
func (g *gate) Filewrite(r *sftp.Request) (io.WriterAt, error) {
	return g.open(r, "Put", policy.Write)
}

// OpenFile opens a file for reading and writing at once (method Open).
func (g *gate) OpenFile(r *sftp.Request) (sftp.WriterAtReaderAt, error) {
	return g.open(r, "Open", policy.Write)
}

func (g *gate) open(r *sftp.Request, method string, class policy.Class) (*remoteFile, error) {
	ctx, cancel := g.requestContext(r)
	defer cancel()
	locate := g.locateWritable
	if class == policy.Read {
		locate = g.locate
	}
	loc, err := locate(r.Filepath)
	if err != nil {
		return nil, err
	}
	if loc.Alias == "" {
		return nil, failure("sftpgate: / is a directory")
	}
	if err := g.allow(ctx, loc.Alias, class, method, loc.Path); err != nil {
		return nil, err
	}
	c, err := g.client(ctx, loc.Alias)
	if err != nil {
		return nil, err
	}
	flags := openFlags(r.Pflags())
	f, err := c.OpenFile(loc.Path, flags)
	if err != nil {
		return nil, relayError(err)
	}
	return newRemoteFile(f, flags), nil
}

// Filecmd relays the commands that change the target: Setstat, Rename,
// Rmdir, Mkdir, Link, Symlink, Remove.
func (g *gate) Filecmd(r *sftp.Request) error {
	ctx, cancel := g.requestContext(r)
	defer cancel()
	switch r.Method {
	case "Setstat":
		return g.setstat(ctx, r)
	case "Rename":
		return g.rename(ctx, r, "Rename")
	case "Mkdir":
		return g.onePath(ctx, r, policy.Write, func(c *sftp.Client, p string) error { return c.Mkdir(p) })
	case "Rmdir":
		return g.onePath(ctx, r, policy.Destructive, func(c *sftp.Client, p string) error { return c.RemoveDirectory(p) })
	case "Remove":
		return g.onePath(ctx, r, policy.Destructive, remove)
	case "Symlink":
		return g.symlink(ctx, r)
	case "Link":
		return g.link(ctx, r)
	}
	return &statusError{code: sftp.ErrSSHFxOpUnsupported, msg: "sftpgate: unsupported operation " + r.Method}
}

// PosixRename relays posix-rename@openssh.com, which replaces an existing
// destination where a plain rename fails.
func (g *gate) PosixRename(r *sftp.Request) error {
	ctx, cancel := g.requestContext(r)
	defer cancel()
	return g.rename(ctx, r, "PosixRename")
}

// StatVFS relays statvfs@openssh.com (sftp's df).
func (g *gate) StatVFS(r *sftp.Request) (*sftp.StatVFS, error) {
	ctx, cancel := g.requestContext(r)
	defer cancel()
	loc, err := g.locate(r.Filepath)
	if err != nil {
		return nil, err
	}
	if loc.Alias == "" {
		return nil, &statusError{code: sftp.ErrSSHFxOpUnsupported, msg: "sftpgate: the virtual root has no file system; try /ALIAS"}
	}
	if err := g.allow(ctx, loc.Alias, policy.Read, "StatVFS", loc.Path); err != nil {
		return nil, err
	}
	c, err := g.client(ctx, loc.Alias)
	if err != nil {
		return nil, err
	}
	st, err := c.StatVFS(loc.Path)
	if err != nil {
		return nil, relayError(err)
	}
	return st, nil
}

// onePath runs a command on one path that changes it.
func (g *gate) onePath(ctx context.Context, r *sftp.Request, class policy.Class, run func(*sftp.Client, string) error) error {
	loc, err := g.locateWritable(r.Filepath)
	if err != nil {
		return err
	}
	if err := g.allow(ctx, loc.Alias, class, r.Method, loc.Path); err != nil {
		return err
	}
	c, err := g.client(ctx, loc.Alias)
	if err != nil {
		return err
	}
	return relayError(run(c, loc.Path))
}

// remove removes a file. The upstream client's Remove falls back to rmdir
// when removing a file fails; SSH_FXP_REMOVE on OpenSSH never removes a
// directory, so the gate checks first and keeps that meaning.
func remove(c *sftp.Client, p string) error {
	fi, err := c.Lstat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return failure("sftpgate: " + p + " is a directory; use rmdir")
	}
	return c.Remove(p)
}

func (g *gate) setstat(ctx context.Context, r *sftp.Request) error {
	loc, err := g.locateWritable(r.Filepath)
	if err != nil {
		return err
	}
	if err := g.allow(ctx, loc.Alias, policy.Write, "Setstat", loc.Path); err != nil {
		return err
	}
	c, err := g.client(ctx, loc.Alias)
	if err != nil {
		return err
	}
	// The upstream client sends one attribute group per setstat. They go in
	// the order OpenSSH's server applies them: size, mode, owner, times.
	flags, attrs := r.AttrFlags(), r.Attributes()
	if flags.Size {
		if err := c.Truncate(loc.Path, int64(attrs.Size)); err != nil {
			return relayError(err)
		}
	}
	if flags.Permissions {
		if err := c.Chmod(loc.Path, attrs.FileMode()&(os.ModePerm|os.ModeSetuid|os.ModeSetgid|os.ModeSticky)); err != nil {
			return relayError(err)
		}
	}
	if flags.UidGid {
		if err := c.Chown(loc.Path, int(attrs.UID), int(attrs.GID)); err != nil {
			return relayError(err)
		}
	}
	if flags.Acmodtime {
		if err := c.Chtimes(loc.Path, time.Unix(int64(attrs.Atime), 0), time.Unix(int64(attrs.Mtime), 0)); err != nil {
			return relayError(err)
		}
	}
	return nil
}

// twoPaths maps the source and destination of a rename or hard link, which
// must lie on one target.
func (g *gate) twoPaths(from, to, what string) (location, location, error) {
	src, err := g.locateWritable(from)
	if err != nil {
		return location{}, location{}, err
	}
	dst, err := g.locateWritable(to)
	if err != nil {
		return location{}, location{}, err
	}
	if src.Alias != dst.Alias {
		return location{}, location{}, failure("sftpgate: cannot " + what + " across aliases (" + src.Alias + " to " + dst.Alias + "); copy instead")
	}
	return src, dst, nil
}

func (g *gate) rename(ctx context.Context, r *sftp.Request, method string) error {
	src, dst, err := g.twoPaths(r.Filepath, r.Target, "rename")
	if err != nil {
		return err
	}
	if err := g.allow(ctx, src.Alias, policy.Write, method, src.Path, dst.Path); err != nil {
		return err
	}
	c, err := g.client(ctx, src.Alias)
	if err != nil {
		return err
	}
	if method == "PosixRename" {
		return relayError(c.PosixRename(src.Path, dst.Path))
	}
	return relayError(c.Rename(src.Path, dst.Path))
}

func (g *gate) link(ctx context.Context, r *sftp.Request) error {
	src, dst, err := g.twoPaths(r.Filepath, r.Target, "link")
	if err != nil {
		return err
	}
	if err := g.allow(ctx, src.Alias, policy.Write, "Link", src.Path, dst.Path); err != nil {
		return err
	}
	c, err := g.client(ctx, src.Alias)
	if err != nil {
		return err
	}
	return relayError(c.Link(src.Path, dst.Path))
}

// symlink relays SSH_FXP_SYMLINK. OpenSSH sends the link's target first and
// the link's path second (the reverse of the SFTP draft, kept for
// compatibility; see OpenSSH's PROTOCOL §4.1), and pkg/sftp follows it on
// both sides: the request server puts the first string, unclean, in
// Filepath and the second, cleaned, in Target; the client's
// Symlink(target, link) sends them in that order again. The Decider sees
// Paths {link target as stored, link path}, like `ln -s TARGET LINK`.
func (g *gate) symlink(ctx context.Context, r *sftp.Request) error {
	link, err := g.locateWritable(r.Target)
	if err != nil {
		return err
	}
	target, err := mapLinkTarget(g.fixed, link.Alias, r.Filepath)
	if err != nil {
		return refuse(err.Error())
	}
	if err := g.allow(ctx, link.Alias, policy.Write, "Symlink", target, link.Path); err != nil {
		return err
	}
	c, err := g.client(ctx, link.Alias)
	if err != nil {
		return err
	}
	return relayError(c.Symlink(target, link.Path))
}

// Filelist serves List and Stat (Readlink and Lstat have their own
// methods). "/" and "/ALIAS" in the virtual root are answered by the gate
// without a target: listing the root opens no upstream session.
func (g *gate) Filelist(r *sftp.Request) (sftp.ListerAt, error) {
	ctx, cancel := g.requestContext(r)
	defer cancel()
	switch r.Method {
	case "List":
		return g.list(ctx, r)
	case "Stat":
		return g.stat(ctx, r, "Stat")
	}
	return nil, &statusError{code: sftp.ErrSSHFxOpUnsupported, msg: "sftpgate: unsupported operation " + r.Method}
}

// Lstat stats a path without following a final symbolic link.
func (g *gate) Lstat(r *sftp.Request) (sftp.ListerAt, error) {
	ctx, cancel := g.requestContext(r)
	defer cancel()
	return g.stat(ctx, r, "Lstat")
}

func (g *gate) list(ctx context.Context, r *sftp.Request) (sftp.ListerAt, error) {
	loc, err := g.locate(r.Filepath)
	if err != nil {
		return nil, err
	}
	if loc.Alias == "" {
		l := make(listerAt, 0, len(g.names))
		for _, name := range g.names {
			l = append(l, dirInfo{name: name, perm: 0o755, mtime: g.started})
		}
		return l, nil
	}
	if err := g.allow(ctx, loc.Alias, policy.Read, "List", loc.Path); err != nil {
		return nil, err
	}
	c, err := g.client(ctx, loc.Alias)
	if err != nil {
		return nil, err
	}
	// ReadDir reads the whole directory before answering; the request
	// server then hands it out in batches of sftp.MaxFilelist.
	fis, err := c.ReadDirContext(ctx, loc.Path)
	if err != nil {
		return nil, relayError(err)
	}
	l := make(listerAt, len(fis))
	for i, fi := range fis {
		l[i] = relayInfo(fi)
	}
	return l, nil
}

func (g *gate) stat(ctx context.Context, r *sftp.Request, method string) (sftp.ListerAt, error) {
	loc, err := g.locate(r.Filepath)
	if err != nil {
		return nil, err
	}
	switch {
	case loc.Alias == "":
		return listerAt{dirInfo{name: "/", perm: 0o555, mtime: g.started}}, nil
	case loc.isAliasDir(g.fixed):
		return listerAt{dirInfo{name: loc.Alias, perm: 0o755, mtime: g.started}}, nil
	}
	if err := g.allow(ctx, loc.Alias, policy.Read, method, loc.Path); err != nil {
		return nil, err
	}
	c, err := g.client(ctx, loc.Alias)
	if err != nil {
		return nil, err
	}
	var fi os.FileInfo
	if method == "Lstat" {
		fi, err = c.Lstat(loc.Path)
	} else {
		fi, err = c.Stat(loc.Path)
	}
	if err != nil {
		return nil, relayError(err)
	}
	return listerAt{relayInfo(fi)}, nil
}

// Readlink returns a symbolic link's content; an absolute one is shown in
// the agent's view (under /ALIAS in the virtual root).
func (g *gate) Readlink(p string) (string, error) {
	ctx := g.ctx
	loc, err := g.locate(p)
	if err != nil {
		return "", err
	}
	if loc.Alias == "" || loc.isAliasDir(g.fixed) {
		return "", failure("sftpgate: " + virtualPath(g.fixed, loc) + " is not a symbolic link")
	}
	if err := g.allow(ctx, loc.Alias, policy.Read, "Readlink", loc.Path); err != nil {
		return "", err
	}
	c, err := g.client(ctx, loc.Alias)
	if err != nil {
		return "", err
	}
	content, err := c.ReadLink(loc.Path)
	if err != nil {
		return "", relayError(err)
	}
	return agentLinkTarget(g.fixed, loc.Alias, content), nil
}

// RealPath canonicalizes p as the target does (resolving symbolic links),
// in the agent's view. The request server hands p over as the client sent
// it, so a relative path is resolved against the start directory here.
// "/" and "/ALIAS" in the virtual root are answered without a target.
func (g *gate) RealPath(p string) (string, error) {
	ctx := g.ctx
	loc, err := g.locate(p)
	if err != nil {
		return "", err
	}
	if loc.Alias == "" || loc.isAliasDir(g.fixed) {
		return virtualPath(g.fixed, loc), nil
	}
	if err := g.allow(ctx, loc.Alias, policy.Read, "Realpath", loc.Path); err != nil {
		return "", err
	}
	c, err := g.client(ctx, loc.Alias)
	if err != nil {
		return "", err
	}
	canon, err := c.RealPath(loc.Path)
	if err != nil {
		return "", relayError(err)
	}
	if !path.IsAbs(canon) || checkPath(canon) != nil {
		return "", failure("sftpgate: the target answered realpath with an unusable path")
	}
	return virtualPath(g.fixed, location{Alias: loc.Alias, Path: path.Clean(canon)}), nil
}

// sortedAliases returns the usable aliases sorted and as a set. A name that
// cannot be one directory of the root (empty, ".", "..", or holding "/" or a
// control byte) is left out rather than shown broken.
func sortedAliases(aliases []string) ([]string, map[string]bool) {
	set := make(map[string]bool, len(aliases))
	var names []string
	for _, a := range aliases {
		if a == "" || a == "." || a == ".." || path.Base(a) != a || checkPath(a) != nil || set[a] {
			continue
		}
		set[a] = true
		names = append(names, a)
	}
	slices.Sort(names)
	return names, set
}
