package bastion

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/postern/postern/metrics"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/recipes"
	"github.com/postern/postern/sftpgate"
	"github.com/postern/postern/store"
	"github.com/rs/zerolog"
	"golang.org/x/crypto/ssh"
)

// Defaults for Config fields left zero.
const (
	// DefaultHandshakeTimeout bounds the time from TCP accept to an
	// authenticated agent, so slow-drip clients cannot hold slots.
	DefaultHandshakeTimeout = 30 * time.Second
	// DefaultMaxUnauthenticated bounds connections still in the handshake,
	// in total and per source address: beyond that new ones are dropped at
	// once, which keeps a flood from starving real agents.
	DefaultMaxUnauthenticated          = 64
	DefaultMaxUnauthenticatedPerSource = 16
	// DefaultMaxQueuedHandshakes bounds connections waiting for a
	// handshake slot. A burst from one CI host (50 concurrent ssh) waits
	// its turn instead of failing; past this bound, the oldest waiting
	// connection is dropped (see admission).
	DefaultMaxQueuedHandshakes = 4 * DefaultMaxUnauthenticated
	// DefaultHandshakeLease is how long a handshake keeps its slot for
	// sure while other connections wait; past it, the slot may go to one
	// of them (see admission). An honest handshake is about six round
	// trips: 2 s covers them at 300 ms each, while a flood of idle or
	// slow-drip connections cannot hold a slot for longer. A connection
	// that has sent nothing has a quarter of it.
	DefaultHandshakeLease = 2 * time.Second
	// DefaultMaxAuthTries matches OpenSSH's MaxAuthTries.
	DefaultMaxAuthTries = 6
	// DefaultKeepaliveInterval and DefaultKeepaliveMax evict an agent that
	// stopped answering after about 45 s.
	DefaultKeepaliveInterval = 15 * time.Second
	DefaultKeepaliveMax      = 3
	// DefaultMaxSessionsPerConn is the number of sessions one agent
	// connection may have open at once (Ansible multiplexes; OpenSSH's
	// MaxSessions default is 10, postern allows more).
	DefaultMaxSessionsPerConn = 64
	// DefaultShutdownGrace is how long SIGTERM lets running sessions finish.
	DefaultShutdownGrace = 10 * time.Second
	// DefaultTerminalLife is how long a session with a terminal that a
	// person approved may run: an interactive shell lasts as long as the
	// agent keeps it, and the approver judged one session, not a standing
	// login.
	DefaultTerminalLife = 15 * time.Minute
)

// Config configures a Server. Store, Policy and HostKey are required.
type Config struct {
	Store   *store.Store
	Policy  *policy.Engine
	HostKey ssh.Signer
	Logger  zerolog.Logger   // disabled if zero
	Now     func() time.Time // time.Now if nil

	HandshakeTimeout            time.Duration // DefaultHandshakeTimeout if zero: bounds TCP accept to authenticated
	MaxUnauthenticated          int           // DefaultMaxUnauthenticated if zero
	MaxUnauthenticatedPerSource int           // DefaultMaxUnauthenticatedPerSource if zero
	MaxQueuedHandshakes         int           // DefaultMaxQueuedHandshakes if zero; waiting within the handshake deadline
	HandshakeLease              time.Duration // DefaultHandshakeLease if zero; a slot's sure time while others wait
	MaxAuthTries                int           // DefaultMaxAuthTries if zero
	KeepaliveInterval           time.Duration // DefaultKeepaliveInterval if zero; to agents
	KeepaliveMax                int           // DefaultKeepaliveMax unanswered keepalives before closing
	MaxSessionsPerConn          int           // DefaultMaxSessionsPerConn if zero; Ansible multiplexes

	// CommandRate is how many commands (exec and shell sessions, SFTP
	// sessions) one agent may start per second over all its connections:
	// DefaultCommandRate if zero, no limit if negative. CommandBurst is how
	// many it may start at once: DefaultCommandBurst if zero. Past the
	// limit a command waits its turn, up to CommandWait
	// (DefaultCommandWait if zero; negative: not at all); one whose turn
	// is further away is refused: the agent reads "postern: rate limited"
	// with the limit and when to retry, the session ends with ExitRefused
	// (126: nothing ran) and the audit says denied, "rate limited". A
	// limit is not a denial: it never counts toward the repeated-denial
	// slow-down.
	CommandRate  float64
	CommandBurst int
	CommandWait  time.Duration

	// ApproveHint tells an agent how an admin decides approval id; the
	// default names `postern approvals approve ID`.
	ApproveHint func(id string) string

	// TerminalLife bounds a session with a terminal (an interactive shell,
	// or any command on a pty) that a person approved: when it has run
	// that long postern ends it, as a disconnect would. The approval card
	// and the waiting line say it. DefaultTerminalLife if zero.
	TerminalLife time.Duration

	// Upstream configures the pool of connections to targets.
	Upstream PoolOptions

	// RecordingBound is how many bytes of output one recorded session
	// keeps (connections whose Record setting covers it); the rest is
	// counted, not kept. DefaultRecordingBound if zero.
	RecordingBound int64
	// LockPoll is how often the locks are read to end the sessions they
	// forbid (locks.go): DefaultLockPoll if zero.
	LockPoll time.Duration

	// Metrics counts agent connections and handshakes, and is handed to
	// the upstream pool (unless Upstream.Metrics is set), the SFTP gate and
	// nothing else; none if nil.
	Metrics *metrics.Metrics
}

func (c *Config) setDefaults() {
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.HandshakeTimeout <= 0 {
		c.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if c.MaxUnauthenticated <= 0 {
		c.MaxUnauthenticated = DefaultMaxUnauthenticated
	}
	if c.MaxUnauthenticatedPerSource <= 0 {
		c.MaxUnauthenticatedPerSource = DefaultMaxUnauthenticatedPerSource
	}
	if c.MaxQueuedHandshakes <= 0 {
		c.MaxQueuedHandshakes = DefaultMaxQueuedHandshakes
	}
	if c.HandshakeLease <= 0 {
		c.HandshakeLease = DefaultHandshakeLease
	}
	if c.MaxAuthTries <= 0 {
		c.MaxAuthTries = DefaultMaxAuthTries
	}
	if c.KeepaliveInterval <= 0 {
		c.KeepaliveInterval = DefaultKeepaliveInterval
	}
	if c.KeepaliveMax <= 0 {
		c.KeepaliveMax = DefaultKeepaliveMax
	}
	if c.MaxSessionsPerConn <= 0 {
		c.MaxSessionsPerConn = DefaultMaxSessionsPerConn
	}
	if c.CommandRate == 0 {
		c.CommandRate = DefaultCommandRate
	}
	if c.CommandBurst <= 0 {
		c.CommandBurst = DefaultCommandBurst
	}
	switch {
	case c.CommandWait == 0:
		c.CommandWait = DefaultCommandWait
	case c.CommandWait < 0:
		c.CommandWait = 0
	}
	if c.TerminalLife <= 0 {
		c.TerminalLife = DefaultTerminalLife
	}
	if c.LockPoll <= 0 {
		c.LockPoll = DefaultLockPoll
	}
	if c.ApproveHint == nil {
		c.ApproveHint = func(id string) string { return "decide with `postern approvals approve " + id + "`" }
	}
}

// Server serves agents. Create it with New.
type Server struct {
	cfg  Config
	log  zerolog.Logger
	ssh  *ssh.ServerConfig
	pool *Pool
	// recipes is the catalog, loaded once: it says how each connection's
	// commands classify.
	recipes *recipes.Catalog
	// limits holds the per-agent command rate and denial streaks.
	limits *limiter
	// sleep waits before deciding a request an agent keeps repeating
	// after denials; sleepCtx, replaced by tests so that they do not wait.
	sleep func(ctx context.Context, d time.Duration) error
	// audited and waiting are for tests, which wait on them instead of
	// polling the store; nil otherwise, and set before Serve. audited is
	// called with each record once Policy.Audit has returned (whether or
	// not the row was written), waiting with each approval an agent was
	// told it waits for, after the agent's line was written.
	audited func(policy.Record)
	waiting func(policy.Approval)
	// relayWaits bound every relay's waits on its peers: relayTeardownWait
	// and relayGoneWait, which a test that must not trip them raises.
	relayWaits relayWaits
	// kexInitWait bounds the wait for an agent's KEXINIT (see
	// negotiate.go's kexInitWait), which a test raises likewise.
	kexInitWait time.Duration
	// sftpConfig, for tests, adjusts each SFTP session's gate
	// configuration (its bounds on the target's answers); nil otherwise.
	sftpConfig func(*sftpgate.Config)
	// classifyOverride, set by tests only, replaces shellclass for exec
	// commands: the read sandbox's tests call every command read to show
	// that the sandbox alone stops the writes. Nothing outside the package
	// can set it (no Config field, flag or setting reaches it).
	classifyOverride func(command string) policy.Class

	// ctx ends when the server is closed for good; every session derives
	// from it, so a hard close ends waits and relays.
	ctx    context.Context
	cancel context.CancelFunc
	// waits ends at the start of Shutdown: sessions still waiting for an
	// approval end at once (the request stays pending for a retry), while
	// running commands get the grace period.
	waits     context.Context
	stopWaits context.CancelFunc

	// adm admits unauthenticated connections to their handshake.
	adm *admission

	// live are the sessions a lock can end (locks.go).
	live liveSet

	// mu guards the fields below. Lock order: mu before nothing else.
	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[net.Conn]struct{}
	shutting  bool
	lockWatch bool // the lock watch has started (locks.go)

	// conns and sessions in flight; Shutdown waits for them.
	wg       sync.WaitGroup
	sessions sync.WaitGroup
	nextConn atomic.Uint64
}

// identification is the SSH identification string postern sends agents, and
// targets as their client. Clients choose protocol behaviour by the software
// version in it, so it names OpenSSH, whose behaviour postern relays, with
// "postern" as the comment (the way NetBSD's sshd keeps "OpenSSH_9.9" in
// front of its own name):
//
//   - OpenSSH sends eow@openssh.com only to a peer whose version matches
//     "OpenSSH*" (compat.c, SSH_NEW_OPENSSH). Under "SSH-2.0-postern" the
//     agent's ssh never said that `| head -1` had exited, so `ssh bastion
//     web yes | head -1` ran until killed; and the target's sshd, seeing
//     x/crypto's "SSH-2.0-Go", never said that a command had closed its
//     stdin.
//   - asyncssh and libssh send SFTP SYMLINK's arguments in OpenSSH's order
//     only to a server whose version names OpenSSH, and libssh reads the
//     number after "OpenSSH_"; postern forwards SYMLINK as the OpenSSH
//     target reads it.
//
// The number is past every version OpenSSH's compatibility table singles
// out for a bug workaround (the newest is 7.7), so an OpenSSH peer works
// around no bug postern does not have.
const identification = "SSH-2.0-OpenSSH_9.9 postern"

// agentIDExt carries the verified agent's id in ssh.Permissions. It is set
// only by VerifiedPublicKeyCallback, after the signature was checked: never
// from PublicKeyCallback, which also answers key queries the client made
// without proof (the CVE-2024-45337 pattern).
const agentIDExt = "postern-agent-id"

// agentNameExt carries the verified agent's name beside its id, for the
// audit rows postern writes itself (an unknown alias, a refused
// forwarding), so that filtering the audit by agent shows them.
const agentNameExt = "postern-agent-name"

// New checks cfg and returns a Server.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil || cfg.Policy == nil || cfg.HostKey == nil {
		return nil, errors.New("bastion: Config needs Store, Policy and HostKey")
	}
	cfg.setDefaults()
	cat, err := recipes.Load()
	if err != nil {
		return nil, fmt.Errorf("bastion: %w", err)
	}
	s := &Server{
		recipes:     cat,
		cfg:         cfg,
		limits:      newLimiter(cfg.CommandRate, cfg.CommandBurst, cfg.Now),
		sleep:       sleepCtx,
		relayWaits:  relayWaits{teardown: relayTeardownWait, gone: relayGoneWait},
		kexInitWait: kexInitWait,
		listeners:   map[net.Listener]struct{}{},
		conns:       map[net.Conn]struct{}{},
	}
	s.log = cfg.Logger.With().Str("component", "bastion").Logger()
	s.adm = newAdmission(cfg.MaxUnauthenticated, cfg.MaxUnauthenticatedPerSource, cfg.MaxQueuedHandshakes, cfg.HandshakeLease, cfg.Now, s.log)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.waits, s.stopWaits = context.WithCancel(s.ctx)
	up := cfg.Upstream
	if up.Metrics == nil {
		up.Metrics = cfg.Metrics
	}
	if up.Signer == nil {
		st := cfg.Store
		up.Signer = func(ctx context.Context, c *store.Connection) (ssh.Signer, error) {
			return st.ConnectionSigner(ctx, c.ID)
		}
	}
	s.pool = NewPool(up)
	sc := &ssh.ServerConfig{
		MaxAuthTries:              cfg.MaxAuthTries,
		PublicKeyCallback:         s.publicKeyQuery,
		VerifiedPublicKeyCallback: s.publicKeyVerified,
		ServerVersion:             identification,
		BannerCallback:            nil,
	}
	// The full lists; each connection offers only postern's pick from the
	// client's KEXINIT (see negotiate.go), or these when it has none.
	sc.Ciphers, sc.MACs, sc.KeyExchanges = cipherPreference, macPreference, keyExchangePreference
	sc.AddHostKey(cfg.HostKey)
	s.ssh = sc
	return s, nil
}

// publicKeyQuery answers whether a key may be used; it decides nothing
// about identity (see agentIDExt).
func (s *Server) publicKeyQuery(meta ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
	a, err := s.cfg.Store.AgentByFingerprint(s.ctx, ssh.FingerprintSHA256(key))
	if unavailable(err) {
		return nil, fmt.Errorf("%w: %w", errUnavailable, err)
	}
	if err != nil || a.Disabled {
		return nil, fmt.Errorf("bastion: key %s is not registered or its agent is disabled", ssh.FingerprintSHA256(key))
	}
	return &ssh.Permissions{}, nil
}

// publicKeyVerified runs after the client proved it holds key: only here is
// the agent's identity recorded.
func (s *Server) publicKeyVerified(meta ssh.ConnMetadata, key ssh.PublicKey, _ *ssh.Permissions, _ string) (*ssh.Permissions, error) {
	a, err := s.cfg.Store.AgentByFingerprint(s.ctx, ssh.FingerprintSHA256(key))
	if unavailable(err) {
		return nil, fmt.Errorf("%w: %w", errUnavailable, err)
	}
	if err != nil || a.Disabled {
		return nil, fmt.Errorf("bastion: key %s is not registered or its agent is disabled", ssh.FingerprintSHA256(key))
	}
	return &ssh.Permissions{Extensions: map[string]string{agentIDExt: a.ID, agentNameExt: a.Name}}, nil
}

// Serve accepts agents on ln until Shutdown; it returns ErrServerClosed
// after a shutdown.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.shutting {
		s.mu.Unlock()
		return ErrServerClosed
	}
	s.listeners[ln] = struct{}{}
	s.startLockWatch()
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, ln)
		s.mu.Unlock()
	}()
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			shutting := s.shutting
			s.mu.Unlock()
			if shutting {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				time.Sleep(backoff)
				continue
			}
			return fmt.Errorf("bastion: accept: %w", err)
		}
		backoff = 0
		if !s.track(nc) {
			s.cfg.Metrics.SSHConnection(metrics.ConnRefused)
			nc.Close()
			continue
		}
		hs := s.adm.enqueue(nc)
		if hs == nil {
			s.cfg.Metrics.SSHConnection(metrics.ConnRefused)
			s.untrack(nc)
			continue
		}
		s.cfg.Metrics.SSHConnection(metrics.ConnAccepted)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer s.untrack(nc)
			deadline := s.cfg.Now().Add(s.cfg.HandshakeTimeout)
			if !s.adm.wait(s.ctx, hs, deadline) {
				s.cfg.Metrics.SSHHandshake(metrics.HandshakeDropped)
				return
			}
			s.serveConn(nc, hs, deadline)
		}()
	}
}

// track registers a new connection for Shutdown; it refuses it once
// Shutdown has begun.
func (s *Server) track(nc net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shutting {
		return false
	}
	s.conns[nc] = struct{}{}
	return true
}

func (s *Server) untrack(nc net.Conn) {
	s.mu.Lock()
	delete(s.conns, nc)
	s.mu.Unlock()
	nc.Close()
}

func sourceOf(nc net.Conn) string {
	host, _, err := net.SplitHostPort(nc.RemoteAddr().String())
	if err != nil {
		return nc.RemoteAddr().String()
	}
	return host
}

// agentConn is one authenticated agent connection.
type agentConn struct {
	id        string
	sconn     *ssh.ServerConn
	agentID   string
	agentName string
	source    string // the agent's address, host:port
	// session is the connection's session id, on every audit row its
	// operations write, so that the commands of one connection (an
	// OpenSSH ControlMaster sends many) read together.
	session string
	user    string
	ctx     context.Context // ends when the connection does
	// sessions counts open session channels, bounded by MaxSessionsPerConn.
	sessions atomic.Int32

	// grantsMu guards grants, the agent's grants as last read, for routing
	// the sessions of this connection (an OpenSSH ControlMaster or Ansible
	// sends many).
	grantsMu sync.Mutex
	grants   []store.Grant
	loaded   bool

	// connsMu guards conns, the connection rows this connection's
	// sessions were routed to, by id. Reading the row was a fifth of
	// postern's time on an exec over an open connection; a kept copy is
	// used only with its modified_at, which policy checks against the
	// stored row in the same read that decides (ErrConnectionChanged).
	connsMu sync.Mutex
	conns   map[string]*store.Connection
}

// connection returns the row of connection id: the copy this agent
// connection keeps, or else the stored row, which it then keeps.
func (ac *agentConn) connection(ctx context.Context, st *store.Store, id string) (*store.Connection, error) {
	ac.connsMu.Lock()
	c, ok := ac.conns[id]
	ac.connsMu.Unlock()
	if ok {
		return c, nil
	}
	c, err := st.ConnectionByID(ctx, id)
	if err != nil {
		return nil, err
	}
	if c.ModifiedAt.IsZero() {
		// Without a version the copy could not be checked: never kept.
		return c, nil
	}
	ac.connsMu.Lock()
	if ac.conns == nil {
		ac.conns = map[string]*store.Connection{}
	}
	ac.conns[id] = c
	ac.connsMu.Unlock()
	return c, nil
}

// forgetConnection drops the kept copy of connection id, so that the next
// connection call reads the stored row.
func (ac *agentConn) forgetConnection(id string) {
	ac.connsMu.Lock()
	delete(ac.conns, id)
	ac.connsMu.Unlock()
}

func (ac *agentConn) cachedGrants() ([]store.Grant, bool) {
	ac.grantsMu.Lock()
	defer ac.grantsMu.Unlock()
	return ac.grants, ac.loaded
}

func (ac *agentConn) setGrants(g []store.Grant) {
	ac.grantsMu.Lock()
	defer ac.grantsMu.Unlock()
	ac.grants, ac.loaded = g, true
}

func (s *Server) serveConn(nc net.Conn, hs *handshake, deadline time.Time) {
	_ = nc.SetDeadline(deadline)
	bc := newBatchConn(countingReader{nc, &hs.read})
	defer bc.Close()
	peekUntil := s.cfg.Now().Add(s.kexInitWait)
	if deadline.Before(peekUntil) {
		peekUntil = deadline
	}
	hello := peekClientHello(bc, peekUntil, deadline)
	cfg := *s.ssh
	cfg.Ciphers, cfg.MACs = offer(hello.kex)
	oc := &outageConn{Conn: newHelloConn(bc, hello)}
	src := sourceOf(nc)
	cfg.PublicKeyCallback = func(meta ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
		p, err := s.publicKeyQuery(meta, key)
		return p, s.outageGuard(oc, src, err)
	}
	cfg.VerifiedPublicKeyCallback = func(meta ssh.ConnMetadata, key ssh.PublicKey, p *ssh.Permissions, alg string) (*ssh.Permissions, error) {
		p, err := s.publicKeyVerified(meta, key, p, alg)
		return p, s.outageGuard(oc, src, err)
	}
	sconn, chans, reqs, err := ssh.NewServerConn(oc, &cfg)
	s.adm.done(hs)
	if err != nil {
		s.cfg.Metrics.SSHHandshake(handshakeOutcome(err))
		s.log.Debug().Str("source", sourceOf(nc)).Err(err).Msg("handshake failed")
		return
	}
	_ = nc.SetDeadline(time.Time{})
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	ac := &agentConn{
		id:        fmt.Sprintf("c%d", s.nextConn.Add(1)),
		sconn:     sconn,
		agentID:   sconn.Permissions.Extensions[agentIDExt],
		agentName: sconn.Permissions.Extensions[agentNameExt],
		source:    nc.RemoteAddr().String(),
		session:   store.NewSessionID(), // made when the connection is authenticated
		user:      sconn.User(),
		ctx:       ctx,
	}
	if ac.agentID == "" {
		// Cannot happen: authentication only succeeds through
		// publicKeyVerified. Fail closed all the same.
		sconn.Close()
		return
	}
	s.cfg.Metrics.SSHHandshake(metrics.HandshakeOK)
	s.cfg.Metrics.SSHConnectionOpened()
	defer s.cfg.Metrics.SSHConnectionClosed()
	log := s.log.With().Str("conn_id", ac.id).Str("session_id", ac.session).Str("agent_id", ac.agentID).Logger()
	algos := negotiated(sconn.Conn)
	log.Info().Str("source", sourceOf(nc)).Str("user", ac.user).Str("client", string(sconn.ClientVersion())).
		Str("kex", algos.KeyExchange).Str("cipher", algos.Read.Cipher).Str("mac", algos.Read.MAC).Msg("agent connected")
	go func() {
		// Ends the connection's context when the agent goes away, which
		// ends waits for approval and relays.
		_ = sconn.Wait()
		cancel()
	}()
	var conns sync.WaitGroup
	conns.Add(2)
	go func() { defer conns.Done(); s.globalRequests(ac, reqs) }()
	go func() { defer conns.Done(); s.keepalive(ac) }()
	for nch := range chans {
		s.newChannel(ac, nch)
	}
	cancel()
	sconn.Close()
	conns.Wait()
	log.Info().Msg("agent disconnected")
}

// handshakeOutcome is the metrics outcome of a failed handshake: the
// client could not authenticate (x/crypto's ServerAuthError: no registered
// key, a disabled agent), the deadline passed, or anything else.
func handshakeOutcome(err error) string {
	var auth *ssh.ServerAuthError
	var ne net.Error
	switch {
	case errors.As(err, &auth) && len(auth.Errors) > 0:
		// With no attempt in Errors the client left before trying a
		// key (ssh-keyscan, a port check): not an authentication failure.
		return metrics.HandshakeAuthFailed
	case errors.As(err, &ne) && ne.Timeout():
		return metrics.HandshakeTimeout
	}
	return metrics.HandshakeError
}

// negotiated returns the algorithms of c's last key exchange. The cipher
// and MAC logged are those of the client-to-server direction (clients use
// the same lists for both; the server-to-client ones are in Write).
func negotiated(c ssh.Conn) ssh.NegotiatedAlgorithms {
	if m, ok := c.(ssh.AlgorithmsConnMetadata); ok {
		return m.Algorithms()
	}
	return ssh.NegotiatedAlgorithms{}
}

// keepalive pings the agent; too many unanswered pings close the connection.
func (s *Server) keepalive(ac *agentConn) {
	t := time.NewTicker(s.cfg.KeepaliveInterval)
	defer t.Stop()
	var missed atomic.Int32
	for {
		select {
		case <-ac.ctx.Done():
			return
		case <-t.C:
		}
		if int(missed.Add(1)) > s.cfg.KeepaliveMax {
			s.log.Info().Str("conn_id", ac.id).Msg("agent stopped answering keepalives; closing")
			ac.sconn.Close()
			return
		}
		go func() {
			// Returns when the reply arrives or the connection closes.
			if _, _, err := ac.sconn.SendRequest("keepalive@openssh.com", true, nil); err == nil {
				missed.Store(0)
			}
		}()
	}
}

// globalRequests answers the agent's global requests as OpenSSH's sshd
// does (serverloop.c, server_input_global_request), apart from forwarding,
// which postern refuses and audits: no-more-sessions@openssh.com succeeds,
// and everything else fails, keepalive@openssh.com included. A failure is
// an answer: OpenSSH's client counts any reply to its ServerAliveInterval
// probe as the server being alive.
//
// no-more-sessions is answered but not enforced: sshd then drops a
// connection that opens another session, but x/crypto hands global
// requests and channel opens over on separate Go channels, so postern
// cannot tell which came first, and the client sends it right after
// opening its one session.
func (s *Server) globalRequests(ac *agentConn, reqs <-chan *ssh.Request) {
	for req := range reqs {
		switch req.Type {
		case "no-more-sessions@openssh.com":
			_ = req.Reply(true, nil)
		case "tcpip-forward", "cancel-tcpip-forward", "streamlocal-forward@openssh.com", "cancel-streamlocal-forward@openssh.com":
			s.refuse(ac, "remote port forwarding ("+req.Type+")")
			_ = req.Reply(false, nil)
		default:
			_ = req.Reply(false, nil)
		}
	}
}

func (s *Server) newChannel(ac *agentConn, nch ssh.NewChannel) {
	switch nch.ChannelType() {
	case "session":
		if int(ac.sessions.Add(1)) > s.cfg.MaxSessionsPerConn {
			ac.sessions.Add(-1)
			_ = nch.Reject(ssh.ResourceShortage, fmt.Sprintf("postern: at most %d sessions per connection", s.cfg.MaxSessionsPerConn))
			return
		}
		s.sessions.Add(1)
		go func() {
			defer s.sessions.Done()
			defer ac.sessions.Add(-1)
			s.session(ac, nch)
		}()
	case "direct-tcpip", "direct-streamlocal@openssh.com":
		s.refuse(ac, "port forwarding ("+nch.ChannelType()+")")
		_ = nch.Reject(ssh.Prohibited, "postern: port forwarding is refused")
	default:
		s.refuse(ac, "channel type "+nch.ChannelType())
		_ = nch.Reject(ssh.UnknownChannelType, "postern: only sessions are served")
	}
}

// refuse audits and logs something postern never allows: forwarding, X11,
// agent forwarding, unknown subsystems.
func (s *Server) refuse(ac *agentConn, what string) {
	s.log.Info().Str("conn_id", ac.id).Str("agent_id", ac.agentID).Str("decision", "denied").Str("what", what).Msg("refused")
	rec := policy.Record{
		AgentID:    ac.agentID,
		AgentName:  ac.agentName,
		SourceAddr: ac.source,
		SessionID:  ac.session,
		Class:      policy.Destructive,
		Kind:       policy.Exec,
		Outcome:    policy.Denied,
		Reason:     what + " is refused by postern",
		Operation:  what,
	}
	_, err := s.cfg.Policy.Audit(s.ctx, rec)
	if err != nil {
		s.log.Error().Err(err).Msg("audit failed")
	}
	if s.audited != nil {
		s.audited(rec)
	}
}

// Shutdown stops accepting, lets running sessions finish until ctx ends,
// then closes them and the upstream pool. It is safe to call more than once.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stopWaits()
	s.mu.Lock()
	s.shutting = true
	for ln := range s.listeners {
		ln.Close()
	}
	s.mu.Unlock()
	s.adm.close() // queued connections leave
	done := make(chan struct{})
	go func() {
		s.sessions.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("bastion: shutdown: sessions still running: %w", ctx.Err())
	}
	s.cancel()
	s.mu.Lock()
	for nc := range s.conns {
		nc.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	if perr := s.pool.Close(); perr != nil && err == nil {
		err = perr
	}
	return err
}
