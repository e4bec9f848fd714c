package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Approval statuses. A request starts pending and leaves it once, to
// approved, denied or expired; an approved request is later consumed (its
// ConsumedAt set) by the one operation it lets through.
const (
	ApprovalPending  = "pending"
	ApprovalApproved = "approved"
	ApprovalDenied   = "denied"
	ApprovalExpired  = "expired"
)

// prefixApproval prefixes approval ids ("apr_...").
const prefixApproval = "apr"

// Approval is one stored approval request. Package policy gives the fields
// their meaning; see migrations/0002_approvals_audit.sql for the columns.
type Approval struct {
	ID              string
	AgentID         string
	ConnectionID    string
	Class           string // read, write or destructive
	Kind            string // exec or sftp
	Operation       string // the operation with secrets redacted, for display
	Reasons         string // why it is in its class, redacted like Operation; "" if not given
	OperationSHA256 string // hex SHA-256 of the exact operation text
	ApprovalsNeeded int    // 1, or 2 for two different admins
	Status          string // ApprovalPending, ...
	FirstApprover   string // the first of two approvals, while the second is awaited
	FirstApprovedAt time.Time
	DecidedBy       string // who approved (the second one) or denied
	DecidedAt       time.Time
	Reason          string // the reason given with a denial
	ExpiresAt       time.Time
	ConsumedAt      time.Time // zero until an operation used the approval
	CreatedAt       time.Time
	ModifiedAt      time.Time

	// Read from the agents and connections tables for display.
	AgentName       string
	ConnectionAlias string
	ConnectionEnv   Env // "" when the connection was removed
}

// Deciders lists who approved or denied, in order.
func (a *Approval) Deciders() []string {
	var out []string
	if a.FirstApprover != "" {
		out = append(out, a.FirstApprover)
	}
	if a.DecidedBy != "" {
		out = append(out, a.DecidedBy)
	}
	return out
}

// RequestOutcome tells what RequestApproval did.
type RequestOutcome int

const (
	// RequestCreated: a new pending request was written.
	RequestCreated RequestOutcome = iota
	// RequestPending: an identical request is still pending; wait on it.
	RequestPending
	// RequestClaimed: an identical request was approved and not yet used;
	// it has now been consumed by this call.
	RequestClaimed
)

// approvalColumns selects an Approval joined with the names to show.
const approvalColumns = `p.id, p.agent_id, p.connection_id, p.class, p.kind, p.operation,
	p.operation_sha256, p.approvals_needed, p.status, p.first_approver, p.first_approved_at,
	p.decided_by, p.decided_at, p.reason, p.expires_at, p.consumed_at, p.created_at,
	p.modified_at, COALESCE(a.name, ''), COALESCE(c.alias, ''), COALESCE(c.env, ''), p.reasons`

const approvalFrom = ` FROM approvals p
	LEFT JOIN agents a ON a.id = p.agent_id
	LEFT JOIN connections c ON c.id = p.connection_id`

type rowScanner interface{ Scan(dest ...any) error }

func scanApproval(r rowScanner) (Approval, error) {
	var a Approval
	var firstAt, decidedAt, expires, consumed, created, modified string
	err := r.Scan(&a.ID, &a.AgentID, &a.ConnectionID, &a.Class, &a.Kind, &a.Operation,
		&a.OperationSHA256, &a.ApprovalsNeeded, &a.Status, &a.FirstApprover, &firstAt,
		&a.DecidedBy, &decidedAt, &a.Reason, &expires, &consumed, &created, &modified,
		&a.AgentName, &a.ConnectionAlias, &a.ConnectionEnv, &a.Reasons)
	if err != nil {
		return Approval{}, err
	}
	for _, f := range []struct {
		dst *time.Time
		src string
	}{{&a.FirstApprovedAt, firstAt}, {&a.DecidedAt, decidedAt}, {&a.ExpiresAt, expires},
		{&a.ConsumedAt, consumed}, {&a.CreatedAt, created}, {&a.ModifiedAt, modified}} {
		if *f.dst, err = parseTime(f.src); err != nil {
			return Approval{}, err
		}
	}
	return a, nil
}

type queryRower interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func getApproval(ctx context.Context, q queryRower, id string) (Approval, error) {
	a, err := scanApproval(q.QueryRowContext(ctx, `SELECT `+approvalColumns+approvalFrom+` WHERE p.id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Approval{}, notFound("approval", id)
	}
	if err != nil {
		return Approval{}, fmt.Errorf("store: read approval %s: %w", id, err)
	}
	return a, nil
}

// GetApproval reads one approval request by id.
func (s *Store) GetApproval(ctx context.Context, id string) (Approval, error) {
	return getApproval(ctx, s.db, id)
}

// RequestApproval finds or creates the approval request for an operation, in
// one transaction so that two identical requests arriving together never make
// two rows. req names the operation (AgentID, ConnectionID, Class, Kind,
// Operation, OperationSHA256, ApprovalsNeeded); the other fields are ignored.
//
// In order of preference it
//   - consumes an identical request that was approved, not yet used and not
//     expired (the agent gave up waiting and retried): RequestClaimed;
//   - returns an identical request still pending and not expired:
//     RequestPending;
//   - writes a new pending request that expires after lifetime:
//     RequestCreated.
//
// Identical means same agent, connection, class, kind and SHA-256.
func (s *Store) RequestApproval(ctx context.Context, req Approval, lifetime time.Duration) (Approval, RequestOutcome, error) {
	if lifetime <= 0 {
		return Approval{}, 0, invalid("approval lifetime %v is not positive", lifetime)
	}
	if req.ApprovalsNeeded != 1 && req.ApprovalsNeeded != 2 {
		return Approval{}, 0, invalid("approvals needed is %d; want 1 or 2", req.ApprovalsNeeded)
	}
	var out Approval
	var outcome RequestOutcome
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		now := s.nowUTC()
		rows, err := tx.QueryContext(ctx, `SELECT `+approvalColumns+approvalFrom+`
			WHERE p.agent_id = ? AND p.connection_id = ? AND p.operation_sha256 = ?
			  AND p.class = ? AND p.kind = ? AND p.expires_at > ?
			  AND (p.status = 'pending' OR (p.status = 'approved' AND p.consumed_at = ''))
			ORDER BY p.created_at`,
			req.AgentID, req.ConnectionID, req.OperationSHA256, req.Class, req.Kind, formatTime(now))
		if err != nil {
			return fmt.Errorf("store: find approval: %w", err)
		}
		var approved, pending []Approval
		for rows.Next() {
			a, err := scanApproval(rows)
			if err != nil {
				rows.Close()
				return fmt.Errorf("store: find approval: %w", err)
			}
			if a.Status == ApprovalApproved {
				approved = append(approved, a)
			} else {
				pending = append(pending, a)
			}
		}
		if err := rows.Close(); err != nil {
			return fmt.Errorf("store: find approval: %w", err)
		}
		switch {
		case len(approved) > 0:
			out = approved[0]
			if err := consume(ctx, tx, out.ID, now); err != nil {
				return err
			}
			out.ConsumedAt, out.ModifiedAt = now, now
			outcome = RequestClaimed
			return nil
		case len(pending) > 0:
			out, outcome = pending[0], RequestPending
			return nil
		}
		out = Approval{
			ID:              newID(prefixApproval),
			AgentID:         req.AgentID,
			ConnectionID:    req.ConnectionID,
			Class:           req.Class,
			Kind:            req.Kind,
			Operation:       req.Operation,
			Reasons:         req.Reasons,
			OperationSHA256: req.OperationSHA256,
			ApprovalsNeeded: req.ApprovalsNeeded,
			Status:          ApprovalPending,
			ExpiresAt:       now.Add(lifetime),
			CreatedAt:       now,
			ModifiedAt:      now,
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO approvals (id, agent_id, connection_id, class, kind,
			operation, reasons, operation_sha256, approvals_needed, status, expires_at, created_at, modified_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?)`,
			out.ID, out.AgentID, out.ConnectionID, out.Class, out.Kind, out.Operation, out.Reasons,
			out.OperationSHA256, out.ApprovalsNeeded, formatTime(out.ExpiresAt),
			formatTime(now), formatTime(now))
		if err != nil {
			if strings.Contains(err.Error(), "FOREIGN KEY") {
				return invalid("approval for unknown agent %s or connection %s", req.AgentID, req.ConnectionID)
			}
			return fmt.Errorf("store: write approval: %w", err)
		}
		// Re-read for the joined names.
		if out, err = getApproval(ctx, tx, out.ID); err != nil {
			return err
		}
		outcome = RequestCreated
		return queueNotifications(ctx, tx, out, NotifyPending, now)
	})
	if err != nil {
		return Approval{}, 0, err
	}
	return out, outcome, nil
}

// consume marks an approved, unused request as used, or fails without
// changing anything.
func consume(ctx context.Context, tx *sql.Tx, id string, now time.Time) error {
	res, err := tx.ExecContext(ctx, `UPDATE approvals SET consumed_at = ?, modified_at = ?
		WHERE id = ? AND status = 'approved' AND consumed_at = ''`,
		formatTime(now), formatTime(now), id)
	if err != nil {
		return fmt.Errorf("store: consume approval %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("store: consume approval %s: no longer approved and unused", id)
	}
	return nil
}

// ConsumeApproval marks an approved request as used by the operation it lets
// through. The UPDATE is conditional (status approved, not yet consumed), so
// of any number of concurrent callers exactly one gets ok; the others get
// ok == false and the request as it now stands.
func (s *Store) ConsumeApproval(ctx context.Context, id string) (a Approval, ok bool, err error) {
	now := s.nowUTC()
	res, err := s.db.ExecContext(ctx, `UPDATE approvals SET consumed_at = ?, modified_at = ?
		WHERE id = ? AND status = 'approved' AND consumed_at = ''`,
		formatTime(now), formatTime(now), id)
	if err != nil {
		return Approval{}, false, fmt.Errorf("store: consume approval %s: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return Approval{}, false, fmt.Errorf("store: consume approval %s: %w", id, err)
	}
	a, err = s.GetApproval(ctx, id)
	return a, n == 1 && err == nil, err
}

// DecideOutcome tells what DecideApproval did.
type DecideOutcome int

const (
	// DecideApproved: the request is now approved.
	DecideApproved DecideOutcome = iota
	// DecideFirstApproval: the first of two approvals was recorded; the
	// request stays pending until a different admin approves too.
	DecideFirstApproval
	// DecideDenied: the request is now denied.
	DecideDenied
	// DecideSameApprover: the admin who gave the first of two approvals
	// tried to give the second; nothing changed.
	DecideSameApprover
	// DecideNotPending: the request was already approved, denied or expired
	// (possibly by a concurrent decision); nothing changed.
	DecideNotPending
	// DecideExpired: the request's lifetime had run out; it is now marked
	// expired and was not approved or denied.
	DecideExpired
)

// DecideApproval applies one admin's approve (approve true) or deny to a
// pending request, in one transaction. Every UPDATE is conditional on the
// request still being pending (and, for a second approval, on the first
// approver being the one just read), so when several admins decide at once,
// in this process or another, exactly one decision takes the request out of
// pending and the others get DecideNotPending with the winning state.
// The returned Approval is the request after the call.
func (s *Store) DecideApproval(ctx context.Context, id string, approve bool, admin, reason string) (Approval, DecideOutcome, error) {
	if admin == "" {
		return Approval{}, 0, invalid("an approval decision needs the admin's name")
	}
	var out Approval
	var outcome DecideOutcome
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		now := s.nowUTC()
		a, err := getApproval(ctx, tx, id)
		if err != nil {
			return err
		}
		var res sql.Result
		switch {
		case a.Status != ApprovalPending:
			out, outcome = a, DecideNotPending
			return nil
		case !now.Before(a.ExpiresAt):
			res, err = tx.ExecContext(ctx, `UPDATE approvals SET status = 'expired', modified_at = ?
				WHERE id = ? AND status = 'pending'`, formatTime(now), id)
			outcome = DecideExpired
		case !approve:
			res, err = tx.ExecContext(ctx, `UPDATE approvals SET status = 'denied', decided_by = ?,
				decided_at = ?, reason = ?, modified_at = ? WHERE id = ? AND status = 'pending'`,
				admin, formatTime(now), reason, formatTime(now), id)
			outcome = DecideDenied
		case a.ApprovalsNeeded == 2 && a.FirstApprover == "":
			res, err = tx.ExecContext(ctx, `UPDATE approvals SET first_approver = ?,
				first_approved_at = ?, modified_at = ?
				WHERE id = ? AND status = 'pending' AND first_approver = ''`,
				admin, formatTime(now), formatTime(now), id)
			outcome = DecideFirstApproval
		case a.ApprovalsNeeded == 2 && a.FirstApprover == admin:
			out, outcome = a, DecideSameApprover
			return nil
		default:
			res, err = tx.ExecContext(ctx, `UPDATE approvals SET status = 'approved', decided_by = ?,
				decided_at = ?, modified_at = ?
				WHERE id = ? AND status = 'pending' AND first_approver = ?`,
				admin, formatTime(now), formatTime(now), id, a.FirstApprover)
			outcome = DecideApproved
		}
		if err != nil {
			return fmt.Errorf("store: decide approval %s: %w", id, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("store: decide approval %s: %w", id, err)
		} else if n != 1 {
			outcome = DecideNotPending
		}
		if out, err = getApproval(ctx, tx, id); err != nil {
			return err
		}
		if outcome == DecideApproved || outcome == DecideDenied {
			return queueNotifications(ctx, tx, out, NotifyDecided, now)
		}
		return nil
	})
	if err != nil {
		return Approval{}, 0, err
	}
	return out, outcome, nil
}

// ExpireApproval marks a pending request whose lifetime has run out as
// expired. changed is false when it was no longer pending or not yet due.
func (s *Store) ExpireApproval(ctx context.Context, id string) (a Approval, changed bool, err error) {
	now := formatTime(s.nowUTC())
	res, err := s.db.ExecContext(ctx, `UPDATE approvals SET status = 'expired', modified_at = ?
		WHERE id = ? AND status = 'pending' AND expires_at <= ?`, now, id, now)
	if err != nil {
		return Approval{}, false, fmt.Errorf("store: expire approval %s: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return Approval{}, false, fmt.Errorf("store: expire approval %s: %w", id, err)
	}
	a, err = s.GetApproval(ctx, id)
	return a, n == 1, err
}

// ExpireApprovals marks every overdue pending request as expired, so that
// lists show the truth even when nobody waited on them, and returns how many
// changed.
func (s *Store) ExpireApprovals(ctx context.Context) (int64, error) {
	now := formatTime(s.nowUTC())
	res, err := s.db.ExecContext(ctx, `UPDATE approvals SET status = 'expired', modified_at = ?
		WHERE status = 'pending' AND expires_at <= ?`, now, now)
	if err != nil {
		return 0, fmt.Errorf("store: expire approvals: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("store: expire approvals: %w", err)
	}
	return n, nil
}

// ListApprovals returns pending requests, or all requests when all is true,
// oldest first.
func (s *Store) ListApprovals(ctx context.Context, all bool) ([]Approval, error) {
	q := `SELECT ` + approvalColumns + approvalFrom
	if !all {
		q += ` WHERE p.status = 'pending'`
	}
	q += ` ORDER BY p.created_at, p.id`
	rows, err := s.db.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("store: list approvals: %w", err)
	}
	defer rows.Close()
	var out []Approval
	for rows.Next() {
		a, err := scanApproval(rows)
		if err != nil {
			return nil, fmt.Errorf("store: list approvals: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list approvals: %w", err)
	}
	return out, nil
}

// RecentDecidedApprovals returns at most limit requests that are no longer
// pending, newest decision first. It reads only those rows (the status
// index), so a page that shows recent decisions costs the same however long
// the history is.
func (s *Store) RecentDecidedApprovals(ctx context.Context, limit int) ([]Approval, error) {
	if limit <= 0 {
		return nil, nil
	}
	rows, err := s.db.QueryContext(ctx, `SELECT `+approvalColumns+approvalFrom+`
		WHERE p.status IN ('approved', 'denied', 'expired')
		ORDER BY p.modified_at DESC, p.id DESC LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("store: recent approvals: %w", err)
	}
	defer rows.Close()
	var out []Approval
	for rows.Next() {
		a, err := scanApproval(rows)
		if err != nil {
			return nil, fmt.Errorf("store: recent approvals: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: recent approvals: %w", err)
	}
	return out, nil
}

// ApprovalStatuses returns the status of each named request (missing ids are
// left out). It reads only those rows by primary key, which is what lets the
// policy engine's watcher check its waiters after every change to the
// database without scanning the table.
func (s *Store) ApprovalStatuses(ctx context.Context, ids []string) (map[string]string, error) {
	out := make(map[string]string, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	q := `SELECT id, status FROM approvals WHERE id IN (?` + strings.Repeat(", ?", len(ids)-1) + `)`
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: approval statuses: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, status string
		if err := rows.Scan(&id, &status); err != nil {
			return nil, fmt.Errorf("store: approval statuses: %w", err)
		}
		out[id] = status
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: approval statuses: %w", err)
	}
	return out, nil
}

// PolicyFacts is what a policy decision needs to know about one agent and one
// connection, read in a single query: who the agent is and whether it is
// disabled, the connection's alias and environment, and the grant's rules.
// It lives with the approval queries because package policy is its only user.
type PolicyFacts struct {
	AgentID         string
	AgentName       string
	AgentDisabled   bool
	ConnectionID    string
	ConnectionAlias string
	// ConnectionModifiedAt is the connection row's modified_at, which every
	// change of the row moves: a caller that classified an operation with a
	// copy of the row it kept tells from it whether that copy is current.
	ConnectionModifiedAt time.Time
	Env                  string // dev, test, staging or production
	HasGrant             bool   // false: the agent may not see the connection
	ReadRule             string // allow, ask or deny; "" without a grant
	WriteRule            string
	DestructiveRule      string
}

// PolicyFacts reads the facts for agentID and the connection named by its id
// (connectionID) or, when that is empty, by its alias. A missing agent or
// connection is ErrNotFound; a missing grant is HasGrant false.
func (s *Store) PolicyFacts(ctx context.Context, agentID, connectionID, alias string) (PolicyFacts, error) {
	ref := connectionID
	if connectionID == "" {
		ref = alias
	}
	return scanPolicyFacts(s.db.QueryRowContext(ctx, policyFactsQuery(connectionID == ""), ref, agentID), agentID, ref)
}

// policyFactsQuery selects PolicyFacts by connection id, or by alias; its
// arguments are the connection reference and the agent id.
func policyFactsQuery(byAlias bool) string {
	where := `c.id = ?`
	if byAlias {
		where = `c.alias = ?`
	}
	return `SELECT a.id, a.name, a.disabled, c.id, c.alias, c.modified_at, c.env,
			g.id, g.read_rule, g.write_rule, g.destructive_rule
		FROM agents a JOIN connections c ON ` + where + `
		LEFT JOIN grants g ON g.agent_id = a.id AND g.connection_id = c.id
		WHERE a.id = ?`
}

func scanPolicyFacts(row *sql.Row, agentID, ref string) (PolicyFacts, error) {
	var f PolicyFacts
	var grantID sql.NullString
	var r, w, d sql.NullString
	var modified string
	err := row.Scan(&f.AgentID, &f.AgentName, &f.AgentDisabled,
		&f.ConnectionID, &f.ConnectionAlias, &modified, &f.Env, &grantID, &r, &w, &d)
	if errors.Is(err, sql.ErrNoRows) {
		return PolicyFacts{}, fmt.Errorf("store: agent %q or connection %q %w", agentID, ref, ErrNotFound)
	}
	if err != nil {
		return PolicyFacts{}, fmt.Errorf("store: read policy facts: %w", err)
	}
	if f.ConnectionModifiedAt, err = parseTime(modified); err != nil {
		return PolicyFacts{}, fmt.Errorf("store: read policy facts: %w", err)
	}
	f.HasGrant = grantID.Valid
	f.ReadRule, f.WriteRule, f.DestructiveRule = r.String, w.String, d.String
	return f, nil
}
