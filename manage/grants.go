package manage

import (
	"context"
	"errors"
	"fmt"

	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
)

// RulesChange is a change to a grant's rules: a nil rule keeps the grant's
// (or a new grant's default, store.DefaultRules).
type RulesChange struct {
	Read, Write, Destructive *store.Rule
}

// SetGrant creates the grant of agent on alias, or changes its rules.
//
// On a production connection a new grant, or rules that let through
// anything the old ones did not, wait for a second admin (*HeldError).
func (m *Manager) SetGrant(ctx context.Context, by policy.Actor, agent, alias string, ch RulesChange) (*store.Grant, error) {
	if err := m.configure(ctx, by); err != nil {
		return nil, err
	}
	// The rules are checked by the store (store.ValidateGrant), against
	// the connection's environment, in the transaction that writes them.
	rules, was, isNew := store.DefaultRules(), "new", true
	cur, err := m.st.GrantByNames(ctx, agent, alias)
	switch {
	case err == nil:
		rules, was, isNew = cur.Rules, "was "+RulesText(cur.Rules), false
	case !errors.Is(err, store.ErrNotFound):
		return nil, err
	}
	if ch.Read != nil {
		rules.Read = *ch.Read
	}
	if ch.Write != nil {
		rules.Write = *ch.Write
	}
	if ch.Destructive != nil {
		rules.Destructive = *ch.Destructive
	}
	a, err := m.st.AgentByName(ctx, agent)
	if err != nil {
		return nil, err
	}
	c, err := m.st.ConnectionByAlias(ctx, alias)
	if err != nil {
		return nil, err
	}
	what := fmt.Sprintf("grant %s %s: %s (%s)", agent, alias, RulesText(rules), was)
	if c.Env == store.EnvProduction && (isNew || loosens(cur.Rules, rules)) {
		if err := store.ValidateGrant(c.Env, rules); err != nil {
			return nil, err
		}
		before := "no grant"
		if !isNew {
			before = RulesText(cur.Rules)
		}
		return nil, m.hold(ctx, by, store.ChangeRequest{Kind: changeGrant, Summary: what, Before: before,
			After: RulesText(rules), AgentID: a.ID, AgentName: a.Name, ConnectionID: c.ID, ConnectionAlias: c.Alias},
			heldChange{Grant: &heldGrant{Agent: a.Name, Alias: c.Alias, Rules: rules, Was: was}})
	}
	aud, p := audited(policy.Change{Actor: by, AgentID: a.ID, AgentName: a.Name, ConnectionID: c.ID,
		ConnectionAlias: c.Alias, What: what})
	g, err := m.st.SetGrant(ctx, aud, agent, alias, rules)
	if err != nil {
		return nil, err
	}
	return g, checkAudited(p, "grant")
}

// RevokeGrant takes a connection away from an agent.
func (m *Manager) RevokeGrant(ctx context.Context, by policy.Actor, agent, alias string) (*store.Grant, error) {
	if err := m.configure(ctx, by); err != nil {
		return nil, err
	}
	cur, err := m.st.GrantByNames(ctx, agent, alias)
	if err != nil {
		return nil, err
	}
	aud, p := audited(policy.Change{Actor: by, AgentID: cur.AgentID, AgentName: cur.AgentName,
		ConnectionID: cur.ConnectionID, ConnectionAlias: cur.Alias,
		What: fmt.Sprintf("grant revoke %s %s: was %s", agent, alias, RulesText(cur.Rules))})
	if err := m.st.RevokeGrant(ctx, aud, agent, alias); err != nil {
		return nil, err
	}
	return cur, checkAudited(p, "grant revoke")
}

// RulesText is a grant's rules on one line.
func RulesText(r store.Rules) string {
	return fmt.Sprintf("read=%s write=%s destructive=%s", r.Read, r.Write, r.Destructive)
}
