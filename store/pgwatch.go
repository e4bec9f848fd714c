package store

import (
	"context"
	"net"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"
)

// ApprovalsChannel is the PostgreSQL notification channel on which the
// database announces every new, decided, expired, revoked or removed
// approval request, with the request's id as payload. A trigger sends it
// (migrations/postgres/0009_replicas.sql), so every change is announced
// whoever makes it: a replica, the admin CLI, the REST API, or SQL typed by
// hand.
const ApprovalsChannel = "postern_approvals"

// Bounds of the notification connection's reconnect loop.
const (
	pgWatchRetryMin = 50 * time.Millisecond
	pgWatchRetryMax = 2 * time.Second
	// pgWatchKeepAlive is the TCP keepalive idle time and interval of the
	// notification connection.
	pgWatchKeepAlive = 5 * time.Second
)

// pgWatch follows ApprovalsChannel on a connection of its own (pgx's native
// API: database/sql has no LISTEN). It is started by the first call that
// needs it, so that a short-lived CLI command opens no such connection, and
// ends with the Store.
//
// It keeps a version that counts the notifications received, and a channel
// closed at each one (changed), on which the policy engine's watcher wakes
// the agent waiting on a request decided on another replica within
// milliseconds. While the connection is down the version moves on every
// read, so that pollers of DataVersion read the approvals every time; after
// a reconnect it moves once more, for what was missed in between.
type pgWatch struct {
	cfg *pgx.ConnConfig
	log zerolog.Logger
	// onDown runs when a working notification connection is lost: the
	// store drops its idle pooled connections, which went to the same
	// server and are most likely broken too, so that the next queries
	// open new ones instead of failing on dead ones.
	onDown func()

	// mu guards everything below.
	mu      sync.Mutex
	started bool
	closed  bool
	live    bool // LISTEN is in effect on a working connection
	n       int64
	ch      chan struct{} // closed and replaced at each change
	cancel  context.CancelFunc
	done    chan struct{} // closed when the loop has ended
}

func newPGWatch(cfg *pgx.ConnConfig, log *zerolog.Logger) *pgWatch {
	w := &pgWatch{cfg: cfg.Copy(), log: zerolog.Nop(), ch: make(chan struct{})}
	w.cfg.RuntimeParams["application_name"] = cfg.RuntimeParams["application_name"] + "-listen"
	// The connection mostly waits. A server that vanishes without closing
	// it (a partition, a host that lost power) is found by TCP keepalives
	// within about pgWatchKeepAlive times four, after which polling takes
	// over until a new connection listens.
	d := &net.Dialer{Timeout: w.cfg.ConnectTimeout, KeepAliveConfig: net.KeepAliveConfig{
		Enable: true, Idle: pgWatchKeepAlive, Interval: pgWatchKeepAlive, Count: 3}}
	w.cfg.DialFunc = d.DialContext
	if log != nil {
		w.log = *log
	}
	return w
}

// startLocked starts the loop once; w.mu is held.
func (w *pgWatch) startLocked() {
	if w.started || w.closed {
		return
	}
	w.started = true
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel, w.done = cancel, make(chan struct{})
	go w.run(ctx)
}

// version is DataVersion on PostgreSQL.
func (w *pgWatch) version() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.startLocked()
	if !w.live {
		w.n++
	}
	return w.n
}

// listening reports whether LISTEN is in effect, starting the loop.
func (w *pgWatch) listening() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.startLocked()
	return w.live
}

// changed is Store.Changed on PostgreSQL.
func (w *pgWatch) changed() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.startLocked()
	return w.ch
}

// bump records a change and wakes whoever waits on changed.
func (w *pgWatch) bump() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n++
	close(w.ch)
	w.ch = make(chan struct{})
}

// setLive records whether the notification connection works, and logs each
// change of that state once.
func (w *pgWatch) setLive(live bool, err error) {
	w.mu.Lock()
	was := w.live
	w.live = live
	w.mu.Unlock()
	switch {
	case was && !live:
		w.log.Warn().Err(err).Msg("store: notifications from PostgreSQL lost; polling the approvals until they are back")
		if w.onDown != nil {
			w.onDown()
		}
	case !was && live:
		w.log.Debug().Msg("store: listening to PostgreSQL for decided approvals")
	}
	if live || was {
		// Coming up: anything may have changed while nobody listened.
		// Going down: notifications may be lost from now on, and waiters
		// should know at once that they have to poll.
		w.bump()
	}
}

// run keeps a listening connection until ctx ends, reconnecting with a
// bounded backoff.
func (w *pgWatch) run(ctx context.Context) {
	defer close(w.done)
	retry := pgWatchRetryMin
	for ctx.Err() == nil {
		err := w.listen(ctx)
		w.setLive(false, err)
		if ctx.Err() != nil {
			return
		}
		t := time.NewTimer(retry)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		retry = min(2*retry, pgWatchRetryMax)
	}
}

// listen connects, listens and reports each notification until the
// connection fails or ctx ends.
func (w *pgWatch) listen(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, w.cfg)
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+ApprovalsChannel); err != nil {
		return err
	}
	w.setLive(true, nil)
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
		w.bump()
	}
}

// close ends the loop and waits for it.
func (w *pgWatch) close() {
	w.mu.Lock()
	w.closed = true
	cancel, done := w.cancel, w.done
	w.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}
