package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// The bound on waiting requests (migrations/0012_pending_bound.sql). One
// agent once opened 60 pending requests in 6 seconds, each a card on the
// page and a notification (issue 23): past PendingLimits a new request is
// refused at once instead, and the approvers hear of it once.

// PendingLimits bound the approval requests that wait for a decision at
// once. A request that is pending and not yet expired counts; one that was
// decided or has expired frees its place.
type PendingLimits struct {
	PerAgent      int // pending requests of one agent; no bound if 0
	PerConnection int // pending requests on one connection, of every agent; no bound if 0
}

// The subjects of a bound, as PendingBoundError.Scope and the outbox's
// bound_scope name them.
const (
	BoundAgent      = "agent"
	BoundConnection = "connection"
)

// TooManyPendingReason is what a request refused by a bound is told.
const TooManyPendingReason = "too many requests waiting for a decision"

// ErrTooManyPending: a new approval request was refused because as many
// requests as the bound allows already wait.
var ErrTooManyPending = errors.New(TooManyPendingReason)

// PendingBoundError is the refusal of a request by a bound. It matches
// ErrTooManyPending.
type PendingBoundError struct {
	Scope     string // BoundAgent or BoundConnection
	SubjectID string // the agent's or the connection's id
	Waiting   int    // the requests that were waiting
	Limit     int    // the bound
	// Summary is true for the refusal that began an episode: it queued
	// the summary notification, and the refusals after it in the same
	// episode did not.
	Summary bool
}

func (e *PendingBoundError) Error() string {
	return fmt.Sprintf("store: %s %s has %d requests waiting (bound %d): %v", e.Scope, e.SubjectID, e.Waiting, e.Limit, ErrTooManyPending)
}

// Is makes errors.Is(err, ErrTooManyPending) true.
func (e *PendingBoundError) Is(target error) bool { return target == ErrTooManyPending }

// checkPendingBounds counts, in the caller's transaction, the requests of
// req's agent and then of its connection that wait now, and returns the
// refusal when either count has reached its bound (nil when req may be
// written).
//
// The count and the insert that follows it are atomic because the
// transaction holds the database's write lock from its start (inTx): on
// SQLite it began IMMEDIATE, and this process's writers queue on
// writeSem; on PostgreSQL it took the advisory lock pgLockWrite, which
// every write transaction of every replica takes first. Two concurrent
// requests therefore never both count 9 under a bound of 10. A lock of
// narrower reach (SELECT ... FOR UPDATE on the agent's row, an advisory
// lock per agent) would not do on its own: the per-connection bound
// counts across agents, so it would need a second lock on the connection
// taken in a fixed order, and the transaction already holds one that
// covers both.
//
// An episode is the time from the first refusal by a bound until the
// subject's queue is seen empty again; its row in pending_bounds is what
// makes the summary notification one per episode, across replicas, since
// only the refusal that inserts it queues one. A queue seen empty here
// ends the episode (the approvers cleared it, or it expired); while any
// request of the flood still waits, further refusals, and requests let in
// as places free, queue nothing more.
func checkPendingBounds(ctx context.Context, tx *sql.Tx, req Approval, limits PendingLimits, now time.Time) (*PendingBoundError, error) {
	for _, b := range []struct {
		scope, column, id string
		limit             int
	}{
		{BoundAgent, "agent_id", req.AgentID, limits.PerAgent},
		{BoundConnection, "connection_id", req.ConnectionID, limits.PerConnection},
	} {
		if b.limit == 0 {
			continue
		}
		var waiting int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM approvals
			WHERE `+b.column+` = ? AND status = 'pending' AND expires_at > ?`,
			b.id, formatTime(now)).Scan(&waiting); err != nil {
			return nil, fmt.Errorf("store: count waiting requests of %s %s: %w", b.scope, b.id, err)
		}
		if waiting == 0 {
			if _, err := tx.ExecContext(ctx, `DELETE FROM pending_bounds WHERE scope = ? AND subject_id = ?`,
				b.scope, b.id); err != nil {
				return nil, fmt.Errorf("store: end the bound's episode of %s %s: %w", b.scope, b.id, err)
			}
			continue
		}
		if waiting < b.limit {
			continue
		}
		refused := &PendingBoundError{Scope: b.scope, SubjectID: b.id, Waiting: waiting, Limit: b.limit}
		res, err := tx.ExecContext(ctx, `INSERT INTO pending_bounds (scope, subject_id, started_at)
			VALUES (?, ?, ?) ON CONFLICT (scope, subject_id) DO NOTHING`, b.scope, b.id, formatTime(now))
		if err != nil {
			return nil, fmt.Errorf("store: begin the bound's episode of %s %s: %w", b.scope, b.id, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return nil, fmt.Errorf("store: begin the bound's episode of %s %s: %w", b.scope, b.id, err)
		} else if n == 0 {
			return refused, nil // an episode already open told the approvers
		}
		// The summary rides on the newest waiting request: it names the
		// agent and connection, its page is where the approver goes, and
		// it waits longest, which is how long the summary is worth
		// sending.
		newest, err := scanApproval(tx.QueryRowContext(ctx, `SELECT `+approvalColumns+approvalFrom+`
			WHERE p.`+b.column+` = ? AND p.status = 'pending' AND p.expires_at > ?
			ORDER BY p.created_at DESC, p.id DESC LIMIT 1`, b.id, formatTime(now)))
		if err != nil {
			return nil, fmt.Errorf("store: newest waiting request of %s %s: %w", b.scope, b.id, err)
		}
		if err := queueOutbox(ctx, tx, outboxEntry{approval: newest, event: NotifyBound, giveUp: newest.ExpiresAt,
			boundScope: b.scope, boundWaiting: waiting}, now); err != nil {
			return nil, err
		}
		refused.Summary = true
		return refused, nil
	}
	return nil, nil
}
