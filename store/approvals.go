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
	FirstApproverID string // that admin's id, which the two-person rule compares
	FirstApprovedAt time.Time
	DecidedBy       string // who approved (the second one) or denied
	DecidedByID     string // that admin's id
	DecidedAt       time.Time
	Reason          string // the reason given with a denial
	ExpiresAt       time.Time
	ConsumedAt      time.Time // zero until an operation used the approval
	CreatedAt       time.Time
	ModifiedAt      time.Time

	// AgentReason is what the agent said the operation is for, redacted;
	// SourceAddr is the address the agent connected from. Both are shown
	// to the admin who decides.
	AgentReason string
	SourceAddr  string

	// Scope is the approval's size (ScopeRequest unless an admin chose
	// more); a wider scope lets further operations through until
	// ScopeExpiresAt, unless ScopeRevokedAt is set first.
	Scope          Scope
	ScopeExpiresAt time.Time
	ScopeRevokedAt time.Time
	ScopeRevokedBy string

	// TerminalLife is, for a session with a terminal (an interactive
	// shell, whatever its command), the longest it may run once approved;
	// zero for a request without a terminal. Such a request is matched
	// only to one with the same life, and never scoped.
	TerminalLife time.Duration

	// Read from the agents and connections tables for display.
	AgentName       string
	ConnectionAlias string
	ConnectionEnv   Env // "" when the connection was removed
	TargetUser      string
	TargetHost      string
	TargetPort      int
}

// Scope is the size of an approval (migrations/0005).
type Scope string

// The scopes.
const (
	// ScopeRequest lets exactly the operation that asked through.
	ScopeRequest Scope = "request"
	// ScopeOperation also lets the same exact operation of the same agent
	// on the same connection through until the scope ends.
	ScopeOperation Scope = "operation"
	// ScopeClass lets any operation of the approval's class by the same
	// agent on the same connection through until the scope ends: a
	// time-boxed elevation of the grant's rule from ask to allow.
	ScopeClass Scope = "class"
)

// Valid reports whether s is one of the scopes.
func (s Scope) Valid() bool { return s == ScopeRequest || s == ScopeOperation || s == ScopeClass }

// ScopeActive reports whether a's scope lets operations through at now.
func (a *Approval) ScopeActive(now time.Time) bool {
	return a.Scope != ScopeRequest && a.Scope != "" && a.Status == ApprovalApproved &&
		a.ScopeRevokedAt.IsZero() && now.Before(a.ScopeExpiresAt)
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
	p.modified_at, COALESCE(a.name, ''), COALESCE(c.alias, ''), COALESCE(c.env, ''), p.reasons,
	p.first_approver_id, p.decided_by_id, p.agent_reason, p.source_addr, p.scope, p.scope_expires_at,
	p.scope_revoked_at, p.scope_revoked_by, COALESCE(c.target_user, ''), COALESCE(c.host, ''), COALESCE(c.port, 0),
	p.terminal_life_ms`

const approvalFrom = ` FROM approvals p
	LEFT JOIN agents a ON a.id = p.agent_id
	LEFT JOIN connections c ON c.id = p.connection_id`

func scanApproval(r rowScanner) (Approval, error) {
	var a Approval
	var firstAt, decidedAt, expires, consumed, created, modified, scopeEnd, scopeRevoked string
	var lifeMS int64
	err := r.Scan(&a.ID, &a.AgentID, &a.ConnectionID, &a.Class, &a.Kind, &a.Operation,
		&a.OperationSHA256, &a.ApprovalsNeeded, &a.Status, &a.FirstApprover, &firstAt,
		&a.DecidedBy, &decidedAt, &a.Reason, &expires, &consumed, &created, &modified,
		&a.AgentName, &a.ConnectionAlias, &a.ConnectionEnv, &a.Reasons,
		&a.FirstApproverID, &a.DecidedByID, &a.AgentReason, &a.SourceAddr, &a.Scope, &scopeEnd,
		&scopeRevoked, &a.ScopeRevokedBy, &a.TargetUser, &a.TargetHost, &a.TargetPort, &lifeMS)
	if err != nil {
		return Approval{}, err
	}
	a.TerminalLife = time.Duration(lifeMS) * time.Millisecond
	for _, f := range []struct {
		dst *time.Time
		src string
	}{{&a.FirstApprovedAt, firstAt}, {&a.DecidedAt, decidedAt}, {&a.ExpiresAt, expires},
		{&a.ConsumedAt, consumed}, {&a.CreatedAt, created}, {&a.ModifiedAt, modified},
		{&a.ScopeExpiresAt, scopeEnd}, {&a.ScopeRevokedAt, scopeRevoked}} {
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

// RequestApproval is RequestApprovalWithin with no bound on the requests
// that wait.
func (s *Store) RequestApproval(ctx context.Context, req Approval, lifetime time.Duration) (Approval, RequestOutcome, error) {
	return s.RequestApprovalWithin(ctx, req, lifetime, PendingLimits{})
}

// RequestApprovalWithin finds or creates the approval request for an
// operation, in one transaction so that two identical requests arriving
// together never make two rows. req names the operation (AgentID,
// ConnectionID, Class, Kind, Operation, OperationSHA256, ApprovalsNeeded);
// the other fields are ignored.
//
// In order of preference it
//   - consumes an identical request that was approved, not yet used and not
//     expired (the agent gave up waiting and retried): RequestClaimed;
//   - returns an identical request still pending and not expired:
//     RequestPending;
//   - refuses with a *PendingBoundError (matching ErrTooManyPending) when
//     the agent or the connection already has as many requests waiting
//     as limits allow (checkPendingBounds);
//   - writes a new pending request that expires after lifetime:
//     RequestCreated.
//
// Identical means same agent, connection, class, kind and SHA-256. A new
// request also keeps req's AgentReason and SourceAddr, for display.
func (s *Store) RequestApprovalWithin(ctx context.Context, req Approval, lifetime time.Duration, limits PendingLimits) (Approval, RequestOutcome, error) {
	if lifetime <= 0 {
		return Approval{}, 0, invalid("approval lifetime %v is not positive", lifetime)
	}
	if req.ApprovalsNeeded != 1 && req.ApprovalsNeeded != 2 {
		return Approval{}, 0, invalid("approvals needed is %d; want 1 or 2", req.ApprovalsNeeded)
	}
	if limits.PerAgent < 0 || limits.PerConnection < 0 {
		return Approval{}, 0, invalid("pending bounds %d per agent, %d per connection: want 0 (none) or more", limits.PerAgent, limits.PerConnection)
	}
	var out Approval
	var outcome RequestOutcome
	// refused is set, and the transaction still committed, when a bound
	// refused the request: the refusal may have opened an episode and
	// queued its summary, which must not be rolled back with it.
	var refused *PendingBoundError
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		now := s.nowUTC()
		rows, err := tx.QueryContext(ctx, `SELECT `+approvalColumns+approvalFrom+`
			WHERE p.agent_id = ? AND p.connection_id = ? AND p.operation_sha256 = ?
			  AND p.class = ? AND p.kind = ? AND p.terminal_life_ms = ? AND p.expires_at > ?
			  AND (p.status = 'pending' OR (p.status = 'approved' AND p.consumed_at = ''))
			ORDER BY p.created_at`,
			req.AgentID, req.ConnectionID, req.OperationSHA256, req.Class, req.Kind, req.TerminalLife.Milliseconds(), formatTime(now))
		found, err := collect(rows, err, "find approval", scanApproval)
		if err != nil {
			return err
		}
		var approved, pending []Approval
		for _, a := range found {
			if a.Status == ApprovalApproved {
				approved = append(approved, a)
			} else {
				pending = append(pending, a)
			}
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
		if refused, err = checkPendingBounds(ctx, tx, req, limits, now); err != nil || refused != nil {
			return err
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
			AgentReason:     req.AgentReason,
			SourceAddr:      req.SourceAddr,
			TerminalLife:    req.TerminalLife,
			Status:          ApprovalPending,
			ExpiresAt:       now.Add(lifetime),
			CreatedAt:       now,
			ModifiedAt:      now,
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO approvals (id, agent_id, connection_id, class, kind,
			operation, reasons, operation_sha256, approvals_needed, status, expires_at, created_at, modified_at,
			agent_reason, source_addr, terminal_life_ms)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?, ?, ?)`,
			out.ID, out.AgentID, out.ConnectionID, out.Class, out.Kind, out.Operation, out.Reasons,
			out.OperationSHA256, out.ApprovalsNeeded, formatTime(out.ExpiresAt),
			formatTime(now), formatTime(now), out.AgentReason, out.SourceAddr, out.TerminalLife.Milliseconds())
		if err != nil {
			if isForeignKeyViolation(err) {
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
	if refused != nil {
		return Approval{}, 0, refused
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
//
// It runs under the write lock (inTx) like RequestApproval, which may
// consume the same request for a retry: on PostgreSQL, where a lone UPDATE
// does not wait for that lock, RequestApproval could otherwise find the
// request unused and then fail to consume it.
func (s *Store) ConsumeApproval(ctx context.Context, id string) (a Approval, ok bool, err error) {
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		now := s.nowUTC()
		res, err := tx.ExecContext(ctx, `UPDATE approvals SET consumed_at = ?, modified_at = ?
			WHERE id = ? AND status = 'approved' AND consumed_at = ''`,
			formatTime(now), formatTime(now), id)
		if err != nil {
			return fmt.Errorf("store: consume approval %s: %w", id, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("store: consume approval %s: %w", id, err)
		}
		if a, err = getApproval(ctx, tx, id); err != nil {
			return err
		}
		ok = n == 1
		return nil
	})
	if err != nil {
		return Approval{}, false, err
	}
	return a, ok, nil
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

// Decider is the admin who decides an approval: AdminID is the identity the
// two-person rule compares, Name what the audit log and the page show.
type Decider struct {
	AdminID string
	Name    string
}

// Decision is one admin's decision of one approval request.
type Decision struct {
	ID      string
	Approve bool // false denies
	By      Decider
	Reason  string // shown to the agent with a denial
	// Scope is the approval's size (ScopeRequest if empty); a wider scope
	// ends at ScopeExpiresAt. Ignored for a denial, and refused for a
	// request that needs two approvals.
	Scope          Scope
	ScopeExpiresAt time.Time
}

// DecideApproval applies one admin's decision to a pending request, in one
// transaction. Every UPDATE is conditional on the request still being
// pending (and, for a second approval, on the first approver being the one
// just read), so when several admins decide at once, in this process or
// another, exactly one decision takes the request out of pending and the
// others get DecideNotPending with the winning state. The returned Approval
// is the request after the call.
//
// The two-person rule compares admin ids: the second approval of a request
// that needs two must come from an admin other than the first.
func (s *Store) DecideApproval(ctx context.Context, d Decision) (Approval, DecideOutcome, error) {
	if d.By.AdminID == "" || d.By.Name == "" {
		return Approval{}, 0, invalid("an approval decision needs the deciding admin")
	}
	if d.Scope == "" {
		d.Scope = ScopeRequest
	}
	if !d.Approve {
		d.Scope, d.ScopeExpiresAt = ScopeRequest, time.Time{}
	}
	if !d.Scope.Valid() {
		return Approval{}, 0, invalid("unknown approval scope %q", d.Scope)
	}
	if (d.Scope == ScopeRequest) != d.ScopeExpiresAt.IsZero() {
		return Approval{}, 0, invalid("scope %s with end %v: a wider scope needs an end, a request none", d.Scope, d.ScopeExpiresAt)
	}
	var out Approval
	var outcome DecideOutcome
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		now := s.nowUTC()
		if err := checkDecider(ctx, tx, d.By, "decide approval "+d.ID); err != nil {
			return err
		}
		a, err := getApproval(ctx, tx, d.ID)
		if err != nil {
			return err
		}
		if d.Scope != ScopeRequest && a.ApprovalsNeeded != 1 {
			return invalid("approval %s needs two admins: it lets one operation through, never a scope", d.ID)
		}
		if d.Scope != ScopeRequest && a.TerminalLife > 0 {
			return invalid("approval %s is of a session with a terminal: it lets that one session through, never a scope", d.ID)
		}
		if d.Scope != ScopeRequest && a.Status == ApprovalPending {
			if err := scopeRuleAsks(ctx, tx, a); err != nil {
				return err
			}
		}
		var res sql.Result
		switch {
		case a.Status != ApprovalPending:
			out, outcome = a, DecideNotPending
			return nil
		case !now.Before(a.ExpiresAt):
			res, err = tx.ExecContext(ctx, `UPDATE approvals SET status = 'expired', modified_at = ?
				WHERE id = ? AND status = 'pending'`, formatTime(now), d.ID)
			outcome = DecideExpired
		case !d.Approve:
			res, err = tx.ExecContext(ctx, `UPDATE approvals SET status = 'denied', decided_by = ?,
				decided_by_id = ?, decided_at = ?, reason = ?, modified_at = ? WHERE id = ? AND status = 'pending'`,
				d.By.Name, d.By.AdminID, formatTime(now), d.Reason, formatTime(now), d.ID)
			outcome = DecideDenied
		case a.ApprovalsNeeded == 2 && a.FirstApproverID == "" && a.FirstApprover == "":
			res, err = tx.ExecContext(ctx, `UPDATE approvals SET first_approver = ?, first_approver_id = ?,
				first_approved_at = ?, modified_at = ?
				WHERE id = ? AND status = 'pending' AND first_approver = ''`,
				d.By.Name, d.By.AdminID, formatTime(now), formatTime(now), d.ID)
			outcome = DecideFirstApproval
		case a.ApprovalsNeeded == 2 && sameAdmin(a, d.By):
			out, outcome = a, DecideSameApprover
			return nil
		default:
			res, err = tx.ExecContext(ctx, `UPDATE approvals SET status = 'approved', decided_by = ?,
				decided_by_id = ?, decided_at = ?, modified_at = ?, scope = ?, scope_expires_at = ?
				WHERE id = ? AND status = 'pending' AND first_approver = ?`,
				d.By.Name, d.By.AdminID, formatTime(now), formatTime(now), string(d.Scope),
				formatTime(d.ScopeExpiresAt), d.ID, a.FirstApprover)
			outcome = DecideApproved
		}
		if err != nil {
			return fmt.Errorf("store: decide approval %s: %w", d.ID, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("store: decide approval %s: %w", d.ID, err)
		} else if n != 1 {
			outcome = DecideNotPending
		}
		if out, err = getApproval(ctx, tx, d.ID); err != nil {
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

// scopeRuleAsks refuses a scope for request a when the grant of its agent
// on its connection says deny for its class now (the request waited while
// an admin changed the rule): a scope elevates an ask, and one made under
// a deny would come to life with the next ask, which is what ending scopes
// on a deny (endScopesTx) prevents.
func scopeRuleAsks(ctx context.Context, tx *sql.Tx, a Approval) error {
	var r, w, d string
	err := tx.QueryRowContext(ctx, `SELECT read_rule, write_rule, destructive_rule FROM grants
		WHERE agent_id = ? AND connection_id = ?`, a.AgentID, a.ConnectionID).Scan(&r, &w, &d)
	if errors.Is(err, sql.ErrNoRows) {
		// No grant: the scope elevates nothing, and never a grant given
		// later (scopeGrantLives).
		return nil
	}
	if err != nil {
		return fmt.Errorf("store: grant of approval %s: %w", a.ID, err)
	}
	rule := map[string]string{"read": r, "write": w, "destructive": d}[a.Class]
	if Rule(rule) == RuleDeny {
		return invalid("approval %s: the %s rule of %s on %s is deny now: approve the one request, without a scope", a.ID, a.Class, a.AgentName, a.ConnectionAlias)
	}
	return nil
}

// sameAdmin reports whether by gave a's first approval. A first approval
// recorded before admin ids were kept (schema 0005) has only a name, which
// is then compared without regard to case, as admin names are unique that
// way.
func sameAdmin(a Approval, by Decider) bool {
	if a.FirstApproverID != "" {
		return a.FirstApproverID == by.AdminID
	}
	return strings.EqualFold(a.FirstApprover, by.Name)
}

// ActiveScope returns the approval whose scope lets agentID run an operation
// of class with the given operation SHA-256 on connectionID now: an
// operation scope of that exact operation, or a class scope of that class,
// approved, not revoked, not ended and of the grant that is there now
// (scopeGrantLives). ok is false when there is none. Of
// several, the one that lasts longest is returned.
func (s *Store) ActiveScope(ctx context.Context, agentID, connectionID, class, operationSHA256 string) (a Approval, ok bool, err error) {
	now := formatTime(s.nowUTC())
	a, err = scanApproval(s.db.QueryRowContext(ctx, `SELECT `+approvalColumns+approvalFrom+`
		WHERE p.agent_id = ? AND p.connection_id = ? AND p.scope != 'request'
		  AND p.scope_expires_at > ? AND p.scope_revoked_at = '' AND p.status = 'approved'
		  AND p.class = ? AND (p.scope = 'class' OR p.operation_sha256 = ?)`+scopeGrantLives+`
		ORDER BY p.scope_expires_at DESC, p.id LIMIT 1`,
		agentID, connectionID, now, class, operationSHA256))
	if errors.Is(err, sql.ErrNoRows) {
		return Approval{}, false, nil
	}
	if err != nil {
		return Approval{}, false, fmt.Errorf("store: active scope: %w", err)
	}
	return a, true, nil
}

// scopeGrantLives is the condition that approval p's scope elevates a grant
// that still is the one it was made under: a grant of its agent on its
// connection made no later than the decision. A grant revoked since (and
// perhaps given again) ends its scopes when it goes (RevokeGrant); this
// also voids those left over from before it did.
const scopeGrantLives = `
		  AND EXISTS (SELECT 1 FROM grants g WHERE g.agent_id = p.agent_id
		    AND g.connection_id = p.connection_id AND g.created_at <= p.decided_at)`

// ListScopes returns the approvals with a scope wider than one request,
// newest end first: only those still active at now when active is true
// (of a grant that is there now, as ActiveScope).
func (s *Store) ListScopes(ctx context.Context, active bool) ([]Approval, error) {
	q := `SELECT ` + approvalColumns + approvalFrom + ` WHERE p.scope != 'request' AND p.status = 'approved'`
	var args []any
	if active {
		q += ` AND p.scope_expires_at > ? AND p.scope_revoked_at = ''` + scopeGrantLives
		args = append(args, formatTime(s.nowUTC()))
	}
	q += ` ORDER BY p.scope_expires_at DESC, p.id`
	return queryApprovals(ctx, s.db, "list scopes", q, args...)
}

// RevokeScope ends approval id's scope at once. It is ErrNotFound for an
// unknown id and invalid for an approval without an active scope.
func (s *Store) RevokeScope(ctx context.Context, id string, by Decider) (Approval, error) {
	if by.AdminID == "" || by.Name == "" {
		return Approval{}, invalid("revoking a scope needs the admin")
	}
	var out Approval
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		now := s.nowUTC()
		if err := checkDecider(ctx, tx, by, "revoke the scope of "+id); err != nil {
			return err
		}
		a, err := getApproval(ctx, tx, id)
		if err != nil {
			return err
		}
		if !a.ScopeActive(now) {
			return invalid("approval %s has no active scope to revoke", id)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE approvals SET scope_revoked_at = ?, scope_revoked_by = ?,
			modified_at = ? WHERE id = ? AND scope_revoked_at = ''`,
			formatTime(now), by.Name, formatTime(now), id); err != nil {
			return fmt.Errorf("store: revoke scope of %s: %w", id, err)
		}
		out, err = getApproval(ctx, tx, id)
		return err
	})
	return out, err
}

// queryApprovals runs q and scans every row as an Approval; what names the
// call in errors.
func queryApprovals(ctx context.Context, db *sql.DB, what, q string, args ...any) ([]Approval, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	return collect(rows, err, what, scanApproval)
}

// ExpireApproval marks a pending request whose lifetime has run out as
// expired. changed is false when it was no longer pending or not yet due.
func (s *Store) ExpireApproval(ctx context.Context, id string) (a Approval, changed bool, err error) {
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		now := formatTime(s.nowUTC())
		res, err := tx.ExecContext(ctx, `UPDATE approvals SET status = 'expired', modified_at = ?
			WHERE id = ? AND status = 'pending' AND expires_at <= ?`, now, id, now)
		if err != nil {
			return fmt.Errorf("store: expire approval %s: %w", id, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("store: expire approval %s: %w", id, err)
		}
		changed = n == 1
		a, err = getApproval(ctx, tx, id)
		return err
	})
	if err != nil {
		return Approval{}, false, err
	}
	return a, changed, nil
}

// ExpireApprovals marks every overdue pending request as expired, so that
// lists show the truth even when nobody waited on them, and returns how many
// changed.
func (s *Store) ExpireApprovals(ctx context.Context) (int64, error) {
	var n int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		now := formatTime(s.nowUTC())
		res, err := tx.ExecContext(ctx, `UPDATE approvals SET status = 'expired', modified_at = ?
			WHERE status = 'pending' AND expires_at <= ?`, now, now)
		if err != nil {
			return fmt.Errorf("store: expire approvals: %w", err)
		}
		if n, err = res.RowsAffected(); err != nil {
			return fmt.Errorf("store: expire approvals: %w", err)
		}
		return nil
	})
	return n, err
}

// ListApprovals returns pending requests, or all requests when all is true,
// oldest first.
func (s *Store) ListApprovals(ctx context.Context, all bool) ([]Approval, error) {
	q := `SELECT ` + approvalColumns + approvalFrom
	if !all {
		q += ` WHERE p.status = 'pending'`
	}
	q += ` ORDER BY p.created_at, p.id`
	return queryApprovals(ctx, s.db, "list approvals", q)
}

// RecentDecidedApprovals returns at most limit requests that are no longer
// pending, newest decision first. It reads only those rows (the status
// index), so a page that shows recent decisions costs the same however long
// the history is.
func (s *Store) RecentDecidedApprovals(ctx context.Context, limit int) ([]Approval, error) {
	if limit <= 0 {
		return nil, nil
	}
	return queryApprovals(ctx, s.db, "recent approvals", `SELECT `+approvalColumns+approvalFrom+`
		WHERE p.status IN ('approved', 'denied', 'expired')
		ORDER BY p.modified_at DESC, p.id DESC LIMIT ?`, limit)
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
	err = scanRows(rows, err, "approval statuses", func(r rowScanner) error {
		var id, status string
		err := r.Scan(&id, &status)
		out[id] = status
		return err
	})
	if err != nil {
		return nil, err
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
	// Lock is a lock that holds now on the agent or the connection
	// (locks.go), nil when neither is locked: the operation is refused.
	Lock *Lock
}

// PolicyFacts reads the facts for agentID and the connection named by its id
// (connectionID) or, when that is empty, by its alias. A missing agent or
// connection is ErrNotFound; a missing grant is HasGrant false.
func (s *Store) PolicyFacts(ctx context.Context, agentID, connectionID, alias string) (PolicyFacts, error) {
	ref := connectionID
	if connectionID == "" {
		ref = alias
	}
	return scanPolicyFacts(s.db.QueryRowContext(ctx, policyFactsQuery(connectionID == ""), ref, formatTime(s.nowUTC()), agentID), agentID, ref)
}

// policyFactsQuery selects PolicyFacts by connection id, or by alias; its
// arguments are the connection reference, the time now (for a lock's end)
// and the agent id. A lock of either is read in the same query, so that
// checking for one costs a decision no round trip.
func policyFactsQuery(byAlias bool) string {
	where := `c.id = ?`
	if byAlias {
		where = `c.alias = ?`
	}
	return `SELECT a.id, a.name, a.disabled, c.id, c.alias, c.modified_at, c.env,
			g.id, g.read_rule, g.write_rule, g.destructive_rule,
			l.id, l.target_kind, l.target_id, l.target_name, l.reason, l.created_by, l.created_by_id, l.created_at, l.expires_at
		FROM agents a JOIN connections c ON ` + where + `
		LEFT JOIN grants g ON g.agent_id = a.id AND g.connection_id = c.id
		LEFT JOIN locks l ON ((l.target_kind = 'agent' AND l.target_id = a.id) OR (l.target_kind = 'connection' AND l.target_id = c.id))
			AND (l.expires_at = '' OR l.expires_at > ?)
		WHERE a.id = ?`
}

func scanPolicyFacts(row *sql.Row, agentID, ref string) (PolicyFacts, error) {
	var f PolicyFacts
	var grantID sql.NullString
	var r, w, d sql.NullString
	var modified string
	var lk [9]sql.NullString
	err := row.Scan(&f.AgentID, &f.AgentName, &f.AgentDisabled,
		&f.ConnectionID, &f.ConnectionAlias, &modified, &f.Env, &grantID, &r, &w, &d,
		&lk[0], &lk[1], &lk[2], &lk[3], &lk[4], &lk[5], &lk[6], &lk[7], &lk[8])
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
	if lk[0].Valid {
		var vals [9]string
		for i := range lk {
			vals[i] = lk[i].String
		}
		l, err := lockFromColumns(vals)
		if err != nil {
			return PolicyFacts{}, fmt.Errorf("store: read policy facts: lock: %w", err)
		}
		f.Lock = &l
	}
	return f, nil
}
