package manage

import (
	"context"
	"errors"
	"fmt"

	"github.com/postern/postern/internal/usererr"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
)

// RoleError is a change its actor's role does not allow. The REST API
// answers it 403 insufficient_role, the page with 403, the CLI with exit
// status 2.
type RoleError struct {
	Who  string
	Have store.Role // "" when the actor has none (a disabled admin)
	Need store.Role
	What string
}

func (e *RoleError) words() string {
	have := string(e.Have)
	if have == "" {
		have = "no role"
	}
	return fmt.Sprintf("%s may not %s: that takes the %s role, and %s has %s", e.Who, e.What, e.Need, e.Who, have)
}

func (e *RoleError) Error() string { return "manage: " + e.words() }

// Unwrap is the refusal in the admin's words.
func (e *RoleError) Unwrap() error { return usererr.New(e.words()) }

// roleOf is what by may do now: the role its door vouches for (a token's
// scope, a session's admin, the CLI), bounded again by the admin's role in
// the store when by names a registered admin, so that a role lowered or an
// admin disabled since the session began or the token was made counts at
// once. The CLI's OS user (no AdminID) has the role the CLI gave it.
func (m *Manager) roleOf(ctx context.Context, by policy.Actor) (store.Role, error) {
	if by.AdminID == "" {
		return by.Role, nil
	}
	a, err := m.st.ResolveAdmin(ctx, by.AdminID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return "", nil
	case err != nil:
		return "", err
	case a.Disabled:
		return "", nil
	case !a.Role.AtLeast(by.Role):
		return a.Role, nil
	}
	return by.Role, nil
}

// requireRole refuses by unless its role includes need; what names the
// change in the refusal ("change configuration").
func (m *Manager) requireRole(ctx context.Context, by policy.Actor, need store.Role, what string) error {
	have, err := m.roleOf(ctx, by)
	if err != nil {
		return err
	}
	if !have.AtLeast(need) {
		who := by.Name
		if who == "" {
			who = "this caller"
		}
		return &RoleError{Who: who, Have: have, Need: need, What: what}
	}
	return nil
}

// configure is requireRole for changes of configuration (agents,
// connections, grants, channels): the admin role.
func (m *Manager) configure(ctx context.Context, by policy.Actor) error {
	return m.requireRole(ctx, by, store.RoleAdmin, "change configuration")
}
