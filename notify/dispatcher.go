package notify

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/postern/postern/metrics"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
)

// Defaults of Config's zero fields.
const (
	// DefaultPoll is how often a dispatcher looks for due notifications.
	// A request is announced within a second: at most one poll, then the
	// send.
	DefaultPoll = 250 * time.Millisecond
	// DefaultTimeout bounds one attempt: connecting, sending and reading
	// the status. Webhook receivers answer in well under a second; ten
	// gives a slow one its chance without holding a worker for long.
	DefaultTimeout = 10 * time.Second
	// DefaultWorkers is how many attempts one dispatcher makes at once, so
	// that a receiver that hangs delays no other channel.
	DefaultWorkers = 4
	// DefaultBackoffMin and DefaultBackoffMax bound the wait before a
	// retry: 1 s, doubled after each failure up to a minute (with jitter),
	// so that a two-minute request gets about six attempts and a receiver
	// that is down is not hammered.
	DefaultBackoffMin = time.Second
	DefaultBackoffMax = time.Minute
	// DefaultStopGrace is how long Run lets attempts in flight finish once
	// its context ends. An attempt cut short may already have reached its
	// receiver, which then gets it twice (it is given back to the outbox);
	// a short grace lets the usual quick answer land first without holding
	// a stopping postern for a whole timeout.
	DefaultStopGrace = 2 * time.Second
)

// Bounds of the dispatcher's housekeeping.
const (
	// finishTimeout bounds writing an attempt's outcome, which is done even
	// when the run's context has just ended, so that a stopping postern
	// gives its claimed notifications back at once instead of leaving them
	// to their leases.
	finishTimeout = 5 * time.Second
	// keepDone is how long ended outbox rows stay for the page's delivery
	// log; pruneEvery is how often older ones are deleted.
	keepDone   = 7 * 24 * time.Hour
	pruneEvery = time.Hour
	// claimBatch is how many due notifications DeliverDue claims at once.
	claimBatch = 100
	// errorLogEvery limits how often the same failure of a poll (the
	// database locked, say) is logged.
	errorLogEvery = time.Minute
)

// Store is what a dispatcher needs from package store; *store.Store
// implements it.
type Store interface {
	GetApproval(ctx context.Context, id string) (store.Approval, error)
	ChangeRequestShown(ctx context.Context, id string) (store.ChangeRequest, error)
	NotifyChannel(ctx context.Context, ref string) (*store.NotifyChannel, error)
	NotifyChannelTarget(ctx context.Context, id string) (store.NotifyTarget, error)
	RecordNotifyResult(ctx context.Context, channelID, errText string) error
	NextNotificationDue(ctx context.Context) (time.Time, bool, error)
	ClaimNotifications(ctx context.Context, claim string, lease time.Duration, limit int) ([]store.Notification, error)
	FinishNotification(ctx context.Context, n store.Notification, claim string, out store.NotifyOutcome) (bool, error)
	ExpireNotifications(ctx context.Context) ([]store.Notification, error)
	PruneNotifications(ctx context.Context, before time.Time) (int64, error)
}

// Config configures New.
type Config struct {
	Store   Store            // required
	BaseURL string           // the web page's public URL, for links; "" when postern serves none
	Logger  zerolog.Logger   // one line per attempt; never a URL or secret
	Now     func() time.Time // time.Now if nil; give it the store's clock

	Poll       time.Duration // DefaultPoll if zero
	Timeout    time.Duration // DefaultTimeout if zero
	Workers    int           // DefaultWorkers if zero
	BackoffMin time.Duration // DefaultBackoffMin if zero
	BackoffMax time.Duration // DefaultBackoffMax if zero
	StopGrace  time.Duration // DefaultStopGrace if zero
	// Jitter turns a backoff into the wait actually used; nil draws it at
	// random from [d/2, d] (equal jitter), so that retries from several
	// dispatchers spread out. Tests make it the identity.
	Jitter func(d time.Duration) time.Duration
	// Transport carries the attempts; nil uses a copy of
	// http.DefaultTransport without keep-alives (see newClient).
	Transport http.RoundTripper
	// Metrics counts the outcomes of delivery attempts (not of Test);
	// none if nil.
	Metrics *metrics.Metrics
}

// Dispatcher sends the outbox's notifications. Run it with Run; send a
// test message with Test. It is safe for concurrent use.
type Dispatcher struct {
	cfg    Config
	client *http.Client
	// id prefixes this dispatcher's claims; claims numbers them, so that
	// every claim value is unique.
	id     string
	claims atomic.Uint64
}

// New checks cfg and builds a dispatcher.
func New(cfg Config) (*Dispatcher, error) {
	if cfg.Store == nil {
		return nil, errors.New("notify: Config needs a Store")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.BackoffMin <= 0 {
		cfg.BackoffMin = DefaultBackoffMin
	}
	if cfg.BackoffMax <= 0 {
		cfg.BackoffMax = DefaultBackoffMax
	}
	if cfg.StopGrace <= 0 {
		cfg.StopGrace = DefaultStopGrace
	}
	if cfg.BackoffMax < cfg.BackoffMin {
		return nil, fmt.Errorf("notify: BackoffMax %v is below BackoffMin %v", cfg.BackoffMax, cfg.BackoffMin)
	}
	if cfg.Jitter == nil {
		cfg.Jitter = equalJitter
	}
	var b [6]byte
	rand.Read(b[:]) // never returns an error (Go 1.24+)
	return &Dispatcher{cfg: cfg, client: newClient(cfg.Transport), id: "dsp_" + hex.EncodeToString(b[:])}, nil
}

// equalJitter is a random wait in [d/2, d].
func equalJitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	return d/2 + mrand.N(d/2+1)
}

// lease is how long a claim holds a notification: longer than an attempt
// can take (the timeout) plus writing its outcome, so that a live
// dispatcher's row is never taken from it; a dead one's comes back after
// it.
func (d *Dispatcher) lease() time.Duration { return 2*d.cfg.Timeout + finishTimeout }

// newClaim is a claim value no other claim has.
func (d *Dispatcher) newClaim() string {
	return d.id + "-" + strconv.FormatUint(d.claims.Add(1), 10)
}

// Backoff is the wait (before jitter) after the attempts-th failed attempt:
// BackoffMin doubled for each failure after the first, at most BackoffMax.
func (d *Dispatcher) Backoff(attempts int) time.Duration {
	w := d.cfg.BackoffMin
	for i := 1; i < attempts && w < d.cfg.BackoffMax; i++ {
		w *= 2
	}
	return min(w, d.cfg.BackoffMax)
}

// Run sends due notifications until ctx ends. Every poll first gives up on
// notifications whose time ran out, then claims as many due ones as it has
// free workers. When ctx ends, attempts in flight get StopGrace to finish;
// those still unanswered then are stopped and given back to the outbox,
// due at once, for the next dispatcher. Run returns when all have ended.
func (d *Dispatcher) Run(ctx context.Context) {
	attemptCtx, stopAttempts := context.WithCancel(context.WithoutCancel(ctx))
	defer stopAttempts()
	var wg sync.WaitGroup
	defer d.drain(&wg, stopAttempts)
	workers := make(chan struct{}, d.cfg.Workers)
	t := time.NewTicker(d.cfg.Poll)
	defer t.Stop()
	var lastPrune time.Time
	var lastErr string
	var lastErrAt time.Time
	for {
		err := d.poll(ctx, attemptCtx, workers, &wg)
		if ctx.Err() != nil {
			return
		}
		if now := d.cfg.Now(); now.Sub(lastPrune) >= pruneEvery {
			lastPrune = now
			if _, perr := d.cfg.Store.PruneNotifications(ctx, now.Add(-keepDone)); perr != nil && err == nil {
				err = perr
			}
		}
		if err != nil && (err.Error() != lastErr || d.cfg.Now().Sub(lastErrAt) >= errorLogEvery) {
			lastErr, lastErrAt = err.Error(), d.cfg.Now()
			d.cfg.Logger.Warn().Err(err).Msg("notify: reading the outbox")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// drain waits for Run's attempts: StopGrace, then stop carries the
// stopping to them, and the wait is for their (prompt) end.
func (d *Dispatcher) drain(wg *sync.WaitGroup, stop context.CancelFunc) {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	t := time.NewTimer(d.cfg.StopGrace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		stop()
		<-done
	}
}

// poll does one round of Run: expire, then claim for the free workers and
// start an attempt for each, under attemptCtx.
func (d *Dispatcher) poll(ctx, attemptCtx context.Context, workers chan struct{}, wg *sync.WaitGroup) error {
	if err := d.expire(ctx); err != nil {
		return err
	}
	free := cap(workers) - len(workers)
	if free == 0 {
		return nil
	}
	due, ok, err := d.cfg.Store.NextNotificationDue(ctx)
	if err != nil || !ok || due.After(d.cfg.Now()) {
		return err
	}
	claim := d.newClaim()
	// The claim is not cut short by ctx: a stop that arrived while the
	// claim committed would leave the rows claimed with no worker to send
	// them, "sending" until the lease ran out. Claimed, they are attempted
	// under attemptCtx, which Run's drain gives StopGrace.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	ns, err := d.cfg.Store.ClaimNotifications(cctx, claim, d.lease(), free)
	cancel()
	if err != nil {
		return err
	}
	for _, n := range ns {
		workers <- struct{}{} // free, as counted above: never blocks
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-workers }()
			d.deliver(attemptCtx, claim, n)
		}()
	}
	return nil
}

// DeliverDue makes one attempt at every notification due now, waits for
// them, and returns how many it made. It is Run's work without the
// polling, for tests that move a clock between rounds.
func (d *Dispatcher) DeliverDue(ctx context.Context) (int, error) {
	if err := d.expire(ctx); err != nil {
		return 0, err
	}
	claim := d.newClaim()
	ns, err := d.cfg.Store.ClaimNotifications(ctx, claim, d.lease(), claimBatch)
	if err != nil {
		return 0, err
	}
	var wg sync.WaitGroup
	for _, n := range ns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.deliver(ctx, claim, n)
		}()
	}
	wg.Wait()
	return len(ns), nil
}

// expire gives up on notifications past their time, logging each.
func (d *Dispatcher) expire(ctx context.Context) error {
	gone, err := d.cfg.Store.ExpireNotifications(ctx)
	for _, n := range gone {
		d.logFor(n).Warn().Str("error", n.LastError).Msg("notify: notification not delivered")
	}
	return err
}

// logFor is the logger of one notification's lines.
func (d *Dispatcher) logFor(n store.Notification) *zerolog.Logger {
	c := d.cfg.Logger.With().Str("notification", n.ID).Str("channel", n.Channel)
	switch {
	case n.Head != "":
		c = c.Str("head", n.Head)
	case n.ChangeID != "":
		c = c.Str("change", n.ChangeID)
	default:
		c = c.Str("approval", n.ApprovalID)
	}
	l := c.Str("event", string(n.Event)).Int("attempt", n.Attempts).Logger()
	return &l
}

// deliver makes the attempt claim holds on n and records its outcome.
func (d *Dispatcher) deliver(ctx context.Context, claim string, n store.Notification) {
	out, a := d.attempt(ctx, n)
	d.cfg.Metrics.Notification(notifyOutcome(out, a))
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	recorded, err := d.cfg.Store.FinishNotification(fctx, n, claim, out)
	log := d.logFor(n)
	switch {
	case err != nil:
		log.Error().Err(err).Str("outcome", out.State).Msg("notify: recording a notification's outcome")
		return
	case !recorded:
		log.Info().Str("outcome", out.State).Msg("notify: outcome not recorded: the notification was claimed again or its channel removed")
		return
	}
	switch {
	case out.State == store.NotificationDelivered:
		log.Info().Int("status", out.Status).Msg("notify: notification delivered")
	case out.State == store.NotificationCancelled:
		log.Info().Str("reason", out.Error).Msg("notify: notification not sent")
	case a.stopped:
		log.Info().Msg("notify: attempt given back at shutdown")
	case out.State == store.NotificationQueued:
		log.Warn().Int("status", out.Status).Str("error", out.Error).
			Str("retry_in", out.RetryAt.Sub(d.cfg.Now()).Round(time.Millisecond).String()).
			Msg("notify: notification failed; will retry")
	default:
		log.Warn().Int("status", out.Status).Str("error", out.Error).Msg("notify: notification not delivered")
	}
}

// notifyOutcome is the metrics outcome of an attempt whose result is out.
func notifyOutcome(out store.NotifyOutcome, a attempt) string {
	switch {
	case out.State == store.NotificationDelivered:
		return metrics.NotifyDelivered
	case out.State == store.NotificationCancelled:
		return metrics.NotifyCancelled
	case a.stopped:
		return metrics.NotifyStopped
	case out.State == store.NotificationQueued:
		return metrics.NotifyRetry
	}
	return metrics.NotifyFailed
}

// attempt reads what n needs, sends it, and says what became of it.
func (d *Dispatcher) attempt(ctx context.Context, n store.Notification) (store.NotifyOutcome, attempt) {
	now := d.cfg.Now()
	p, skip, err := d.payloadOf(ctx, n, now)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return store.NotifyOutcome{State: store.NotificationCancelled, Error: "the request was removed"}, attempt{}
	case err != nil:
		return d.retry(n, now, attempt{err: "postern could not read the request: " + err.Error(), retry: true})
	case skip != "":
		return store.NotifyOutcome{State: store.NotificationCancelled, Error: skip}, attempt{}
	}
	target, err := d.cfg.Store.NotifyChannelTarget(ctx, n.ChannelID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return store.NotifyOutcome{State: store.NotificationCancelled, Error: "the channel was removed"}, attempt{}
	case err != nil:
		return d.retry(n, now, attempt{err: "postern could not open the channel: " + err.Error(), retry: true})
	}
	defer clear(target.Secret)
	m, err := render(target.Format, p, target.Secret)
	if err != nil {
		return store.NotifyOutcome{State: store.NotificationFailed, Error: err.Error()}, attempt{}
	}
	res := post(ctx, d.client, target, m, d.cfg.Timeout, now)
	return d.retry(n, now, res)
}

// payloadOf reads the request n is about, an operation's or a change's,
// as it stands now and describes it. skip says why n is not to be sent: a
// pending event whose request was decided (or, for a change, expired)
// before it could be announced, which the decided event follows.
func (d *Dispatcher) payloadOf(ctx context.Context, n store.Notification, now time.Time) (p Payload, skip string, err error) {
	if n.Head != "" {
		h, err := policy.ParseHead(n.Head)
		if err != nil {
			return Payload{}, "", fmt.Errorf("notify: %s: %w", n.ID, err)
		}
		return newHeadPayload(h, n.ID, now), "", nil
	}
	if n.ChangeID != "" {
		c, err := d.cfg.Store.ChangeRequestShown(ctx, n.ChangeID)
		switch {
		case err != nil:
			return Payload{}, "", err
		case n.Event == store.NotifyPending && c.Status != store.ChangePending:
			return Payload{}, "the change request was " + c.Status + " before it could be announced", nil
		}
		return newChangePayload(c, string(n.Event), n.ID, d.cfg.BaseURL, now), "", nil
	}
	a, err := d.cfg.Store.GetApproval(ctx, n.ApprovalID)
	switch {
	case err != nil:
		return Payload{}, "", err
	case n.Event == store.NotifyPending && a.Status != store.ApprovalPending:
		return Payload{}, "the request was " + a.Status + " before it could be announced", nil
	}
	p = newPayload(a, string(n.Event), n.ID, d.cfg.BaseURL, now)
	if n.Event == store.NotifyBound {
		p = boundSummary(p, n.BoundScope, n.BoundWaiting)
	}
	return p, "", nil
}

// retry turns an attempt into the outcome to record: delivered, given back
// (postern stopping), failed for good, or queued again after the backoff
// (or the receiver's Retry-After, if longer) — unless that would be after
// n's give-up time, when it fails now.
func (d *Dispatcher) retry(n store.Notification, now time.Time, a attempt) (store.NotifyOutcome, attempt) {
	switch {
	case a.err == "":
		return store.NotifyOutcome{State: store.NotificationDelivered, Status: a.status}, a
	case a.stopped:
		return store.NotifyOutcome{State: store.NotificationQueued, RetryAt: now}, a
	case !a.retry:
		return store.NotifyOutcome{State: store.NotificationFailed, Status: a.status, Error: a.err}, a
	}
	at := now.Add(max(d.cfg.Jitter(d.Backoff(n.Attempts)), a.retryAfter))
	if !at.Before(n.GiveUpAt) {
		why := "the request expires"
		switch {
		case n.ChangeID != "" && n.Event == store.NotifyPending:
			why = "the change request expires"
		case n.Event == store.NotifyDecided:
			why = "the retry window of a decision (" + store.NotifyDecidedWindow.String() + ") ends"
		case n.Event == store.NotifyBound:
			why = "the waiting requests expire"
		case n.Event == store.NotifyAuditHead:
			why = "the next published head supersedes it"
		}
		return store.NotifyOutcome{State: store.NotificationFailed, Status: a.status,
			Error: a.err + fmt.Sprintf("; gave up after %d attempts: %s before the next", n.Attempts, why)}, a
	}
	return store.NotifyOutcome{State: store.NotificationQueued, RetryAt: at, Status: a.status, Error: a.err}, a
}

// TestResult is what a test message came to.
type TestResult struct {
	Channel   store.NotifyChannel // as it stands after the test
	Delivered bool
	Status    int    // the receiver's HTTP status; 0 if it never answered
	Error     string // why it was not delivered; never the URL
}

// Test sends a test message (event "test", about a made-up request) to the
// channel with that id or name, now, once, and records the result as the
// channel's last delivery or failure. An error is a failure to try (an
// unknown channel, the database); a receiver's refusal is a result.
func (d *Dispatcher) Test(ctx context.Context, ref string) (TestResult, error) {
	ch, err := d.cfg.Store.NotifyChannel(ctx, ref)
	if err != nil {
		return TestResult{}, err
	}
	target, err := d.cfg.Store.NotifyChannelTarget(ctx, ch.ID)
	if err != nil {
		return TestResult{}, err
	}
	defer clear(target.Secret)
	now := d.cfg.Now()
	var b [6]byte
	rand.Read(b[:])
	p := newPayload(testApproval(now), EventTest, "ntf_test_"+hex.EncodeToString(b[:]), d.cfg.BaseURL, now)
	if d.cfg.BaseURL != "" {
		p.Link = d.cfg.BaseURL + "/approvals"
	}
	m, err := render(target.Format, p, target.Secret)
	if err != nil {
		return TestResult{}, err
	}
	a := post(ctx, d.client, target, m, d.cfg.Timeout, now)
	if a.stopped {
		return TestResult{}, fmt.Errorf("notify: test of %s: %w", ch.Name, ctx.Err())
	}
	if err := d.cfg.Store.RecordNotifyResult(ctx, ch.ID, a.err); err != nil {
		return TestResult{}, err
	}
	log := d.cfg.Logger.With().Str("channel", ch.Name).Int("status", a.status).Logger()
	if a.err == "" {
		log.Info().Msg("notify: test message delivered")
	} else {
		log.Warn().Str("error", a.err).Msg("notify: test message not delivered")
	}
	after, err := d.cfg.Store.NotifyChannel(ctx, ch.ID)
	if err != nil {
		return TestResult{}, err
	}
	return TestResult{Channel: *after, Delivered: a.err == "", Status: a.status, Error: a.err}, nil
}
