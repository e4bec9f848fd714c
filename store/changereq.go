package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Changes that wait for a second admin (migrations/0013_roles_changes.sql).
// The store keeps them and enforces what makes them two people's work: a
// decision is taken once, before the request expires, by an admin who is
// not the one who asked. What the change does when approved is package
// manage's: the store only keeps its payload sealed.

const prefixChange = "chg"

// IsChangeID reports whether id names a change request rather than an
// operation's approval request; the approvals queue holds both.
func IsChangeID(id string) bool { return strings.HasPrefix(id, prefixChange+"_") }

// The statuses of a change request. An approved change whose write then
// failed (its connection was removed meanwhile, a name was taken) is
// failed, with the reason.
const (
	ChangePending  = "pending"
	ChangeApproved = "approved"
	ChangeDenied   = "denied"
	ChangeExpired  = "expired"
	ChangeFailed   = "failed"
)

// ChangeRequest is one change waiting for, or decided by, a second admin.
type ChangeRequest struct {
	ID string
	// Kind names what the change does (manage's kinds: grant, conn-update,
	// conn-remove, admin-add, admin-role, token-add).
	Kind string
	// Summary is the change in words; Before and After what it changes,
	// as an admin reads them on the card.
	Summary, Before, After string
	// Payload is what the change writes once approved, opened; nil in
	// lists.
	Payload []byte
	// Who asked: an admin's name and id, or cli:USER and "" for the
	// server's CLI without --as; and the door (cli, web, api, apply).
	RequestedBy, RequestedByID, RequestedVia string
	// The agent and connection the change is about, if any.
	AgentID, AgentName, ConnectionID, ConnectionAlias string
	Status                                            string
	DecidedBy, DecidedByID                            string
	DecidedAt                                         time.Time
	// Reason is a denial's reason, or why an approved change failed.
	Reason                           string
	ExpiresAt, CreatedAt, ModifiedAt time.Time
}

// ChangeDecision is an admin's decision on a change request.
type ChangeDecision struct {
	AdminID, Name string
	Approve       bool
	Reason        string // a denial's reason
}

// Refusals of a change decision. Each is an ErrInvalid: the request stays
// as it was.
var (
	// ErrSameRequester: the admin deciding is the one who asked.
	ErrSameRequester = fmt.Errorf("%w: a change must be approved by an admin other than the one who asked for it", ErrInvalid)
	// ErrChangeDecided: the request was already decided or expired.
	ErrChangeDecided = fmt.Errorf("%w: the change request was already decided", ErrInvalid)
)

// CreateChangeRequest stores r as pending, its payload sealed, expiring
// after lifetime, and returns it as stored. The caller's audit row (from
// audit) is appended in the same transaction.
func (s *Store) CreateChangeRequest(ctx context.Context, audit Audit, r ChangeRequest, lifetime time.Duration) (ChangeRequest, error) {
	ctx, err := audit.bind(ctx)
	if err != nil {
		return ChangeRequest{}, err
	}
	if r.Kind == "" || r.Summary == "" || r.RequestedBy == "" || lifetime <= 0 {
		return r, invalid("change request: want a kind, a summary, who asked and a lifetime")
	}
	r.ID = newID(prefixChange)
	box, err := s.sealFor(r.Payload, r.ID)
	if err != nil {
		return r, err
	}
	now := s.nowUTC()
	r.Status, r.CreatedAt, r.ModifiedAt, r.ExpiresAt = ChangePending, now, now, now.Add(lifetime)
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO change_requests (id, kind, summary, before_text, after_text, payload,
			requested_by, requested_by_id, requested_via, agent_id, agent_name, connection_id, connection_alias,
			status, expires_at, created_at, modified_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			r.ID, r.Kind, r.Summary, r.Before, r.After, box, r.RequestedBy, r.RequestedByID, r.RequestedVia,
			r.AgentID, r.AgentName, r.ConnectionID, r.ConnectionAlias, r.Status,
			formatTime(r.ExpiresAt), formatTime(now), formatTime(now))
		if err != nil {
			return fmt.Errorf("store: add change request: %w", err)
		}
		return queueChangeNotifications(ctx, tx, r, NotifyPending, now)
	})
	return r, err
}

const changeColumns = `id, kind, summary, before_text, after_text, payload, requested_by, requested_by_id,
	requested_via, agent_id, agent_name, connection_id, connection_alias, status, decided_by, decided_by_id,
	decided_at, reason, expires_at, created_at, modified_at FROM change_requests`

// scanChange reads one row; box is the sealed payload.
func scanChange(r rowScanner) (c ChangeRequest, box []byte, err error) {
	var decided, expires, created, modified string
	if err := r.Scan(&c.ID, &c.Kind, &c.Summary, &c.Before, &c.After, &box, &c.RequestedBy, &c.RequestedByID,
		&c.RequestedVia, &c.AgentID, &c.AgentName, &c.ConnectionID, &c.ConnectionAlias, &c.Status, &c.DecidedBy,
		&c.DecidedByID, &decided, &c.Reason, &expires, &created, &modified); err != nil {
		return c, nil, err
	}
	for _, t := range []struct {
		to   *time.Time
		from string
	}{{&c.DecidedAt, decided}, {&c.ExpiresAt, expires}, {&c.CreatedAt, created}, {&c.ModifiedAt, modified}} {
		if *t.to, err = parseTime(t.from); err != nil {
			return c, nil, err
		}
	}
	return c, box, nil
}

func getChange(ctx context.Context, q queryRower, id string) (ChangeRequest, []byte, error) {
	c, box, err := scanChange(q.QueryRowContext(ctx, `SELECT `+changeColumns+` WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return c, nil, notFound("change request", id)
	} else if err != nil {
		return c, nil, fmt.Errorf("store: change request %s: %w", id, err)
	}
	return c, box, nil
}

// ChangeRequest returns the change request id with its payload opened.
func (s *Store) ChangeRequest(ctx context.Context, id string) (ChangeRequest, error) {
	c, box, err := getChange(ctx, s.db, id)
	if err != nil {
		return c, err
	}
	c.Payload, err = s.openFor(box, c.ID, "change request "+c.ID)
	return c, err
}

// ChangeRequestShown returns the change request id without its payload,
// which stays sealed: what a page, a list or a notification shows of it
// (the payload can hold a private key or a password hash). A pending
// request past its expiry is returned expired.
func (s *Store) ChangeRequestShown(ctx context.Context, id string) (ChangeRequest, error) {
	c, _, err := getChange(ctx, s.db, id)
	return s.expiredAsOfNow(c), err
}

// expiredAsOfNow is c with the status a pending request past its expiry
// has: readers see it expired without a write (the page's live list reads
// the queue every second); DecideChangeRequest stores it.
func (s *Store) expiredAsOfNow(c ChangeRequest) ChangeRequest {
	if c.Status == ChangePending && !c.ExpiresAt.IsZero() && !s.nowUTC().Before(c.ExpiresAt) {
		c.Status = ChangeExpired
	}
	return c
}

// ListChangeRequests returns the change requests still waiting (all of
// them with all), newest first, without their payloads. It only reads.
func (s *Store) ListChangeRequests(ctx context.Context, all bool) ([]ChangeRequest, error) {
	q, args := `SELECT `+changeColumns, []any{}
	if !all {
		q, args = q+` WHERE status = 'pending' AND expires_at > ?`, append(args, formatTime(s.nowUTC()))
	}
	rows, err := s.db.QueryContext(ctx, q+` ORDER BY created_at DESC, id`, args...)
	return collect(rows, err, "list change requests", func(r rowScanner) (ChangeRequest, error) {
		c, _, err := scanChange(r)
		return s.expiredAsOfNow(c), err
	})
}

// ExpireChangeRequests marks every pending change request past its expiry
// expired, and returns how many there were.
func (s *Store) ExpireChangeRequests(ctx context.Context) (int64, error) {
	now := formatTime(s.nowUTC())
	var n int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, `UPDATE change_requests SET status = 'expired', modified_at = ?
			WHERE status = 'pending' AND expires_at <= ?`, now, now)
		if err != nil {
			return fmt.Errorf("store: expire change requests: %w", err)
		}
		n, _ = r.RowsAffected()
		return nil
	})
	return n, err
}

// DecideChangeRequest approves or denies the pending change request id, in
// one transaction with the caller's audit row, and returns it with its
// payload opened. It refuses (ErrInvalid, with ErrSameRequester or
// ErrChangeDecided) a decision by the admin who asked, compared by id and
// by name without regard to case, and one on a request that is no longer
// pending or has expired (which it marks expired).
func (s *Store) DecideChangeRequest(ctx context.Context, audit Audit, id string, d ChangeDecision) (ChangeRequest, error) {
	ctx, err := audit.bind(ctx)
	if err != nil {
		return ChangeRequest{}, err
	}
	var c ChangeRequest
	var box []byte
	now := s.nowUTC()
	expired := false
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		if err := checkDecider(ctx, tx, Decider{AdminID: d.AdminID, Name: d.Name}, "decide change "+id); err != nil {
			return err
		}
		var err error
		if c, box, err = getChange(ctx, tx, id); err != nil {
			return err
		}
		switch {
		case c.Status != ChangePending:
			return shown(ErrChangeDecided, fmt.Sprintf("change request %s was already %s", id, c.Status))
		case !now.Before(c.ExpiresAt):
			expired = true
			return nil
		case (d.AdminID != "" && d.AdminID == c.RequestedByID) || strings.EqualFold(d.Name, c.RequestedBy):
			return shown(ErrSameRequester, fmt.Sprintf("%s asked for change %s; a different admin must decide it", c.RequestedBy, id))
		}
		c.Status = ChangeDenied
		if d.Approve {
			c.Status = ChangeApproved
		}
		c.DecidedBy, c.DecidedByID, c.DecidedAt, c.Reason, c.ModifiedAt = d.Name, d.AdminID, now, d.Reason, now
		if _, err := tx.ExecContext(ctx, `UPDATE change_requests SET status = ?, decided_by = ?, decided_by_id = ?,
			decided_at = ?, reason = ?, modified_at = ? WHERE id = ? AND status = 'pending'`,
			c.Status, d.Name, d.AdminID, formatTime(now), d.Reason, formatTime(now), id); err != nil {
			return fmt.Errorf("store: decide change request %s: %w", id, err)
		}
		return queueChangeNotifications(ctx, tx, c, NotifyDecided, now)
	})
	if err != nil {
		return c, err
	}
	if expired {
		if _, err := s.ExpireChangeRequests(ctx); err != nil {
			return c, err
		}
		return c, shown(ErrChangeDecided, fmt.Sprintf("change request %s expired at %s", id,
			c.ExpiresAt.Format(time.RFC3339)))
	}
	c.Payload, err = s.openFor(box, c.ID, "change request "+c.ID)
	return c, err
}

// FailChangeRequest records that the approved change id could not be
// made, and why.
func (s *Store) FailChangeRequest(ctx context.Context, id, why string) error {
	now := formatTime(s.nowUTC())
	return s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE change_requests SET status = 'failed', reason = ?, modified_at = ?
			WHERE id = ? AND status = 'approved'`, cutText(why, 1000), now, id); err != nil {
			return fmt.Errorf("store: change request %s: %w", id, err)
		}
		return nil
	})
}
