package sftpgate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"sync/atomic"
	"time"

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
	// Stderr, if set, also receives each refusal's message as one line.
	// OpenSSH's sftp and scp print only a status code's generic text
	// ("Permission denied"), never the server's message, so without it an
	// agent using them cannot learn why. The bastion passes the session's
	// stderr. None if nil.
	Stderr io.Writer
}

// ErrRefused is matched by refusals built by this package.
var ErrRefused = errors.New("sftpgate: refused")

// Serve runs the SFTP server on rwc (the agent's session channel) until the
// agent ends the session or ctx ends. It returns nil on a clean end (the
// caller then sends exit-status 0), and closes every upstream it opened.
//
// Serve leaves rwc open when the agent ends the session, so that the caller
// can still send exit-status on it; it closes rwc only to stop when ctx
// ends. In the fixed view it dials the target before answering anything, to
// learn the home directory relative paths start from; a failed dial is
// returned and nothing is served.
func Serve(ctx context.Context, rwc io.ReadWriteCloser, cfg Config) error {
	if cfg.Decide == nil || cfg.Dial == nil {
		return errors.New("sftpgate: Config needs Decide and Dial")
	}
	// sessCtx ends when the agent stops sending (its end of the channel
	// reads EOF or fails) as well as with ctx: the request server waits for
	// its workers before Serve returns, and a worker may be waiting for an
	// approval that nobody will read any more.
	sessCtx, cancel := context.WithCancel(ctx)
	defer cancel()

	ups := newUpstreams(cfg.Dial)
	defer ups.closeAll()

	names, set := sortedAliases(cfg.Aliases)
	g := &gate{
		ctx:     sessCtx,
		fixed:   cfg.Fixed,
		start:   "/",
		aliases: set,
		names:   names,
		decide:  cfg.Decide,
		ups:     ups,
		log:     cfg.Logger,
		stderr:  cfg.Stderr,
		started: time.Now(),
	}
	if cfg.Fixed != "" {
		home, err := homeDir(sessCtx, ups, cfg.Fixed)
		if err != nil {
			return err
		}
		g.start = home
	}

	agent := &agentConn{rwc: rwc, gone: cancel}
	rs := sftp.NewRequestServer(agent,
		sftp.Handlers{FileGet: g, FilePut: g, FileCmd: g, FileList: g},
		sftp.WithRSAllocator(),
		sftp.WithStartDirectory(g.start),
	)
	// When ctx ends, closing the agent's channel ends the request loop and
	// closing the upstreams fails the requests still waiting on a target, so
	// that the workers, and Serve, return.
	stop := context.AfterFunc(ctx, func() {
		rs.Close()
		ups.closeAll()
	})
	defer stop()

	err := rs.Serve()
	if ctx.Err() != nil {
		return fmt.Errorf("sftpgate: %w", ctx.Err())
	}
	// The request server reports a clean end with handles still open as
	// io.ErrUnexpectedEOF. OpenSSH's sftp-server exits 0 then (it closes
	// them), and so does the gate: the agent ended the session.
	if errors.Is(err, io.EOF) || (errors.Is(err, io.ErrUnexpectedEOF) && agent.eof.Load()) {
		return nil
	}
	return fmt.Errorf("sftpgate: serve: %w", err)
}

// homeDir dials alias and asks the target for its user's home directory: the
// upstream session starts there, and `scp f ALIAS@bastion:` must land in it.
func homeDir(ctx context.Context, ups *upstreams, alias string) (string, error) {
	c, err := ups.client(ctx, alias)
	if err != nil {
		return "", err
	}
	home, err := c.Getwd()
	if err != nil {
		return "", fmt.Errorf("sftpgate: home directory on %s: %w", alias, err)
	}
	if !path.IsAbs(home) || checkPath(home) != nil {
		return "/", nil
	}
	return path.Clean(home), nil
}

// agentConn is the agent's channel as the request server sees it. A failed
// read (EOF included) means the agent will send nothing more, so it cancels
// the session's context at once, rather than when the request server has
// finished its workers.
type agentConn struct {
	rwc  io.ReadWriteCloser
	gone context.CancelFunc
	eof  atomic.Bool // the agent ended its side: a read returned io.EOF
}

func (c *agentConn) Read(p []byte) (int, error) {
	n, err := c.rwc.Read(p)
	if err != nil {
		c.eof.Store(err == io.EOF)
		c.gone()
	}
	return n, err
}

func (c *agentConn) Write(p []byte) (int, error) { return c.rwc.Write(p) }
func (c *agentConn) Close() error                { return c.rwc.Close() }
