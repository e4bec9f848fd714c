package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"

	"golang.org/x/crypto/chacha20poly1305"
)

// MasterKeySize is the length of the master key in bytes.
const MasterKeySize = chacha20poly1305.KeySize

// sealer seals and opens secrets with the master key. XChaCha20-Poly1305 is
// used because its 24-byte nonce can be drawn at random for every seal with
// no risk of reuse, so no nonce counter has to be kept in the database.
type sealer struct {
	aead interface {
		Seal(dst, nonce, plaintext, additionalData []byte) []byte
		Open(dst, nonce, ciphertext, additionalData []byte) ([]byte, error)
		NonceSize() int
	}
}

func newSealer(key []byte) (*sealer, error) {
	if len(key) != MasterKeySize {
		return nil, fmt.Errorf("store: master key is %d bytes; want %d", len(key), MasterKeySize)
	}
	aead, err := chacha20poly1305.NewX(key)
	if err != nil {
		return nil, fmt.Errorf("store: master key: %w", err)
	}
	return &sealer{aead: aead}, nil
}

// seal returns nonce || ciphertext, bound to ad (a record id).
func (s *sealer) seal(plaintext []byte, ad string) []byte {
	nonce := make([]byte, s.aead.NonceSize(), s.aead.NonceSize()+len(plaintext)+chacha20poly1305.Overhead)
	rand.Read(nonce) // never returns an error (Go 1.24+)
	return s.aead.Seal(nonce, nonce, plaintext, []byte(ad))
}

// open reverses seal. It fails, rather than returning garbage, when the key,
// the associated data or a byte of the box is wrong.
func (s *sealer) open(box []byte, ad string) ([]byte, error) {
	n := s.aead.NonceSize()
	if len(box) < n+chacha20poly1305.Overhead {
		return nil, errors.New("sealed value is truncated")
	}
	return s.aead.Open(nil, box[:n], box[n:], []byte(ad))
}

// masterKeyCheck names the meta row holding a value sealed under the master
// key when the database first saw one. Opening it tells "this is not the key
// that sealed this database" apart from "this one record is damaged", and
// stops a wrong key from sealing new connections next to old ones.
const (
	masterKeyCheckName = "master_key_check"
	masterKeyCheckText = "postern master key check v1"
)

// loadMasterKey sets s.sealer from opts, verifying the key against the
// database's check value (creating that value on first use).
func (s *Store) loadMasterKey(ctx context.Context, opts Options) error {
	if opts.MasterKey == nil {
		s.keyErr = opts.masterKeyErr
		if s.keyErr == nil {
			s.keyErr = fmt.Errorf("%w loaded", ErrNoMasterKey)
		}
		return nil
	}
	sl, err := newSealer(opts.MasterKey)
	if err != nil {
		return err
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		var box []byte
		err := tx.QueryRowContext(ctx, `SELECT value FROM meta WHERE name = ?`, masterKeyCheckName).Scan(&box)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			_, err = tx.ExecContext(ctx, `INSERT INTO meta (name, value) VALUES (?, ?)`,
				masterKeyCheckName, sl.seal([]byte(masterKeyCheckText), masterKeyCheckName))
			if err != nil {
				return fmt.Errorf("store: save master key check: %w", err)
			}
		case err != nil:
			return fmt.Errorf("store: read master key check: %w", err)
		default:
			if pt, err := sl.open(box, masterKeyCheckName); err != nil || string(pt) != masterKeyCheckText {
				// Keep the store usable for everything that needs no secret
				// (listing, approvals, audit) but refuse every seal and open.
				s.keyErr = fmt.Errorf("%w: the master key is not the one this database was created with (check POSTERN_MASTER_KEY_FILE)", ErrWrongMasterKey)
				return nil
			}
		}
		s.sealer = sl
		return nil
	})
}

// CheckMasterKey reports why sealed secrets cannot be used (no master key, or
// not the one that sealed this database), or nil if they can. Callers check
// it before slow work that ends in sealing, such as dialing a target.
func (s *Store) CheckMasterKey() error {
	if s.sealer == nil {
		return fmt.Errorf("store: %w", s.keyErr)
	}
	return nil
}

// sealFor seals a secret for the record id, or explains why it cannot.
func (s *Store) sealFor(plaintext []byte, id string) ([]byte, error) {
	if s.sealer == nil {
		return nil, fmt.Errorf("store: cannot seal a secret: %w", s.keyErr)
	}
	return s.sealer.seal(plaintext, id), nil
}

// openFor opens a secret sealed for the record id. what names the record
// ("connection prod-web") in the error.
func (s *Store) openFor(box []byte, id, what string) ([]byte, error) {
	if s.sealer == nil {
		return nil, fmt.Errorf("store: cannot open sealed key of %s: %w", what, s.keyErr)
	}
	pt, err := s.sealer.open(box, id)
	if err != nil {
		return nil, fmt.Errorf("store: master key does not open sealed key of %s: %w", what, ErrWrongMasterKey)
	}
	return pt, nil
}
