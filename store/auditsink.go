package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Audit sink cursors (migrations/0016_audit_sinks.sql): how far each
// streaming audit sink of package auditsink has shipped the log, and which
// replica ships it now. The cursor lives in the database, not beside the
// process, so that a restart, a receiver's outage or a failover to another
// replica resumes with the next row, and never skips one.

// ErrAuditSinkLost: the replica no longer holds the sink's lease; another
// replica took it over (the lease had run out) and ships the sink now.
var ErrAuditSinkLost = errors.New("audit sink lease held by another replica")

// AuditSinkCursor is one sink's row.
type AuditSinkCursor struct {
	Name         string
	Seq          int64     // the last row the receiver took; 0 before the first
	UpdatedAt    time.Time // when seq last moved or the lease was renewed
	Holder       string    // the replica that holds the lease; "" for none yet
	LeaseExpires time.Time // zero once released
}

// ClaimAuditSink takes the lease of sink name for holder until lease from
// now, when nobody holds it, its holder's lease has run out, or holder
// already holds it, and returns the sink's cursor and claimed true. When
// another holder's lease still runs, it returns claimed false and takes
// nothing, unless force: a serve on SQLite is the only one of its data
// directory (it holds the directory's lock), so a lease left by a previous
// run that was killed is taken at once. A sink never seen before starts at
// cursor 0.
func (s *Store) ClaimAuditSink(ctx context.Context, name, holder string, lease time.Duration, force bool) (cursor int64, claimed bool, err error) {
	if name == "" || holder == "" {
		return 0, false, invalid("audit sink name and holder must not be empty")
	}
	if lease <= 0 {
		return 0, false, invalid("audit sink lease %v is not positive", lease)
	}
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		now := s.nowUTC()
		c, found, err := readAuditSinkTx(ctx, tx, name)
		if err != nil {
			return err
		}
		if !found {
			_, err = tx.ExecContext(ctx, `INSERT INTO audit_sink_cursors (name, seq, updated_at, holder, lease_expires)
				VALUES (?, 0, ?, ?, ?)`, name, formatTime(now), holder, formatTime(now.Add(lease)))
			claimed = err == nil
			return err
		}
		if !force && c.Holder != holder && c.Holder != "" && now.Before(c.LeaseExpires) {
			return nil
		}
		_, err = tx.ExecContext(ctx, `UPDATE audit_sink_cursors SET holder = ?, lease_expires = ? WHERE name = ?`,
			holder, formatTime(now.Add(lease)), name)
		cursor, claimed = c.Seq, err == nil
		return err
	})
	if err != nil {
		return 0, false, fmt.Errorf("store: claim audit sink %s: %w", name, err)
	}
	return cursor, claimed, nil
}

// AdvanceAuditSink moves sink name's cursor to seq (never back: a smaller
// seq keeps the stored one) and renews holder's lease to lease from now;
// with seq 0 it only renews. It fails with ErrAuditSinkLost when holder no
// longer holds the lease: the rows past the stored cursor are another
// replica's to ship now.
func (s *Store) AdvanceAuditSink(ctx context.Context, name, holder string, seq int64, lease time.Duration) error {
	if lease <= 0 {
		return invalid("audit sink lease %v is not positive", lease)
	}
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		now := s.nowUTC()
		c, found, err := readAuditSinkTx(ctx, tx, name)
		if err != nil {
			return err
		}
		if !found || c.Holder != holder {
			return ErrAuditSinkLost
		}
		seq = max(seq, c.Seq)
		_, err = tx.ExecContext(ctx, `UPDATE audit_sink_cursors SET seq = ?, updated_at = ?, lease_expires = ? WHERE name = ?`,
			seq, formatTime(now), formatTime(now.Add(lease)), name)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: advance audit sink %s: %w", name, err)
	}
	return nil
}

// ReleaseAuditSink gives up holder's lease of sink name, so that another
// replica takes the sink over at once rather than after the lease; a lease
// holder does not hold is left alone.
func (s *Store) ReleaseAuditSink(ctx context.Context, name, holder string) error {
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE audit_sink_cursors SET lease_expires = '' WHERE name = ? AND holder = ?`,
			name, holder)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: release audit sink %s: %w", name, err)
	}
	return nil
}

// AuditSinkCursors lists every sink's row by name.
func (s *Store) AuditSinkCursors(ctx context.Context) ([]AuditSinkCursor, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT name, seq, updated_at, holder, lease_expires FROM audit_sink_cursors ORDER BY name`)
	return collect(rows, err, "list audit sinks", scanAuditSink)
}

func readAuditSinkTx(ctx context.Context, tx *sql.Tx, name string) (AuditSinkCursor, bool, error) {
	c, err := scanAuditSink(tx.QueryRowContext(ctx,
		`SELECT name, seq, updated_at, holder, lease_expires FROM audit_sink_cursors WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return AuditSinkCursor{}, false, nil
	}
	return c, err == nil, err
}

func scanAuditSink(r rowScanner) (AuditSinkCursor, error) {
	var c AuditSinkCursor
	var updated, expires string
	if err := r.Scan(&c.Name, &c.Seq, &updated, &c.Holder, &expires); err != nil {
		return AuditSinkCursor{}, err
	}
	var err error
	if c.UpdatedAt, err = parseTime(updated); err != nil {
		return AuditSinkCursor{}, err
	}
	if c.LeaseExpires, err = parseTime(expires); err != nil {
		return AuditSinkCursor{}, err
	}
	return c, nil
}
