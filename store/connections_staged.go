package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
)

// Staged key rotation (issue 25).
//
// A new key is staged beside the current one instead of replacing it, so
// that the target keeps working until the new key is proved: the current
// key stays in use, the staged one is checked on its own, and a commit
// switches to it only once the target accepts it. The staged key is sealed
// like the current one, with another associated data (the id with
// stagedAD), so that a sealed box can never be moved from one column to
// the other and opened there.

// stagedAD is appended to a connection's id as the associated data of its
// staged key.
const stagedAD = "/staged"

// StagedKey is the key staged for a connection's rotation: its public
// half (never the private key) and its last check.
type StagedKey struct {
	PublicKey ssh.PublicKey
	StagedAt  time.Time
	Check     KeyCheck // Status is KeyUnchecked until a check ran
}

// Fingerprint is the staged key's SHA256 fingerprint.
func (k *StagedKey) Fingerprint() string { return ssh.FingerprintSHA256(k.PublicKey) }

// Proved reports whether the staged key's last check proved it.
func (k *StagedKey) Proved() bool { return k.Check.Status == KeyOK }

// StageConnectionKey stages key (an unencrypted private key file) for the
// connection with that alias, replacing any key staged before. The
// current key and everything else about the connection stay as they are,
// and modified_at with them: the upstream pool keys its clients on it, and
// nothing they use changed.
func (s *Store) StageConnectionKey(ctx context.Context, audit Audit, alias string, key []byte) (*Connection, error) {
	ctx, err := audit.bind(ctx)
	if err != nil {
		return nil, err
	}
	if err := CheckPrivateKey(key); err != nil {
		return nil, fmt.Errorf("store: connection %s: %w", alias, err)
	}
	signer, err := ssh.ParsePrivateKey(key)
	if err != nil {
		return nil, invalid("private key does not parse")
	}
	line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey())))
	return s.updateConnection(ctx, alias, func(tx *sql.Tx, id string) error {
		sealed, err := s.sealFor(key, id+stagedAD)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `
			UPDATE connections SET staged_key = ?, staged_public = ?, staged_at = ?, staged_status = ?,
			       staged_message = ?, staged_checked_at = ''
			WHERE id = ?`, sealed, line, formatTime(s.nowUTC()), string(KeyUnchecked), "not checked since it was staged", id)
		if err != nil {
			return fmt.Errorf("store: stage key of connection %s: %w", alias, err)
		}
		return nil
	})
}

// DropStagedKey removes the key staged for the connection with that
// alias; ErrInvalid when none is staged.
func (s *Store) DropStagedKey(ctx context.Context, audit Audit, alias string) (*Connection, error) {
	ctx, err := audit.bind(ctx)
	if err != nil {
		return nil, err
	}
	return s.updateConnection(ctx, alias, func(tx *sql.Tx, id string) error {
		res, err := tx.ExecContext(ctx, `UPDATE connections SET `+clearStaged+` WHERE id = ? AND staged_key IS NOT NULL`, id)
		if err != nil {
			return fmt.Errorf("store: drop staged key of connection %s: %w", alias, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return invalid("connection %s has no staged key", alias)
		}
		return nil
	})
}

// clearStaged is the SET list that forgets a staged key.
const clearStaged = `staged_key = NULL, staged_public = '', staged_at = '', staged_status = '', staged_message = '', staged_checked_at = ''`

// SetStagedKeyStatus records the outcome of a check of the staged key,
// which must still be the key with that fingerprint (a key staged again
// meanwhile is another key, and the outcome is not its).
func (s *Store) SetStagedKeyStatus(ctx context.Context, alias, fingerprint string, status KeyStatus, message string) (*Connection, error) {
	if _, err := ParseKeyStatus(string(status)); err != nil {
		return nil, err
	}
	return s.updateConnection(ctx, alias, func(tx *sql.Tx, id string) error {
		if _, err := sameStaged(ctx, tx, id, alias, fingerprint); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE connections SET staged_status = ?, staged_message = ?, staged_checked_at = ? WHERE id = ?`,
			string(status), message, formatTime(s.nowUTC()), id)
		if err != nil {
			return fmt.Errorf("store: update connection %s: %w", alias, err)
		}
		return nil
	})
}

// sameStaged makes sure the key staged for connection id is the one with
// that fingerprint, and answers its sealed box.
func sameStaged(ctx context.Context, tx *sql.Tx, id, alias, fingerprint string) ([]byte, error) {
	var line string
	var box []byte
	if err := tx.QueryRowContext(ctx, `SELECT staged_public, staged_key FROM connections WHERE id = ?`, id).Scan(&line, &box); err != nil {
		return nil, fmt.Errorf("store: read connection %s: %w", alias, err)
	}
	if box == nil {
		return nil, invalid("connection %s has no staged key", alias)
	}
	if pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(line)); err != nil || ssh.FingerprintSHA256(pub) != fingerprint {
		return nil, invalid("connection %s: the staged key is no longer %s (it was staged again)", alias, fingerprint)
	}
	return box, nil
}

// StagedSigner opens the key staged for connection id as an ssh.Signer,
// for a check or a commit; ErrInvalid when none is staged.
func (s *Store) StagedSigner(ctx context.Context, id string) (ssh.Signer, error) {
	var alias string
	var box []byte
	err := s.queryRow(ctx, `SELECT alias, staged_key FROM connections WHERE id = ?`, id).Scan(&alias, &box)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("connection id", id)
	}
	if err != nil {
		return nil, fmt.Errorf("store: read connection %s: %w", id, err)
	}
	if box == nil {
		return nil, invalid("connection %s has no staged key", alias)
	}
	key, err := s.openFor(box, id+stagedAD, "connection "+alias+" (staged)")
	if err != nil {
		return nil, err
	}
	signer, err := ssh.ParsePrivateKey(key)
	clear(key)
	if err != nil {
		return nil, fmt.Errorf("store: connection %s: staged private key does not parse", alias)
	}
	return signer, nil
}

// commitStaged makes the staged key of connection id (which must be the
// key with that fingerprint) its current key, in tx: the sets and args to
// add to the connection's UPDATE.
func (s *Store) commitStaged(ctx context.Context, tx *sql.Tx, id, alias, fingerprint string) ([]string, []any, error) {
	box, err := sameStaged(ctx, tx, id, alias, fingerprint)
	if err != nil {
		return nil, nil, err
	}
	key, err := s.openFor(box, id+stagedAD, "connection "+alias+" (staged)")
	if err != nil {
		return nil, nil, err
	}
	defer clear(key)
	sealed, err := s.sealFor(key, id)
	if err != nil {
		return nil, nil, err
	}
	return []string{"sealed_key = ?", clearStaged}, []any{sealed}, nil
}

// scanStaged fills c.Staged from the staged columns.
func scanStaged(c *Connection, line, at, status, message, checked string) error {
	if line == "" {
		return nil
	}
	pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(line))
	if err != nil {
		return fmt.Errorf("store: connection %s: staged public key: %w", c.Alias, err)
	}
	k := StagedKey{PublicKey: pub, Check: KeyCheck{Status: KeyStatus(status), Message: message}}
	if k.StagedAt, err = parseTime(at); err != nil {
		return err
	}
	if k.Check.CheckedAt, err = parseTime(checked); err != nil {
		return err
	}
	c.Staged = &k
	return nil
}
