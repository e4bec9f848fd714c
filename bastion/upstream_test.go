package bastion

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/postern/postern/internal/fakeclock"
	"github.com/postern/postern/internal/testsshd"
	"github.com/postern/postern/internal/testwait"
	"github.com/postern/postern/store"
	"go.uber.org/goleak"
	"golang.org/x/crypto/ssh"
)

// leakCheck fails the test if it leaves goroutines behind. It ignores the
// ones that ran before it (other tests' leftovers are theirs) and runs after
// every cleanup registered later, such as stopping sshd and closing the pool.
func leakCheck(t *testing.T) {
	t.Helper()
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, opt) })
}

// testTarget is a real sshd and a store holding a connection to it.
type testTarget struct {
	sshd *testsshd.Server
	st   *store.Store
	conn *store.Connection
}

// newTestTarget starts a target with opts, or takes the package's shared
// one if opts is nil, and records a connection to it in a new store.
func newTestTarget(t *testing.T, opts *testsshd.Options) *testTarget {
	t.Helper()
	var sshd *testsshd.Server
	if opts != nil {
		sshd = testsshd.Start(t, *opts)
	} else {
		sshd = sharedTarget.Get(t)
	}
	st := newTestStore(t)
	c := addConnection(t, st, "web", sshd.Host, sshd.Port, sshd)
	return &testTarget{sshd: sshd, st: st, conn: c}
}

func newTestStore(t *testing.T) *store.Store {
	t.Helper()
	ctx := context.Background()
	d := store.Dir{Path: t.TempDir()}
	if _, err := d.Init(ctx, store.Options{}); err != nil {
		t.Fatalf("init store: %v", err)
	}
	st, err := d.Open(ctx, store.Options{})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// addConnection records a connection to host:port that logs in as sshd's
// user with its key and pins its host key.
func addConnection(t *testing.T, st *store.Store, alias, host string, port int, sshd *testsshd.Server, hostKeys ...string) *store.Connection {
	t.Helper()
	if len(hostKeys) == 0 {
		hostKeys = []string{sshd.KnownHostsLine}
	}
	c, err := st.CreateConnection(context.Background(), store.Unaudited(), store.NewConnection{
		Alias:      alias,
		Host:       host,
		Port:       port,
		User:       sshd.User,
		PrivateKey: sshd.UserKeyPEM,
		HostKeys:   hostKeys,
	})
	if err != nil {
		t.Fatalf("create connection: %v", err)
	}
	return c
}

// newTestPool returns a pool that signs with st's sealed keys and counts
// its dials, closed when the test ends. The bounds a test's success must
// beat (a dial's handshake, a keepalive's answer, a client's idle time) end
// at the test's deadline unless opts sets them: a busy machine can delay a
// target's answers past their defaults of seconds.
func newTestPool(t *testing.T, st *store.Store, opts PoolOptions) (*Pool, *dialCounter) {
	t.Helper()
	if opts.HandshakeTimeout == 0 {
		opts.HandshakeTimeout = testwait.Remaining(t)
	}
	if opts.KeepaliveTimeout == 0 {
		opts.KeepaliveTimeout = testwait.Remaining(t)
	}
	if opts.IdleTimeout == 0 {
		opts.IdleTimeout = testwait.Remaining(t)
	}
	dc := &dialCounter{next: opts.Dial}
	if dc.next == nil {
		dc.next = (&net.Dialer{}).DialContext
	}
	opts.Dial = dc.dial
	opts.Signer = func(ctx context.Context, c *store.Connection) (ssh.Signer, error) {
		return st.ConnectionSigner(ctx, c.ID)
	}
	p := NewPool(opts)
	t.Cleanup(func() { p.Close() })
	return p, dc
}

// dialCounter counts the TCP dials a pool makes and keeps the connections.
type dialCounter struct {
	next func(ctx context.Context, network, addr string) (net.Conn, error)

	// mu guards n and conns.
	mu    sync.Mutex
	n     int
	conns []net.Conn
}

func (d *dialCounter) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	d.n++
	d.mu.Unlock()
	c, err := d.next(ctx, network, addr)
	if err == nil {
		d.mu.Lock()
		d.conns = append(d.conns, c)
		d.mu.Unlock()
	}
	return c, err
}

func (d *dialCounter) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n
}

func (d *dialCounter) conn(i int) net.Conn {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.conns[i]
}

// run executes cmd on s and returns its output.
func run(t *testing.T, s *UpstreamSession, cmd string) string {
	t.Helper()
	status := make(chan uint32, 1)
	go func() {
		for req := range s.Requests {
			if req.Type == "exit-status" && len(req.Payload) == 4 {
				status <- uint32(req.Payload[0])<<24 | uint32(req.Payload[1])<<16 | uint32(req.Payload[2])<<8 | uint32(req.Payload[3])
			}
			if req.WantReply {
				req.Reply(false, nil)
			}
		}
	}()
	ok, err := s.Channel.SendRequest("exec", true, ssh.Marshal(struct{ Command string }{cmd}))
	if err != nil || !ok {
		t.Fatalf("exec %q: ok %v, err %v", cmd, ok, err)
	}
	out, err := io.ReadAll(s.Channel)
	if err != nil {
		t.Fatalf("read output of %q: %v", cmd, err)
	}
	if st := testwait.Recv(t, fmt.Sprintf("the exit status of %q", cmd), status); st != 0 {
		t.Fatalf("exec %q: got exit status %d; want 0", cmd, st)
	}
	return string(out)
}

// open opens a session and fails the test on error.
func open(t *testing.T, p *Pool, c *store.Connection) *UpstreamSession {
	t.Helper()
	s, err := p.Open(testwait.Context(t), c)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return s
}

func TestPoolReusesClient(t *testing.T) {
	leakCheck(t)
	tt := newTestTarget(t, nil)
	p, dc := newTestPool(t, tt.st, PoolOptions{})

	for i := range 3 {
		s := open(t, p, tt.conn)
		if got, want := run(t, s, fmt.Sprintf("echo run %d", i)), fmt.Sprintf("run %d\n", i); got != want {
			t.Errorf("got output %q; want %q", got, want)
		}
		if err := s.Close(); err != nil {
			t.Errorf("close session: %v", err)
		}
	}
	// Sessions at once share the client too, up to its limit.
	var held []*UpstreamSession
	for range DefaultUpstreamMaxSessions {
		held = append(held, open(t, p, tt.conn))
	}
	if got, want := p.Stats(tt.conn), (PoolStats{Clients: 1, Sessions: DefaultUpstreamMaxSessions}); got != want {
		t.Errorf("got stats %+v; want %+v", got, want)
	}
	for _, s := range held {
		s.Close()
	}
	if got, want := dc.count(), 1; got != want {
		t.Errorf("got %d dials; want %d", got, want)
	}
	if got, want := p.Stats(tt.conn), (PoolStats{Clients: 1}); got != want {
		t.Errorf("after closing sessions: got stats %+v; want %+v", got, want)
	}
}

func TestPoolMaxSessionsOverflowOpensSecondClient(t *testing.T) {
	leakCheck(t)
	tt := newTestTarget(t, &testsshd.Options{ExtraConfig: []string{"MaxSessions 2"}})
	p, dc := newTestPool(t, tt.st, PoolOptions{MaxSessionsPerClient: 8})

	var held []*UpstreamSession
	for range 2 {
		held = append(held, open(t, p, tt.conn))
	}
	if got, want := dc.count(), 1; got != want {
		t.Fatalf("two sessions: got %d dials; want %d", got, want)
	}
	// The third is administratively prohibited on the first client and
	// must land on a second one.
	third := open(t, p, tt.conn)
	if got, want := run(t, third, "echo third"), "third\n"; got != want {
		t.Errorf("third session: got output %q; want %q", got, want)
	}
	if got, want := dc.count(), 2; got != want {
		t.Errorf("three sessions: got %d dials; want %d", got, want)
	}
	// The pool learned the first client's limit: a fourth goes to the
	// second client without another dial.
	fourth := open(t, p, tt.conn)
	if got, want := run(t, fourth, "echo fourth"), "fourth\n"; got != want {
		t.Errorf("fourth session: got output %q; want %q", got, want)
	}
	if got, want := dc.count(), 2; got != want {
		t.Errorf("four sessions: got %d dials; want %d", got, want)
	}
	if got, want := p.Stats(tt.conn).Clients, 2; got != want {
		t.Errorf("got %d clients; want %d", got, want)
	}
	for _, s := range append(held, third, fourth) {
		s.Close()
	}
}

func TestPoolHostKeyMismatch(t *testing.T) {
	leakCheck(t)
	sshd := sharedTarget.Get(t)
	st := newTestStore(t)

	_, edKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	hostLine := func(k any) string {
		pub, err := ssh.NewPublicKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("[%s]:%d %s", sshd.Host, sshd.Port, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub))))
	}
	tests := []struct {
		name  string
		alias string
		pin   string
	}{
		{name: "another ed25519 key", alias: "web-ed", pin: hostLine(edKey.Public())},
		{name: "an rsa key where the target has none", alias: "web-rsa", pin: hostLine(&rsaKey.PublicKey)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := addConnection(t, st, tc.alias, sshd.Host, sshd.Port, sshd, tc.pin)
			p, _ := newTestPool(t, st, PoolOptions{})
			s, err := p.Open(context.Background(), c)
			if err == nil {
				s.Close()
				t.Fatal("got a session; want the connection refused")
			}
			var hk *HostKeyChangedError
			if !errors.As(err, &hk) {
				t.Fatalf("got error %v (%T); want *HostKeyChangedError", err, err)
			}
			if got, want := hk.Alias, tc.alias; got != want {
				t.Errorf("got alias %q; want %q", got, want)
			}
			if got, want := err.Error(), "host key of "+tc.alias+" changed:"; !strings.HasPrefix(got, want) {
				t.Errorf("got message %q; want it to start with %q", got, want)
			}
			if got, want := p.Stats(c), (PoolStats{}); got != want {
				t.Errorf("got stats %+v; want %+v", got, want)
			}
		})
	}
}

func TestPoolUnreachable(t *testing.T) {
	leakCheck(t)
	sshd := sharedTarget.Get(t)
	st := newTestStore(t)

	// A port nothing listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := l.Addr().(*net.TCPAddr).Port
	l.Close()

	// A listener that accepts and never says a word: only the handshake
	// deadline ends the dial.
	silent := silentListener(t)

	tests := []struct {
		name  string
		alias string
		port  int
	}{
		{name: "closed port", alias: "closed", port: closedPort},
		{name: "silent listener", alias: "silent", port: silent},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := addConnection(t, st, tc.alias, "127.0.0.1", tc.port, sshd)
			// The handshake timeout is what ends the dial of the silent
			// listener, and nothing else in this test depends on it.
			p, _ := newTestPool(t, st, PoolOptions{HandshakeTimeout: 300 * time.Millisecond})
			s, err := p.Open(context.Background(), c)
			if err == nil {
				s.Close()
				t.Fatal("got a session; want an error")
			}
			var ue *UnreachableError
			if !errors.As(err, &ue) {
				t.Fatalf("got error %v (%T); want *UnreachableError", err, err)
			}
			if got, want := ue.Alias, tc.alias; got != want {
				t.Errorf("got alias %q; want %q", got, want)
			}
			if got, want := err.Error(), "bastion: "+tc.alias+" unreachable: "; !strings.HasPrefix(got, want) {
				t.Errorf("got message %q; want it to start with %q", got, want)
			}
		})
	}
}

// silentListener accepts TCP connections on loopback and never writes. It
// returns the port and closes everything when the test ends.
func silentListener(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	// mu guards conns.
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().(*net.TCPAddr).Port
}

// gatedDial holds every dial until open is closed.
type gatedDial struct {
	open chan struct{}
}

func (g *gatedDial) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	select {
	case <-g.open:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return (&net.Dialer{}).DialContext(ctx, network, addr)
}

// claims reports the dials in flight to c, the Opens waiting on them, and
// the Opens parked until a dial ends or a slot frees up.
func claims(p *Pool, c *store.Connection) (dials, claimed, parked int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.targets[targetKey(c)]
	if t == nil {
		return 0, 0, 0
	}
	for _, d := range t.dials {
		claimed += d.claimed
	}
	return len(t.dials), claimed, t.parked
}

func TestPoolDedupDials(t *testing.T) {
	leakCheck(t)
	tt := newTestTarget(t, nil)

	tests := []struct {
		name      string
		opens     int
		inFlight  int // dials while the first are held
		waiting   int // Opens riding on them
		wantDials int // in all
	}{
		// Eight Opens fit one client: one dial serves them all.
		{name: "one client's worth", opens: 8, inFlight: 1, waiting: 8, wantDials: 1},
		// Twenty need three clients; two dials run at once, and the
		// four Opens left over wait for a slot or a dial.
		{name: "more than two clients' worth", opens: 20, inFlight: 2, waiting: 16, wantDials: 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			gate := &gatedDial{open: make(chan struct{})}
			p, dc := newTestPool(t, tt.st, PoolOptions{Dial: gate.dial, MaxSessionsPerClient: 8, DialsPerTarget: 2})

			type result struct {
				s   *UpstreamSession
				err error
			}
			results := make(chan result, tc.opens)
			for range tc.opens {
				go func() {
					s, err := p.Open(context.Background(), tt.conn)
					results <- result{s, err}
				}()
			}
			testwait.Until(t, "every dial to reach the gate and every Open to wait on a dial or for a slot", func() bool {
				d, c, parked := claims(p, tt.conn)
				return d == tc.inFlight && c == tc.waiting && parked == tc.opens-tc.waiting && dc.count() == tc.inFlight
			})
			// Every Open now waits on a channel that only the end of a
			// dial or a freed slot closes, and every dial is held at the
			// gate: nothing can start another dial until the gate opens.
			// A dial too many would show in the count below.
			close(gate.open)

			var sessions []*UpstreamSession
			for range tc.opens {
				r := <-results
				if r.err != nil {
					t.Errorf("open: %v", r.err)
					continue
				}
				sessions = append(sessions, r.s)
			}
			if got, want := dc.count(), tc.wantDials; got != want {
				t.Errorf("got %d dials; want %d", got, want)
			}
			if got, want := p.Stats(tt.conn), (PoolStats{Clients: tc.wantDials, Sessions: tc.opens}); got != want {
				t.Errorf("got stats %+v; want %+v", got, want)
			}
			for _, s := range sessions {
				s.Close()
			}
		})
	}
}

func TestPoolDedupDialsShareFailure(t *testing.T) {
	leakCheck(t)
	sshd := sharedTarget.Get(t)
	st := newTestStore(t)
	c := addConnection(t, st, "silent", "127.0.0.1", silentListener(t), sshd)
	// The handshake timeout is what ends the dial of the silent listener,
	// and nothing else in this test depends on it.
	p, dc := newTestPool(t, st, PoolOptions{HandshakeTimeout: 500 * time.Millisecond})

	const opens = 5
	errs := make(chan error, opens)
	for range opens {
		go func() {
			s, err := p.Open(context.Background(), c)
			if s != nil {
				s.Close()
			}
			errs <- err
		}()
	}
	for range opens {
		var ue *UnreachableError
		if err := <-errs; !errors.As(err, &ue) {
			t.Errorf("got error %v; want *UnreachableError", err)
		}
	}
	// Opens that started while the dial was in flight shared its result;
	// a latecomer may have tried again, never more than one at a time.
	if got, want := dc.count(), opens; got >= want {
		t.Errorf("got %d dials for %d Opens; want them shared", got, opens)
	}
}

// freezableConn stops passing bytes either way when frozen, without closing:
// a target that vanished without a FIN or RST.
type freezableConn struct {
	net.Conn
	frozen     chan struct{}
	closed     chan struct{}
	freezeOnce sync.Once
	closeOnce  sync.Once
}

func newFreezableConn(c net.Conn) *freezableConn {
	return &freezableConn{Conn: c, frozen: make(chan struct{}), closed: make(chan struct{})}
}

func (c *freezableConn) freeze() { c.freezeOnce.Do(func() { close(c.frozen) }) }

func (c *freezableConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	select {
	case <-c.frozen:
		<-c.closed
		return 0, net.ErrClosed
	default:
	}
	return n, err
}

func (c *freezableConn) Write(b []byte) (int, error) {
	select {
	case <-c.frozen:
		return len(b), nil
	default:
	}
	return c.Conn.Write(b)
}

func (c *freezableConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// TestPoolEvictsClosedClient: a client whose connection closed leaves the
// pool by itself, with keepalives off, and the next Open dials anew.
func TestPoolEvictsClosedClient(t *testing.T) {
	leakCheck(t)
	tt := newTestTarget(t, nil)
	p, dc := newTestPool(t, tt.st, PoolOptions{KeepaliveInterval: -1})

	s := open(t, p, tt.conn)
	if got, want := run(t, s, "echo before"), "before\n"; got != want {
		t.Errorf("got output %q; want %q", got, want)
	}
	s.Close()
	if got, want := p.Stats(tt.conn).Clients, 1; got != want {
		t.Fatalf("got %d clients; want %d", got, want)
	}

	dc.conn(0).Close()
	testwait.Until(t, "the dead client to leave the pool", func() bool { return p.Stats(tt.conn).Clients == 0 })

	s = open(t, p, tt.conn)
	defer s.Close()
	if got, want := run(t, s, "echo after"), "after\n"; got != want {
		t.Errorf("got output %q; want %q", got, want)
	}
	if got, want := dc.count(), 2; got != want {
		t.Errorf("got %d dials; want %d", got, want)
	}
}

// TestPoolKeepaliveEvictsSilentClient: a client whose target stops
// answering without closing the connection (it vanished without a FIN or
// RST) is evicted when a keepalive goes unanswered for KeepaliveTimeout,
// and the next Open dials anew. Only a keepalive can tell that this client
// is dead.
//
// The pool runs in a testing/synctest bubble against an in-process SSH
// server over in-memory connections, so that the keepalives' interval and
// timeout pass on the bubble's clock, which moves only when every
// goroutine of the bubble waits: a healthy client's answer, which takes no
// time there, always beats the timeout, however busy the machine, and the
// silent one's never comes.
func TestPoolKeepaliveEvictsSilentClient(t *testing.T) {
	t.Parallel()
	// The keepalives' interval and timeout, which this test trips, are of
	// the bubble's clock.
	const interval, timeout = 50 * time.Millisecond, 200 * time.Millisecond
	_, hostPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	hostKey, err := ssh.NewSignerFromKey(hostPriv)
	if err != nil {
		t.Fatal(err)
	}
	_, userPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	userKey, err := ssh.NewSignerFromKey(userPriv)
	if err != nil {
		t.Fatal(err)
	}
	conn := &store.Connection{ID: "c1", Alias: "web", Host: "127.0.0.1", Port: 22, User: "u",
		HostKeys: []string{"127.0.0.1 " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(hostKey.PublicKey())))}}

	synctest.Test(t, func(t *testing.T) {
		srv := &ssh.ServerConfig{NoClientAuth: true}
		srv.AddHostKey(hostKey)
		// mu guards dialed, the pool's ends of the connections.
		var mu sync.Mutex
		var dialed []*freezableConn
		p := NewPool(PoolOptions{
			Signer: func(context.Context, *store.Connection) (ssh.Signer, error) { return userKey, nil },
			Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
				pool, target := net.Pipe()
				go servePipeSSH(target, srv)
				c := newFreezableConn(pool)
				mu.Lock()
				dialed = append(dialed, c)
				mu.Unlock()
				return c, nil
			},
			HandshakeTimeout:  time.Minute, // of the bubble's clock, as every bound here
			KeepaliveInterval: interval,
			KeepaliveTimeout:  timeout,
			IdleTimeout:       -1, // only the keepalive may take the client
		})
		defer p.Close()

		s, err := p.Open(context.Background(), conn)
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		s.Close()
		// Healthy, the client answers every keepalive.
		time.Sleep(10 * (interval + timeout))
		if got, want := p.Stats(conn).Clients, 1; got != want {
			t.Fatalf("after 50 keepalives answered: got %d clients; want %d", got, want)
		}

		dialed[0].freeze()
		time.Sleep(interval + timeout) // the next keepalive, and its timeout
		synctest.Wait()
		if got, want := p.Stats(conn).Clients, 0; got != want {
			t.Fatalf("a keepalive interval and timeout after the target went silent: got %d clients; want %d (evicted)", got, want)
		}

		s, err = p.Open(context.Background(), conn)
		if err != nil {
			t.Fatalf("open after the eviction: %v", err)
		}
		s.Close()
		mu.Lock()
		defer mu.Unlock()
		if got, want := len(dialed), 2; got != want {
			t.Errorf("got %d dials; want %d", got, want)
		}
	})
}

// servePipeSSH serves an SSH connection on c with cfg until it closes: it
// accepts session channels and answers every request false, as the
// in-process target of a unit test of the pool.
func servePipeSSH(c net.Conn, cfg *ssh.ServerConfig) {
	defer c.Close()
	_, chans, reqs, err := ssh.NewServerConn(c, cfg)
	if err != nil {
		return
	}
	go ssh.DiscardRequests(reqs)
	for nch := range chans {
		ch, chReqs, err := nch.Accept()
		if err != nil {
			continue
		}
		go func() {
			defer ch.Close()
			ssh.DiscardRequests(chReqs)
		}()
	}
}

// TestPoolClosesIdleClients: a client with a session open is kept however
// long it lasts; once its last session closes it is closed after
// IdleTimeout. The pool's clock is a fake one, and each step waits for the
// reaper to have judged the clients at the time the test set.
func TestPoolClosesIdleClients(t *testing.T) {
	leakCheck(t)
	tt := newTestTarget(t, nil)
	clock := fakeclock.New()
	passes := make(chan struct{}, 1)
	// The idle timeout is of the fake clock, which only reapAfter moves.
	p, dc := newTestPool(t, tt.st, PoolOptions{IdleTimeout: 100 * time.Millisecond, Now: clock.Now,
		afterReap: func() {
			select {
			case passes <- struct{}{}:
			default:
			}
		}})
	// reapAfter moves the clock by d and waits for a pass of the reaper
	// that started after the move: the second pass to end from now.
	reapAfter := func(d time.Duration) {
		t.Helper()
		clock.Advance(d)
		select {
		case <-passes:
		default:
		}
		for i := range 2 {
			testwait.Recv(t, fmt.Sprintf("reaper pass %d of 2", i+1), passes)
		}
	}

	s := open(t, p, tt.conn)
	reapAfter(time.Hour)
	if got, want := p.Stats(tt.conn), (PoolStats{Clients: 1, Sessions: 1}); got != want {
		t.Fatalf("with a session open an hour: got stats %+v; want %+v", got, want)
	}
	s.Close()
	reapAfter(50 * time.Millisecond)
	if got, want := p.Stats(tt.conn), (PoolStats{Clients: 1}); got != want {
		t.Fatalf("idle for half the idle timeout: got stats %+v; want %+v", got, want)
	}
	reapAfter(50 * time.Millisecond)
	if got, want := p.Stats(tt.conn), (PoolStats{}); got != want {
		t.Fatalf("idle for the idle timeout: got stats %+v; want %+v (the client closed)", got, want)
	}

	s = open(t, p, tt.conn)
	s.Close()
	if got, want := dc.count(), 2; got != want {
		t.Errorf("got %d dials; want %d", got, want)
	}
}

func TestPoolCloseEndsGoroutines(t *testing.T) {
	leakCheck(t)
	tt := newTestTarget(t, nil)
	silent := addConnection(t, tt.st, "silent", "127.0.0.1", silentListener(t), tt.sshd)
	// Keepalives every 20 ms, so that Close finds one in flight; their
	// answers have until the test's deadline (newTestPool).
	p, _ := newTestPool(t, tt.st, PoolOptions{KeepaliveInterval: 20 * time.Millisecond, IdleTimeout: -1})

	// Clients with sessions, an idle client, and a dial stuck in its
	// handshake.
	var sessions []*UpstreamSession
	for range 10 {
		sessions = append(sessions, open(t, p, tt.conn))
	}
	idle := open(t, p, tt.conn)
	idle.Close()
	stuck := make(chan error, 1)
	go func() {
		_, err := p.Open(context.Background(), silent)
		stuck <- err
	}()
	testwait.Until(t, "the dial to the silent target", func() bool { return p.Stats(silent).Dials == 1 })

	if err := p.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := <-stuck; !errors.Is(err, ErrPoolClosed) {
		t.Errorf("open in flight: got error %v; want ErrPoolClosed", err)
	}
	if _, err := p.Open(context.Background(), tt.conn); !errors.Is(err, ErrPoolClosed) {
		t.Errorf("open after close: got error %v; want ErrPoolClosed", err)
	}
	for _, s := range sessions {
		if _, err := s.Channel.SendRequest("exec", true, ssh.Marshal(struct{ Command string }{"true"})); err == nil {
			t.Errorf("exec on a session of a closed pool: got no error; want one")
		}
		s.Close()
	}
	if err := p.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
}

func TestUpstreamSessionCloseIsIdempotent(t *testing.T) {
	leakCheck(t)
	tt := newTestTarget(t, nil)
	p, _ := newTestPool(t, tt.st, PoolOptions{})

	s := open(t, p, tt.conn)
	other := open(t, p, tt.conn)
	defer other.Close()
	for i := range 3 {
		if err := s.Close(); err != nil {
			t.Errorf("close %d: got %v; want nil", i+1, err)
		}
	}
	if got, want := p.Stats(tt.conn).Sessions, 1; got != want {
		t.Errorf("got %d sessions; want %d (one slot released once)", got, want)
	}
}

func TestPoolPrefersAESGCMAndCurve25519(t *testing.T) {
	leakCheck(t)
	tt := newTestTarget(t, nil)
	p, _ := newTestPool(t, tt.st, PoolOptions{})
	s := open(t, p, tt.conn)
	defer s.Close()

	p.mu.Lock()
	cl := p.targets[targetKey(tt.conn)].clients[0]
	p.mu.Unlock()
	algs := cl.c.Conn.(ssh.AlgorithmsConnMetadata).Algorithms()
	tests := []struct{ what, got, want string }{
		{"key exchange", algs.KeyExchange, ssh.KeyExchangeCurve25519},
		{"cipher to target", algs.Write.Cipher, ssh.CipherAES128GCM},
		{"cipher from target", algs.Read.Cipher, ssh.CipherAES128GCM},
		{"host key", algs.HostKey, ssh.KeyAlgoED25519},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("%s: got %q; want %q", tc.what, tc.got, tc.want)
		}
	}
}

func TestHostKeyAlgorithms(t *testing.T) {
	t.Parallel()
	pub := func(k any) ssh.PublicKey {
		p, err := ssh.NewPublicKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	edPub, _, _ := ed25519.GenerateKey(rand.Reader)
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ed, rs, ec := pub(edPub), pub(&rsaKey.PublicKey), pub(&ecKey.PublicKey)

	tests := []struct {
		name   string
		pinned []ssh.PublicKey
		want   []string
	}{
		{"ed25519", []ssh.PublicKey{ed}, []string{ssh.KeyAlgoED25519}},
		{"rsa offers sha2 only", []ssh.PublicKey{rs}, []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256}},
		{"ecdsa", []ssh.PublicKey{ec}, []string{ssh.KeyAlgoECDSA256}},
		{"several in pin order, once each", []ssh.PublicKey{rs, ed, rs}, []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoED25519}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := hostKeyAlgorithms(tc.pinned); strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("got %q; want %q", got, tc.want)
			}
		})
	}
}

// TestPoolErrorsCarryNoKey makes sure a failing dial does not quote the
// private key in its error.
func TestPoolErrorsCarryNoKey(t *testing.T) {
	leakCheck(t)
	tt := newTestTarget(t, nil)
	// Another key, which the target does not accept.
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := newTestPool(t, tt.st, PoolOptions{})
	p.opts.Signer = func(context.Context, *store.Connection) (ssh.Signer, error) { return signer, nil }

	_, err = p.Open(context.Background(), tt.conn)
	var ue *UnreachableError
	if !errors.As(err, &ue) {
		t.Fatalf("got error %v; want *UnreachableError", err)
	}
	msg := ue.Error()
	for _, secret := range []string{
		"PRIVATE KEY",
		base64.StdEncoding.EncodeToString(priv.Seed()),
		hex.EncodeToString(priv.Seed()),
		string(tt.sshd.UserKeyPEM),
	} {
		if strings.Contains(msg, secret) {
			t.Errorf("error %q contains key material", msg)
		}
	}
}

// TestPoolRetiresClientsOfAChangedConnection: once the connection changes
// (a re-pin, a rotated key, any edit: its row's modification time), the
// clients made before take no new session; an idle one closes at once, a
// busy one with its last session (issue 25: pooled connections outlived a
// re-pin or a rotated key).
func TestPoolRetiresClientsOfAChangedConnection(t *testing.T) {
	leakCheck(t)
	tt := newTestTarget(t, nil)
	p, dc := newTestPool(t, tt.st, PoolOptions{})
	old := *tt.conn
	busy := open(t, p, &old)
	if got := p.Stats(&old).Clients; got != 1 {
		t.Fatalf("before the change: %d clients; want 1", got)
	}

	changed := old
	changed.ModifiedAt = old.ModifiedAt.Add(time.Second)
	s := open(t, p, &changed)
	if got, want := dc.count(), 2; got != want {
		t.Errorf("after the change: %d dials; want %d (a new client)", got, want)
	}
	if got, want := p.Stats(&old), (PoolStats{Clients: 1, Sessions: 1}); got != want {
		t.Errorf("old configuration while a session runs: %+v; want %+v (the busy client kept for it)", got, want)
	}
	if got := run(t, busy, "echo still"); got != "still\n" {
		t.Errorf("the running session after the change: %q; want it to go on", got)
	}
	busy.Close()
	if got := p.Stats(&old); got != (PoolStats{}) {
		t.Errorf("old configuration after its last session: %+v; want no client", got)
	}
	if got := run(t, s, "echo new"); got != "new\n" {
		t.Errorf("new client: %q; want new", got)
	}
	s.Close()
	if got := p.Stats(&changed).Clients; got != 1 {
		t.Errorf("new configuration: %d clients; want 1", got)
	}
}

// TestPoolClosesIdleClientsOfAChangedConnection: an idle client of the old
// configuration closes as soon as the changed connection is opened.
func TestPoolClosesIdleClientsOfAChangedConnection(t *testing.T) {
	leakCheck(t)
	tt := newTestTarget(t, nil)
	p, _ := newTestPool(t, tt.st, PoolOptions{})
	old := *tt.conn
	open(t, p, &old).Close()
	changed := old
	changed.ModifiedAt = old.ModifiedAt.Add(time.Second)
	open(t, p, &changed).Close()
	if got := p.Stats(&old); got != (PoolStats{}) {
		t.Errorf("old configuration after the change: %+v; want its idle client closed", got)
	}
}
