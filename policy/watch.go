package policy

import (
	"context"
	"time"

	"github.com/postern/postern/store"
)

// waitSlot is what the waiters of one approval request block on. ch is
// closed, once, when the request may have been decided; refs counts the
// waiters holding the slot so the last one to leave removes it.
type waitSlot struct {
	ch   chan struct{}
	refs int
}

// register adds a waiter for approval id and returns the channel that is
// closed when the request may have changed, and a release func the waiter
// must call when it stops waiting on that channel. It starts the watcher
// goroutine with the first waiter.
func (e *Engine) register(id string) (<-chan struct{}, func(), error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, nil, ErrClosed
	}
	if !e.watching {
		e.watching = true
		e.watcherWG.Add(1)
		go e.watch()
	}
	slot := e.waiters[id]
	if slot == nil {
		slot = &waitSlot{ch: make(chan struct{})}
		e.waiters[id] = slot
	}
	slot.refs++
	released := false
	release := func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		if released {
			return
		}
		released = true
		slot.refs--
		if slot.refs == 0 && e.waiters[id] == slot {
			delete(e.waiters, id)
		}
	}
	return slot.ch, release, nil
}

// notify wakes every waiter of approval id. The slot is removed so that a
// waiter that finds the request still pending (the first of two approvals)
// registers on a fresh channel.
func (e *Engine) notify(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if slot := e.waiters[id]; slot != nil {
		close(slot.ch)
		delete(e.waiters, id)
	}
}

// waitingIDs lists the approval ids that have waiters.
func (e *Engine) waitingIDs() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	ids := make([]string, 0, len(e.waiters))
	for id := range e.waiters {
		ids = append(ids, id)
	}
	return ids
}

// changeNotifier is implemented by *store.Store: on PostgreSQL, Changed
// returns a channel closed at the next announced change to an approval
// (LISTEN/NOTIFY, store/pgwatch.go); on SQLite it is nil.
type changeNotifier interface {
	Changed() <-chan struct{}
}

// watch is the engine's one watcher goroutine; it runs from the first wait
// until Close. Decisions made through this engine wake waiters directly
// (notify); this loop is for decisions made by another process, such as the
// admin CLI or another replica. Every poll interval it reads the store's
// DataVersion — SQLite's PRAGMA data_version, which changes only when
// another connection committed; on PostgreSQL the count of notifications
// received, which moves on every read while notifications are lost — and
// only then reads the status of the requests that have waiters, by primary
// key. An idle bastion therefore costs one trivial query per interval,
// whatever the size of the table. On PostgreSQL a notification wakes the
// loop at once, so that a decision on another replica reaches its waiter
// in milliseconds rather than at the next poll.
func (e *Engine) watch() {
	defer e.watcherWG.Done()
	ctx := e.life
	ticker := time.NewTicker(e.poll)
	defer ticker.Stop()
	cn, _ := e.st.(changeNotifier)
	var last int64 = -1
	for {
		var changed <-chan struct{}
		if cn != nil {
			// Taken before DataVersion is read: a change after the read
			// closes it, a change before it shows in the version.
			changed = cn.Changed()
		}
		last = e.check(ctx, last)
		select {
		case <-e.done:
			return
		case <-ticker.C:
		case <-changed:
		}
	}
}

// check reads the data version and, when it moved from last, the status
// of every request with waiters, and wakes the waiters of those no longer
// pending. It returns the version to compare the next check with: last
// again when the statuses could not be read, so that the next check tries
// again.
func (e *Engine) check(ctx context.Context, last int64) int64 {
	v, err := e.st.DataVersion(ctx)
	if err != nil {
		if ctx.Err() == nil {
			e.log.Warn().Err(err).Msg("approval watcher: reading data version")
		}
		return last
	}
	if v == last {
		return last
	}
	// Ids are collected after reading the version: a waiter that
	// registered later read the request itself after the change.
	ids := e.waitingIDs()
	if len(ids) == 0 {
		return v
	}
	statuses, err := e.st.ApprovalStatuses(ctx, ids)
	if err != nil {
		if ctx.Err() == nil {
			e.log.Warn().Err(err).Msg("approval watcher: reading approvals")
		}
		return last // try again next tick
	}
	for _, id := range ids {
		if st, ok := statuses[id]; !ok || st != store.ApprovalPending {
			e.notify(id) // decided, expired or removed
		}
	}
	return v
}
