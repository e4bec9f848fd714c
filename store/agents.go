package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
)

// Agent is a client of the bastion: an LLM agent, a CI job, a script. It is
// known by its public keys; its name is what admins and the audit log use.
type Agent struct {
	ID         string
	Name       string
	Disabled   bool // a disabled agent keeps its grants but cannot log in
	Keys       []AgentKey
	CreatedAt  time.Time
	ModifiedAt time.Time
}

// AgentKey is one public key of an agent.
type AgentKey struct {
	ID            string
	AgentID       string
	AuthorizedKey string // one authorized_keys line: "ssh-ed25519 AAAA... comment"
	Fingerprint   string // "SHA256:..." as printed by ssh-keygen -l
	CreatedAt     time.Time
}

// namePattern is what agent names and connection aliases may look like. The
// alias is an SSH user name (ssh ALIAS@bastion) and an SFTP directory name
// (/ALIAS/... in the virtual root), and both
// appear unquoted in shell commands, so they stay plain.
var namePattern = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._-]{0,63}$`)

// ValidateName checks an agent name or connection alias: 1 to 64 letters,
// digits, '.', '_' or '-', not starting with a punctuation character.
func ValidateName(kind, name string) error {
	if !namePattern.MatchString(name) {
		return invalid("%s name %q: use 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit", kind, name)
	}
	return nil
}

// ParseAuthorizedKey reads one OpenSSH public key line (authorized_keys
// form, options not allowed) and returns it normalised with its SHA256
// fingerprint. Errors wrap ErrInvalid.
func ParseAuthorizedKey(line string) (normalized, fingerprint string, err error) {
	line = strings.TrimSpace(line)
	if line == "" {
		return "", "", invalid("public key is empty")
	}
	if strings.Contains(line, "PRIVATE KEY") {
		// Do not echo it: it is a secret given in the wrong place.
		return "", "", invalid("expected an OpenSSH public key line but got a private key")
	}
	if strings.Count(line, "\n") > 0 {
		return "", "", invalid("expected one public key line, got several lines")
	}
	pub, comment, options, rest, err := ssh.ParseAuthorizedKey([]byte(line))
	if err != nil {
		return "", "", invalid("malformed OpenSSH public key: %v", err)
	}
	if len(options) > 0 {
		return "", "", invalid("public key has authorized_keys options (%s); give the bare key", strings.Join(options, ","))
	}
	if len(strings.TrimSpace(string(rest))) > 0 {
		return "", "", invalid("expected one public key line, got several")
	}
	norm := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub)))
	if comment != "" {
		norm += " " + comment
	}
	return norm, ssh.FingerprintSHA256(pub), nil
}

// CreateAgent adds an agent with its first public key (an authorized_keys
// line). A taken name or a key that already belongs to an agent gives a
// *ConflictError.
func (s *Store) CreateAgent(ctx context.Context, audit Audit, name, authorizedKey string) (*Agent, error) {
	ctx, err := audit.bind(ctx)
	if err != nil {
		return nil, err
	}
	if err := ValidateName("agent", name); err != nil {
		return nil, err
	}
	key, fp, err := ParseAuthorizedKey(authorizedKey)
	if err != nil {
		return nil, err
	}
	now := formatTime(s.nowUTC())
	id := newID(prefixAgent)
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := agentIDByName(ctx, tx, name); err == nil {
			return &ConflictError{Kind: "agent", Value: name}
		} else if !errors.Is(err, ErrNotFound) {
			return err
		}
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO agents (id, name, disabled, created_at, modified_at) VALUES (?, ?, 0, ?, ?)`,
			id, name, now, now); err != nil {
			if isUniqueViolation(err) {
				return &ConflictError{Kind: "agent", Value: name}
			}
			return fmt.Errorf("store: add agent %s: %w", name, err)
		}
		noteAuditSubject(ctx, id, name, "", "")
		return insertAgentKey(ctx, tx, id, key, fp, now)
	})
	if err != nil {
		return nil, err
	}
	return s.AgentByID(ctx, id)
}

// AddAgentKey gives an existing agent another public key.
func (s *Store) AddAgentKey(ctx context.Context, audit Audit, name, authorizedKey string) (*Agent, error) {
	ctx, err := audit.bind(ctx)
	if err != nil {
		return nil, err
	}
	key, fp, err := ParseAuthorizedKey(authorizedKey)
	if err != nil {
		return nil, err
	}
	now := formatTime(s.nowUTC())
	var id string
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		id, err = agentIDByName(ctx, tx, name)
		if err != nil {
			return err
		}
		if err := insertAgentKey(ctx, tx, id, key, fp, now); err != nil {
			return err
		}
		return touch(ctx, tx, "agents", id, now)
	})
	if err != nil {
		return nil, err
	}
	return s.AgentByID(ctx, id)
}

// RemoveAgentKey removes one key (by SHA256 fingerprint) from an agent. The
// last key cannot be removed: an agent without keys could never log in and
// would only look registered; remove the agent instead.
func (s *Store) RemoveAgentKey(ctx context.Context, audit Audit, name, fingerprint string) (*Agent, error) {
	ctx, err := audit.bind(ctx)
	if err != nil {
		return nil, err
	}
	now := formatTime(s.nowUTC())
	var id string
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		id, err = agentIDByName(ctx, tx, name)
		if err != nil {
			return err
		}
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM agent_keys WHERE agent_id = ?`, id).Scan(&n); err != nil {
			return fmt.Errorf("store: remove agent key: %w", err)
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM agent_keys WHERE agent_id = ? AND fingerprint = ?`, id, fingerprint)
		if err != nil {
			return fmt.Errorf("store: remove agent key: %w", err)
		}
		if k, _ := res.RowsAffected(); k == 0 {
			return notFound("key of agent "+name, fingerprint)
		}
		if n <= 1 {
			return invalid("%s is the last key of agent %s; remove the agent instead", fingerprint, name)
		}
		return touch(ctx, tx, "agents", id, now)
	})
	if err != nil {
		return nil, err
	}
	return s.AgentByID(ctx, id)
}

func insertAgentKey(ctx context.Context, tx *sql.Tx, agentID, key, fp, now string) error {
	var owner string
	err := tx.QueryRowContext(ctx,
		`SELECT a.name FROM agent_keys k JOIN agents a ON a.id = k.agent_id WHERE k.fingerprint = ?`, fp).Scan(&owner)
	if err == nil {
		return &ConflictError{Kind: "agent key", Value: fp + " (of agent " + owner + ")"}
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("store: add agent key: %w", err)
	}
	if _, err := tx.ExecContext(ctx,
		`INSERT INTO agent_keys (id, agent_id, authorized_key, fingerprint, created_at) VALUES (?, ?, ?, ?, ?)`,
		newID(prefixAgentKey), agentID, key, fp, now); err != nil {
		if isUniqueViolation(err) {
			return &ConflictError{Kind: "agent key", Value: fp}
		}
		return fmt.Errorf("store: add agent key: %w", err)
	}
	return nil
}

// SetAgentDisabled disables or re-enables an agent. A disabled agent is still
// found by AgentByFingerprint (with Disabled set) so that the bastion can
// tell it "disabled" rather than "unknown key" and audit the attempt.
func (s *Store) SetAgentDisabled(ctx context.Context, audit Audit, name string, disabled bool) (*Agent, error) {
	ctx, err := audit.bind(ctx)
	if err != nil {
		return nil, err
	}
	now := formatTime(s.nowUTC())
	var id string
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		id, err = agentIDByName(ctx, tx, name)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE agents SET disabled = ?, modified_at = ? WHERE id = ?`,
			disabled, now, id); err != nil {
			return fmt.Errorf("store: update agent %s: %w", name, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s.AgentByID(ctx, id)
}

// RemoveAgent deletes an agent with its keys, grants and approval requests
// (ON DELETE CASCADE) and its lock (which no foreign key ties to it: see
// TestLockGoesWithItsTarget). Audit rows copy the agent's id and name and
// stay.
func (s *Store) RemoveAgent(ctx context.Context, audit Audit, name string) error {
	ctx, err := audit.bind(ctx)
	if err != nil {
		return err
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM locks WHERE target_kind = 'agent'
			AND target_id IN (SELECT id FROM agents WHERE name = ?)`, name); err != nil {
			return fmt.Errorf("store: remove agent %s's lock: %w", name, err)
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM agents WHERE name = ?`, name)
		if err != nil {
			return fmt.Errorf("store: remove agent %s: %w", name, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return notFound("agent", name)
		}
		return nil
	})
}

// AgentByName returns the agent with that name.
func (s *Store) AgentByName(ctx context.Context, name string) (*Agent, error) {
	return s.oneAgent(ctx, "name", name, "agent", name)
}

// AgentByID returns the agent with that id.
func (s *Store) AgentByID(ctx context.Context, id string) (*Agent, error) {
	return s.oneAgent(ctx, "id", id, "agent id", id)
}

// AgentByFingerprint returns the agent owning the public key with that
// SHA256 fingerprint (ssh.FingerprintSHA256). The caller must refuse a
// Disabled agent; it is returned so the refusal can say why.
func (s *Store) AgentByFingerprint(ctx context.Context, fingerprint string) (*Agent, error) {
	var id string
	err := s.queryRow(ctx, `SELECT agent_id FROM agent_keys WHERE fingerprint = ?`, fingerprint).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("agent with key", fingerprint)
	}
	if err != nil {
		return nil, fmt.Errorf("store: find agent by key: %w", err)
	}
	return s.AgentByID(ctx, id)
}

// ListAgents returns every agent with its keys, by name.
func (s *Store) ListAgents(ctx context.Context) ([]Agent, error) {
	return s.queryAgents(ctx, "")
}

func (s *Store) oneAgent(ctx context.Context, col, val, kind, shown string) (*Agent, error) {
	as, err := s.queryAgents(ctx, `WHERE a.`+col+` = ?`, val)
	if err != nil {
		return nil, err
	}
	if len(as) == 0 {
		return nil, notFound(kind, shown)
	}
	return &as[0], nil
}

// queryAgents reads agents and their keys in one query, ordered by name.
// where is empty or a WHERE clause over the agents table, alias a.
func (s *Store) queryAgents(ctx context.Context, where string, args ...any) ([]Agent, error) {
	rows, err := s.query(ctx, `
		SELECT a.id, a.name, a.disabled, a.created_at, a.modified_at,
		       COALESCE(k.id, ''), COALESCE(k.authorized_key, ''), COALESCE(k.fingerprint, ''), COALESCE(k.created_at, '')
		FROM agents a LEFT JOIN agent_keys k ON k.agent_id = a.id
		`+where+`
		ORDER BY a.name, a.id, k.created_at, k.id`, args...)
	// One row per key (or one without a key): an agent's rows are
	// consecutive, and gather its keys.
	var out []Agent
	err = scanRows(rows, err, "list agents", func(r rowScanner) error {
		var (
			a                 Agent
			k                 AgentKey
			created, modified string
			keyCreated        string
		)
		err := r.Scan(&a.ID, &a.Name, &a.Disabled, &created, &modified,
			&k.ID, &k.AuthorizedKey, &k.Fingerprint, &keyCreated)
		if err != nil {
			return err
		}
		if len(out) == 0 || out[len(out)-1].ID != a.ID {
			if a.CreatedAt, err = parseTime(created); err != nil {
				return err
			}
			if a.ModifiedAt, err = parseTime(modified); err != nil {
				return err
			}
			out = append(out, a)
		}
		if k.ID != "" {
			k.AgentID = a.ID
			if k.CreatedAt, err = parseTime(keyCreated); err != nil {
				return err
			}
			last := &out[len(out)-1]
			last.Keys = append(last.Keys, k)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// agentIDByName finds an agent id inside a transaction.
func agentIDByName(ctx context.Context, tx *sql.Tx, name string) (string, error) {
	var id string
	err := tx.QueryRowContext(ctx, `SELECT id FROM agents WHERE name = ?`, name).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", notFound("agent", name)
	}
	if err != nil {
		return "", fmt.Errorf("store: find agent %s: %w", name, err)
	}
	return id, nil
}

// touch sets modified_at of one row.
func touch(ctx context.Context, tx *sql.Tx, table, id, now string) error {
	if _, err := tx.ExecContext(ctx, `UPDATE `+table+` SET modified_at = ? WHERE id = ?`, now, id); err != nil {
		return fmt.Errorf("store: update %s: %w", table, err)
	}
	return nil
}
