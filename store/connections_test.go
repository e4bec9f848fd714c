package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

func TestCreateConnection(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		ctx := context.Background()
		s, clock, _ := openTestStore(t)
		key := newTestKeyPair(t, "")
		host := newTestKeyPair(t, "")
		c, err := s.CreateConnection(ctx, Unaudited(), NewConnection{
			Alias: "prod-web", Host: "web.example.com", User: "deploy", PrivateKey: key.privatePEM,
			HostKeys: []string{host.knownHostsLine("web.example.com")}, Recipe: "linux", Env: EnvProduction,
		})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(c.ID, "con_") {
			t.Errorf("id: got %q; want con_...", c.ID)
		}
		if c.Port != 22 || c.Addr() != "web.example.com:22" {
			t.Errorf("port: got %d %s; want 22", c.Port, c.Addr())
		}
		if c.Env != EnvProduction || c.Recipe != "linux" || c.KeyStatus != KeyUnchecked || !c.KeyCheckedAt.IsZero() {
			t.Errorf("got env %s recipe %s status %s checked %v", c.Env, c.Recipe, c.KeyStatus, c.KeyCheckedAt)
		}
		if !c.CreatedAt.Equal(clock.Now()) {
			t.Errorf("created: got %v; want %v", c.CreatedAt, clock.Now())
		}
		signer, err := s.ConnectionSigner(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(signer.PublicKey().Marshal(), key.signer.PublicKey().Marshal()) {
			t.Error("ConnectionSigner returned a different key")
		}
		raw, err := s.ConnectionPrivateKey(ctx, c.ID)
		if err != nil || !bytes.Equal(raw, key.privatePEM) {
			t.Errorf("ConnectionPrivateKey: got %d bytes, %v; want the key file back", len(raw), err)
		}

		got, err := s.ConnectionByAlias(ctx, "prod-web")
		if err != nil || got.ID != c.ID {
			t.Fatalf("ConnectionByAlias: got %v, %v", got, err)
		}
		if _, err := s.ConnectionByAlias(ctx, "nope"); !errors.Is(err, ErrNotFound) {
			t.Errorf("unknown alias: got %v; want ErrNotFound", err)
		}
	})
}

func TestCreateConnectionErrors(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		ctx := context.Background()
		s, _, _ := openTestStore(t)
		mustCreateConnection(t, s, "taken", EnvDev)
		key := newTestKeyPair(t, "")
		host := newTestKeyPair(t, "").knownHostsLine("h")
		enc, err := ssh.MarshalPrivateKeyWithPassphrase(key.private, "", []byte("hunter2"))
		if err != nil {
			t.Fatal(err)
		}
		encPEM := pem.EncodeToMemory(enc)
		valid := func() NewConnection {
			return NewConnection{Alias: "new", Host: "h", User: "u", PrivateKey: key.privatePEM, HostKeys: []string{host}}
		}
		tests := []struct {
			name    string
			mod     func(*NewConnection)
			want    error
			wantMsg string
		}{
			{"duplicate alias", func(c *NewConnection) { c.Alias = "taken" }, ErrDuplicate, "connection taken already exists"},
			{"bad alias", func(c *NewConnection) { c.Alias = "a/b" }, ErrInvalid, "connection name"},
			{"no host", func(c *NewConnection) { c.Host = "" }, ErrInvalid, "host"},
			{"bad port", func(c *NewConnection) { c.Port = 70000 }, ErrInvalid, "port"},
			{"no user", func(c *NewConnection) { c.User = "" }, ErrInvalid, "user"},
			{"bad env", func(c *NewConnection) { c.Env = "prod" }, ErrInvalid, "environment"},
			{"no private key", func(c *NewConnection) { c.PrivateKey = nil }, ErrInvalid, "private key is empty"},
			{"garbage private key", func(c *NewConnection) { c.PrivateKey = []byte("not a key") }, ErrInvalid, "does not parse"},
			{"passphrase", func(c *NewConnection) { c.PrivateKey = encPEM }, ErrInvalid, "passphrase"},
			{"no host key", func(c *NewConnection) { c.HostKeys = nil }, ErrInvalid, "no host key"},
			{"bad host key", func(c *NewConnection) { c.HostKeys = []string{"h ssh-ed25519 zzz"} }, ErrInvalid, "malformed host key"},
			{"host key marker", func(c *NewConnection) { c.HostKeys = []string{"@revoked " + host} }, ErrInvalid, "marker"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				nc := valid()
				tt.mod(&nc)
				_, err := s.CreateConnection(ctx, Unaudited(), nc)
				if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.wantMsg) {
					t.Fatalf("got %v; want %v containing %q", err, tt.want, tt.wantMsg)
				}
				if strings.Contains(err.Error(), "PRIVATE KEY") || strings.Contains(err.Error(), "hunter2") {
					t.Errorf("error leaks key material: %q", err)
				}
			})
		}
		cs, _ := s.ListConnections(ctx)
		if len(cs) != 1 {
			t.Errorf("connections after failures: got %d; want 1", len(cs))
		}
	})
}

func TestParseHostKeyLine(t *testing.T) {
	kp := newTestKeyPair(t, "")
	pub := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(kp.signer.PublicKey())))
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"known_hosts", "example.com " + pub, "example.com " + pub},
		{"known_hosts with port", "[example.com]:2222 " + pub, "[example.com]:2222 " + pub},
		{"several names", "a,b " + pub, "a,b " + pub},
		{"bare key", pub + " comment", pub},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, key, err := ParseHostKeyLine(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %q; want %q", got, tt.want)
			}
			if !bytes.Equal(key.Marshal(), kp.signer.PublicKey().Marshal()) {
				t.Error("wrong key")
			}
		})
	}
}

func TestHostKeyCallback(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		ctx := context.Background()
		s, _, _ := openTestStore(t)
		pinned1, pinned2, other := newTestKeyPair(t, ""), newTestKeyPair(t, ""), newTestKeyPair(t, "")
		c, err := s.CreateConnection(ctx, Unaudited(), NewConnection{
			Alias: "web", Host: "web", User: "u", PrivateKey: newTestKeyPair(t, "").privatePEM,
			HostKeys: []string{pinned1.knownHostsLine("web"), pinned2.knownHostsLine("[web]:22")},
		})
		if err != nil {
			t.Fatal(err)
		}
		cb, err := c.HostKeyCallback()
		if err != nil {
			t.Fatal(err)
		}
		addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 22}
		for _, kp := range []testKeyPair{pinned1, pinned2} {
			// The name the target is dialled by does not matter; the pin does.
			if err := cb("another-name:22", addr, kp.signer.PublicKey()); err != nil {
				t.Errorf("pinned key refused: %v", err)
			}
		}
		err = cb("web:22", addr, other.signer.PublicKey())
		var mm *HostKeyMismatchError
		if !errors.As(err, &mm) || mm.Got != ssh.FingerprintSHA256(other.signer.PublicKey()) || len(mm.Want) != 2 {
			t.Fatalf("unpinned key: got %v; want *HostKeyMismatchError naming both pins", err)
		}
		if !strings.Contains(err.Error(), "HOST KEY MISMATCH") {
			t.Errorf("got %q; want a loud message", err)
		}
	})
}

func TestSetKeyStatus(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		ctx := context.Background()
		s, clock, _ := openTestStore(t)
		mustCreateConnection(t, s, "web", EnvDev)
		clock.Advance(3600e9)
		c, err := s.SetKeyStatus(ctx, "web", KeyRejected, "Permission denied (publickey).")
		if err != nil {
			t.Fatal(err)
		}
		if c.KeyStatus != KeyRejected || c.KeyMessage != "Permission denied (publickey)." || !c.KeyCheckedAt.Equal(clock.Now()) || !c.ModifiedAt.Equal(clock.Now()) {
			t.Errorf("got %s %q %v %v; want rejected, message, %v", c.KeyStatus, c.KeyMessage, c.KeyCheckedAt, c.ModifiedAt, clock.Now())
		}
		if _, err := s.SetKeyStatus(ctx, "web", "great", ""); !errors.Is(err, ErrInvalid) {
			t.Errorf("bad status: got %v; want ErrInvalid", err)
		}
		if _, err := s.SetKeyStatus(ctx, "nope", KeyOK, ""); !errors.Is(err, ErrNotFound) {
			t.Errorf("unknown alias: got %v; want ErrNotFound", err)
		}
	})
}

func TestRemoveConnectionCascades(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		ctx := context.Background()
		s, _, _ := openTestStore(t)
		mustCreateAgent(t, s, "bot")
		mustCreateConnection(t, s, "web", EnvDev)
		if _, err := s.SetGrant(ctx, Unaudited(), "bot", "web", DefaultRules()); err != nil {
			t.Fatal(err)
		}
		if err := s.RemoveConnection(ctx, Unaudited(), "web"); err != nil {
			t.Fatal(err)
		}
		if err := s.RemoveConnection(ctx, Unaudited(), "web"); !errors.Is(err, ErrNotFound) {
			t.Errorf("second remove: got %v; want ErrNotFound", err)
		}
		if gs, _ := s.ListGrants(ctx); len(gs) != 0 {
			t.Errorf("grants after removing the connection: got %d; want 0", len(gs))
		}
	})
}

// A sealed key copied onto another connection's row must not open there:
// the connection id is the associated data.
func TestSealedKeyBoundToID(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		ctx := context.Background()
		s, _, _ := openTestStore(t)
		a, _ := mustCreateConnection(t, s, "a", EnvDev)
		b, _ := mustCreateConnection(t, s, "b", EnvDev)
		if _, err := s.db.ExecContext(ctx, `UPDATE connections SET sealed_key = (SELECT sealed_key FROM connections WHERE id = ?) WHERE id = ?`, a.ID, b.ID); err != nil {
			t.Fatal(err)
		}
		_, err := s.ConnectionSigner(ctx, b.ID)
		if !errors.Is(err, ErrWrongMasterKey) || !strings.Contains(err.Error(), "does not open sealed key of connection b") {
			t.Fatalf("got %v; want 'does not open sealed key of connection b'", err)
		}
		if _, err := s.ConnectionSigner(ctx, a.ID); err != nil {
			t.Errorf("original row: %v", err)
		}
	})
}

func TestWrongOrMissingMasterKey(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		ctx := context.Background()
		s, _, path := openTestStore(t)
		c, _ := mustCreateConnection(t, s, "web", EnvDev)
		s.Close()

		wrong := make([]byte, MasterKeySize)
		rand.Read(wrong)
		tests := []struct {
			name    string
			key     []byte
			want    error
			wantMsg string
		}{
			{"wrong key", wrong, ErrWrongMasterKey, "not the one this database was created with"},
			{"no key", nil, ErrNoMasterKey, "no master key"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				s2, err := openRef(ctx, path, Options{MasterKey: tt.key})
				if err != nil {
					t.Fatalf("Open: %v (a store without a usable key must still open)", err)
				}
				defer s2.Close()
				if _, err := s2.ListConnections(ctx); err != nil {
					t.Errorf("ListConnections without a usable key: %v", err)
				}
				_, err = s2.ConnectionSigner(ctx, c.ID)
				if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.wantMsg) || !strings.Contains(err.Error(), "connection web") {
					t.Errorf("ConnectionSigner: got %v; want %v naming connection web", err, tt.want)
				}
				_, err = s2.CreateConnection(ctx, Unaudited(), NewConnection{
					Alias: "new", Host: "h", User: "u", PrivateKey: newTestKeyPair(t, "").privatePEM,
					HostKeys: []string{newTestKeyPair(t, "").knownHostsLine("h")},
				})
				if !errors.Is(err, tt.want) {
					t.Errorf("CreateConnection: got %v; want %v", err, tt.want)
				}
			})
		}
		if _, err := openRef(ctx, path, Options{MasterKey: []byte("short")}); err == nil {
			t.Error("Open with a 5-byte master key: got nil error")
		}
	})
}

// The database files must never hold the private key or the master key.
func TestDatabaseHoldsNoKeyBytes(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		ctx := context.Background()
		s, _, path := openTestStore(t)
		var keys []testKeyPair
		for _, alias := range []string{"a", "b", "c"} {
			_, kp := mustCreateConnection(t, s, alias, EnvDev)
			keys = append(keys, kp)
		}
		// Open them once, as the relay would.
		cs, _ := s.ListConnections(ctx)
		for _, c := range cs {
			if _, err := s.ConnectionSigner(ctx, c.ID); err != nil {
				t.Fatal(err)
			}
		}
		var sealed []byte
		if err := s.db.QueryRowContext(ctx, `SELECT sealed_key FROM connections WHERE alias = 'a'`).Scan(&sealed); err != nil {
			t.Fatal(err)
		}
		check := func(when string) {
			t.Helper()
			var all []byte
			if testDialect(t) == dialectPostgres {
				all = postgresFiles(t)
			}
			for _, suffix := range []string{"", "-wal", "-shm"} {
				if testDialect(t) == dialectPostgres {
					break
				}
				b, _ := readFileIfExists(path + suffix)
				all = append(all, b...)
			}
			if len(all) == 0 {
				t.Fatalf("%s: database files are empty", when)
			}
			// The files read hold the rows: the sealed keys are there.
			if !bytes.Contains(all, sealed) {
				t.Fatalf("%s: database files do not hold a connection's sealed key; the check reads the wrong files", when)
			}
			secrets := map[string][]byte{"master key": testMasterKey()}
			for i, kp := range keys {
				secrets["private key PEM "+string(rune('a'+i))] = kp.privatePEM
				secrets["ed25519 seed "+string(rune('a'+i))] = kp.private.Seed()
				block, _ := pem.Decode(kp.privatePEM)
				secrets["private key body "+string(rune('a'+i))] = block.Bytes
			}
			for name, secret := range secrets {
				if bytes.Contains(all, secret) {
					t.Errorf("%s: database files contain the %s", when, name)
				}
			}
			if bytes.Contains(all, []byte("PRIVATE KEY")) {
				t.Errorf("%s: database files contain a PEM private key header", when)
			}
		}
		if st, err := os.Stat(path + "-wal"); testDialect(t) == dialectSQLite && (err != nil || st.Size() == 0) {
			t.Fatalf("expected a non-empty -wal file while the store is open: %v", err)
		}
		check("with WAL")
		s.Close()
		check("after close")
	})
}

// postgresFiles returns every file of the test PostgreSQL server's data
// directory, its write-ahead log included, after a checkpoint has written
// every table's pages out: what a copy of the server's disk holds.
func postgresFiles(t *testing.T) []byte {
	t.Helper()
	srv := testPG.Get(t)
	if err := srv.Exec(context.Background(), "CHECKPOINT"); err != nil {
		t.Fatal(err)
	}
	var all []byte
	err := filepath.WalkDir(srv.Dir, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			// Tests run in parallel on this server: another test's
			// database went (DROP DATABASE) while the walk ran.
			return nil
		}
		if err != nil || !d.Type().IsRegular() {
			return err // directories, and the server's unix socket
		}
		b, err := readFileIfExists(p)
		all = append(all, b...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return all
}

func readFileIfExists(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return b, err
}
