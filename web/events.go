package web

import (
	"context"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/postern/postern/store"
)

// eventHub tells live pages that the database changed. It polls SQLite's
// data_version, which changes when any connection — this process's bastion,
// the CLI, another postern — commits, so a page learns of a new approval or
// a decision made anywhere within one poll interval.
type eventHub struct {
	store *store.Store
	poll  time.Duration
	log   zerolog.Logger

	mu   sync.Mutex
	subs map[chan struct{}]struct{}
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
	last, err := h.store.DataVersion(ctx)
	if err != nil && ctx.Err() == nil {
		h.log.Warn().Err(err).Msg("web: watching for changes")
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		v, err := h.store.DataVersion(ctx)
		if err != nil {
			if ctx.Err() == nil {
				h.log.Warn().Err(err).Msg("web: watching for changes")
			}
			continue
		}
		if v != last {
			last = v
			h.notify()
		}
	}
}
