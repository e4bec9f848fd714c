// Package demotarget is the demo target of `postern demo`: a small SSH
// server, in process, that stands in for a real server behind the bastion so
// that the demo needs nothing installed beyond Go. It is not a general SSH
// server and must not be used as one: it listens on loopback only, accepts a
// single public key, and runs each exec command with /bin/sh -c inside one
// scratch directory (the working directory and HOME of every command), as
// the user running postern. The sftp subsystem is served by pkg/sftp's
// server on the real file system, starting in the scratch directory, with
// the same reach as a command. Interactive shells and other subsystems are
// refused.
//
// It speaks enough of the session protocol for the bastion's relay to be
// shown honestly: stdin, stdout and stderr, EOF both ways, exit-status or
// exit-signal then EOF then close (the order OpenSSH uses), and signals.
package demotarget

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// ServerVersion is the SSH identification string, so that anyone who finds
// the port open (or reads the bastion's logs) sees that it is the demo
// target and not a real sshd.
const ServerVersion = "SSH-2.0-postern_demo_target"

// Banner is shown to clients before authentication, for the same reason.
const Banner = "postern demo target: commands run with /bin/sh in a scratch directory; not a real server\r\n"

// Defaults for Config fields left zero.
const (
	// DefaultHandshakeTimeout bounds a connection from accept to
	// authenticated, so that a client that stalls cannot hold a goroutine.
	DefaultHandshakeTimeout = 30 * time.Second
	// DefaultOutputDrain is how long a command's output is still read after
	// the command exits, for background children that keep stdout open;
	// then the pipes are closed and exit-status is sent.
	DefaultOutputDrain = 2 * time.Second
	// DefaultShell runs every command as `DefaultShell -c COMMAND`.
	DefaultShell = "/bin/sh"
)

// Config configures Start. Dir and AuthorizedKey are required.
type Config struct {
	Dir           string        // scratch directory, created (0700) if missing; cwd and HOME of commands
	AuthorizedKey ssh.PublicKey // the one key allowed in, under any user name
	HostKey       ssh.Signer    // a fresh ed25519 key if nil
	Addr          string        // "127.0.0.1:0" if empty; must be a loopback address
	Shell         string        // DefaultShell if empty
	Logger        zerolog.Logger

	HandshakeTimeout time.Duration // DefaultHandshakeTimeout if zero
	OutputDrain      time.Duration // DefaultOutputDrain if zero

	// Confine runs every command in bubblewrap, where only Dir is
	// writable, the system's programs are read-only and the rest of the
	// host's files (home directories, /etc/shadow) are not there. When
	// bwrap is missing or cannot run, Start logs a warning and commands
	// run as the user running postern, with that user's rights
	// (Target.Confined says which). SFTP is not confined either way.
	Confine bool
}

// Target is a running demo target. Close stops it and every goroutine it
// started, killing commands still running.
type Target struct {
	cfg      Config
	dir      string // absolute Dir
	confined confinement
	ln       net.Listener
	sshCfg   *ssh.ServerConfig
	log      zerolog.Logger

	// wg counts every goroutine the target starts; Close waits for it.
	wg sync.WaitGroup

	// mu protects closed, conns and procs. It is never held while doing
	// I/O on a connection or waiting for a process.
	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]struct{}
	procs  map[*process]struct{}
}

// Start listens and serves in the background until Close.
func Start(cfg Config) (*Target, error) {
	if cfg.Dir == "" {
		return nil, errors.New("demotarget: no scratch directory")
	}
	if cfg.AuthorizedKey == nil {
		return nil, errors.New("demotarget: no authorized key")
	}
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	if cfg.Shell == "" {
		cfg.Shell = DefaultShell
	}
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if cfg.OutputDrain <= 0 {
		cfg.OutputDrain = DefaultOutputDrain
	}
	if err := checkLoopback(cfg.Addr); err != nil {
		return nil, err
	}
	if cfg.HostKey == nil {
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, fmt.Errorf("demotarget: host key: %w", err)
		}
		if cfg.HostKey, err = ssh.NewSignerFromKey(priv); err != nil {
			return nil, fmt.Errorf("demotarget: host key: %w", err)
		}
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("demotarget: scratch directory: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("demotarget: scratch directory: %w", err)
	}

	t := &Target{
		cfg:   cfg,
		dir:   dir,
		log:   cfg.Logger.With().Str("component", "demotarget").Logger(),
		conns: make(map[net.Conn]struct{}),
		procs: make(map[*process]struct{}),
	}
	if cfg.Confine {
		t.confined = confine(dir, cfg.Shell)
		if t.confined.bwrap == "" {
			t.log.Warn().Str("reason", t.confined.reason).Str("dir", dir).
				Msg("demo target: commands are NOT confined: they run as you, with your rights; the scratch directory is only their working directory")
		}
	} else {
		t.confined.reason = "not asked to confine commands"
	}
	authorized := cfg.AuthorizedKey.Marshal()
	t.sshCfg = &ssh.ServerConfig{
		ServerVersion: ServerVersion,
		// The key is compared here and nothing is remembered: the library
		// calls this only for keys whose signature it then verifies before
		// letting the client in, and there is a single identity anyway.
		PublicKeyCallback: func(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			if bytes.Equal(key.Marshal(), authorized) {
				return &ssh.Permissions{}, nil
			}
			return nil, errors.New("demotarget: key not authorized")
		},
		BannerCallback: func(ssh.ConnMetadata) string { return Banner },
	}
	t.sshCfg.AddHostKey(cfg.HostKey)

	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("demotarget: listen: %w", err)
	}
	t.ln = ln
	t.wg.Add(1)
	go t.acceptLoop()
	t.log.Info().Str("addr", ln.Addr().String()).Str("dir", dir).Msg("demo target listening")
	return t, nil
}

// checkLoopback refuses any address that is not a loopback IP: the demo
// target runs commands for whoever holds one key, and must not be reachable
// from the network.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("demotarget: address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("demotarget: address %q is not a loopback IP; the demo target listens on loopback only", addr)
	}
	return nil
}

// Addr is the address the target listens on ("127.0.0.1:PORT").
func (t *Target) Addr() string { return t.ln.Addr().String() }

// Host is the IP the target listens on.
func (t *Target) Host() string { return t.ln.Addr().(*net.TCPAddr).IP.String() }

// Port is the port the target listens on.
func (t *Target) Port() int { return t.ln.Addr().(*net.TCPAddr).Port }

// Dir is the absolute scratch directory.
func (t *Target) Dir() string { return t.dir }

// HostKey is the target's public host key.
func (t *Target) HostKey() ssh.PublicKey { return t.cfg.HostKey.PublicKey() }

// KnownHostsLine pins the host key for the target's address, in the form
// known_hosts files and the store use ("[127.0.0.1]:PORT ssh-ed25519 ...").
func (t *Target) KnownHostsLine() string {
	return knownhosts.Line([]string{knownhosts.Normalize(net.JoinHostPort(t.Host(), strconv.Itoa(t.Port())))}, t.HostKey())
}

// Close stops listening, closes every connection, kills running commands
// (their whole process group) and waits for every goroutine to end.
func (t *Target) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	err := t.ln.Close()
	for c := range t.conns {
		c.Close()
	}
	for p := range t.procs {
		p.kill()
	}
	t.mu.Unlock()
	t.wg.Wait()
	t.log.Info().Msg("demo target stopped")
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("demotarget: close: %w", err)
	}
	return nil
}

func (t *Target) acceptLoop() {
	defer t.wg.Done()
	for {
		c, err := t.ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				t.log.Error().Err(err).Msg("accept")
			}
			return
		}
		if !t.track(c) {
			c.Close()
			return
		}
		t.wg.Add(1)
		go t.serveConn(c)
	}
}

// track adds c to the open connections, or reports false if the target is
// closing.
func (t *Target) track(c net.Conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.conns[c] = struct{}{}
	return true
}

func (t *Target) untrack(c net.Conn) {
	t.mu.Lock()
	delete(t.conns, c)
	t.mu.Unlock()
}

// serveConn runs one client connection: handshake under a deadline, then one
// goroutine per session channel.
func (t *Target) serveConn(c net.Conn) {
	defer t.wg.Done()
	defer t.untrack(c)
	defer c.Close()
	c.SetDeadline(time.Now().Add(t.cfg.HandshakeTimeout))
	sc, chans, reqs, err := ssh.NewServerConn(c, t.sshCfg)
	if err != nil {
		t.log.Debug().Err(err).Str("remote", c.RemoteAddr().String()).Msg("handshake failed")
		return
	}
	c.SetDeadline(time.Time{})
	defer sc.Close()
	log := t.log.With().Str("remote", c.RemoteAddr().String()).Str("user", sc.User()).Logger()
	log.Debug().Msg("connected")

	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		// Global requests (keepalives, forwarding) get a "no"; any answer
		// to a keepalive tells the client that the target is alive.
		ssh.DiscardRequests(reqs)
	}()
	for nc := range chans {
		if nc.ChannelType() != "session" {
			nc.Reject(ssh.UnknownChannelType, "postern demo target: only session channels")
			continue
		}
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			t.serveSession(nc, log)
		}()
	}
	log.Debug().Msg("disconnected")
}
