package web

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/postern/postern/store"
)

// eventHub tells live pages that the approvals changed. It polls SQLite's
// data_version, which changes when any connection — this process's bastion,
// the CLI, another postern — commits, so a page learns of a new approval or
// a decision made anywhere within one poll interval.
//
// Most commits are not about approvals (logins, grants, audit rows, every
// API call's token use), so after a commit the hub reads the pending
// approvals once and tells its subscribers only if they differ from what it
// saw last: one small query per commit for all open pages, instead of every
// page fetching its list after every commit.
type eventHub struct {
	store *store.Store
	poll  time.Duration
	log   zerolog.Logger

	// mu guards subs.
	mu   sync.Mutex
	subs map[chan struct{}]struct{}

	// Owned by the goroutine in run (or a test calling check).
	version   int64
	signature []byte // of the pending approvals; nil when unknown
}

func newEventHub(st *store.Store, poll time.Duration, log zerolog.Logger) *eventHub {
	return &eventHub{store: st, poll: poll, log: log, subs: map[chan struct{}]struct{}{}}
}

// subscribe returns a channel that receives a value after each change (at
// most one value waits: a slow reader sees one notification for many
// changes) and a function that ends the subscription.
func (h *eventHub) subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	h.subs[ch] = struct{}{}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		delete(h.subs, ch)
		h.mu.Unlock()
	}
}

// notify wakes every subscriber without blocking.
func (h *eventHub) notify() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// run polls until ctx ends. A failed poll is logged and retried; it does
// not end the stream of live pages.
func (h *eventHub) run(ctx context.Context) {
	t := time.NewTicker(h.poll)
	defer t.Stop()
	v, err := h.store.DataVersion(ctx)
	if err != nil && ctx.Err() == nil {
		h.log.Warn().Err(err).Msg("web: watching for changes")
	}
	h.version = v
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		changed, err := h.check(ctx)
		if err != nil && ctx.Err() == nil {
			h.log.Warn().Err(err).Msg("web: watching for changes")
		}
		if changed {
			h.notify()
		}
	}
}

// check reports whether the pending approvals changed since the last
// check. When they cannot be read after a commit it answers true with the
// error: a needless refresh is better than a page that misses a request.
func (h *eventHub) check(ctx context.Context) (bool, error) {
	v, err := h.store.DataVersion(ctx)
	if err != nil {
		return false, fmt.Errorf("web: %w", err)
	}
	if v == h.version {
		return false, nil
	}
	h.version = v
	if !h.watched() {
		h.signature = nil // nobody listens: do not read, but do not trust the old one
		return false, nil
	}
	sig, err := h.pendingSignature(ctx)
	if err != nil {
		h.signature = nil
		return true, err
	}
	if bytes.Equal(sig, h.signature) {
		return false, nil
	}
	h.signature = sig
	return true, nil
}

// watched reports whether anyone subscribes.
func (h *eventHub) watched() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs) > 0
}

// pendingSignature hashes what the approvals page shows of each pending
// request (an operation's or a change's) that can change: its id, status, first approver and modification
// time. A request that is decided or expires leaves the list, which changes
// the hash too.
func (h *eventHub) pendingSignature(ctx context.Context) ([]byte, error) {
	list, err := h.store.ListApprovals(ctx, false)
	if err != nil {
		return nil, fmt.Errorf("web: %w", err)
	}
	// Changes of configuration that wait for a second admin are in the
	// same queue, on the same page.
	changes, err := h.store.ListChangeRequests(ctx, false)
	if err != nil {
		return nil, fmt.Errorf("web: %w", err)
	}
	d := sha256.New()
	for _, a := range list {
		fmt.Fprintf(d, "%s\x00%s\x00%s\x00%d\n", a.ID, a.Status, a.FirstApprover, a.ModifiedAt.UnixNano())
	}
	for _, c := range changes {
		fmt.Fprintf(d, "%s\x00%s\x00%d\n", c.ID, c.Status, c.ModifiedAt.UnixNano())
	}
	return d.Sum(nil), nil
}

// heartbeatEvery is how often an idle event stream sends a comment, so that
// proxies and browsers keep it open and a dead peer is noticed.
const heartbeatEvery = 15 * time.Second

// eventRetry is the reconnect delay the stream asks browsers to use.
const eventRetry = 3 * time.Second

// eventStream answers GET /events with server-sent events: "event:
// approvals" after each change to the pending approvals, which tells the approvals
// page to fetch its list again, and a comment every heartbeatEvery. It
// returns when the client goes away or the server shuts down (Serve cancels
// every request's context), so the stream needs no goroutine of its own.
func (s *Server) eventStream(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	// The server's ReadTimeout would otherwise end the stream after 30 s:
	// while a handler runs, net/http reads the connection in the background
	// to notice a client that hangs up, and a read deadline passing there
	// cancels the request's context as if the client had gone.
	if err := rc.SetReadDeadline(time.Time{}); err != nil && !errors.Is(err, http.ErrNotSupported) {
		s.cfg.Logger.Debug().Err(err).Msg("web: events: clearing the read deadline")
	}
	if err := rc.SetWriteDeadline(time.Time{}); err != nil && !errors.Is(err, http.ErrNotSupported) {
		s.cfg.Logger.Debug().Err(err).Msg("web: events: clearing the write deadline")
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	if r.Method == http.MethodHead {
		return // a stream has no end for HEAD to wait for
	}
	changes, unsubscribe := s.events.subscribe()
	defer unsubscribe()
	w.WriteHeader(http.StatusOK)
	send := func(msg string) bool {
		if _, err := io.WriteString(w, msg); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !send(fmt.Sprintf("retry: %d\n: connected\n\n", eventRetry.Milliseconds())) {
		return
	}
	beat := time.NewTicker(heartbeatEvery)
	defer beat.Stop()
	ctx := r.Context()
	for {
		select {
		case <-ctx.Done():
			return
		case <-changes:
			if !send("event: approvals\ndata: changed\n\n") {
				return
			}
		case <-beat.C:
			if !send(": heartbeat\n\n") {
				return
			}
		}
	}
}
