package manage

import (
	"context"
	"time"

	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
)

// Lock locks an agent (kind store.LockAgent, name its name) or a
// connection (store.LockConnection, name its alias) for d (zero: until
// unlocked), with a reason that the agents refused are told. The bastion
// ends the live sessions of what is locked (on every replica, within a
// second) and refuses new ones; the pending approval requests of it are
// denied with the lock's words. It takes the admin role, and applies at
// once: a lock only takes power away, so it never waits for a second admin.
func (m *Manager) Lock(ctx context.Context, by policy.Actor, kind, name string, d time.Duration, reason string) (*store.Lock, error) {
	if err := m.requireRole(ctx, by, store.RoleAdmin, "lock an agent or a connection"); err != nil {
		return nil, err
	}
	// The reason is printed on the refused agents' terminals: the rule of
	// a denial's reason.
	if err := policy.CheckAdminText("reason", reason, store.MaxLockReason); err != nil {
		return nil, err
	}
	c, err := m.lockChange(ctx, by, kind, name)
	if err != nil {
		return nil, err
	}
	how := "until unlocked"
	if d > 0 {
		how = "for " + d.String()
	}
	c.What = "lock " + kind + " " + name + " " + how
	if reason != "" {
		c.What += ": " + reason
	}
	aud, p := audited(c)
	l, err := m.st.SetLock(ctx, aud, store.LockInput{Kind: kind, Name: name, Reason: reason,
		CreatedBy: by.Name, CreatedByID: by.AdminID, For: d})
	if err != nil {
		return nil, err
	}
	return l, checkAudited(p, "lock")
}

// Unlock removes the lock of an agent or a connection. It applies at once
// too, audited: a lock is an emergency brake, and the admin who lifts it
// restores what the grants allowed before, which took a second admin
// already where it had to.
func (m *Manager) Unlock(ctx context.Context, by policy.Actor, kind, name string) (*store.Lock, error) {
	if err := m.requireRole(ctx, by, store.RoleAdmin, "unlock an agent or a connection"); err != nil {
		return nil, err
	}
	c, err := m.lockChange(ctx, by, kind, name)
	if err != nil {
		return nil, err
	}
	c.What = "unlock " + kind + " " + name
	aud, p := audited(c)
	l, err := m.st.RemoveLock(ctx, aud, kind, name)
	if err != nil {
		return nil, err
	}
	return l, checkAudited(p, "unlock")
}

// Locks lists the locks that hold now; any role may read them.
func (m *Manager) Locks(ctx context.Context) ([]store.Lock, error) {
	return m.st.ActiveLocks(ctx)
}

// lockChange is the audit change of a lock or unlock of kind and name,
// naming the agent or connection it is about.
func (m *Manager) lockChange(ctx context.Context, by policy.Actor, kind, name string) (policy.Change, error) {
	c := policy.Change{Actor: by}
	switch kind {
	case store.LockAgent:
		a, err := m.st.AgentByName(ctx, name)
		if err != nil {
			return c, err
		}
		c.AgentID, c.AgentName = a.ID, a.Name
	case store.LockConnection:
		conn, err := m.st.ConnectionByAlias(ctx, name)
		if err != nil {
			return c, err
		}
		c.ConnectionID, c.ConnectionAlias = conn.ID, conn.Alias
	default:
		return c, store.Invalidf("a lock is on an agent or a connection, not %q", kind)
	}
	return c, nil
}
