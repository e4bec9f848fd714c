package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
)

// prefixInflight is the id prefix of journal rows.
const prefixInflight = "inf"

// inflightRow is the JSON form of an AuditRow in the journal. It names its
// fields so that a journal written by one build is read by the next.
type inflightRow struct {
	Time            string   `json:"time"`
	AgentID         string   `json:"agent_id"`
	AgentName       string   `json:"agent_name"`
	ConnectionID    string   `json:"connection_id"`
	ConnectionAlias string   `json:"connection_alias"`
	Class           string   `json:"class"`
	Kind            string   `json:"kind"`
	Decision        string   `json:"decision"`
	Reason          string   `json:"reason"`
	ApprovalID      string   `json:"approval_id"`
	Deciders        []string `json:"deciders"`
	Operation       string   `json:"operation"`
	AgentReason     string   `json:"agent_reason,omitempty"`
	SourceAddr      string   `json:"source_addr,omitempty"`
	SessionID       string   `json:"session_id,omitempty"`
	ChainVersion    int      `json:"chain_version,omitempty"`
}

// BeginInflight writes the journal row of an operation about to run (see
// migrations/0004_inflight.sql) and returns its id, for FinishInflight. row
// is the audit row as known now; its operation must already be redacted.
// owner is the id of the replica that runs the operation (RegisterReplica),
// or "" for none: then the row belongs to nobody alive, and any replica's
// RecoverInflight may take it.
//
// An error means the database does not take writes, or owner's lease has
// run out (another replica may already be recovering its journal): the
// caller must not let the operation run. Store.Fault tells why.
func (s *Store) BeginInflight(ctx context.Context, owner string, row AuditRow) (string, error) {
	b, err := json.Marshal(inflightRow{
		Time: formatTime(row.Time), AgentID: row.AgentID, AgentName: row.AgentName,
		ConnectionID: row.ConnectionID, ConnectionAlias: row.ConnectionAlias, Class: row.Class,
		Kind: row.Kind, Decision: row.Decision, Reason: row.Reason, ApprovalID: row.ApprovalID,
		Deciders: row.Deciders, Operation: row.Operation, AgentReason: row.AgentReason,
		SourceAddr: row.SourceAddr, SessionID: row.SessionID, ChainVersion: row.ChainVersion,
	})
	if err != nil {
		return "", fmt.Errorf("store: journal: %w", err)
	}
	id := newID(prefixInflight)
	if s.dialect == dialectSQLite {
		// SQLite has one writer: queue for it (see writeSem). PostgreSQL
		// takes concurrent inserts, and no read-then-write happens here.
		if err := s.lockWrite(ctx); err != nil {
			return "", err
		}
		defer s.unlockWrite()
	}
	now := formatTime(s.nowUTC())
	var res sql.Result
	if owner == "" {
		res, err = s.exec(ctx, `INSERT INTO inflight (id, row, created_at, owner) VALUES (?, ?, ?, '')`, id, string(b), now)
	} else {
		// Only while owner's lease runs: a row written after it ran out
		// could be taken for an interrupted operation at once.
		res, err = s.exec(ctx, `INSERT INTO inflight (id, row, created_at, owner)
			SELECT ?, ?, ?, id FROM replicas WHERE id = ? AND expires_at > ?`, id, string(b), now, owner, now)
	}
	if err != nil {
		return "", fmt.Errorf("store: journal: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return "", fmt.Errorf("store: journal: %w", err)
	} else if n != 1 {
		return "", fmt.Errorf("store: journal: %w", ErrLeaseLapsed)
	}
	return id, nil
}

// ErrLeaseLapsed: this replica's lease ran out before it could be renewed
// (it could not reach the database in time); until the next heartbeat
// renews it, its operations are refused, since another replica may be
// recording its journal as interrupted.
var ErrLeaseLapsed = errors.New("this replica's lease has run out; refused until it is renewed")

// FinishInflight appends row to the audit log and removes journal row id in
// one transaction: the operation is recorded exactly once, as ended or (by
// RecoverInflight) as interrupted, never both.
func (s *Store) FinishInflight(ctx context.Context, id string, row AuditRow, chain ChainFunc) (AuditRow, error) {
	return s.appendAudit(ctx, row, chain, auditStmts{}, id)
}

// FinishInflight is Store.FinishInflight with the prepared statements.
func (p *PolicyStatements) FinishInflight(ctx context.Context, id string, row AuditRow, chain ChainFunc) (AuditRow, error) {
	return p.s.appendAudit(ctx, row, chain, p.auditStmts(), id)
}

const deleteInflightStmt = `DELETE FROM inflight WHERE id = ?`

// deleteInflight removes journal row id inside tx, with the prepared
// statement del when there is one, and reports whether it was gone
// already. A missing row is not an error: its replica's lease may have run
// out and another replica recovered it meanwhile, and the audit row being
// appended is still the truth about the operation.
func deleteInflight(ctx context.Context, tx *sql.Tx, del *sql.Stmt, id string) (gone bool, err error) {
	var res sql.Result
	if del != nil {
		res, err = tx.StmtContext(ctx, del).ExecContext(ctx, id)
	} else {
		res, err = tx.ExecContext(ctx, deleteInflightStmt, id)
	}
	if err != nil {
		return false, fmt.Errorf("store: journal: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("store: journal: %w", err)
	}
	return n == 0, nil
}

// RecoverOptions say whose journal rows RecoverInflight takes.
type RecoverOptions struct {
	// Self is the caller's own replica id, whose rows are never taken.
	Self string
	// All takes every row not Self's, whatever its owner's lease: for the
	// one `postern serve` of an SQLite data directory at its start, when
	// no other replica can be running. Otherwise only rows whose owner's
	// lease has run out (or that have no owner) are taken.
	All bool
}

// RecoverInflight appends an audit row for every journal row left behind —
// an operation that started and whose end postern did not see, because the
// replica that ran it stopped — with decision "failed", no exit status and
// reason, and removes the journal rows. It returns how many it recovered.
// Then it removes the registrations of replicas whose lease ran out and
// that hold no journal row any more.
//
// Each row is recovered in its own write transaction that first removes it,
// on the condition that it is still there and its owner still dead: of
// several replicas recovering at once, one records it; a replica that
// renewed its lease in the meantime keeps it.
func (s *Store) RecoverInflight(ctx context.Context, chain ChainFunc, reason string, opts RecoverOptions) (int, error) {
	now := formatTime(s.nowUTC())
	q := `SELECT id, row FROM inflight WHERE (? = '' OR owner != ?)`
	args := []any{opts.Self, opts.Self}
	if !opts.All {
		q += ` AND NOT EXISTS (SELECT 1 FROM replicas r WHERE r.id = inflight.owner AND r.expires_at > ?)`
		args = append(args, now)
	}
	rows, err := s.db.QueryContext(ctx, q+` ORDER BY created_at, id`, args...)
	type left struct {
		id  string
		row AuditRow
	}
	all, err := collect(rows, err, "journal", func(r rowScanner) (left, error) {
		var id, js string
		if err := r.Scan(&id, &js); err != nil {
			return left{}, err
		}
		var ir inflightRow
		if err := json.Unmarshal([]byte(js), &ir); err != nil {
			return left{}, fmt.Errorf("row %s: %w", id, err)
		}
		t, err := parseTime(ir.Time)
		if err != nil {
			return left{}, err
		}
		return left{id: id, row: AuditRow{
			Time: t, AgentID: ir.AgentID, AgentName: ir.AgentName, ConnectionID: ir.ConnectionID,
			ConnectionAlias: ir.ConnectionAlias, Class: ir.Class, Kind: ir.Kind, Decision: "failed",
			Reason: reason, ApprovalID: ir.ApprovalID, Deciders: ir.Deciders, Operation: ir.Operation,
			AgentReason: ir.AgentReason, SourceAddr: ir.SourceAddr, SessionID: ir.SessionID,
			ChainVersion: ir.ChainVersion,
		}}, nil
	})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, l := range all {
		took, err := s.recoverOne(ctx, l.id, l.row, chain, opts)
		if err != nil {
			return n, err
		}
		if took {
			n++
		}
	}
	return n, s.pruneReplicas(ctx)
}

// recoverOne removes journal row id, if it is still there and still
// recoverable under opts, and appends row for it, in one transaction.
func (s *Store) recoverOne(ctx context.Context, id string, row AuditRow, chain ChainFunc, opts RecoverOptions) (bool, error) {
	took := false
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		q := `DELETE FROM inflight WHERE id = ? AND (? = '' OR owner != ?)`
		args := []any{id, opts.Self, opts.Self}
		if !opts.All {
			q += ` AND NOT EXISTS (SELECT 1 FROM replicas r WHERE r.id = inflight.owner AND r.expires_at > ?)`
			args = append(args, formatTime(s.nowUTC()))
		}
		res, err := tx.ExecContext(ctx, q, args...)
		if err != nil {
			return fmt.Errorf("store: journal: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return err // gone, or its owner is alive again
		}
		took = true
		_, err = appendAuditTx(ctx, tx, row, chain, auditStmts{}, s.nowUTC)
		return err
	})
	return took, err
}
