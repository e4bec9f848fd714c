package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// AuditRow is one row of the audit log. Package policy fills it, computes its
// hash (see policy/chain.go) and reads it back to verify the chain.
type AuditRow struct {
	Seq             int64     // 1, 2, 3, ...; assigned by AppendAudit
	Time            time.Time // set by AppendAudit when zero
	AgentID         string
	AgentName       string
	ConnectionID    string
	ConnectionAlias string
	Class           string
	Kind            string
	Decision        string
	Reason          string
	ApprovalID      string
	Deciders        []string // admin names; must not contain commas
	Operation       string   // already redacted by the caller
	ExitStatus      *int     // nil when the operation did not run or gave none
	Duration        time.Duration
	BytesIn         int64
	BytesOut        int64
	// AgentReason is what the agent said the operation is for, redacted;
	// SourceAddr is the address the agent connected from.
	AgentReason string
	SourceAddr  string
	// ChainVersion names the encoding the row's hash covers (1: without
	// AgentReason and SourceAddr; 2: with them). Package policy sets it.
	ChainVersion int
	Hash         []byte // SHA-256, set by AppendAudit through its chain func
}

// ChainFunc computes a row's hash from the previous row's hash (32 zero bytes
// before the first row) and the row, whose Seq and Time are already set.
type ChainFunc func(prev []byte, row *AuditRow) []byte

// AppendAudit adds row at the end of the audit log. Reading the last row's
// seq and hash and inserting the new row happen in one IMMEDIATE transaction,
// which holds SQLite's write lock for its whole length: two appends, from
// this process or another, can never chain from the same previous row.
// It returns the row as stored.
func (s *Store) AppendAudit(ctx context.Context, row AuditRow, chain ChainFunc) (AuditRow, error) {
	return s.appendAudit(ctx, row, chain, auditStmts{}, "")
}

const (
	lastAuditQuery  = `SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1`
	insertAuditStmt = `INSERT INTO audit (seq, time, agent_id, agent_name,
			connection_id, connection_alias, class, kind, decision, reason, approval_id, deciders,
			operation, exit_status, duration_ns, bytes_in, bytes_out, hash, chain_version,
			agent_reason, source_addr)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
)

// auditStmts are the prepared statements of an audit append; nil ones are
// prepared for the call.
type auditStmts struct {
	last, insert, deleteInflight *sql.Stmt
}

// appendAudit is AppendAudit that also removes journal row inflightID ("" for
// none) in the same transaction. The row goes through the store's group
// commit (auditbatch.go); st is no longer used, since the batcher prepares
// its own statements.
func (s *Store) appendAudit(ctx context.Context, row AuditRow, chain ChainFunc, _ auditStmts, inflightID string) (AuditRow, error) {
	if err := checkDeciders(row.Deciders); err != nil {
		return AuditRow{}, err
	}
	return s.audits.submit(s, &auditReq{ctx: ctx, row: row, chain: chain, inflightID: inflightID, res: make(chan auditRes, 1)})
}

// inflightGoneNote is added to the reason of an operation's audit row when
// its journal row was no longer there: its replica's lease had run out
// while it ran (or a restart took it for interrupted), so the log already
// holds a "failed" row for it, and this row tells how it really ended.
const inflightGoneNote = "its journal row had been recorded as interrupted while it ran"

// joinReason appends note to reason.
func joinReason(reason, note string) string {
	if reason == "" {
		return note
	}
	return reason + "; " + note
}

// checkDeciders refuses decider names that the comma-separated column
// could not keep apart.
func checkDeciders(deciders []string) error {
	for _, d := range deciders {
		if d == "" || strings.ContainsAny(d, ",\n") {
			return invalid("decider name %q is empty or has a comma or newline", d)
		}
	}
	return nil
}

// appendAuditTx appends row in tx: it reads the last row's seq and hash,
// chains the new row from them and inserts it. tx holds the database's
// write lock (inTx), so no other append, from this process or another, can
// chain from the same row.
func appendAuditTx(ctx context.Context, tx *sql.Tx, row AuditRow, chain ChainFunc, st auditStmts, now func() time.Time) (AuditRow, error) {
	if row.ChainVersion == 0 {
		row.ChainVersion = 1
	}
	var lastSeq int64
	var prev []byte
	var err error
	if st.last != nil {
		err = tx.StmtContext(ctx, st.last).QueryRowContext(ctx).Scan(&lastSeq, &prev)
	} else {
		err = tx.QueryRowContext(ctx, lastAuditQuery).Scan(&lastSeq, &prev)
	}
	switch {
	case errors.Is(err, sql.ErrNoRows):
		lastSeq, prev = 0, make([]byte, 32)
	case err != nil:
		return row, fmt.Errorf("store: read last audit row: %w", err)
	}
	row.Seq = lastSeq + 1
	if row.Time.IsZero() {
		row.Time = now()
	}
	// Round trip through the stored form so the hash covers exactly what
	// a later reader will see.
	row.Time, err = parseTime(formatTime(row.Time))
	if err != nil {
		return row, err
	}
	row.Hash = chain(prev, &row)
	var exit sql.NullInt64
	if row.ExitStatus != nil {
		exit = sql.NullInt64{Int64: int64(*row.ExitStatus), Valid: true}
	}
	args := []any{row.Seq, formatTime(row.Time), row.AgentID, row.AgentName, row.ConnectionID,
		row.ConnectionAlias, row.Class, row.Kind, row.Decision, row.Reason, row.ApprovalID,
		strings.Join(row.Deciders, ","), row.Operation, exit, int64(row.Duration),
		row.BytesIn, row.BytesOut, row.Hash, row.ChainVersion, row.AgentReason, row.SourceAddr}
	if st.insert != nil {
		_, err = tx.StmtContext(ctx, st.insert).ExecContext(ctx, args...)
	} else {
		_, err = tx.ExecContext(ctx, insertAuditStmt, args...)
	}
	if err != nil {
		return row, fmt.Errorf("store: write audit row: %w", err)
	}
	return row, nil
}

// PolicyStatements holds the statements package policy runs for every
// operation (the decision's facts and the audit append), prepared once.
// Parsing SQL was a third of the cost of a decision with its audit row; a
// prepared statement is parsed once per pooled connection instead of once
// per call. Close it before the Store.
type PolicyStatements struct {
	s            *Store
	factsByID    *sql.Stmt
	factsByAlias *sql.Stmt
	lastAudit    *sql.Stmt
	insertAudit  *sql.Stmt
	delInflight  *sql.Stmt
}

func (p *PolicyStatements) auditStmts() auditStmts {
	return auditStmts{last: p.lastAudit, insert: p.insertAudit, deleteInflight: p.delInflight}
}

// PreparePolicy prepares the per-operation statements.
func (s *Store) PreparePolicy(ctx context.Context) (*PolicyStatements, error) {
	p := &PolicyStatements{s: s}
	for _, x := range []struct {
		dst **sql.Stmt
		q   string
	}{
		{&p.factsByID, policyFactsQuery(false)},
		{&p.factsByAlias, policyFactsQuery(true)},
		{&p.lastAudit, lastAuditQuery},
		{&p.insertAudit, insertAuditStmt},
		{&p.delInflight, deleteInflightStmt},
	} {
		st, err := s.db.PrepareContext(ctx, x.q)
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("store: prepare policy statements: %w", err)
		}
		*x.dst = st
	}
	return p, nil
}

// PolicyFacts is Store.PolicyFacts with the prepared statement.
func (p *PolicyStatements) PolicyFacts(ctx context.Context, agentID, connectionID, alias string) (PolicyFacts, error) {
	st, ref := p.factsByID, connectionID
	if connectionID == "" {
		st, ref = p.factsByAlias, alias
	}
	return scanPolicyFacts(st.QueryRowContext(ctx, ref, formatTime(p.s.nowUTC()), agentID), agentID, ref)
}

// AppendAudit is Store.AppendAudit with the prepared statements.
func (p *PolicyStatements) AppendAudit(ctx context.Context, row AuditRow, chain ChainFunc) (AuditRow, error) {
	return p.s.appendAudit(ctx, row, chain, p.auditStmts(), "")
}

// Close releases the prepared statements.
func (p *PolicyStatements) Close() error {
	var first error
	for _, st := range []*sql.Stmt{p.factsByID, p.factsByAlias, p.lastAudit, p.insertAudit, p.delInflight} {
		if st == nil {
			continue
		}
		if err := st.Close(); err != nil && first == nil {
			first = fmt.Errorf("store: close policy statements: %w", err)
		}
	}
	return first
}

// AuditFilter narrows ListAudit. Zero fields do not filter.
type AuditFilter struct {
	Agent      string    // agent name or id
	Connection string    // connection alias or id
	Since      time.Time // rows at or after this time
	Until      time.Time // rows before this time
	Class      string    // read, write or destructive
	Kind       string    // exec or sftp
	Decision   string    // allowed, approved, denied, ...
	BeforeSeq  int64     // rows with a smaller seq (a page of older rows)
	Limit      int       // at most this many rows, the newest; all if zero
}

const auditColumns = `seq, time, agent_id, agent_name, connection_id, connection_alias, class,
	kind, decision, reason, approval_id, deciders, operation, exit_status, duration_ns, bytes_in,
	bytes_out, hash, chain_version, agent_reason, source_addr`

func scanAudit(r rowScanner) (AuditRow, error) {
	var row AuditRow
	var t, deciders string
	var exit sql.NullInt64
	var dur int64
	err := r.Scan(&row.Seq, &t, &row.AgentID, &row.AgentName, &row.ConnectionID,
		&row.ConnectionAlias, &row.Class, &row.Kind, &row.Decision, &row.Reason, &row.ApprovalID,
		&deciders, &row.Operation, &exit, &dur, &row.BytesIn, &row.BytesOut, &row.Hash,
		&row.ChainVersion, &row.AgentReason, &row.SourceAddr)
	if err != nil {
		return AuditRow{}, err
	}
	if row.Time, err = parseTime(t); err != nil {
		return AuditRow{}, err
	}
	if deciders != "" {
		row.Deciders = strings.Split(deciders, ",")
	}
	if exit.Valid {
		v := int(exit.Int64)
		row.ExitStatus = &v
	}
	row.Duration = time.Duration(dur)
	return row, nil
}

// ListAudit returns the rows that match f in seq order.
func (s *Store) ListAudit(ctx context.Context, f AuditFilter) ([]AuditRow, error) {
	var where []string
	var args []any
	if f.Agent != "" {
		where = append(where, `(agent_name = ? OR agent_id = ?)`)
		args = append(args, f.Agent, f.Agent)
	}
	if f.Connection != "" {
		where = append(where, `(connection_alias = ? OR connection_id = ?)`)
		args = append(args, f.Connection, f.Connection)
	}
	if !f.Since.IsZero() {
		where = append(where, `time >= ?`)
		args = append(args, formatTime(f.Since))
	}
	if !f.Until.IsZero() {
		where = append(where, `time < ?`)
		args = append(args, formatTime(f.Until))
	}
	for _, eq := range []struct{ col, val string }{
		{"class", f.Class}, {"kind", f.Kind}, {"decision", f.Decision},
	} {
		if eq.val != "" {
			where = append(where, eq.col+` = ?`)
			args = append(args, eq.val)
		}
	}
	if f.BeforeSeq > 0 {
		where = append(where, `seq < ?`)
		args = append(args, f.BeforeSeq)
	}
	q := `SELECT ` + auditColumns + ` FROM audit`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	if f.Limit > 0 {
		q = `SELECT * FROM (` + q + ` ORDER BY seq DESC LIMIT ?) AS page`
		args = append(args, f.Limit)
	}
	q += ` ORDER BY seq`
	rows, err := s.db.QueryContext(ctx, q, args...)
	return collect(rows, err, "list audit", scanAudit)
}

// ScanAudit calls fn for every audit row in the order of the table's
// primary key (seq), streaming, so that verifying a long log needs no memory
// for it. It stops at the first error fn returns and returns that error,
// wrapped (errors.Is finds it).
func (s *Store) ScanAudit(ctx context.Context, fn func(AuditRow) error) error {
	rows, err := s.db.QueryContext(ctx, `SELECT `+auditColumns+` FROM audit ORDER BY seq`)
	return scanRows(rows, err, "scan audit", func(r rowScanner) error {
		row, err := scanAudit(r)
		if err != nil {
			return err
		}
		return fn(row)
	})
}

// AuditHead returns the seq and hash of the newest audit row as stored, or
// seq 0 and 32 zero bytes (the hash the first row chains from) when the log
// is empty. It reads one row by the primary key, so that serve can publish
// the head often at no cost; whether the rows up to it are intact is
// policy.Verify's question, not this one's.
func (s *Store) AuditHead(ctx context.Context) (seq int64, hash []byte, err error) {
	err = s.db.QueryRowContext(ctx, lastAuditQuery).Scan(&seq, &hash)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, make([]byte, 32), nil
	case err != nil:
		return 0, nil, fmt.Errorf("store: read audit head: %w", err)
	}
	return seq, hash, nil
}

// ListAuditAfter returns at most n rows (n > 0) whose seq is above
// afterSeq and whose time is at or after since (any time if zero), oldest
// first. An export pages through the log with it, passing the last seq of
// one page to the next, so that a long log is never held in memory whole
// and rows appended meanwhile are neither skipped nor repeated.
func (s *Store) ListAuditAfter(ctx context.Context, afterSeq int64, since time.Time, n int) ([]AuditRow, error) {
	if n <= 0 {
		return nil, invalid("audit page size %d is not positive", n)
	}
	q := `SELECT ` + auditColumns + ` FROM audit WHERE seq > ?`
	args := []any{afterSeq}
	if !since.IsZero() {
		q += ` AND time >= ?`
		args = append(args, formatTime(since))
	}
	q += ` ORDER BY seq LIMIT ?`
	args = append(args, n)
	rows, err := s.db.QueryContext(ctx, q, args...)
	return collect(rows, err, "list audit page", scanAudit)
}
