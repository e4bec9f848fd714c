package config

import (
	"context"

	"github.com/postern/postern/manage"
	"github.com/postern/postern/store"
)

// grant plans one declared grant: set, changed, or as declared. Its agent
// and connection may be in the file or only in the database.
func (p *planner) grant(where string, g Grant) {
	key := [2]string{g.Agent, g.Connection}
	if p.grants[key] {
		p.bad(where, "declared twice")
		return
	}
	p.grants[key] = true
	if _, ok := p.cur.agents[g.Agent]; !ok && !p.agents[g.Agent] {
		p.bad(where, "no agent %q in the file or the database", g.Agent)
		return
	}
	if _, ok := p.cur.conns[g.Connection]; !ok && !p.conns[g.Connection] {
		p.bad(where, "no connection %q in the file or the database", g.Connection)
		return
	}
	if !p.agents[g.Agent] {
		if _, seen := p.agentUsers[g.Agent]; !seen {
			p.agentUsers[g.Agent] = where
		}
	}
	if !p.conns[g.Connection] {
		if _, seen := p.connUsers[g.Connection]; !seen {
			p.connUsers[g.Connection] = where
		}
	}
	rules, ok := p.grantRules(where, g)
	if !ok {
		return
	}
	if err := store.ValidateGrant(p.grantEnv(g.Connection), rules); err != nil {
		p.bad(where, "%s", errText(err))
		return
	}
	have, exists := p.cur.grants[key]
	if exists && have.Rules == rules {
		p.out.unchanged++
		return
	}
	line := "+ grant " + g.Agent + " " + g.Connection + ": " + manage.RulesText(rules)
	if exists {
		line = "~ grant " + g.Agent + " " + g.Connection + ": " + manage.RulesText(rules) + " (was " + manage.RulesText(have.Rules) + ")"
	}
	p.add(line, func(ctx context.Context) (string, error) {
		_, err := p.m.SetGrant(ctx, p.by, g.Agent, g.Connection, manage.RulesChange{Read: &rules.Read, Write: &rules.Write, Destructive: &rules.Destructive})
		return "", err
	})
}

// grantRules reads a grant's rules over the defaults, naming each one that
// does not parse.
func (p *planner) grantRules(where string, g Grant) (store.Rules, bool) {
	rules := store.DefaultRules()
	ok := true
	for _, r := range []struct {
		name, val string
		dst       *store.Rule
	}{{"read", g.Read, &rules.Read}, {"write", g.Write, &rules.Write}, {"destructive", g.Destructive, &rules.Destructive}} {
		if r.val == "" {
			continue
		}
		rule, err := store.ParseRule(r.val)
		if err != nil {
			p.bad(where, "%s: %q: want allow, ask or deny", r.name, r.val)
			ok = false
			continue
		}
		*r.dst = rule
	}
	return rules, ok
}

// grantEnv is the environment a grant's rules are checked against: the
// one the file gives its connection (dev if it gives none), else the
// stored connection's.
func (p *planner) grantEnv(alias string) store.Env {
	if env, ok := p.connEnv[alias]; ok {
		return env
	}
	return p.cur.conns[alias].Env
}
