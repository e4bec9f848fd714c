package store

import (
	"context"
	"database/sql"
	"encoding/json"
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
	ChainVersion    int      `json:"chain_version,omitempty"`
}

// BeginInflight writes the journal row of an operation about to run (see
// migrations/0004_inflight.sql) and returns its id, for FinishInflight. row
// is the audit row as known now; its operation must already be redacted.
// An error means the database does not take writes: the caller must not
// let the operation run. Store.Fault tells why.
func (s *Store) BeginInflight(ctx context.Context, row AuditRow) (string, error) {
	b, err := json.Marshal(inflightRow{
		Time: formatTime(row.Time), AgentID: row.AgentID, AgentName: row.AgentName,
		ConnectionID: row.ConnectionID, ConnectionAlias: row.ConnectionAlias, Class: row.Class,
		Kind: row.Kind, Decision: row.Decision, Reason: row.Reason, ApprovalID: row.ApprovalID,
		Deciders: row.Deciders, Operation: row.Operation, AgentReason: row.AgentReason,
		SourceAddr: row.SourceAddr, ChainVersion: row.ChainVersion,
	})
	if err != nil {
		return "", fmt.Errorf("store: journal: %w", err)
	}
	id := newID(prefixInflight)
	if err := s.lockWrite(ctx); err != nil {
		return "", err
	}
	defer s.unlockWrite()
	stmt, err := s.stmts.get(ctx, `INSERT INTO inflight (id, row, created_at) VALUES (?, ?, ?)`)
	if err != nil {
		return "", fmt.Errorf("store: journal: %w", err)
	}
	if _, err := stmt.ExecContext(ctx, id, string(b), formatTime(s.nowUTC())); err != nil {
		return "", fmt.Errorf("store: journal: %w", err)
	}
	return id, nil
}

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
// statement del when there is one. A missing row is not an error: the row
// may have been recovered by a restart meanwhile, and the audit row being
// appended is still the truth about the operation.
func deleteInflight(ctx context.Context, tx *sql.Tx, del *sql.Stmt, id string) error {
	var err error
	if del != nil {
		_, err = tx.StmtContext(ctx, del).ExecContext(ctx, id)
	} else {
		_, err = tx.ExecContext(ctx, deleteInflightStmt, id)
	}
	if err != nil {
		return fmt.Errorf("store: journal: %w", err)
	}
	return nil
}

// RecoverInflight appends an audit row for every journal row left behind —
// an operation that started and whose end postern did not see, because it
// stopped — with decision "failed", no exit status and reason, and removes
// the journal rows. It returns how many it recovered.
//
// Only the one `postern serve` of a data directory may call it, at start:
// the journal rows of a running server are not left behind.
func (s *Store) RecoverInflight(ctx context.Context, chain ChainFunc, reason string) (int, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, row FROM inflight ORDER BY created_at, id`)
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
			AgentReason: ir.AgentReason, SourceAddr: ir.SourceAddr, ChainVersion: ir.ChainVersion,
		}}, nil
	})
	if err != nil {
		return 0, err
	}
	for i, l := range all {
		if _, err := s.FinishInflight(ctx, l.id, l.row, chain); err != nil {
			return i, err
		}
	}
	return len(all), nil
}
