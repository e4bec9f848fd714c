package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"golang.org/x/crypto/ssh"
)

// ConnectionChange is the input of UpdateConnection: a nil field (or an
// empty HostKeys or PrivateKey) keeps what is stored.
type ConnectionChange struct {
	Host       *string
	Port       *int
	User       *string
	Env        *Env
	Recipe     *string
	HostKeys   []string // re-pins: replaces every pinned key
	PrivateKey []byte   // re-keys: sealed in place of the old key
	// Check is the key check made of the connection as changed, recorded
	// with the change; nil keeps the recorded status.
	Check *KeyCheck
	// ReadSandbox changes the read sandbox setting, with
	// ReadSandboxReason (which off needs, and the others must not have);
	// Probe records a probe of the connection as changed.
	ReadSandbox       *ReadSandbox
	ReadSandboxReason string
	Probe             *SandboxProbe
	// Record changes the recording setting.
	Record *Record
	// CommitStaged, the fingerprint of the staged key, makes that key the
	// current one and forgets it as staged (a rotation's commit). It is
	// refused if the staged key is another by now.
	CommitStaged string `json:",omitempty"`
}

// UpdateConnection changes the connection with that alias in place: its
// id, grants, approvals and audit history stay, because it is the same
// target reached another way, with another key or under another label.
// Moving it to production is refused while a grant allows destructive
// operations on it (ValidateGrant), in the same transaction as the write.
func (s *Store) UpdateConnection(ctx context.Context, audit Audit, alias string, ch ConnectionChange) (*Connection, error) {
	ctx, err := audit.bind(ctx)
	if err != nil {
		return nil, err
	}
	var sets []string
	var args []any
	set := func(col string, v any) {
		sets = append(sets, col+" = ?")
		args = append(args, v)
	}
	if ch.Host != nil {
		if *ch.Host == "" || strings.ContainsAny(*ch.Host, " \t\r\n/@") {
			return nil, invalid("connection %s: host %q is not a host name or address", alias, *ch.Host)
		}
		set("host", *ch.Host)
	}
	if ch.Port != nil {
		if *ch.Port < 1 || *ch.Port > 65535 {
			return nil, invalid("connection %s: port %d out of range 1-65535", alias, *ch.Port)
		}
		set("port", *ch.Port)
	}
	if ch.User != nil {
		if *ch.User == "" || strings.ContainsAny(*ch.User, " \t\r\n@:/") {
			return nil, invalid("connection %s: target user %q is not a user name", alias, *ch.User)
		}
		set("target_user", *ch.User)
	}
	if ch.Env != nil {
		if _, err := ParseEnv(string(*ch.Env)); err != nil {
			return nil, err
		}
		set("env", string(*ch.Env))
	}
	if ch.Recipe != nil {
		set("recipe", *ch.Recipe)
	}
	if len(ch.HostKeys) > 0 {
		var pins []string
		for _, l := range ch.HostKeys {
			norm, _, err := ParseHostKeyLine(l)
			if err != nil {
				return nil, fmt.Errorf("store: connection %s: %w", alias, err)
			}
			pins = append(pins, norm)
		}
		set("host_keys", strings.Join(pins, "\n"))
	}
	if len(ch.PrivateKey) > 0 {
		if err := CheckPrivateKey(ch.PrivateKey); err != nil {
			return nil, fmt.Errorf("store: connection %s: %w", alias, err)
		}
	}
	if ch.Check != nil {
		if _, err := ParseKeyStatus(string(ch.Check.Status)); err != nil {
			return nil, err
		}
		at := ch.Check.CheckedAt
		if at.IsZero() {
			at = s.nowUTC()
		}
		set("check_status", string(ch.Check.Status))
		set("key_message", ch.Check.Message)
		set("key_checked_at", formatTime(at))
	}
	if ch.ReadSandbox != nil {
		reason, err := checkReadSandbox(alias, *ch.ReadSandbox, ch.ReadSandboxReason)
		if err != nil {
			return nil, err
		}
		set("read_sandbox", string(*ch.ReadSandbox))
		set("read_sandbox_reason", reason)
	} else if ch.ReadSandboxReason != "" {
		return nil, invalid("connection %s: a read sandbox reason goes with read sandbox off", alias)
	}
	if ch.Probe != nil {
		p, err := s.checkSandboxProbe(*ch.Probe)
		if err != nil {
			return nil, err
		}
		set("sandbox_found", string(p.Found))
		set("sandbox_message", p.Message)
		set("sandbox_probed_at", formatTime(p.ProbedAt))
	}
	if ch.Record != nil {
		if _, err := ParseRecord(string(*ch.Record)); err != nil {
			return nil, err
		}
		set("record", string(*ch.Record))
	}
	set("modified_at", formatTime(s.nowUTC()))

	return s.updateConnection(ctx, alias, func(tx *sql.Tx, id string) error {
		sets, args := sets, args
		if ch.CommitStaged != "" {
			if len(ch.PrivateKey) > 0 {
				return invalid("connection %s: a new key and a staged key's commit, not both", alias)
			}
			more, moreArgs, err := s.commitStaged(ctx, tx, id, alias, ch.CommitStaged)
			if err != nil {
				return err
			}
			// Each set but the last takes an argument; the last clears the staged columns.
			sets = append(sets, more...)
			args = append(args, moreArgs...)
		}
		if len(ch.PrivateKey) > 0 {
			// Sealed here: the id is the associated data.
			sealed, err := s.sealFor(ch.PrivateKey, id)
			if err != nil {
				return err
			}
			sets = append(sets, "sealed_key = ?")
			args = append(args, sealed)
		}
		if ch.Env != nil && *ch.Env == EnvProduction {
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM grants WHERE connection_id = ? AND destructive_rule = ?`,
				id, string(RuleAllow)).Scan(&n); err != nil {
				return fmt.Errorf("store: update connection %s: %w", alias, err)
			}
			if n > 0 {
				return invalid("connection %s cannot become production: %d grant(s) allow destructive operations on it; set them to ask or deny first", alias, n)
			}
		}
		_, err := tx.ExecContext(ctx, `UPDATE connections SET `+strings.Join(sets, ", ")+` WHERE id = ?`, append(args, id)...)
		if err != nil {
			return fmt.Errorf("store: update connection %s: %w", alias, err)
		}
		return nil
	})
}

// UpdateConnectionAddress moves a connection to a new host and port, and
// re-pins its host keys when hostKeys is not empty (an empty hostKeys keeps
// the pins). `postern demo` needs it because its demo target listens on a
// new random port at every run.
func (s *Store) UpdateConnectionAddress(ctx context.Context, audit Audit, alias, host string, port int, hostKeys []string) (*Connection, error) {
	if port == 0 {
		port = DefaultSSHPort
	}
	return s.UpdateConnection(ctx, audit, alias, ConnectionChange{Host: &host, Port: &port, HostKeys: hostKeys})
}

// ConnectionPublicKey is the public half of the connection's sealed key:
// the line a target's authorized_keys holds for it, safe to show.
func (s *Store) ConnectionPublicKey(ctx context.Context, id string) (ssh.PublicKey, error) {
	signer, err := s.ConnectionSigner(ctx, id)
	if err != nil {
		return nil, err
	}
	return signer.PublicKey(), nil
}
