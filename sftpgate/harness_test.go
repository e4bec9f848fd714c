package sftpgate

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"testing"

	"github.com/pkg/sftp"
	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/postern/postern/internal/testsshd"
	"github.com/postern/postern/internal/testwait"
)

// sharedTarget is the sshd of the tests that check the gate against
// OpenSSH's sftp-server, started by the first of them.
var sharedTarget testsshd.Shared

// TestMain stops the shared target after the tests, then fails the package
// if a goroutine outlived them.
func TestMain(m *testing.M) {
	code := m.Run()
	if err := sharedTarget.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// tcpPair returns the two ends of a loopback TCP connection. net.Pipe would
// deadlock when both sides write at once, which SFTP clients and servers do.
func tcpPair(t testing.TB) (net.Conn, net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := l.Accept()
		accepted <- c
	}()
	a, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b := <-accepted
	if b == nil {
		t.Fatal("accept failed")
	}
	return a, b
}

// memTarget is an in-memory SFTP target: every session dialed to it sees the
// same files.
type memTarget struct {
	handlers sftp.Handlers
	start    string // the upstream server's start directory ("/" if empty)
}

func newMemTarget() *memTarget { return &memTarget{handlers: sftp.InMemHandler()} }

// session opens an SFTP session to the target; close ends it and waits for
// its server.
func (m *memTarget) session(t testing.TB) (*sftp.Client, func() error) {
	t.Helper()
	c, closeFn, err := serveSession(t, m.handlers, m.start)
	if err != nil {
		t.Fatal(err)
	}
	return c, closeFn
}

// serveBoth starts a request server on one end of a loopback pair and
// returns the other end, the raw stream a Dialer hands to the gate; close
// ends it and waits for the server. It also returns the server's end, which
// a test closes to end the session from the target's side.
func (m *memTarget) serveBoth(t testing.TB) (net.Conn, func() error, net.Conn) {
	a, b := tcpPair(t)
	done := m.run(b)
	return a, func() error {
		err := a.Close()
		testwait.Recv(t, "the target's request server to end", done)
		return err
	}, b
}

// run serves the target's files on rwc (the server's end of a stream) until
// the stream ends; the channel is closed when the server has ended.
func (m *memTarget) run(rwc io.ReadWriteCloser) <-chan struct{} {
	var opts []sftp.RequestServerOption
	if m.start != "" {
		opts = append(opts, sftp.WithStartDirectory(m.start))
	}
	rs := sftp.NewRequestServer(rwc, m.handlers, opts...)
	done := make(chan struct{})
	go func() {
		defer close(done)
		rs.Serve()
		rs.Close()
	}()
	return done
}

// serveSession serves handlers with a RequestServer (starting in start, "/"
// if empty) over a loopback pair and returns a client to it; close ends the
// session and waits for its server.
func serveSession(t testing.TB, handlers sftp.Handlers, start string) (*sftp.Client, func() error, error) {
	a, b := tcpPair(t)
	var opts []sftp.RequestServerOption
	if start != "" {
		opts = append(opts, sftp.WithStartDirectory(start))
	}
	rs := sftp.NewRequestServer(b, handlers, opts...)
	done := make(chan struct{})
	go func() {
		defer close(done)
		rs.Serve()
		rs.Close()
	}()
	c, err := sftp.NewClientPipe(a, a)
	if err != nil {
		a.Close()
		testwait.Recv(t, "the target's request server to end", done)
		return nil, nil, err
	}
	return c, func() error {
		err := c.Close()
		testwait.Recv(t, "the target's request server to end", done)
		return err
	}, nil
}

// served waits, bounded, for Serve's result.
func (h *harness) served() error {
	h.t.Helper()
	return testwait.Recv(h.t, "Serve to return", h.done)
}

// patient returns cfg with its bounds on the target's answers (the version
// exchange, the home directory, the lstat of a rename's destination, the
// drain of forwarded requests) at the test's deadline, where cfg leaves
// them zero: a busy machine can delay a target past their defaults of
// seconds, and the test would then fail for the load.
func patient(t testing.TB, cfg Config) Config {
	if cfg.TargetTimeout == 0 {
		cfg.TargetTimeout = testwait.Remaining(t)
	}
	if cfg.Drain == 0 {
		cfg.Drain = testwait.Remaining(t)
	}
	return cfg
}

// harness runs Serve over loopback with in-memory targets and records what
// the gate asks the Decider and dials.
type harness struct {
	t       testing.TB
	targets map[string]*memTarget
	client  *sftp.Client // the agent's client
	conn    net.Conn     // the agent's end, for raw packets
	done    chan error   // Serve's result

	// mu protects ops, outcomes, dials, closes, upstreams and deny.
	mu        sync.Mutex
	ops       []Op
	outcomes  []opOutcome
	upstreams map[string]net.Conn // each alias's latest session, the target's end
	dials     map[string]int
	closes    map[string]int
	deny      func(Op) error
}

// opOutcome is an allowed operation and how it ended.
type opOutcome struct {
	op Op
	o  Outcome
}

type harnessOpts struct {
	fixed   string
	aliases []string
	home    string // the fixed target's start directory
	raw     bool   // no pkg/sftp client: the test speaks raw packets
	decide  Decider
	ride    Rider  // nil: every ride the gate offers is taken
	dial    Dialer // instead of in-memory targets
	config  func(*Config)
	stderr  io.Writer
}

func startHarness(t testing.TB, o harnessOpts) *harness {
	t.Helper()
	h := &harness{t: t, targets: map[string]*memTarget{}, dials: map[string]int{}, closes: map[string]int{},
		upstreams: map[string]net.Conn{}, done: make(chan error, 1)}
	names := o.aliases
	if o.fixed != "" {
		names = append([]string{o.fixed}, names...)
	}
	for _, a := range names {
		h.targets[a] = newMemTarget()
	}
	if o.fixed != "" && o.home != "" {
		h.targets[o.fixed].start = o.home
		h.seed(o.fixed, func(c *sftp.Client) {
			if err := c.MkdirAll(o.home); err != nil {
				t.Fatal(err)
			}
		})
	}
	decide := o.decide
	if decide == nil {
		decide = func(ctx context.Context, op Op) (Finish, error) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.ops = append(h.ops, op)
			if h.deny != nil {
				if err := h.deny(op); err != nil {
					return nil, err
				}
			}
			return func(o Outcome) {
				h.mu.Lock()
				defer h.mu.Unlock()
				h.outcomes = append(h.outcomes, opOutcome{op, o})
			}, nil
		}
	}
	if o.ride == nil {
		o.ride = func(context.Context, Op, Op) bool { return true }
	}
	cfg := Config{
		Aliases: o.aliases,
		Fixed:   o.fixed,
		Decide:  decide,
		Ride:    o.ride,
		Logger:  zerolog.Nop(),
		Dial: func(ctx context.Context, alias string) (*Upstream, error) {
			m := h.targets[alias]
			if m == nil {
				return nil, fmt.Errorf("no target %s", alias)
			}
			h.mu.Lock()
			h.dials[alias]++
			h.mu.Unlock()
			conn, closeFn, server := m.serveBoth(t)
			h.mu.Lock()
			h.upstreams[alias] = server
			h.mu.Unlock()
			return &Upstream{Conn: conn, Close: func() error {
				h.mu.Lock()
				h.closes[alias]++
				h.mu.Unlock()
				return closeFn()
			}}, nil
		},
	}
	if o.dial != nil {
		cfg.Dial = o.dial
	}
	cfg.Stderr = o.stderr
	cfg = patient(t, cfg)
	if o.config != nil {
		o.config(&cfg)
	}
	a, b := tcpPair(t)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { h.done <- Serve(ctx, b, cfg) }()
	h.conn = a
	t.Cleanup(func() {
		cancel()
		a.Close()
		testwait.Recv(t, "Serve to return at the end of the test", h.done)
		b.Close()
	})
	if !o.raw {
		c, err := sftp.NewClientPipe(a, a)
		if err != nil {
			t.Fatalf("agent client: %v", err)
		}
		h.client = c
		t.Cleanup(func() { c.Close() })
	}
	return h
}

// seed works on a target directly, around the gate.
func (h *harness) seed(alias string, f func(*sftp.Client)) {
	h.t.Helper()
	c, closeFn := h.targets[alias].session(h.t)
	defer closeFn()
	f(c)
}

// writeFile puts content at p on alias's target, around the gate.
func (h *harness) writeFile(alias, p, content string) {
	h.t.Helper()
	h.seed(alias, func(c *sftp.Client) {
		f, err := c.Create(p)
		if err != nil {
			h.t.Fatalf("seed %s:%s: %v", alias, p, err)
		}
		if _, err := f.Write([]byte(content)); err != nil {
			h.t.Fatal(err)
		}
		f.Close()
	})
}

// takeOutcomes returns the outcomes recorded so far and forgets them.
func (h *harness) takeOutcomes() []opOutcome {
	h.mu.Lock()
	defer h.mu.Unlock()
	o := h.outcomes
	h.outcomes = nil
	return o
}

func (h *harness) takeOps() []Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	ops := h.ops
	h.ops = nil
	return ops
}

func (h *harness) dialCount(alias string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.dials[alias]
}

// rawConn speaks SFTP packets directly, to see status codes and messages
// that pkg/sftp's client folds into os.ErrPermission and os.ErrNotExist.
type rawConn struct {
	t    testing.TB
	conn io.ReadWriter
	id   uint32
}

func newRawConn(t testing.TB, conn io.ReadWriter) *rawConn {
	r := &rawConn{t: t, conn: conn}
	r.send(fxpInit, uint32(3))
	if typ, _ := r.recv(); typ != fxpVersion {
		t.Fatalf("got packet %d; want version", typ)
	}
	return r
}

func (r *rawConn) send(typ byte, fields ...any) {
	r.t.Helper()
	if _, err := r.conn.Write(fuzzPacket(typ, fields...)); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rawConn) recv() (byte, []byte) {
	r.t.Helper()
	if c, ok := r.conn.(net.Conn); ok {
		c.SetReadDeadline(testwait.Deadline(r.t)) // a packet that never comes fails the test
	}
	var hdr [4]byte
	if _, err := io.ReadFull(r.conn, hdr[:]); err != nil {
		r.t.Fatal(err)
	}
	b := make([]byte, binary.BigEndian.Uint32(hdr[:]))
	if _, err := io.ReadFull(r.conn, b); err != nil {
		r.t.Fatal(err)
	}
	return b[0], b[1:]
}

// call sends a request (the id is added) and returns the answer's type and
// its payload after the id.
func (r *rawConn) call(typ byte, fields ...any) (byte, []byte) {
	r.t.Helper()
	r.id++
	r.send(typ, append([]any{r.id}, fields...)...)
	rt, p := r.recv()
	if got := binary.BigEndian.Uint32(p); got != r.id {
		r.t.Fatalf("got answer to id %d; want %d", got, r.id)
	}
	return rt, p[4:]
}

// status sends a request and returns the status code and message of the
// answer (fxOK with the packet type in the message when it is no status).
func (r *rawConn) status(typ byte, fields ...any) (uint32, string) {
	r.t.Helper()
	rt, p := r.call(typ, fields...)
	if rt != fxpStatus {
		return fxOK, fmt.Sprintf("packet %d", rt)
	}
	code := binary.BigEndian.Uint32(p)
	n := binary.BigEndian.Uint32(p[4:])
	return code, string(p[8 : 8+n])
}

// name sends a request answered with one name (realpath, readlink).
func (r *rawConn) name(typ byte, fields ...any) (string, error) {
	r.t.Helper()
	rt, p := r.call(typ, fields...)
	if rt == fxpStatus {
		n := binary.BigEndian.Uint32(p[4:])
		return "", errors.New(string(p[8 : 8+n]))
	}
	if rt != fxpName {
		r.t.Fatalf("got packet %d; want name", rt)
	}
	n := binary.BigEndian.Uint32(p[4:])
	return string(p[8 : 8+n]), nil
}
