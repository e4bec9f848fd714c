package store

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// newSandboxConnection makes connection alias with the read sandbox
// setting given, on a fresh store.
func newSandboxConnection(t *testing.T, s *Store, alias string, rs ReadSandbox, reason string, probe *SandboxProbe) (*Connection, error) {
	t.Helper()
	key, host := newTestKeyPair(t, ""), newTestKeyPair(t, "")
	return s.CreateConnection(context.Background(), Unaudited(), NewConnection{
		Alias: alias, Host: "db.example.com", User: "deploy", PrivateKey: key.privatePEM,
		HostKeys: []string{host.knownHostsLine("db.example.com")}, Env: EnvProduction,
		ReadSandbox: rs, ReadSandboxReason: reason, Probe: probe,
	})
}

// TestReadSandboxSetting: a connection is auto and unprobed unless told;
// off needs a reason and the other settings refuse one; a probe is
// recorded with its time, bumps modified_at (so a bastion's copy of the
// row is read again) and is forgotten by an unprobed one.
func TestReadSandboxSetting(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		ctx := context.Background()
		s, clock, _ := openTestStore(t)
		c, err := newSandboxConnection(t, s, "plain", "", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.ReadSandbox != ReadSandboxAuto || c.ReadSandboxReason != "" || c.SandboxFound != SandboxUnprobed ||
			c.SandboxMessage != "" || !c.SandboxProbedAt.IsZero() {
			t.Errorf("new connection: %q %q %q %q %v; want auto, no reason, unprobed, never", c.ReadSandbox,
				c.ReadSandboxReason, c.SandboxFound, c.SandboxMessage, c.SandboxProbedAt)
		}

		refused := []struct {
			name   string
			rs     ReadSandbox
			reason string
			probe  *SandboxProbe
			want   string
		}{
			{"off without a reason", ReadSandboxOff, "  ", nil, "say why"},
			{"a reason without off", ReadSandboxRequire, "why not", nil, "goes with read sandbox off"},
			{"an unknown setting", "sometimes", "", nil, "want auto, require or off"},
			{"a control character", ReadSandboxOff, "breaks\x1b[2J", nil, "control character"},
			{"a long reason", ReadSandboxOff, strings.Repeat("x", maxSandboxReason+1), nil, "longer than"},
			{"an unknown probe outcome", ReadSandboxAuto, "", &SandboxProbe{Found: "firejail"}, "want unprobed, bwrap"},
		}
		for _, tc := range refused {
			if _, err := newSandboxConnection(t, s, "bad", tc.rs, tc.reason, tc.probe); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("create with %s: got %v; want an invalid error saying %q", tc.name, err, tc.want)
			}
			off := tc.rs
			if _, err := s.UpdateConnection(ctx, Unaudited(), "plain", ConnectionChange{ReadSandbox: &off, ReadSandboxReason: tc.reason, Probe: tc.probe}); !errors.Is(err, ErrInvalid) {
				t.Errorf("update with %s: got %v; want an invalid error", tc.name, err)
			}
		}
		if _, err := s.UpdateConnection(ctx, Unaudited(), "plain", ConnectionChange{ReadSandboxReason: "alone"}); !errors.Is(err, ErrInvalid) {
			t.Errorf("update with a reason alone: got %v; want an invalid error", err)
		}

		off := ReadSandboxOff
		clock.Advance(time.Minute)
		c, err = s.UpdateConnection(ctx, Unaudited(), "plain", ConnectionChange{ReadSandbox: &off, ReadSandboxReason: " the app's fuse mounts hang bwrap "})
		if err != nil || c.ReadSandbox != ReadSandboxOff || c.ReadSandboxReason != "the app's fuse mounts hang bwrap" {
			t.Fatalf("set off: %v, %v; want off with the reason trimmed", c, err)
		}
		require := ReadSandboxRequire
		c, err = s.UpdateConnection(ctx, Unaudited(), "plain", ConnectionChange{ReadSandbox: &require})
		if err != nil || c.ReadSandbox != ReadSandboxRequire || c.ReadSandboxReason != "" {
			t.Fatalf("set require: %v, %v; want require and the reason gone", c, err)
		}

		clock.Advance(time.Minute)
		before := c.ModifiedAt
		c, err = s.SetSandboxProbe(ctx, "plain", SandboxProbe{Found: SandboxNone, Message: "bwrap: not installed"})
		if err != nil || c.SandboxFound != SandboxNone || c.SandboxMessage != "bwrap: not installed" ||
			!c.SandboxProbedAt.Equal(clock.Now()) || !c.ModifiedAt.After(before) {
			t.Fatalf("SetSandboxProbe: %+v, %v; want none, the message, probed and modified now", c, err)
		}
		c, err = s.UpdateConnection(ctx, Unaudited(), "plain", ConnectionChange{Probe: &SandboxProbe{Found: SandboxBwrap, Message: "bwrap: works"}})
		if err != nil || c.SandboxFound != SandboxBwrap || c.ReadSandbox != ReadSandboxRequire {
			t.Fatalf("update with a probe: %+v, %v; want bwrap, the setting kept", c, err)
		}
		c, err = s.UpdateConnection(ctx, Unaudited(), "plain", ConnectionChange{Probe: &SandboxProbe{Found: SandboxUnprobed, Message: "ignored"}})
		if err != nil || c.SandboxFound != SandboxUnprobed || c.SandboxMessage != "" || !c.SandboxProbedAt.IsZero() {
			t.Fatalf("update with unprobed: %+v, %v; want the probe forgotten", c, err)
		}
		if _, err := s.SetSandboxProbe(ctx, "nope", SandboxProbe{Found: SandboxBwrap}); !errors.Is(err, ErrNotFound) {
			t.Errorf("SetSandboxProbe of an unknown alias: %v; want not found", err)
		}

		c, err = newSandboxConnection(t, s, "probed", ReadSandboxRequire, "", &SandboxProbe{Found: SandboxUnshare, Message: strings.Repeat("m", maxSandboxMessage+10)})
		if err != nil || c.SandboxFound != SandboxUnshare || len(c.SandboxMessage) != maxSandboxMessage || c.SandboxProbedAt.IsZero() {
			t.Fatalf("create with a probe: %+v, %v; want unshare, the message cut, a time", c, err)
		}
	})
}

// TestReadSandboxMigration: connections made before the step become auto
// and unprobed, and keep everything else.
func TestReadSandboxMigration(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := openDB(path, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := migrate(ctx, db, dialectSQLite, 9); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO connections (id, alias, host, port, target_user, sealed_key, host_keys, env, created_at, modified_at)
		VALUES ('con_1', 'old', 'h', 22, 'u', x'00', 'h ssh-ed25519 AAAA', 'production', '', '')`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s, err := Open(ctx, path, Options{MasterKey: testMasterKey()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := s.ConnectionByAlias(ctx, "old")
	if err != nil || c.ReadSandbox != ReadSandboxAuto || c.SandboxFound != SandboxUnprobed || c.Env != EnvProduction {
		t.Fatalf("after migrating: %+v, %v; want auto, unprobed, production", c, err)
	}
}
