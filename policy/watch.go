package policy

import (
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

// watch is the engine's one watcher goroutine; it runs from the first wait
// until Close. Decisions made through this engine wake waiters directly
// (notify); this loop is for decisions made by another process, such as the
// admin CLI. Every poll interval it reads PRAGMA data_version, which changes
// only when another connection committed, and only then reads the status of
// the requests that have waiters, by primary key. An idle bastion therefore
// costs one trivial query per interval, whatever the size of the table.
func (e *Engine) watch() {
	defer e.watcherWG.Done()
	ctx := e.life
	ticker := time.NewTicker(e.poll)
	defer ticker.Stop()
	var last int64 = -1
	for {
		select {
		case <-e.done:
			return
		case <-ticker.C:
		}
		v, err := e.st.DataVersion(ctx)
		if err != nil {
			if ctx.Err() == nil {
				e.log.Warn().Err(err).Msg("approval watcher: reading data version")
			}
			continue
		}
		if v == last {
			continue
		}
		// Ids are collected after reading the version: a waiter that
		// registered later read the request itself after the change.
		ids := e.waitingIDs()
		if len(ids) == 0 {
			last = v
			continue
		}
		statuses, err := e.st.ApprovalStatuses(ctx, ids)
		if err != nil {
			if ctx.Err() == nil {
				e.log.Warn().Err(err).Msg("approval watcher: reading approvals")
			}
			continue // last unchanged: try again next tick
		}
		last = v
		for _, id := range ids {
			if st, ok := statuses[id]; !ok || st != store.ApprovalPending {
				e.notify(id) // decided, expired or removed
			}
		}
	}
}
