package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// Replicas: every running `postern serve` of a database
// (migrations/0009_replicas.sql). Package policy registers one per serve,
// renews its lease with a heartbeat, and journals its operations under its
// id; a journal row is recovered as interrupted only once its replica's
// lease has run out.

// prefixReplica prefixes replica ids ("rep_...").
const prefixReplica = "rep"

// Replica is one registered `postern serve`.
type Replica struct {
	ID          string
	Host        string // the host name it runs on
	PID         int
	StartedAt   time.Time
	HeartbeatAt time.Time // its last renewal
	ExpiresAt   time.Time // the end of its lease
}

// Alive reports whether r's lease runs at now.
func (r *Replica) Alive(now time.Time) bool { return now.Before(r.ExpiresAt) }

// RegisterReplica registers a new replica running on host as process pid,
// with a lease of lease from now, and returns it.
func (s *Store) RegisterReplica(ctx context.Context, host string, pid int, lease time.Duration) (Replica, error) {
	if lease <= 0 {
		return Replica{}, invalid("replica lease %v is not positive", lease)
	}
	now := s.nowUTC()
	r := Replica{ID: newID(prefixReplica), Host: host, PID: pid, StartedAt: now, HeartbeatAt: now, ExpiresAt: now.Add(lease)}
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO replicas (id, host, pid, started_at, heartbeat_at, expires_at)
			VALUES (?, ?, ?, ?, ?, ?)`, r.ID, r.Host, r.PID, formatTime(now), formatTime(now), formatTime(r.ExpiresAt))
		return err
	})
	if err != nil {
		return Replica{}, fmt.Errorf("store: register replica: %w", err)
	}
	return r, nil
}

// RenewReplica moves replica id's lease to lease from now. When the replica
// is no longer registered — its lease ran out and another replica recovered
// its journal — it registers it again under the same id and reports
// renewed false: the caller's operations that were running then have been
// audited as interrupted already.
func (s *Store) RenewReplica(ctx context.Context, r Replica, lease time.Duration) (renewed bool, err error) {
	if lease <= 0 {
		return false, invalid("replica lease %v is not positive", lease)
	}
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		now := s.nowUTC()
		res, err := tx.ExecContext(ctx, `UPDATE replicas SET heartbeat_at = ?, expires_at = ? WHERE id = ?`,
			formatTime(now), formatTime(now.Add(lease)), r.ID)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			renewed = n == 1
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO replicas (id, host, pid, started_at, heartbeat_at, expires_at)
			VALUES (?, ?, ?, ?, ?, ?)`, r.ID, r.Host, r.PID, formatTime(r.StartedAt), formatTime(now), formatTime(now.Add(lease)))
		return err
	})
	if err != nil {
		return false, fmt.Errorf("store: renew replica %s: %w", r.ID, err)
	}
	return renewed, nil
}

// RemoveReplica unregisters replica id, at the end of a clean shutdown.
// Journal rows it still holds (operations cut at the end of the shutdown
// grace whose audit rows could not be written) are then recovered by the
// next replica that looks.
func (s *Store) RemoveReplica(ctx context.Context, id string) error {
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM replicas WHERE id = ?`, id)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: remove replica %s: %w", id, err)
	}
	return nil
}

// ListReplicas returns the registered replicas, oldest first, expired ones
// included until a replica's heartbeat removes them.
func (s *Store) ListReplicas(ctx context.Context) ([]Replica, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, host, pid, started_at, heartbeat_at, expires_at
		FROM replicas ORDER BY started_at, id`)
	return collect(rows, err, "list replicas", func(r rowScanner) (Replica, error) {
		var rep Replica
		var started, beat, expires string
		if err := r.Scan(&rep.ID, &rep.Host, &rep.PID, &started, &beat, &expires); err != nil {
			return Replica{}, err
		}
		var err error
		for _, f := range []struct {
			dst *time.Time
			src string
		}{{&rep.StartedAt, started}, {&rep.HeartbeatAt, beat}, {&rep.ExpiresAt, expires}} {
			if *f.dst, err = parseTime(f.src); err != nil {
				return Replica{}, err
			}
		}
		return rep, nil
	})
}

// pruneReplicas removes replicas whose lease ran out and that hold no
// journal row any more.
func (s *Store) pruneReplicas(ctx context.Context) error {
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM replicas WHERE expires_at <= ?
			AND NOT EXISTS (SELECT 1 FROM inflight i WHERE i.owner = replicas.id)`, formatTime(s.nowUTC()))
		return err
	})
	if err != nil {
		return fmt.Errorf("store: prune replicas: %w", err)
	}
	return nil
}
