package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Role is what an admin may do. Each role includes the ones before it
// (migrations/0013_roles_changes.sql): a person who decides approvals need
// not be one who can loosen the rules they decide under, and neither need
// be one who can make admins.
type Role string

// The roles, narrowest first.
const (
	RoleViewer   Role = "viewer"   // sees everything, decides nothing
	RoleApprover Role = "approver" // also decides approvals and re-checks keys
	RoleAdmin    Role = "admin"    // also changes configuration
	RoleOwner    Role = "owner"    // also manages admins and their roles
)

// Roles lists the roles, narrowest first.
var Roles = []Role{RoleViewer, RoleApprover, RoleAdmin, RoleOwner}

// DefaultRole is a new admin's role unless asked otherwise: one who decides
// approvals, the reason most admins are added, and nothing more.
const DefaultRole = RoleApprover

// ParseRole checks a role word; "" is DefaultRole.
func ParseRole(s string) (Role, error) {
	if s == "" {
		return DefaultRole, nil
	}
	for _, r := range Roles {
		if string(r) == s {
			return r, nil
		}
	}
	return "", invalid("role %q: want viewer, approver, admin or owner", s)
}

func (r Role) rank() int {
	for i, x := range Roles {
		if x == r {
			return i
		}
	}
	return -1
}

// AtLeast reports whether role r includes need. An unknown role includes
// nothing.
func (r Role) AtLeast(need Role) bool { return r.rank() >= 0 && r.rank() >= need.rank() }

// Scope is the widest console token scope an admin of role r may hold: a
// token carries at most its admin's role.
func (r Role) Scope() TokenScope {
	switch r {
	case RoleViewer:
		return ScopeRead
	case RoleApprover:
		return ScopeApprove
	case RoleAdmin, RoleOwner:
		return ScopeAdmin
	}
	return ""
}

// Role is what a token of scope t may do, before its admin's own role
// bounds it (ConsoleToken.Role).
func (t TokenScope) Role() Role {
	switch t {
	case ScopeRead:
		return RoleViewer
	case ScopeApprove:
		return RoleApprover
	case ScopeAdmin:
		return RoleAdmin
	}
	return ""
}

// Role is what a call made with the token may do: the narrower of its
// scope and its admin's role now. A token outlives a change of its admin's
// role, so the role is read with the token on every call, never copied
// into it.
func (t *ConsoleToken) Role() Role {
	if t.AdminRole.rank() < t.Scope.Role().rank() {
		return t.AdminRole
	}
	return t.Scope.Role()
}

// checkDecider refuses, in the transaction of the decision, one by an
// admin who is not (or no longer) an approver or more: a viewer, a
// disabled admin, one removed. The store checks it, not the doors alone,
// so that a role lowered a moment ago counts for a session or token that
// is still open, through every door.
func checkDecider(ctx context.Context, tx *sql.Tx, by Decider, what string) error {
	var role string
	var disabled bool
	err := tx.QueryRowContext(ctx, `SELECT role, disabled FROM admins WHERE id = ?`, by.AdminID).Scan(&role, &disabled)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return shown(ErrForbidden, fmt.Sprintf("%s may not %s: no such admin", by.Name, what))
	case err != nil:
		return fmt.Errorf("store: %s: %w", what, err)
	case disabled:
		return shown(ErrForbidden, fmt.Sprintf("%s may not %s: the admin is disabled", by.Name, what))
	case !Role(role).AtLeast(RoleApprover):
		return shown(ErrForbidden, fmt.Sprintf("%s may not %s: that takes the approver role, and %s has %s",
			by.Name, what, by.Name, role))
	}
	return nil
}

// SetAdminRole changes the named admin's role (exact name or id).
func (s *Store) SetAdminRole(ctx context.Context, audit Audit, name string, role Role) (*Admin, error) {
	ctx, err := audit.bind(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := ParseRole(string(role)); err != nil || role == "" {
		return nil, invalid("admin %s: role %q: want viewer, approver, admin or owner", name, role)
	}
	now := formatTime(s.nowUTC())
	var exact string
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, `SELECT name FROM admins WHERE name = ? OR id = ?`, name, name).Scan(&exact)
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("admin", name)
		} else if err != nil {
			return fmt.Errorf("store: admin %s: %w", name, err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE admins SET role = ?, modified_at = ? WHERE name = ?`,
			string(role), now, exact); err != nil {
			return fmt.Errorf("store: admin %s: %w", name, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s.AdminByName(ctx, exact)
}
