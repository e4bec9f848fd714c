package sftpgate

import (
	"context"
	"errors"
	"io"

	"github.com/pkg/sftp"
	"github.com/postern/postern/policy"
	"github.com/rs/zerolog"
)

// Op is one SFTP operation as the Decider sees it.
type Op struct {
	Alias  string       // the connection the operation goes to
	Class  policy.Class // read, write or destructive
	Method string       // the SFTP method: Get, Put, Open, List, Stat, Lstat, Readlink, Realpath, StatVFS, Setstat, Rename, PosixRename, Mkdir, Rmdir, Remove, Symlink, Link
	Paths  []string     // paths on the target (one, or two for rename and links: source then target)
}

// Decider decides op; nil lets it run. A refusal's Error() is sent to the
// agent as the status message of a permission-denied answer. It may block
// (an approval) and must honour ctx.
type Decider func(ctx context.Context, op Op) error

// Upstream is one SFTP session to a target.
type Upstream struct {
	Client *sftp.Client
	Close  func() error // ends the session and releases its channel
}

// Dialer opens an SFTP session to alias's target.
type Dialer func(ctx context.Context, alias string) (*Upstream, error)

// Config configures Serve.
type Config struct {
	// Aliases lists the agent's aliases: the directories of the virtual root.
	Aliases []string
	// Fixed, if set, serves that alias's own tree instead of the virtual
	// root, starting in the target user's home.
	Fixed  string
	Decide Decider
	Dial   Dialer
	Logger zerolog.Logger
}

// ErrRefused is matched by refusals built by this package.
var ErrRefused = errors.New("sftpgate: refused")

// Serve runs the SFTP server on rwc (the agent's session channel) until the
// agent ends the session or ctx ends. It returns nil on a clean end (the
// caller then sends exit-status 0), and closes every upstream it opened.
func Serve(ctx context.Context, rwc io.ReadWriteCloser, cfg Config) error {
	return errors.New("sftpgate: not implemented yet")
}
