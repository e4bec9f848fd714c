package store

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// TestStagedKeyRotation: a staged key sits beside the current one without
// changing what the relay uses (nor modified_at, which the upstream pool
// keys on); its check is recorded only for the key it was made of; the
// commit makes it current and forgets it; a drop forgets it.
func TestStagedKeyRotation(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		ctx := context.Background()
		s, clock, _ := openTestStore(t)
		c, cur := mustCreateConnection(t, s, "web", EnvDev)
		clock.Advance(time.Minute)
		next := newTestKeyPair(t, "")
		fp := ssh.FingerprintSHA256(next.signer.PublicKey())

		got, err := s.StageConnectionKey(ctx, Unaudited(), "web", next.privatePEM)
		if err != nil {
			t.Fatal(err)
		}
		if got.Staged == nil || got.Staged.Fingerprint() != fp || got.Staged.Check.Status != KeyUnchecked ||
			!got.Staged.StagedAt.Equal(clock.Now()) {
			t.Fatalf("staged: got %+v; want %s unchecked, staged now", got.Staged, fp)
		}
		if !got.ModifiedAt.Equal(c.ModifiedAt) {
			t.Errorf("modified_at: got %v; want %v kept (nothing the relay uses changed)", got.ModifiedAt, c.ModifiedAt)
		}
		signer, err := s.ConnectionSigner(ctx, c.ID)
		if err != nil || !bytes.Equal(signer.PublicKey().Marshal(), cur.signer.PublicKey().Marshal()) {
			t.Fatalf("ConnectionSigner after staging: %v; want the current key still", err)
		}
		staged, err := s.StagedSigner(ctx, c.ID)
		if err != nil || ssh.FingerprintSHA256(staged.PublicKey()) != fp {
			t.Fatalf("StagedSigner: %v; want %s", err, fp)
		}

		// A check's outcome is recorded for the key it checked only.
		if _, err := s.SetStagedKeyStatus(ctx, "web", "SHA256:other", KeyOK, "ran true"); !errors.Is(err, ErrInvalid) {
			t.Errorf("status for another key: got %v; want ErrInvalid", err)
		}
		got, err = s.SetStagedKeyStatus(ctx, "web", fp, KeyRejected, "Permission denied")
		if err != nil || got.Staged.Check.Status != KeyRejected || got.Staged.Check.Message != "Permission denied" ||
			got.KeyStatus != c.KeyStatus {
			t.Fatalf("staged status: got %+v, %v; want rejected, the current key's status kept", got.Staged, err)
		}

		// The commit of another fingerprint is refused; of this one, made.
		if _, err := s.UpdateConnection(ctx, Unaudited(), "web", ConnectionChange{CommitStaged: "SHA256:other"}); !errors.Is(err, ErrInvalid) {
			t.Errorf("commit of another key: got %v; want ErrInvalid", err)
		}
		got, err = s.UpdateConnection(ctx, Unaudited(), "web", ConnectionChange{CommitStaged: fp, Check: &KeyCheck{Status: KeyOK, Message: "ran true"}})
		if err != nil {
			t.Fatal(err)
		}
		if got.Staged != nil || got.KeyStatus != KeyOK || !got.ModifiedAt.Equal(clock.Now()) {
			t.Errorf("after commit: staged %+v, status %s, modified %v; want none staged, ok, modified now", got.Staged, got.KeyStatus, got.ModifiedAt)
		}
		signer, err = s.ConnectionSigner(ctx, c.ID)
		if err != nil || ssh.FingerprintSHA256(signer.PublicKey()) != fp {
			t.Fatalf("ConnectionSigner after commit: %v; want %s", err, fp)
		}
		if _, err := s.StagedSigner(ctx, c.ID); !errors.Is(err, ErrInvalid) {
			t.Errorf("StagedSigner after commit: got %v; want ErrInvalid (none staged)", err)
		}
		if _, err := s.UpdateConnection(ctx, Unaudited(), "web", ConnectionChange{CommitStaged: fp}); !errors.Is(err, ErrInvalid) {
			t.Errorf("commit with nothing staged: got %v; want ErrInvalid", err)
		}

		// Staged again and dropped.
		if _, err := s.StageConnectionKey(ctx, Unaudited(), "web", cur.privatePEM); err != nil {
			t.Fatal(err)
		}
		got, err = s.DropStagedKey(ctx, Unaudited(), "web")
		if err != nil || got.Staged != nil {
			t.Fatalf("drop: %+v, %v; want none staged", got, err)
		}
		if _, err := s.DropStagedKey(ctx, Unaudited(), "web"); !errors.Is(err, ErrInvalid) {
			t.Errorf("drop with nothing staged: got %v; want ErrInvalid", err)
		}
	})
}

// TestStagedKeyInput: a staged key must be a key postern can use, of a
// connection that exists; the sealed box of a staged key does not open as
// the current key's.
func TestStagedKeyInput(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		ctx := context.Background()
		s, _, _ := openTestStore(t)
		c, _ := mustCreateConnection(t, s, "web", EnvDev)
		next := newTestKeyPair(t, "")
		for _, tt := range []struct {
			name, alias string
			key         []byte
			want        error
		}{
			{"empty", "web", nil, ErrInvalid},
			{"garbage", "web", []byte("not a key"), ErrInvalid},
			{"no such connection", "nosuch", next.privatePEM, ErrNotFound},
		} {
			if _, err := s.StageConnectionKey(ctx, Unaudited(), tt.alias, tt.key); !errors.Is(err, tt.want) {
				t.Errorf("%s: got %v; want %v", tt.name, err, tt.want)
			}
		}
		if _, err := s.StageConnectionKey(ctx, Unaudited(), "web", next.privatePEM); err != nil {
			t.Fatal(err)
		}
		var box []byte
		if err := s.queryRow(ctx, `SELECT staged_key FROM connections WHERE id = ?`, c.ID).Scan(&box); err != nil {
			t.Fatal(err)
		}
		if _, err := s.openFor(box, c.ID, "test"); err == nil {
			t.Error("the staged key's box opens as the current key's; want it sealed for the staged column only")
		}
	})
}
