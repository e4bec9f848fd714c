package bastion

import (
	"context"
	"net"
	"time"

	"github.com/postern/postern/store"
	"github.com/rs/zerolog"
	"golang.org/x/crypto/ssh"
)

// PoolOptions configures the upstream pool. (Owned by upstream.go.)
type PoolOptions struct {
	// Signer returns the private key for a connection (unsealed by store).
	Signer func(ctx context.Context, c *store.Connection) (ssh.Signer, error)
	// Dial opens TCP to a target; (&net.Dialer{}).DialContext if nil.
	Dial                 func(ctx context.Context, network, addr string) (net.Conn, error)
	HandshakeTimeout     time.Duration // whole TCP+SSH handshake bound
	MaxSessionsPerClient int           // 8 if zero
	KeepaliveInterval    time.Duration
	KeepaliveTimeout     time.Duration
	Logger               zerolog.Logger
	Now                  func() time.Time
}

// Pool holds upstream SSH clients per connection.
type Pool struct{ opts PoolOptions }

// NewPool returns an empty pool.
func NewPool(opts PoolOptions) *Pool { return &Pool{opts: opts} }

// UpstreamSession is one session channel on a pooled client; Close releases
// its slot.
type UpstreamSession struct {
	Channel  ssh.Channel
	Requests <-chan *ssh.Request
}

// Open opens a session channel to c's target.
func (p *Pool) Open(ctx context.Context, c *store.Connection) (*UpstreamSession, error) {
	return nil, errNotImplemented
}

// Close closes every pooled client.
func (p *Pool) Close() error { return nil }

// Close closes the channel and releases its slot in the pool.
func (s *UpstreamSession) Close() error { return s.Channel.Close() }
