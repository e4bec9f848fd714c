package store

import (
	"context"
	"fmt"
)

// CheckWritable reports whether the database takes a write now: it begins a
// write transaction, makes a write that changes no row, and rolls back, so
// that a readiness probe can run it every few seconds without growing the
// database. On SQLite the transaction begins IMMEDIATE, which takes the
// write lock (a read-only file or a full disk's lock fails here); on
// PostgreSQL an UPDATE in a read-only transaction or on a standby fails
// before it looks for rows, so the one that matches none still proves that
// writes are allowed. It waits for this process's write turn like any
// write: ctx bounds the whole check.
func (s *Store) CheckWritable(ctx context.Context) error {
	if err := s.lockWrite(ctx); err != nil {
		return err
	}
	defer s.unlockWrite()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: check writable: begin: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `UPDATE meta SET value = value WHERE 1 = 0`); err != nil {
		return fmt.Errorf("store: check writable: %w", err)
	}
	return nil
}
