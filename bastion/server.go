package bastion

import (
	"context"
	"net"
	"time"

	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
	"github.com/rs/zerolog"
	"golang.org/x/crypto/ssh"
)

// Defaults for Config fields left zero.
const (
	DefaultHandshakeTimeout            = 30 * time.Second
	DefaultMaxUnauthenticated          = 64
	DefaultMaxUnauthenticatedPerSource = 16
	DefaultMaxAuthTries                = 6
	DefaultKeepaliveInterval           = 15 * time.Second
	DefaultKeepaliveMax                = 3
	DefaultMaxSessionsPerConn          = 64
	DefaultShutdownGrace               = 10 * time.Second
)

// Config configures a Server. Store, Policy and HostKey are required.
type Config struct {
	Store   *store.Store
	Policy  *policy.Engine
	HostKey ssh.Signer
	Logger  zerolog.Logger   // zerolog.Nop() if zero
	Now     func() time.Time // time.Now if nil

	HandshakeTimeout            time.Duration // DefaultHandshakeTimeout if zero: bounds TCP accept to authenticated
	MaxUnauthenticated          int           // DefaultMaxUnauthenticated if zero
	MaxUnauthenticatedPerSource int           // DefaultMaxUnauthenticatedPerSource if zero
	MaxAuthTries                int           // DefaultMaxAuthTries if zero
	KeepaliveInterval           time.Duration // DefaultKeepaliveInterval if zero; to agents
	KeepaliveMax                int           // DefaultKeepaliveMax unanswered keepalives before closing
	MaxSessionsPerConn          int           // DefaultMaxSessionsPerConn if zero; Ansible multiplexes

	// ApproveHint tells an agent how an admin decides approval id; the
	// default names `postern approvals approve ID`.
	ApproveHint func(id string) string

	// Upstream configures the pool of connections to targets.
	Upstream PoolOptions
}

// Server serves agents. Create it with New.
type Server struct {
	cfg Config
}

// New checks cfg and returns a Server.
func New(cfg Config) (*Server, error) {
	return &Server{cfg: cfg}, nil
}

// Serve accepts agents on ln until Shutdown or Close; it returns
// ErrServerClosed after a shutdown.
func (s *Server) Serve(ln net.Listener) error {
	return ErrServerClosed
}

// Shutdown stops accepting, lets running sessions finish until ctx ends,
// then closes them and the upstream pool.
func (s *Server) Shutdown(ctx context.Context) error {
	return nil
}
