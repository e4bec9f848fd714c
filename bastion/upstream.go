package bastion

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/postern/postern/metrics"
	"github.com/postern/postern/store"
	"github.com/rs/zerolog"
	"golang.org/x/crypto/ssh"
)

// Defaults for PoolOptions fields left zero.
const (
	// DefaultUpstreamHandshakeTimeout bounds the whole dial of a target: TCP
	// connect, SSH key exchange and authentication. ssh.ClientConfig.Timeout
	// covers only the TCP connect, so a target that accepts TCP and then
	// says nothing would otherwise hold an agent forever. 15 s is generous
	// for a handshake (milliseconds on a LAN, under a second across the
	// world) and short enough that an agent hears about a dead target
	// before it gives up itself.
	DefaultUpstreamHandshakeTimeout = 15 * time.Second

	// DefaultUpstreamMaxSessions is how many sessions one upstream client
	// carries at once. OpenSSH's MaxSessions defaults to 10; staying below
	// it leaves room for a target that counts a closing session a little
	// longer than we do, and spreads the work of a busy agent (Ansible runs
	// 5 forks by default) over few TCP connections.
	DefaultUpstreamMaxSessions = 8

	// DefaultUpstreamKeepaliveInterval is how often an upstream client is
	// asked for a keepalive@openssh.com reply, and
	// DefaultUpstreamKeepaliveTimeout how long the reply may take before the
	// client is taken for dead, evicted and closed. Without them a target
	// that vanished without a FIN or RST (a rebooted VM, a dropped NAT
	// entry) would be handed new sessions that hang until TCP gives up,
	// which takes minutes to hours.
	DefaultUpstreamKeepaliveInterval = 30 * time.Second
	DefaultUpstreamKeepaliveTimeout  = 15 * time.Second

	// DefaultUpstreamIdleTimeout is how long a client with no session stays
	// open for the next one. A pooled client saves the next exec a full
	// handshake (the point of the pool); two minutes covers an agent's
	// bursts of commands without keeping connections to every target open
	// all day.
	DefaultUpstreamIdleTimeout = 2 * time.Minute

	// DefaultUpstreamDialsPerTarget bounds the handshakes in flight to one
	// target. A burst of agents' sessions must not become a burst of
	// handshakes: sshd's MaxStartups (10:30:100 by default) starts dropping
	// unauthenticated connections at 10, and every handshake costs the
	// target a key exchange.
	DefaultUpstreamDialsPerTarget = 2
)

// maxDeadClientRetries is how many times Open moves on after a client turns
// out to be dead under it (the target closed it between two sessions)
// before reporting the target unreachable.
const maxDeadClientRetries = 2

// ErrPoolClosed is returned by Open after Close.
var ErrPoolClosed = errors.New("bastion: upstream pool closed")

// HostKeyChangedError says that a target presented a host key that is not
// the one pinned for its connection. The pool never connects then: it is a
// rebuilt server or an attack, and an admin must look. Its message is the
// one the agent sees.
type HostKeyChangedError struct {
	Alias string
	// Got is the SHA256 fingerprint of the key the target presented, or,
	// when it had no key of a pinned type, the types it offered.
	Got  string
	Want []string // SHA256 fingerprints pinned
}

func (e *HostKeyChangedError) Error() string {
	return fmt.Sprintf("host key of %s changed: the target presented %s, pinned %s; refusing to connect",
		e.Alias, e.Got, strings.Join(e.Want, ", "))
}

// UnreachableError says that no working SSH connection to a target could be
// made or kept: the TCP connect failed, the handshake failed or timed out,
// the target refused the key, or the client died under every attempt. The
// server answers it with exit status 255 and the error's text, which never
// carries key material.
type UnreachableError struct {
	Alias string
	Err   error
}

func (e *UnreachableError) Error() string {
	return "bastion: " + e.Alias + " unreachable: " + e.Err.Error()
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// PoolOptions configures the upstream pool. (Owned by upstream.go.)
type PoolOptions struct {
	// Signer returns the private key for a connection (unsealed by store).
	// It is called once per dial, so the key is held only by live clients.
	Signer func(ctx context.Context, c *store.Connection) (ssh.Signer, error)
	// Dial opens TCP to a target; (&net.Dialer{}).DialContext if nil.
	Dial                 func(ctx context.Context, network, addr string) (net.Conn, error)
	HandshakeTimeout     time.Duration    // DefaultUpstreamHandshakeTimeout if zero; whole TCP+SSH handshake bound
	MaxSessionsPerClient int              // DefaultUpstreamMaxSessions if zero
	KeepaliveInterval    time.Duration    // DefaultUpstreamKeepaliveInterval if zero; none if negative
	KeepaliveTimeout     time.Duration    // DefaultUpstreamKeepaliveTimeout if zero
	IdleTimeout          time.Duration    // DefaultUpstreamIdleTimeout if zero; idle clients kept until Close if negative
	DialsPerTarget       int              // DefaultUpstreamDialsPerTarget if zero
	Logger               zerolog.Logger   // disabled if zero
	Now                  func() time.Time // time.Now if nil
	Metrics              *metrics.Metrics // pool size and dial errors; none if nil

	// afterReap, for tests, is called at the end of each pass of the idle
	// reaper: with Now a fake clock, a test knows that a pass has judged
	// the clients at the time it set, without waiting for real time.
	afterReap func()
}

// withDefaults fills the zero fields.
func (o PoolOptions) withDefaults() PoolOptions {
	if o.Dial == nil {
		o.Dial = (&net.Dialer{}).DialContext
	}
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = DefaultUpstreamHandshakeTimeout
	}
	if o.MaxSessionsPerClient <= 0 {
		o.MaxSessionsPerClient = DefaultUpstreamMaxSessions
	}
	if o.KeepaliveInterval == 0 {
		o.KeepaliveInterval = DefaultUpstreamKeepaliveInterval
	}
	if o.KeepaliveTimeout <= 0 {
		o.KeepaliveTimeout = DefaultUpstreamKeepaliveTimeout
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = DefaultUpstreamIdleTimeout
	}
	if o.DialsPerTarget <= 0 {
		o.DialsPerTarget = DefaultUpstreamDialsPerTarget
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Pool holds upstream SSH clients per connection. One client carries up to
// MaxSessionsPerClient sessions; a full client, or a target that refuses
// another session (OpenSSH MaxSessions), makes the pool dial another. It is
// safe for concurrent use.
//
// Goroutines: the pool owns an idle reaper, one dial goroutine per
// handshake in flight, and two per client (one waits for the connection to
// end, one sends keepalives). Close ends them all and waits for them.
type Pool struct {
	opts PoolOptions

	// ctx is cancelled by Close; it bounds dials and the pool's goroutines.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // every goroutine the pool starts

	// mu guards closed, targets and everything reachable from targets
	// (target and client fields, dial.claimed). It is never held across
	// network I/O.
	mu      sync.Mutex
	closed  bool
	targets map[string]*target // by targetKey
}

// target is the pool's state for one connection as it is now configured.
type target struct {
	key   string
	alias string
	id    string
	addr  string

	clients []*client
	dials   []*dial
	// changed is closed and replaced when a slot may have become free or a
	// dial ended, to wake Opens waiting for one; parked counts the Opens
	// waiting on it (those waiting on a dial are its claimed).
	changed chan struct{}
	parked  int
}

// client is one upstream SSH connection.
type client struct {
	t    *target
	c    *ssh.Client
	addr string

	sessions  int                      // open sessions (and opens in flight)
	limit     int                      // sessions allowed; lowered when the target refuses one
	idleSince time.Time                // when sessions last dropped to zero
	closing   bool                     // evicted or lost: gets no new sessions
	retired   bool                     // made under an older configuration: closes with its last session
	reason    string                   // why it was closed, for the log
	algos     ssh.NegotiatedAlgorithms // of the handshake, for the log

	done chan struct{} // closed when the connection has ended
}

// dial is one handshake in flight. Opens that need a client share it.
type dial struct {
	done    chan struct{} // closed when the dial has ended
	err     error         // set before done is closed
	claimed int           // Opens counting on it; at most the client's limit
}

// NewPool returns an empty pool. Close it to end its goroutines.
func NewPool(opts PoolOptions) *Pool {
	p := &Pool{opts: opts.withDefaults(), targets: make(map[string]*target)}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	if p.opts.IdleTimeout > 0 {
		p.wg.Add(1)
		go p.reapIdle()
	}
	return p
}

// PoolStats describe the pool's clients for one connection.
type PoolStats struct {
	Clients  int // open clients
	Sessions int // sessions open on them
	Dials    int // handshakes in flight
}

// Stats reports the pool's clients for connection c.
func (p *Pool) Stats(c *store.Connection) PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.targets[targetKey(c)]
	if t == nil {
		return PoolStats{}
	}
	st := PoolStats{Dials: len(t.dials)}
	for _, cl := range t.clients {
		st.Clients++
		st.Sessions += cl.sessions
	}
	return st
}

// targetKey names a connection together with everything the dial depends
// on, so that a connection whose host, user or pinned keys were changed
// gets new clients and the old ones drain and idle out.
func targetKey(c *store.Connection) string {
	// The row's modification time stands for what the key cannot name
	// without a query per session, the connection's private key: a
	// rotated key, like a re-pin, makes a new target (see retireLocked).
	return strings.Join([]string{c.ID, c.Addr(), c.User, strings.Join(c.HostKeys, "\n"),
		strconv.FormatInt(c.ModifiedAt.UnixNano(), 10)}, "\x00")
}

// UpstreamSession is one session channel on a pooled client; Close releases
// its slot.
type UpstreamSession struct {
	Channel  ssh.Channel
	Requests <-chan *ssh.Request

	release   func() // gives the slot back; nil if none
	closeOnce sync.Once
}

// Open opens a session channel to c's target, on a pooled client with a free
// slot or on a new one. ctx bounds the whole wait; each dial it waits for is
// bounded by HandshakeTimeout, and the channel open by the keepalives (a
// target that stops answering is evicted, which fails the open). Errors:
// *HostKeyChangedError, *UnreachableError, ErrPoolClosed, ctx's error
// (wrapped), or the target's refusal of the session.
func (p *Pool) Open(ctx context.Context, c *store.Connection) (*UpstreamSession, error) {
	key := targetKey(c)
	deadRetries := 0
	for {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("bastion: open session on %s: %w", c.Alias, err)
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, ErrPoolClosed
		}
		t := p.targets[key]
		var idle []*client
		if t == nil {
			t = &target{key: key, alias: c.Alias, id: c.ID, addr: c.Addr(), changed: make(chan struct{})}
			p.targets[key] = t
			idle = p.retireLocked(c.ID, key)
		}
		if len(idle) > 0 {
			p.mu.Unlock()
			for _, cl := range idle {
				p.evict(cl, "the connection changed (re-pinned, re-keyed or edited)")
			}
			continue
		}

		if cl := t.freeClientLocked(); cl != nil {
			cl.sessions++
			p.mu.Unlock()
			s, retry, err := p.openOn(cl)
			if err == nil {
				return s, nil
			}
			if !retry {
				return nil, err
			}
			if errors.Is(err, errClientDead) {
				if deadRetries++; deadRetries > maxDeadClientRetries {
					return nil, &UnreachableError{Alias: c.Alias, Err: err}
				}
			}
			continue
		}

		var d *dial
		for _, x := range t.dials {
			if x.claimed < p.opts.MaxSessionsPerClient {
				d = x
				break
			}
		}
		if d == nil && len(t.dials) < p.opts.DialsPerTarget {
			d = &dial{done: make(chan struct{})}
			t.dials = append(t.dials, d)
			conn := *c
			p.wg.Add(1)
			go p.dial(t, d, &conn)
		}
		if d != nil {
			d.claimed++
			p.mu.Unlock()
			select {
			case <-d.done:
			case <-ctx.Done():
				p.mu.Lock()
				d.claimed--
				p.mu.Unlock()
				return nil, fmt.Errorf("bastion: open session on %s: %w", c.Alias, ctx.Err())
			}
			if d.err != nil {
				return nil, d.err
			}
			continue
		}

		// Every dial in flight is spoken for; wait for one to end or a
		// slot to free up.
		changed := t.changed
		t.parked++
		p.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
		}
		p.mu.Lock()
		t.parked--
		p.mu.Unlock()
	}
}

// errClientDead marks an open that failed because the client's connection
// had ended.
var errClientDead = errors.New("connection lost")

// openOn opens a session channel on cl, whose slot the caller has taken.
// retry says whether Open should look for another client.
func (p *Pool) openOn(cl *client) (s *UpstreamSession, retry bool, err error) {
	ch, reqs, err := cl.c.OpenChannel("session", nil)
	if err == nil {
		return &UpstreamSession{Channel: ch, Requests: reqs, release: func() { p.release(cl) }}, false, nil
	}
	var oce *ssh.OpenChannelError
	if !errors.As(err, &oce) {
		p.release(cl)
		p.evict(cl, "open failed: "+err.Error())
		return nil, true, fmt.Errorf("%w: %v", errClientDead, err)
	}
	p.mu.Lock()
	cl.sessions--
	others := cl.sessions
	full := others > 0 && isFullAnswer(oce.Reason)
	if full {
		// The target holds fewer sessions per connection than we allow
		// (OpenSSH MaxSessions): learn its limit so that the next Open
		// goes to another client instead of asking again.
		cl.limit = min(cl.limit, others)
	}
	if cl.sessions == 0 {
		cl.idleSince = p.opts.Now()
	}
	cl.t.notifyLocked()
	p.mu.Unlock()
	if full {
		p.opts.Logger.Debug().Str("conn_id", cl.t.id).Str("alias", cl.t.alias).
			Int("sessions", others).Msg("upstream refused another session on a client; using another client")
		return nil, true, err
	}
	return nil, false, fmt.Errorf("bastion: %s refused a session: %w", cl.t.alias, err)
}

// isFullAnswer reports whether a refused session channel can mean that the
// client carries as many sessions as the target allows on one connection.
// OpenSSH answers MaxSessions with "connect failed" ("open failed"), other
// servers with "administratively prohibited" or "resource shortage"; on a
// client with no other session the same answers are a real refusal.
func isFullAnswer(r ssh.RejectionReason) bool {
	return r == ssh.Prohibited || r == ssh.ConnectionFailed || r == ssh.ResourceShortage
}

// freeClientLocked returns the live client with the most sessions that
// still has a free slot, so that sessions gather on few clients and the
// others can idle out.
func (t *target) freeClientLocked() *client {
	var best *client
	for _, cl := range t.clients {
		if cl.closing || cl.retired || cl.sessions >= cl.limit {
			continue
		}
		if best == nil || cl.sessions > best.sessions {
			best = cl
		}
	}
	return best
}

// notifyLocked wakes Opens waiting for a slot or a dial.
func (t *target) notifyLocked() {
	close(t.changed)
	t.changed = make(chan struct{})
}

// release gives a session's slot back; the last session of a retired
// client closes it.
func (p *Pool) release(cl *client) {
	p.mu.Lock()
	cl.sessions--
	if cl.sessions == 0 {
		cl.idleSince = p.opts.Now()
	}
	cl.t.notifyLocked()
	last := cl.retired && cl.sessions == 0
	p.mu.Unlock()
	if last {
		p.evict(cl, "the connection changed (re-pinned, re-keyed or edited)")
	}
}

// retireLocked retires the clients made for connection id under another
// configuration than key's (an older pin, key or address): they were
// verified against what no longer stands, so they take no new session.
// Busy ones close with their last session (release); the idle ones are
// returned for the caller to close without the lock.
func (p *Pool) retireLocked(id, key string) []*client {
	var idle []*client
	for k, t := range p.targets {
		if t.id != id || k == key {
			continue
		}
		for _, cl := range t.clients {
			if cl.closing || cl.retired {
				continue
			}
			cl.retired = true
			if cl.sessions == 0 {
				idle = append(idle, cl)
			}
		}
	}
	return idle
}

// dial runs one handshake for t and adds the client to the pool, then
// tells the Opens sharing d.
func (p *Pool) dial(t *target, d *dial, c *store.Connection) {
	defer p.wg.Done()
	cl, err := p.handshake(c)
	p.mu.Lock()
	for i, x := range t.dials {
		if x == d {
			t.dials = append(t.dials[:i], t.dials[i+1:]...)
			break
		}
	}
	if err == nil && p.closed {
		err = ErrPoolClosed
	}
	if err == nil {
		cl.t = t
		cl.limit = p.opts.MaxSessionsPerClient
		cl.idleSince = p.opts.Now()
		t.clients = append(t.clients, cl)
		p.opts.Metrics.UpstreamClientAdded()
		p.startClientLocked(cl)
	} else {
		p.dropIfEmptyLocked(t)
		if !errors.Is(err, ErrPoolClosed) {
			p.opts.Metrics.UpstreamDialError(dialReason(err))
		}
	}
	d.err = err
	t.notifyLocked()
	p.mu.Unlock()
	if err != nil && cl != nil {
		cl.c.Close()
	}
	close(d.done)
	if err == nil {
		p.opts.Logger.Info().Str("conn_id", c.ID).Str("alias", c.Alias).Str("addr", cl.addr).
			Str("kex", cl.algos.KeyExchange).Str("cipher", cl.algos.Write.Cipher).Str("mac", cl.algos.Write.MAC).
			Msg("upstream client connected")
	}
}

// dialReason is the metrics reason of a failed dial.
func dialReason(err error) string {
	var hk *HostKeyChangedError
	var ur *UnreachableError
	switch {
	case errors.As(err, &hk):
		return metrics.DialHostKeyChanged
	case errors.As(err, &ur):
		return metrics.DialUnreachable
	}
	return metrics.DialOther
}

// handshake dials c's target and authenticates, all within the handshake
// deadline. Pool.Close interrupts it.
func (p *Pool) handshake(c *store.Connection) (*client, error) {
	ctx, cancel := context.WithTimeout(p.ctx, p.opts.HandshakeTimeout)
	defer cancel()

	hostKeyCallback, err := c.HostKeyCallback()
	if err != nil {
		return nil, fmt.Errorf("bastion: connection %s: %w", c.Alias, err)
	}
	pinned, err := c.PinnedKeys()
	if err != nil {
		return nil, fmt.Errorf("bastion: connection %s: %w", c.Alias, err)
	}
	if p.opts.Signer == nil {
		return nil, fmt.Errorf("bastion: connection %s: upstream pool has no signer", c.Alias)
	}
	signer, err := p.opts.Signer(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("bastion: connection %s: private key: %w", c.Alias, err)
	}

	// The store's callback explains a mismatch; keep it to answer with a
	// HostKeyChangedError, whatever the handshake wraps it in.
	var mismatch atomic.Pointer[store.HostKeyMismatchError]
	cfg := &ssh.ClientConfig{
		User: c.User,
		Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: func(host string, remote net.Addr, key ssh.PublicKey) error {
			err := hostKeyCallback(host, remote, key)
			var m *store.HostKeyMismatchError
			if errors.As(err, &m) {
				mismatch.Store(m)
			}
			return err
		},
		HostKeyAlgorithms: hostKeyAlgorithms(pinned),
		// sshd, too, sends eow@openssh.com only to a client it takes for
		// OpenSSH (see identification).
		ClientVersion: identification,
		// As the client, postern's order decides: the cheapest cipher and
		// MAC the target has, post-quantum key exchange where it has it
		// (see negotiate.go).
		Config: ssh.Config{
			Ciphers:      cipherPreference,
			MACs:         macPreference,
			KeyExchanges: keyExchangePreference,
		},
	}

	addr := c.Addr()
	conn, err := p.opts.Dial(ctx, "tcp", addr)
	if err != nil {
		if p.ctx.Err() != nil {
			return nil, ErrPoolClosed
		}
		return nil, &UnreachableError{Alias: c.Alias, Err: err}
	}
	// ClientConfig.Timeout covers only the TCP connect: bound the SSH
	// handshake with a deadline on the connection, and let Close or the
	// context cut it short.
	conn = newBatchConn(conn)
	deadline, _ := ctx.Deadline()
	conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	sc, chans, reqs, err := ssh.NewClientConn(conn, addr, cfg)
	interrupted := !stop()
	if err != nil {
		conn.Close()
		if m := mismatch.Load(); m != nil {
			e := &HostKeyChangedError{Alias: c.Alias, Got: m.Got, Want: m.Want}
			p.logHostKeyChanged(c, e)
			return nil, e
		}
		var ane *ssh.AlgorithmNegotiationError
		if errors.As(err, &ane) && ane.What == "host key" {
			// HostKeyAlgorithms offered only the pinned keys' types and
			// the target has none of them: its key changed too.
			e := &HostKeyChangedError{Alias: c.Alias, Got: "only keys of type " + strings.Join(ane.RequestedAlgorithms, ", "), Want: fingerprints(pinned)}
			p.logHostKeyChanged(c, e)
			return nil, e
		}
		if p.ctx.Err() != nil {
			return nil, ErrPoolClosed
		}
		if interrupted || isTimeout(err) {
			err = fmt.Errorf("no SSH handshake within %v: %w", p.opts.HandshakeTimeout, err)
		} else {
			err = fmt.Errorf("ssh handshake with %s: %w", addr, err)
		}
		return nil, &UnreachableError{Alias: c.Alias, Err: err}
	}
	if interrupted || conn.SetDeadline(time.Time{}) != nil {
		sc.Close()
		if p.ctx.Err() != nil {
			return nil, ErrPoolClosed
		}
		return nil, &UnreachableError{Alias: c.Alias, Err: fmt.Errorf("no SSH handshake within %v", p.opts.HandshakeTimeout)}
	}
	return &client{c: ssh.NewClient(sc, chans, reqs), addr: addr, algos: negotiated(sc), done: make(chan struct{})}, nil
}

// logHostKeyChanged says loudly, for the admin, that a target's host key
// changed.
func (p *Pool) logHostKeyChanged(c *store.Connection, e *HostKeyChangedError) {
	p.opts.Logger.Error().Str("conn_id", c.ID).Str("alias", c.Alias).Str("addr", c.Addr()).
		Str("got", e.Got).Strs("want", e.Want).Msg("HOST KEY MISMATCH: refusing to connect upstream")
}

// fingerprints lists the SHA256 fingerprints of keys.
func fingerprints(keys []ssh.PublicKey) []string {
	var fps []string
	for _, k := range keys {
		fps = append(fps, ssh.FingerprintSHA256(k))
	}
	return fps
}

// isTimeout reports whether err is a network timeout.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// hostKeyAlgorithms lists the algorithms that can verify the pinned keys,
// so that the target shows one of them rather than another key it may
// hold, which could not be checked and would be refused. An RSA key is
// offered with SHA-2 signatures only.
func hostKeyAlgorithms(pinned []ssh.PublicKey) []string {
	var algos []string
	seen := make(map[string]bool)
	for _, k := range pinned {
		names := []string{k.Type()}
		if k.Type() == ssh.KeyAlgoRSA {
			names = []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256}
		}
		for _, n := range names {
			if !seen[n] {
				seen[n] = true
				algos = append(algos, n)
			}
		}
	}
	return algos
}

// startClientLocked starts the goroutines that watch cl.
func (p *Pool) startClientLocked(cl *client) {
	p.wg.Add(1)
	go p.watch(cl)
	if p.opts.KeepaliveInterval > 0 {
		p.wg.Add(1)
		go p.keepalive(cl)
	}
}

// watch waits for cl's connection to end, however it ends, and removes it
// from the pool.
func (p *Pool) watch(cl *client) {
	defer p.wg.Done()
	err := cl.c.Wait()
	p.mu.Lock()
	cl.closing = true
	reason := cl.reason
	p.removeLocked(cl)
	p.mu.Unlock()
	close(cl.done)
	if reason == "" {
		reason = "connection lost"
		if err != nil && !errors.Is(err, io.EOF) {
			reason += ": " + err.Error()
		}
	}
	p.opts.Logger.Info().Str("conn_id", cl.t.id).Str("alias", cl.t.alias).Str("addr", cl.addr).
		Str("reason", reason).Msg("upstream client closed")
}

// keepalive asks cl for a reply every KeepaliveInterval and evicts it when
// none comes within KeepaliveTimeout. Any reply counts: OpenSSH answers
// keepalive@openssh.com with a failure.
func (p *Pool) keepalive(cl *client) {
	defer p.wg.Done()
	tick := time.NewTicker(p.opts.KeepaliveInterval)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-cl.done:
			return
		case <-p.ctx.Done():
			return
		}
		// SendRequest has no timeout of its own; it returns when the
		// client is closed, which every way out of the select below
		// ensures (eviction here, the watch goroutine, or Pool.Close).
		reply := make(chan error, 1)
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			_, _, err := cl.c.SendRequest("keepalive@openssh.com", true, nil)
			reply <- err
		}()
		timeout := time.NewTimer(p.opts.KeepaliveTimeout)
		select {
		case err := <-reply:
			timeout.Stop()
			if err != nil {
				p.evict(cl, "keepalive: "+err.Error())
				return
			}
		case <-timeout.C:
			p.evict(cl, "no keepalive reply within "+p.opts.KeepaliveTimeout.String())
			return
		case <-p.ctx.Done():
			timeout.Stop()
			return
		}
	}
}

// evict takes cl out of the pool and closes it. The first reason given is
// the one logged.
func (p *Pool) evict(cl *client, reason string) {
	p.mu.Lock()
	first := !cl.closing
	cl.closing = true
	if cl.reason == "" {
		cl.reason = reason
	}
	p.removeLocked(cl)
	p.mu.Unlock()
	if first {
		cl.c.Close()
	}
}

// removeLocked takes cl out of its target.
func (p *Pool) removeLocked(cl *client) {
	t := cl.t
	for i, x := range t.clients {
		if x == cl {
			t.clients = append(t.clients[:i], t.clients[i+1:]...)
			p.opts.Metrics.UpstreamClientRemoved()
			break
		}
	}
	t.notifyLocked()
	p.dropIfEmptyLocked(t)
}

// dropIfEmptyLocked forgets t when nothing is left of it.
func (p *Pool) dropIfEmptyLocked(t *target) {
	if len(t.clients) == 0 && len(t.dials) == 0 && p.targets[t.key] == t {
		delete(p.targets, t.key)
	}
}

// reapIdle closes clients that have had no session for IdleTimeout.
func (p *Pool) reapIdle() {
	defer p.wg.Done()
	tick := time.NewTicker(max(p.opts.IdleTimeout/2, time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-p.ctx.Done():
			return
		}
		now := p.opts.Now()
		var idle []*client
		p.mu.Lock()
		for _, t := range p.targets {
			for _, cl := range t.clients {
				if cl.sessions == 0 && !cl.closing && now.Sub(cl.idleSince) >= p.opts.IdleTimeout {
					idle = append(idle, cl)
				}
			}
		}
		for _, cl := range idle {
			cl.closing = true
			cl.reason = "idle for " + p.opts.IdleTimeout.String()
			p.removeLocked(cl)
		}
		p.mu.Unlock()
		for _, cl := range idle {
			cl.c.Close()
		}
		if p.opts.afterReap != nil {
			p.opts.afterReap()
		}
	}
}

// Close closes every pooled client, stops dials in flight and waits for the
// pool's goroutines to end. Sessions still open are cut. Later Opens fail
// with ErrPoolClosed. It is safe to call more than once.
func (p *Pool) Close() error {
	p.mu.Lock()
	p.closed = true
	var all []*client
	for _, t := range p.targets {
		for _, cl := range t.clients {
			if !cl.closing {
				cl.closing = true
				if cl.reason == "" {
					cl.reason = "pool closed"
				}
				all = append(all, cl)
			}
		}
	}
	p.mu.Unlock()
	p.cancel()
	for _, cl := range all {
		cl.c.Close()
	}
	p.wg.Wait()
	return nil
}

// Close closes the channel and releases its slot in the pool. Only the
// first call does anything; a channel the target already closed is not an
// error.
func (s *UpstreamSession) Close() error {
	var err error
	s.closeOnce.Do(func() {
		err = s.Channel.Close()
		if errors.Is(err, io.EOF) {
			err = nil
		}
		if s.release != nil {
			s.release()
		}
	})
	return err
}
