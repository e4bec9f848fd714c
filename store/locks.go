package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

const prefixLock = "lck"

// Lock kinds: what a lock holds.
const (
	LockAgent      = "agent"
	LockConnection = "connection"
)

// Lock is a lock on an agent or a connection (migrations/0017_locks.sql):
// while it holds, the bastion ends the live sessions of what it names and
// refuses new ones. It holds until removed or until ExpiresAt (zero: until
// removed).
type Lock struct {
	ID          string
	Kind        string // LockAgent or LockConnection
	TargetID    string // the agent's or connection's id
	TargetName  string // its name or alias when locked
	Reason      string
	CreatedBy   string
	CreatedByID string // "" for the CLI's OS user
	CreatedAt   time.Time
	ExpiresAt   time.Time // zero: until removed
}

// Words say what the lock is, for a refusal, a message to an agent and an
// audit row: "agent bot is locked until 2026-12-07T20:00:00Z: incident 42".
func (l Lock) Words() string {
	w := l.Kind + " " + l.TargetName + " is locked"
	if !l.ExpiresAt.IsZero() {
		w += " until " + l.ExpiresAt.UTC().Format(time.RFC3339)
	}
	if l.Reason != "" {
		w += ": " + l.Reason
	}
	return w
}

// LockInput is a new lock: Kind and Name (an agent's name or a
// connection's alias) say what it holds.
type LockInput struct {
	Kind        string
	Name        string
	Reason      string
	CreatedBy   string
	CreatedByID string
	// For is how long the lock holds from now, by the store's clock; zero
	// holds until removed.
	For time.Duration
}

// MaxLockReason bounds a lock's reason, which is shown to agents and kept in
// the audit. manage checks it with the other rules of the text.
const MaxLockReason = 500

// SetLock locks an agent or a connection, replacing a lock it already has,
// and in the same transaction denies the approval requests of it that are
// still pending, with the lock's words as their reason: the agents waiting
// for them are refused at once, on every replica, by the way any denial
// reaches them.
func (s *Store) SetLock(ctx context.Context, audit Audit, in LockInput) (*Lock, error) {
	ctx, err := audit.bind(ctx)
	if err != nil {
		return nil, err
	}
	if in.Kind != LockAgent && in.Kind != LockConnection {
		return nil, invalid("a lock is on an agent or a connection, not %q", in.Kind)
	}
	if len(in.Reason) > MaxLockReason {
		return nil, invalid("a lock's reason is at most %d bytes", MaxLockReason)
	}
	if in.For < 0 {
		return nil, invalid("a lock's duration cannot be negative")
	}
	now := s.nowUTC()
	l := &Lock{ID: newID(prefixLock), Kind: in.Kind, TargetName: in.Name, Reason: in.Reason,
		CreatedBy: in.CreatedBy, CreatedByID: in.CreatedByID, CreatedAt: now}
	if in.For > 0 {
		l.ExpiresAt = now.Add(in.For)
	}
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		column := "agent_id"
		if in.Kind == LockAgent {
			l.TargetID, err = agentIDByName(ctx, tx, in.Name)
		} else {
			l.TargetID, err = connectionIDByAlias(ctx, tx, in.Name)
			column = "connection_id"
		}
		if err != nil {
			return err
		}
		// The lock it replaces goes, and so do locks whose time is over,
		// which nothing reads any more.
		if _, err := tx.ExecContext(ctx, `DELETE FROM locks WHERE (target_kind = ? AND target_id = ?)
			OR (expires_at <> '' AND expires_at <= ?)`, l.Kind, l.TargetID, formatTime(now)); err != nil {
			return fmt.Errorf("store: replace lock: %w", err)
		}
		expires := ""
		if !l.ExpiresAt.IsZero() {
			expires = formatTime(l.ExpiresAt)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO locks (id, target_kind, target_id, target_name, reason,
			created_by, created_by_id, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			l.ID, l.Kind, l.TargetID, l.TargetName, l.Reason, l.CreatedBy, l.CreatedByID, formatTime(now), expires); err != nil {
			return fmt.Errorf("store: add lock: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE approvals SET status = 'denied', decided_by = ?, decided_by_id = ?,
			decided_at = ?, reason = ?, modified_at = ? WHERE status = 'pending' AND `+column+` = ?`,
			l.CreatedBy, l.CreatedByID, formatTime(now), l.Words(), formatTime(now), l.TargetID); err != nil {
			return fmt.Errorf("store: deny the pending requests of a lock: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return l, nil
}

// RemoveLock removes the lock of an agent or connection by its name or
// alias, and returns it. A lock that has expired is removed too; no lock is
// ErrNotFound.
func (s *Store) RemoveLock(ctx context.Context, audit Audit, kind, name string) (*Lock, error) {
	ctx, err := audit.bind(ctx)
	if err != nil {
		return nil, err
	}
	var l *Lock
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		row := tx.QueryRowContext(ctx, `SELECT `+lockColumns+` FROM locks WHERE target_kind = ? AND target_name = ?
			ORDER BY created_at DESC LIMIT 1`, kind, name)
		got, err := scanLock(row)
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("lock on "+kind, name)
		}
		if err != nil {
			return fmt.Errorf("store: read lock: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM locks WHERE id = ?`, got.ID); err != nil {
			return fmt.Errorf("store: remove lock: %w", err)
		}
		l = &got
		return nil
	})
	return l, err
}

// ActiveLocks lists the locks that hold now, oldest first. Locks past their
// end are left out (and deleted by the next SetLock); the bastion polls
// this list to end the sessions of what is locked.
func (s *Store) ActiveLocks(ctx context.Context) ([]Lock, error) {
	rows, err := s.query(ctx, `SELECT `+lockColumns+` FROM locks WHERE expires_at = '' OR expires_at > ?
		ORDER BY created_at, id`, formatTime(s.nowUTC()))
	return collect(rows, err, "list locks", func(r rowScanner) (Lock, error) { return scanLock(r) })
}

// AgentStates answers, for each of ids, whether the agent exists and
// whether it is disabled: the bastion ends the live sessions of an agent
// that was disabled or removed. An id missing from the answer is an agent
// that no longer exists.
func (s *Store) AgentStates(ctx context.Context, ids []string) (map[string]bool, error) {
	out := make(map[string]bool, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	args := make([]any, len(ids))
	q := `SELECT id, disabled FROM agents WHERE id IN (`
	for i, id := range ids {
		if i > 0 {
			q += ", "
		}
		q += "?"
		args[i] = id
	}
	rows, err := s.db.QueryContext(ctx, q+`)`, args...)
	err = scanRows(rows, err, "agent states", func(r rowScanner) error {
		var id string
		var disabled bool
		err := r.Scan(&id, &disabled)
		out[id] = disabled
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

const lockColumns = `id, target_kind, target_id, target_name, reason, created_by, created_by_id, created_at, expires_at`

func scanLock(r rowScanner) (Lock, error) {
	var v [9]string
	if err := r.Scan(&v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8]); err != nil {
		return Lock{}, err
	}
	return lockFromColumns(v)
}

// lockFromColumns is a Lock from the text of lockColumns, in their order.
func lockFromColumns(v [9]string) (Lock, error) {
	l := Lock{ID: v[0], Kind: v[1], TargetID: v[2], TargetName: v[3], Reason: v[4], CreatedBy: v[5], CreatedByID: v[6]}
	var err error
	if l.CreatedAt, err = parseTime(v[7]); err != nil {
		return Lock{}, err
	}
	if v[8] != "" {
		if l.ExpiresAt, err = parseTime(v[8]); err != nil {
			return Lock{}, err
		}
	}
	return l, nil
}
