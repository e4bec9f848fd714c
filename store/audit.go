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
	// SessionID names the agent's SSH connection whose operation the row
	// records ("ses_..."; one connection of a ControlMaster carries many
	// commands), "" for a row no agent connection wrote.
	SessionID string
	// ChainVersion names the encoding the row's hash covers (1: without
	// AgentReason and SourceAddr; 2: with them; 3: with SessionID too).
	// Package policy sets it.
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
			agent_reason, source_addr, session_id)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
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
		row.BytesIn, row.BytesOut, row.Hash, row.ChainVersion, row.AgentReason, row.SourceAddr,
		row.SessionID}
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
	Session    string    // session id: the rows of one agent SSH connection
	Since      time.Time // rows at or after this time
	Until      time.Time // rows before this time
	Class      string    // read, write or destructive
	Kind       string    // exec or sftp
	Decision   string    // allowed, approved, denied, ...
	// Search keeps rows whose operation or reason contains it, without
	// regard to ASCII case. It reads the rows the other fields leave in
	// seq order until the page is full: no index helps a substring.
	Search    string
	BeforeSeq int64 // rows with a smaller seq (a page of older rows)
	AfterSeq  int64 // rows with a larger seq (a page of newer rows)
	Limit     int   // at most this many rows, the newest; all if zero
	// Oldest makes Limit keep the oldest matching rows instead of the
	// newest: the page just after AfterSeq.
	Oldest bool
}

// where is f as SQL conditions, joined by AND, and their arguments;
// "" when f does not filter.
func (f AuditFilter) where() (string, []any) {
	var where []string
	var args []any
	if f.Agent != "" {
		// Two indexed lookups (audit_agent, audit_agent_id) joined by
		// OR: SQLite and PostgreSQL both read each index for its rows.
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
		{"session_id", f.Session}, {"class", f.Class}, {"kind", f.Kind}, {"decision", f.Decision},
	} {
		if eq.val != "" {
			where = append(where, eq.col+` = ?`)
			args = append(args, eq.val)
		}
	}
	if f.Search != "" {
		// lower() on both sides: SQLite's LIKE ignores ASCII case and
		// PostgreSQL's does not; this reads the same on both.
		pat := "%" + likeEscaper.Replace(strings.ToLower(f.Search)) + "%"
		where = append(where, `(lower(operation) LIKE ? ESCAPE '\' OR lower(reason) LIKE ? ESCAPE '\')`)
		args = append(args, pat, pat)
	}
	if f.BeforeSeq > 0 {
		where = append(where, `seq < ?`)
		args = append(args, f.BeforeSeq)
	}
	if f.AfterSeq > 0 {
		where = append(where, `seq > ?`)
		args = append(args, f.AfterSeq)
	}
	return strings.Join(where, ` AND `), args
}

// likeEscaper escapes LIKE's wildcards, so that a search for "100%" or
// "a_b" finds that text.
var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

const auditColumns = `seq, time, agent_id, agent_name, connection_id, connection_alias, class,
	kind, decision, reason, approval_id, deciders, operation, exit_status, duration_ns, bytes_in,
	bytes_out, hash, chain_version, agent_reason, source_addr, session_id`

func scanAudit(r rowScanner) (AuditRow, error) {
	var row AuditRow
	var t, deciders string
	var exit sql.NullInt64
	var dur int64
	err := r.Scan(&row.Seq, &t, &row.AgentID, &row.AgentName, &row.ConnectionID,
		&row.ConnectionAlias, &row.Class, &row.Kind, &row.Decision, &row.Reason, &row.ApprovalID,
		&deciders, &row.Operation, &exit, &dur, &row.BytesIn, &row.BytesOut, &row.Hash,
		&row.ChainVersion, &row.AgentReason, &row.SourceAddr, &row.SessionID)
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

// ListAudit returns the rows that match f in seq order. With a Limit it
// reads by seq from the newest (or, with Oldest, the oldest) end, so that a
// page costs the rows it reads, not the log's length.
func (s *Store) ListAudit(ctx context.Context, f AuditFilter) ([]AuditRow, error) {
	where, args := f.where()
	q := `SELECT ` + auditColumns + ` FROM audit`
	if where != "" {
		q += ` WHERE ` + where
	}
	if f.Limit > 0 {
		order := `DESC`
		if f.Oldest {
			order = `ASC`
		}
		q = `SELECT * FROM (` + q + ` ORDER BY seq ` + order + ` LIMIT ?) AS page`
		args = append(args, f.Limit)
	}
	q += ` ORDER BY seq`
	rows, err := s.db.QueryContext(ctx, q, args...)
	return collect(rows, err, "list audit", scanAudit)
}

// AuditSession sums up the rows of one agent SSH connection.
type AuditSession struct {
	ID        string
	AgentName string
	// Aliases are the connections its rows name, sorted; a connection of
	// a ControlMaster may reach several.
	Aliases []string
	First   time.Time // the earliest row's time
	Last    time.Time // the latest row's time
	Rows    int64
	LastSeq int64 // its newest row's seq: the sessions' order and cursor
}

// ListAuditSessions sums up, per session id, the rows that match f (rows
// without a session are left out), newest session first: the one whose
// newest matching row has the largest seq. f.BeforeSeq pages: only
// sessions whose newest matching row is older than it. f.Limit bounds the
// sessions returned (all if zero); f.AfterSeq and f.Oldest are not used.
func (s *Store) ListAuditSessions(ctx context.Context, f AuditFilter) ([]AuditSession, error) {
	before, limit := f.BeforeSeq, f.Limit
	f.BeforeSeq, f.AfterSeq, f.Limit, f.Oldest = 0, 0, 0, false
	where, args := f.where()
	q := `SELECT session_id, MIN(agent_name), MIN(time), MAX(time), COUNT(*), MAX(seq) FROM audit WHERE session_id != ''`
	if where != "" {
		q += ` AND ` + where
	}
	q += ` GROUP BY session_id`
	if before > 0 {
		q += ` HAVING MAX(seq) < ?`
		args = append(args, before)
	}
	q += ` ORDER BY MAX(seq) DESC`
	if limit > 0 {
		q += ` LIMIT ?`
		args = append(args, limit)
	}
	rows, err := s.db.QueryContext(ctx, q, args...)
	list, err := collect(rows, err, "list audit sessions", func(r rowScanner) (AuditSession, error) {
		var v AuditSession
		var first, last string
		if err := r.Scan(&v.ID, &v.AgentName, &first, &last, &v.Rows, &v.LastSeq); err != nil {
			return v, err
		}
		var err error
		if v.First, err = parseTime(first); err != nil {
			return v, err
		}
		v.Last, err = parseTime(last)
		return v, err
	})
	if err != nil || len(list) == 0 {
		return list, err
	}
	// The aliases of the matching rows of the sessions on this page,
	// found through the session index.
	marks := make([]string, len(list))
	args = args[:0]
	for i, v := range list {
		marks[i] = "?"
		args = append(args, v.ID)
	}
	q = `SELECT DISTINCT session_id, connection_alias FROM audit
		WHERE session_id IN (` + strings.Join(marks, ", ") + `) AND connection_alias != ''`
	if where, wargs := f.where(); where != "" {
		q += ` AND ` + where
		args = append(args, wargs...)
	}
	arows, err := s.db.QueryContext(ctx, q+` ORDER BY session_id, connection_alias`, args...)
	type pair struct{ id, alias string }
	pairs, err := collect(arows, err, "list audit sessions", func(r rowScanner) (pair, error) {
		var p pair
		return p, r.Scan(&p.id, &p.alias)
	})
	if err != nil {
		return nil, err
	}
	at := make(map[string]int, len(list))
	for i, v := range list {
		at[v.ID] = i
	}
	for _, p := range pairs {
		i := at[p.id]
		list[i].Aliases = append(list[i].Aliases, p.alias)
	}
	return list, nil
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
// and rows appended meanwhile are neither skipped nor repeated. It is
// ListAudit's page after a seq (AfterSeq, Oldest), under another name for
// the callers that need no other filter.
func (s *Store) ListAuditAfter(ctx context.Context, afterSeq int64, since time.Time, n int) ([]AuditRow, error) {
	if n <= 0 {
		return nil, invalid("audit page size %d is not positive", n)
	}
	return s.ListAudit(ctx, AuditFilter{AfterSeq: afterSeq, Since: since, Limit: n, Oldest: true})
}
