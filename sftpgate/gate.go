package sftpgate

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/postern/postern/metrics"
	"github.com/postern/postern/policy"
)

// Op is one SFTP operation as the Decider sees it.
type Op struct {
	Alias string       // the connection the operation goes to
	Class policy.Class // read, write or destructive
	// Method names the operation: get (open for reading), put (open for
	// writing), open (for both), list (opendir), stat, lstat, realpath,
	// readlink, statvfs, expand-path, home-directory, users-groups-by-id,
	// limits, setstat, fsetstat, lsetstat, mkdir, rename, posix-rename,
	// symlink, hardlink, copy-data, remove, rmdir.
	Method string
	// Paths are the paths on the target: one, or two for rename and
	// hard link (source, then destination) and for symlink (the link's
	// target as it will be stored, then the link), like ln's arguments.
	Paths []string
	// Detail is what else an approver needs to judge it: open flags and
	// mode, the attributes a setstat sets, whether a rename replaces a
	// file. "" if nothing.
	Detail string
}

// Outcome is how a decided operation ended.
type Outcome struct {
	// Answered is false when the session ended before any answer came.
	Answered bool
	// Status is the answer's SFTP status code (SSH_FX_*): the target's,
	// or the gate's when it answered for the target (an unreachable
	// target is SSH_FX_NO_CONNECTION). An answer that carries data (a
	// handle, names, attributes) is SSH_FX_OK.
	Status uint32
	// Message is the status message of an answer other than SSH_FX_OK.
	Message string
	// Rode lists, for an open for writing, what rode on its decision and
	// how the target answered each (docs/sftp.md, "riding on a write"):
	// an fsetstat on its handle, a setstat of its file right after the
	// handle was closed, a copy-data into it. At most maxRideNotes, then
	// a count of the rest.
	Rode []string
	// Transfer is what went through the handle of a file's open (get,
	// put, open) that the target granted; nil for any other operation.
	Transfer *Transfer
}

// Transfer is what went through one file handle, from the target's answer
// to its open to its answer to the close. An open's row is written only
// when the handle is closed (or the session ends with it open), so that it
// can say how much data left or reached the target: counting at the open,
// as postern once did, audited every download and upload as 0 bytes.
type Transfer struct {
	// Read is the data the target's answers to reads through the handle
	// carried to the agent (a download); Written the data of the agent's
	// writes through it that the target acknowledged (an upload).
	Read, Written int64
	// Held is how long the handle was open: from the target's answer to
	// the open to its answer to the close, or to the end of the session
	// (Closed false) when it ended with the handle still open.
	Held   time.Duration
	Closed bool
}

// Finish records the outcome of an operation the Decider let run. The gate
// calls it exactly once, after the agent has been sent the answer; for an
// open of a file that the target granted, once the handle is closed and
// every read and write through it has been answered (or the session
// ended), so that its row says what went through it (Outcome.Transfer);
// for an open for writing, also once what rides on the write has been
// answered, so that its row says what rode on it.
type Finish func(Outcome)

// Decider decides op. nil error lets it run, and then finish (which may be
// nil) is called with its outcome. A refusal's Error() is sent to the agent
// as the status message of a permission-denied answer, and on Stderr; a
// refusal that wraps ErrNoSuchAlias is answered as for a missing path
// instead. It may block (an approval) and must honour ctx, which ends when
// the agent stops sending or the session ends.
type Decider func(ctx context.Context, op Op) (Finish, error)

// ErrNoSuchAlias is what a Decider's refusal wraps when the agent holds no
// grant for op.Alias (one revoked during the session): the gate answers
// SSH_FX_NO_SUCH_FILE, as a server does for a path that is not there, and
// the alias is gone from the virtual root at once. The Decider audits it
// as any refusal.
var ErrNoSuchAlias = errors.New("sftpgate: no such alias")

// Rider says whether op, a change of modes, times or a size that rides on
// a write (docs/sftp.md), may still ride on it: write is the open of that
// write's handle as it was decided. It returns true only while the rule
// that let write through would still let it through the same way (a rule
// changed since, to deny, to ask or to allow, means no), without asking
// anyone. The gate then forwards op undecided and records it on write's
// row (Outcome.Rode); otherwise op is decided on its own like any other.
type Rider func(ctx context.Context, write, op Op) bool

// Refusal records a refusal the gate makes itself, with no Decider asked:
// a change in the virtual root "/", an operation across two aliases,
// statvfs of "/", a path no target may be sent. op's Paths are the agent's
// own, as it sent them (control bytes replaced), since the operation
// reaches no target; its Alias is "" unless one alias is concerned. reason
// is what the agent was told.
type Refusal func(op Op, reason string)

// Upstream is one SFTP session to a target: the byte stream of its sftp
// subsystem, before the version exchange.
type Upstream struct {
	Conn io.ReadWriter
	// Stderr, if set, is the session's stderr (an sftp-server run with -e
	// logs there). It is copied to Config.Stderr, as OpenSSH's client shows
	// it, or read and dropped: unread, it would fill the channel's window
	// and stall the session. It must end (io.EOF) once Close has run.
	Stderr io.Reader
	// Close ends the session and releases its channel; it must make a
	// blocked read of Conn return. If nil, Conn is closed if it is an
	// io.Closer.
	Close func() error
}

// Dialer opens an SFTP session to alias's target.
type Dialer func(ctx context.Context, alias string) (*Upstream, error)

// DialError is Serve's error when the fixed view's target could not be
// dialed; nothing was served. Err is the Dialer's.
type DialError struct {
	Alias string
	Err   error
}

func (e *DialError) Error() string {
	return fmt.Sprintf("sftpgate: open sftp session to %s: %v", e.Alias, e.Err)
}

func (e *DialError) Unwrap() error { return e.Err }

// Defaults for Config's durations.
const (
	// DefaultTargetTimeout bounds the target's answer to postern's own
	// requests: the version exchange, the home directory, the lstat that
	// tells an approver whether a rename replaces a file.
	DefaultTargetTimeout = 30 * time.Second
	// DefaultDrain bounds how long a session that the agent ended still
	// waits for the answers to requests already forwarded, so that their
	// outcomes are recorded.
	DefaultDrain = 5 * time.Second
)

// Config configures Serve.
type Config struct {
	// Aliases lists the agent's aliases: the directories of the virtual
	// root.
	Aliases []string
	// Fixed, if set, serves that alias's own tree instead of the virtual
	// root: a pass-through to one upstream session.
	Fixed string
	// Granted, if set, reads the agent's aliases as they are now. The
	// virtual root calls it whenever it answers about "/" or "/ALIAS"
	// itself (a listing, a stat, a mkdir), so that a grant revoked during
	// the session is gone from "/" at once and one given appears. On an
	// error the aliases stay as they were: every operation on a target is
	// decided by the Decider anyway. Aliases alone if nil.
	Granted func(ctx context.Context) ([]string, error)
	Decide  Decider
	Dial    Dialer
	// Ride, if set, decides whether a change rides on a write (Rider). If
	// nil nothing rides: every fsetstat and setstat is decided on its own.
	Ride Rider
	// Refused, if set, records the gate's own refusals (Refusal); it is
	// called from the goroutine that records outcomes, not the one that
	// answers the agent.
	Refused Refusal
	Logger  zerolog.Logger
	// Stderr, if set, also receives each refusal's message as one line.
	// OpenSSH's sftp and scp print only a status code's generic text
	// ("Permission denied"), never the server's message, so without it an
	// agent using them cannot learn why. The bastion passes the session's
	// stderr. None if nil.
	Stderr io.Writer

	TargetTimeout time.Duration // DefaultTargetTimeout if zero
	Drain         time.Duration // DefaultDrain if zero
	// Now is the clock that times how long a file handle is open
	// (Transfer.Held); time.Now if nil.
	Now func() time.Time

	// Metrics counts the session's packet bytes each way and its requests
	// by type; none if nil.
	Metrics *metrics.Metrics
}

// Bounds of one session.
const (
	// maxQueued bounds the agent's packets read and not yet forwarded.
	// While a request waits for a decision the gate keeps reading behind
	// it, up to this many; then the agent's writes wait (SSH flow
	// control). At MaxPacket each, 4 MiB.
	maxQueued = 16
	// maxOutstanding bounds the requests forwarded and not yet answered;
	// OpenSSH's sftp keeps 64 in flight, pkg/sftp 64.
	maxOutstanding = 1024
	// maxHandles bounds the handles one session holds open (OpenSSH's
	// sftp-server allows about as many as its file descriptor limit).
	maxHandles = 4096
)

// Serve runs the SFTP subsystem on rwc (the agent's session channel) until
// the agent ends the session or ctx ends. It returns nil on a clean end
// (the caller then sends exit-status 0), and closes every upstream it
// opened.
//
// Serve leaves rwc open when the agent ends the session, so that the caller
// can still send exit-status on it; it closes rwc to stop when ctx ends or
// when it cannot go on (the target ended the fixed view's session). In the
// fixed view it dials the target before reading anything; a failed dial is
// returned and nothing is served.
func Serve(ctx context.Context, rwc io.ReadWriteCloser, cfg Config) error {
	if cfg.Decide == nil || cfg.Dial == nil {
		return errors.New("sftpgate: Config needs Decide and Dial")
	}
	if cfg.TargetTimeout <= 0 {
		cfg.TargetTimeout = DefaultTargetTimeout
	}
	if cfg.Drain <= 0 {
		cfg.Drain = DefaultDrain
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := newSession(ctx, rwc, cfg)
	defer s.cancel()

	var fixedUp *Upstream
	if cfg.Fixed != "" {
		u, err := cfg.Dial(s.ctx, cfg.Fixed)
		if err == nil && (u == nil || u.Conn == nil) {
			err = errors.New("dialer returned no session")
		}
		if err != nil {
			return &DialError{Alias: cfg.Fixed, Err: err}
		}
		fixedUp = u
	}

	// When ctx ends, closing the agent's channel and the upstreams ends
	// every read and write the session's goroutines may be blocked in.
	stop := context.AfterFunc(ctx, func() {
		rwc.Close()
		s.closeUpstreams()
	})
	defer stop()

	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.readAgent()
	}()
	go func() {
		defer close(s.recorded)
		s.recordOutcomes()
	}()
	err := s.run(fixedUp)
	s.end(err)
	if ctx.Err() != nil {
		return fmt.Errorf("sftpgate: %w", ctx.Err())
	}
	return err
}

// session is one agent's SFTP session.
type session struct {
	cfg   Config
	log   zerolog.Logger
	fixed string
	// aliases are the virtual root's directories, and names the same
	// sorted: Config.Aliases, then as Config.Granted reads them and less
	// those the Decider found no grant for. Only the dispatcher reads and
	// writes them.
	aliases map[string]bool
	names   []string
	started time.Time // the virtual directories' modification time

	// ctx ends with the session; decideCtx also when the agent stops
	// sending, so that a request waiting for an approval stops waiting.
	ctx          context.Context
	cancel       context.CancelFunc
	decideCtx    context.Context
	cancelDecide context.CancelFunc

	agentIn *bufio.Reader
	agent   *agentWriter
	// free holds packet buffers for the agent reader: one per queued
	// packet, back here once forwarded.
	free  chan []byte
	rwc   io.ReadWriteCloser
	queue chan []byte   // the agent's packets, in order; closed when its stream ends
	stop  chan struct{} // closed when the dispatcher stops taking packets
	// agentEnd is why the agent's stream ended (io.EOF for a clean end);
	// read after queue is closed.
	agentEnd error
	eof      atomic.Bool // the agent ended its stream

	// slots holds one token per request forwarded and not yet answered.
	slots chan struct{}

	// home is the fixed view's start directory, for showing relative
	// paths in decisions; "" in the virtual root.
	home string
	// fixedUp is the fixed view's upstream; nil in the virtual root.
	fixedUp *upstream

	// wg counts the session's goroutines: the agent reader and each
	// upstream reader.
	wg sync.WaitGroup

	// upMu protects ups and closed.
	upMu   sync.Mutex
	ups    map[string]*upstream
	closed bool

	// mu protects handles, nextHandle and each handle's record (fin,
	// outcome, riding, settled, dropped). Lock order: upMu is never held
	// while taking mu, nor mu while taking an upstream's mu.
	mu         sync.Mutex
	handles    map[string]*handle
	nextHandle uint64

	// justClosed is the write handle the agent closed last, while a
	// setstat of its file may still ride on it: until the agent asks for
	// anything but a stat or setstat of that file. Only the dispatcher
	// reads and writes it.
	justClosed *handle

	// readerDone is closed when the agent reader has ended.
	readerDone chan struct{}
	// outcomes queues the decided operations' outcomes for the recorder
	// goroutine; recorded is closed when it has run them all.
	outcomes chan func()
	recorded chan struct{}
	// dead is closed, with deadErr set, when the session cannot go on
	// (the fixed view's target ended it); the dispatcher then stops.
	dead    chan struct{}
	deadErr error
	dieOnce sync.Once
}

func newSession(ctx context.Context, rwc io.ReadWriteCloser, cfg Config) *session {
	names, set := sortedAliases(cfg.Aliases)
	s := &session{
		cfg:        cfg,
		log:        cfg.Logger,
		fixed:      cfg.Fixed,
		aliases:    set,
		names:      names,
		started:    time.Now(),
		rwc:        rwc,
		agentIn:    bufio.NewReaderSize(rwc, 32<<10),
		agent:      &agentWriter{w: rwc, metrics: cfg.Metrics},
		queue:      make(chan []byte, maxQueued),
		free:       make(chan []byte, maxQueued+2),
		stop:       make(chan struct{}),
		dead:       make(chan struct{}),
		readerDone: make(chan struct{}),
		outcomes:   make(chan func(), maxOutstanding),
		recorded:   make(chan struct{}),
		slots:      make(chan struct{}, maxOutstanding),
		ups:        map[string]*upstream{},
		handles:    map[string]*handle{},
	}
	s.ctx, s.cancel = context.WithCancel(ctx)
	s.decideCtx, s.cancelDecide = context.WithCancel(s.ctx)
	return s
}

// readAgent reads the agent's packets into the queue until its stream ends
// or the dispatcher stops.
func (s *session) readAgent() {
	defer close(s.readerDone)
	defer close(s.queue)
	for {
		frame, err := readPacket(s.agentIn, s.getBuf(), MaxPacket)
		s.cfg.Metrics.SFTPBytes(metrics.FromAgent, len(frame))
		if err != nil {
			s.agentEnd = err
			if err == io.EOF {
				s.eof.Store(true)
				// Nobody will read an approval's outcome.
				s.cancelDecide()
			}
			return
		}
		select {
		case s.queue <- frame:
		case <-s.stop:
			s.putBuf(frame)
			return
		}
	}
}

// agentWriter sends whole packets to the agent, one at a time.
type agentWriter struct {
	// mu serialises packets from the dispatcher and the upstream readers.
	mu      sync.Mutex
	w       io.Writer
	metrics *metrics.Metrics // nil-safe
}

func (a *agentWriter) write(frame []byte) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	n, err := a.w.Write(frame)
	a.metrics.SFTPBytes(metrics.ToAgent, n)
	return err
}

// getBuf returns a free packet buffer, or a new one.
func (s *session) getBuf() []byte {
	select {
	case b := <-s.free:
		return b[:0]
	default:
		return make([]byte, 0, 4<<10)
	}
}

// putBuf gives a forwarded packet's buffer back, unless enough are kept.
func (s *session) putBuf(b []byte) {
	select {
	case s.free <- b[:0]:
	default:
	}
}
