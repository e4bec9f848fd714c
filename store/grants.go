package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Rule is what a grant says about one class of operation.
type Rule string

// The rules.
const (
	RuleAllow Rule = "allow" // run it
	RuleAsk   Rule = "ask"   // run it once a human approves
	RuleDeny  Rule = "deny"  // refuse it
)

// ParseRule checks a rule word.
func ParseRule(s string) (Rule, error) {
	switch r := Rule(s); r {
	case RuleAllow, RuleAsk, RuleDeny:
		return r, nil
	}
	return "", invalid("rule %q: want allow, ask or deny", s)
}

// Rules holds one rule per class: what happens to a read, a write and a
// destructive operation (allow, ask or deny).
type Rules struct {
	Read        Rule
	Write       Rule
	Destructive Rule
}

// DefaultRules is what a new grant gets unless told otherwise: postern ships
// read-only, and an admin turns the rest on.
func DefaultRules() Rules {
	return Rules{Read: RuleAllow, Write: RuleDeny, Destructive: RuleDeny}
}

// ValidateGrant checks rules against a connection's environment. Every rule
// must be a known word, and on a production connection destructive may be ask
// or deny but never allow: nothing irreversible happens in production without
// a person looking at it. It lives here, below policy, so that no path that
// writes a grant (CLI, REST, web) can skip it.
func ValidateGrant(env Env, r Rules) error {
	for _, c := range []struct {
		class string
		rule  Rule
	}{{"read", r.Read}, {"write", r.Write}, {"destructive", r.Destructive}} {
		if _, err := ParseRule(string(c.rule)); err != nil {
			return invalid("%s rule %q: want allow, ask or deny", c.class, c.rule)
		}
	}
	if env == EnvProduction && r.Destructive == RuleAllow {
		return invalid("destructive=allow is not permitted on a production connection; use ask (a human approves each operation) or deny")
	}
	return nil
}

// Grant gives one agent one connection, with a rule per class. The names
// are joined in for display and for the bastion's menu; the ids are what
// stays stable.
type Grant struct {
	ID           string
	AgentID      string
	AgentName    string
	ConnectionID string
	Alias        string
	Env          Env // the connection's environment
	Rules        Rules
	CreatedAt    time.Time
	ModifiedAt   time.Time
}

// ElevatedGrant is a grant with the approvals whose active scope lets the
// agent's operations on the connection through without asking: a
// time-boxed elevation of its Rules. (Kept apart from Grant, which stays
// comparable.)
type ElevatedGrant struct {
	Grant
	Scopes []Approval
}

// SetGrant creates the grant of agent on alias, or replaces the rules of the
// existing one. The rules are checked with ValidateGrant against the
// connection's environment inside the same transaction.
func (s *Store) SetGrant(ctx context.Context, audit Audit, agentName, alias string, rules Rules) (*Grant, error) {
	ctx, err := audit.bind(ctx)
	if err != nil {
		return nil, err
	}
	now := formatTime(s.nowUTC())
	var id string
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		agentID, err := agentIDByName(ctx, tx, agentName)
		if err != nil {
			return err
		}
		var connID, env string
		err = tx.QueryRowContext(ctx, `SELECT id, env FROM connections WHERE alias = ?`, alias).Scan(&connID, &env)
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("connection", alias)
		}
		if err != nil {
			return fmt.Errorf("store: find connection %s: %w", alias, err)
		}
		if err := ValidateGrant(Env(env), rules); err != nil {
			return err
		}
		err = tx.QueryRowContext(ctx, `SELECT id FROM grants WHERE agent_id = ? AND connection_id = ?`, agentID, connID).Scan(&id)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			id = newID(prefixGrant)
			_, err = tx.ExecContext(ctx, `
				INSERT INTO grants (id, agent_id, connection_id, read_rule, write_rule, destructive_rule, created_at, modified_at)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
				id, agentID, connID, string(rules.Read), string(rules.Write), string(rules.Destructive), now, now)
		case err == nil:
			_, err = tx.ExecContext(ctx, `
				UPDATE grants SET read_rule = ?, write_rule = ?, destructive_rule = ?, modified_at = ? WHERE id = ?`,
				string(rules.Read), string(rules.Write), string(rules.Destructive), now, id)
		}
		if isUniqueViolation(err) {
			return &ConflictError{Kind: "grant", Value: agentName + " on " + alias}
		}
		if err != nil {
			return fmt.Errorf("store: grant %s on %s: %w", agentName, alias, err)
		}
		// A scope elevates an ask; a deny ends it, so that the rule going
		// back to ask later does not bring it back (issue 23).
		for _, c := range []struct {
			class string
			rule  Rule
		}{{"read", rules.Read}, {"write", rules.Write}, {"destructive", rules.Destructive}} {
			if c.rule != RuleDeny {
				continue
			}
			if err := s.endScopesTx(ctx, tx, agentID, connID, c.class, "setting "+c.class+"=deny"); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s.grantWhere(ctx, `g.id = ?`, id)
}

// RevokeGrant deletes the grant of agent on alias.
func (s *Store) RevokeGrant(ctx context.Context, audit Audit, agentName, alias string) error {
	ctx, err := audit.bind(ctx)
	if err != nil {
		return err
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		agentID, err := agentIDByName(ctx, tx, agentName)
		if err != nil {
			return err
		}
		connID, err := connectionIDByAlias(ctx, tx, alias)
		if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM grants WHERE agent_id = ? AND connection_id = ?`, agentID, connID)
		if err != nil {
			return fmt.Errorf("store: revoke grant %s on %s: %w", agentName, alias, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return notFound("grant", agentName+" on "+alias)
		}
		// A scope never outlives the grant it elevated.
		return s.endScopesTx(ctx, tx, agentID, connID, "", "revoking the grant")
	})
}

// endScopesTx ends, in tx, every active scope (operation or class) of
// agentID on connID of class, or of every class when class is "", because
// of a grant change described by why ("setting write=deny"). Each ended
// scope is recorded as revoked by the admin of ctx's pending audit row
// (the change's), with why, and named in that row's operation, so that
// the audit log says which scopes the change ended.
func (s *Store) endScopesTx(ctx context.Context, tx *sql.Tx, agentID, connID, class, why string) error {
	now := formatTime(s.nowUTC())
	q := `SELECT id, scope, class FROM approvals
		WHERE agent_id = ? AND connection_id = ? AND scope != 'request' AND status = 'approved'
		  AND scope_revoked_at = '' AND scope_expires_at > ?`
	args := []any{agentID, connID, now}
	if class != "" {
		q += ` AND class = ?`
		args = append(args, class)
	}
	type ended struct{ id, scope, class string }
	rows, err := tx.QueryContext(ctx, q+` ORDER BY id`, args...)
	list, err := collect(rows, err, "scopes of a grant", func(r rowScanner) (ended, error) {
		var e ended
		err := r.Scan(&e.id, &e.scope, &e.class)
		return e, err
	})
	if err != nil || len(list) == 0 {
		return err
	}
	by := "grant change"
	p := pendingAudit(ctx)
	if p != nil {
		p.mu.Lock()
		if len(p.Row.Deciders) > 0 && p.Row.Deciders[0] != "" {
			by = p.Row.Deciders[0]
		}
		p.mu.Unlock()
	}
	names := make([]string, len(list))
	for i, e := range list {
		if _, err := tx.ExecContext(ctx, `UPDATE approvals SET scope_revoked_at = ?, scope_revoked_by = ?,
			modified_at = ? WHERE id = ? AND scope_revoked_at = ''`, now, by+", "+why, now, e.id); err != nil {
			return fmt.Errorf("store: end scope of %s: %w", e.id, err)
		}
		names[i] = fmt.Sprintf("%s (%s %s)", e.id, e.scope, e.class)
	}
	if p != nil {
		p.mu.Lock()
		word := "scope"
		if len(names) > 1 {
			word = "scopes"
		}
		p.Row.Operation += fmt.Sprintf("; %s ends %s %s", why, word, strings.Join(names, ", "))
		p.mu.Unlock()
	}
	return nil
}

// GrantFor returns the grant of an agent on a connection, by ids: the
// question the bastion asks for every operation. ErrNotFound means the agent
// may neither see nor reach the connection.
func (s *Store) GrantFor(ctx context.Context, agentID, connectionID string) (*Grant, error) {
	g, err := s.grantWhere(ctx, `g.agent_id = ? AND g.connection_id = ?`, agentID, connectionID)
	if errors.Is(err, ErrNotFound) {
		return nil, notFound("grant", agentID+" on "+connectionID)
	}
	return g, err
}

// GrantByNames returns the grant of agent on alias, by names, for admin
// tools.
func (s *Store) GrantByNames(ctx context.Context, agentName, alias string) (*Grant, error) {
	g, err := s.grantWhere(ctx, `a.name = ? AND c.alias = ?`, agentName, alias)
	if errors.Is(err, ErrNotFound) {
		return nil, notFound("grant", agentName+" on "+alias)
	}
	return g, err
}

// GrantsForAgent returns the grants of one agent (by id), by alias: what the
// agent may see in `ssh bastion` and in the SFTP root.
func (s *Store) GrantsForAgent(ctx context.Context, agentID string) ([]Grant, error) {
	return s.queryGrants(ctx, `WHERE g.agent_id = ?`, agentID)
}

// ListGrants returns every grant, by agent name then alias.
func (s *Store) ListGrants(ctx context.Context) ([]Grant, error) {
	return s.queryGrants(ctx, "")
}

// ListElevatedGrants returns every grant, by agent name then alias, each
// with the scopes that elevate it now: what admins see of grants.
func (s *Store) ListElevatedGrants(ctx context.Context) ([]ElevatedGrant, error) {
	gs, err := s.queryGrants(ctx, "")
	if err != nil {
		return nil, err
	}
	scopes, err := s.ListScopes(ctx, true)
	if err != nil {
		return nil, err
	}
	type pair struct{ agent, conn string }
	byPair := map[pair][]Approval{}
	for _, a := range scopes {
		k := pair{a.AgentID, a.ConnectionID}
		byPair[k] = append(byPair[k], a)
	}
	out := make([]ElevatedGrant, len(gs))
	for i, g := range gs {
		out[i] = ElevatedGrant{Grant: g, Scopes: byPair[pair{g.AgentID, g.ConnectionID}]}
	}
	return out, nil
}

func (s *Store) grantWhere(ctx context.Context, cond string, args ...any) (*Grant, error) {
	gs, err := s.queryGrants(ctx, `WHERE `+cond, args...)
	if err != nil {
		return nil, err
	}
	if len(gs) == 0 {
		return nil, shown(ErrNotFound, "grant not found")
	}
	return &gs[0], nil
}

func (s *Store) queryGrants(ctx context.Context, where string, args ...any) ([]Grant, error) {
	rows, err := s.query(ctx, `
		SELECT g.id, g.agent_id, a.name, g.connection_id, c.alias, c.env,
		       g.read_rule, g.write_rule, g.destructive_rule, g.created_at, g.modified_at
		FROM grants g
		JOIN agents a ON a.id = g.agent_id
		JOIN connections c ON c.id = g.connection_id
		`+where+`
		ORDER BY a.name, c.alias`, args...)
	return collect(rows, err, "list grants", scanGrant)
}

func scanGrant(row rowScanner) (Grant, error) {
	var (
		g                 Grant
		env, r, w, d      string
		created, modified string
	)
	err := row.Scan(&g.ID, &g.AgentID, &g.AgentName, &g.ConnectionID, &g.Alias, &env,
		&r, &w, &d, &created, &modified)
	if err != nil {
		return g, err
	}
	g.Env = Env(env)
	g.Rules = Rules{Read: Rule(r), Write: Rule(w), Destructive: Rule(d)}
	if g.CreatedAt, err = parseTime(created); err != nil {
		return g, err
	}
	g.ModifiedAt, err = parseTime(modified)
	return g, err
}
