package auditsink

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/postern/postern/metrics"
	"github.com/postern/postern/store"
)

// Defaults of Options.
const (
	// DefaultBatch bounds the rows of one Send: an HTTP body or a burst
	// to syslog stays small, and a receiver that was down catches up in
	// steps that each move the cursor.
	DefaultBatch = 200
	// DefaultPoll is how long an idle shipper waits before it looks for
	// new rows: a row reaches the receiver within about this long.
	DefaultPoll = time.Second
	// DefaultLease is how long a replica holds a sink after its last
	// renewal; it renews every third of it. A replica that dies hands its
	// sinks to another after at most this long.
	DefaultLease = 30 * time.Second
	// DefaultMinBackoff and DefaultMaxBackoff bound the wait after a failed
	// Send, doubled from the one to the other while the receiver fails.
	DefaultMinBackoff = time.Second
	DefaultMaxBackoff = time.Minute
	// DefaultSendTimeout bounds one Send, connecting included.
	DefaultSendTimeout = 30 * time.Second
)

// releaseTimeout bounds giving up the lease at the end of Flush.
const releaseTimeout = 2 * time.Second

// Store is what a Shipper reads and writes; *store.Store implements it.
type Store interface {
	ListAuditAfter(ctx context.Context, afterSeq int64, since time.Time, n int) ([]store.AuditRow, error)
	AuditHead(ctx context.Context) (seq int64, hash []byte, err error)
	ClaimAuditSink(ctx context.Context, name, holder string, lease time.Duration, force bool) (cursor int64, claimed bool, err error)
	AdvanceAuditSink(ctx context.Context, name, holder string, seq int64, lease time.Duration) error
	ReleaseAuditSink(ctx context.Context, name, holder string) error
}

// Sink delivers rows to one receiver. A Shipper calls it from one
// goroutine.
type Sink interface {
	// Send delivers rows, non-empty and in seq order, within ctx, and
	// returns nil only when the receiver has taken every one of them as
	// far as its transport can tell. After an error the Shipper sends the
	// same rows again (and maybe more).
	Send(ctx context.Context, rows []store.AuditRow) error
	// Close releases the sink's connection or file; the next Send opens
	// it again.
	Close() error
}

// Options configure a Shipper. Zero durations and sizes take the defaults.
type Options struct {
	Name    string // the sink's name: its cursor's key
	Sink    Sink
	Store   Store
	Holder  string // this replica's id, the lease's holder
	Log     zerolog.Logger
	Metrics *metrics.AuditSinkMetrics // none if nil
	// Exclusive: no other process ships from this database (SQLite, whose
	// data directory one serve holds), so a lease a killed run left is
	// taken at once rather than after it runs out.
	Exclusive bool
	// Now is the clock of the lease's renewals (time.Now if nil); tests
	// share the store's fake one.
	Now func() time.Time

	Batch       int
	Poll        time.Duration
	Lease       time.Duration
	MinBackoff  time.Duration
	MaxBackoff  time.Duration
	SendTimeout time.Duration
}

// Shipper ships the audit log to one sink. Run it in one goroutine, then
// Flush it once Run has returned.
type Shipper struct {
	o Options

	held      bool      // this replica holds the lease
	cursor    int64     // the last delivered seq, as stored
	renewedAt time.Time // when the lease was last claimed or renewed
	backoff   time.Duration
	failing   bool // the last Send failed (for logging the recovery)
}

// errNotHeld: another replica ships the sink.
var errNotHeld = errors.New("auditsink: another replica ships the sink")

// New checks o and returns its Shipper.
func New(o Options) (*Shipper, error) {
	if o.Name == "" || o.Sink == nil || o.Store == nil || o.Holder == "" {
		return nil, errors.New("auditsink: a shipper needs a name, a sink, a store and a holder")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if o.Batch <= 0 {
		o.Batch = DefaultBatch
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	def(&o.Poll, DefaultPoll)
	def(&o.Lease, DefaultLease)
	def(&o.MinBackoff, DefaultMinBackoff)
	def(&o.MaxBackoff, DefaultMaxBackoff)
	def(&o.SendTimeout, DefaultSendTimeout)
	o.Log = o.Log.With().Str("sink", o.Name).Logger()
	return &Shipper{o: o}, nil
}

// Name is the sink's name.
func (s *Shipper) Name() string { return s.o.Name }

// Run ships rows as they are written until ctx ends. A failure is logged
// and retried after a backoff; Run never gives up before ctx ends.
func (s *Shipper) Run(ctx context.Context) {
	for ctx.Err() == nil {
		n, err := s.step(ctx)
		var wait time.Duration
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, errNotHeld):
			wait = s.o.Lease / 3
		case err != nil:
			wait = s.nextBackoff()
		case n == s.o.Batch:
			// More rows may be waiting: no pause.
		default:
			wait = s.o.Poll
		}
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}
}

// Flush ships what is left, until the sink has caught up, a Send fails or
// ctx ends (the caller bounds it), then gives up the lease, so that
// another replica takes the sink over at once, and closes the sink. serve
// calls it at shutdown, once the sessions have written their last rows.
func (s *Shipper) Flush(ctx context.Context) error {
	var err error
	for ctx.Err() == nil {
		var n int
		if n, err = s.step(ctx); err != nil || n == 0 {
			break
		}
	}
	if err == nil {
		err = ctx.Err()
	}
	if s.held {
		// Released even when ctx ran out shipping: another replica then
		// takes the sink over at once rather than after the lease.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		if rerr := s.o.Store.ReleaseAuditSink(rctx, s.o.Name, s.o.Holder); rerr != nil && err == nil {
			err = rerr
		}
		cancel()
		s.held = false
	}
	if cerr := s.o.Sink.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("auditsink: %s: close: %w", s.o.Name, cerr)
	}
	if errors.Is(err, errNotHeld) {
		err = nil // another replica ships it: nothing left for this one
	}
	return err
}

// nextBackoff doubles the wait after a failure, from MinBackoff to
// MaxBackoff.
func (s *Shipper) nextBackoff() time.Duration {
	s.backoff = min(max(2*s.backoff, s.o.MinBackoff), s.o.MaxBackoff)
	return s.backoff
}

// step claims the lease if needed and ships at most one batch. It returns
// how many rows it delivered.
func (s *Shipper) step(ctx context.Context) (int, error) {
	if !s.held {
		cursor, claimed, err := s.o.Store.ClaimAuditSink(ctx, s.o.Name, s.o.Holder, s.o.Lease, s.o.Exclusive)
		if err != nil {
			s.o.Log.Error().Err(err).Msg("audit sink: claim failed")
			return 0, err
		}
		if !claimed {
			return 0, errNotHeld
		}
		s.o.Log.Info().Int64("cursor", cursor).Msg("audit sink: shipping from cursor")
		s.held, s.cursor, s.renewedAt = true, cursor, s.o.Now()
	} else if s.o.Now().Sub(s.renewedAt) >= s.o.Lease/3 {
		// Renewed before sending, not only after: a replica that was
		// stalled past its lease finds out that another took the sink
		// over before it sends rows the other sends too.
		if err := s.advance(ctx, s.cursor); err != nil {
			return 0, err
		}
	}
	rows, err := s.o.Store.ListAuditAfter(ctx, s.cursor, time.Time{}, s.o.Batch)
	if err != nil {
		s.o.Log.Error().Err(err).Msg("audit sink: read rows failed")
		return 0, err
	}
	if len(rows) == 0 {
		// Nothing after the cursor: none behind, without reading the
		// head (an idle shipper polls every Poll).
		s.o.Metrics.Behind(s.o.Name, 0)
		return 0, nil
	}
	sctx, cancel := context.WithTimeout(ctx, s.o.SendTimeout)
	err = s.o.Sink.Send(sctx, rows)
	cancel()
	if err != nil {
		if cerr := s.o.Sink.Close(); cerr != nil {
			s.o.Log.Debug().Err(cerr).Msg("audit sink: close after a failure")
		}
		if ctx.Err() != nil {
			return 0, err // stopped, not failed: the next run sends them
		}
		s.o.Metrics.SendFailure(s.o.Name)
		s.setBehind(ctx) // a receiver that is down falls behind: say so
		s.o.Log.Warn().Err(err).Int64("first_seq", rows[0].Seq).Int("rows", len(rows)).
			Msg("audit sink: send failed; will retry from the cursor")
		s.failing = true
		return 0, err
	}
	if s.failing {
		s.o.Log.Info().Int64("first_seq", rows[0].Seq).Msg("audit sink: delivering again")
		s.failing = false
	}
	s.backoff = 0
	last := rows[len(rows)-1].Seq
	if err := s.advance(ctx, last); err != nil {
		return 0, err
	}
	s.setBehind(ctx)
	return len(rows), nil
}

// advance stores the cursor at seq and renews the lease. A lease lost to
// another replica ends this one's shipping until it can claim it again.
func (s *Shipper) advance(ctx context.Context, seq int64) error {
	err := s.o.Store.AdvanceAuditSink(ctx, s.o.Name, s.o.Holder, seq, s.o.Lease)
	if errors.Is(err, store.ErrAuditSinkLost) {
		s.o.Log.Warn().Msg("audit sink: another replica took the sink over")
		s.held = false
		return errNotHeld
	}
	if err != nil {
		s.o.Log.Error().Err(err).Msg("audit sink: store cursor failed")
		return err
	}
	s.cursor, s.renewedAt = max(seq, s.cursor), s.o.Now()
	return nil
}

// setBehind updates the rows-behind gauge; a failed read leaves it.
func (s *Shipper) setBehind(ctx context.Context) {
	if s.o.Metrics == nil {
		return
	}
	head, _, err := s.o.Store.AuditHead(ctx)
	if err == nil {
		s.o.Metrics.Behind(s.o.Name, max(head-s.cursor, 0))
	}
}
