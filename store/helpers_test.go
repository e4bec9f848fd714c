package store

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/postern/postern/internal/fakeclock"
	"github.com/postern/postern/internal/testpg"
)

// testPG is the PostgreSQL server of this package's tests, started by the
// first test that needs it and stopped by TestMain. Its databases are
// copies of one that the migrations ran on (testPG.Get(t).NewDatabase for
// an empty one).
var testPG = testpg.Shared{Template: migratedTemplate}

// migratedTemplate runs the migrations on the template database, with no
// master key (each test's store sets its own).
func migratedTemplate(ctx context.Context, url string) error {
	s, err := OpenPostgres(ctx, url, Options{})
	if err != nil {
		return err
	}
	return s.Close()
}

func TestMain(m *testing.M) {
	os.Exit(testpg.Main(m, false, &testPG))
}

// forEachDB runs fn once on each database postern supports, as the
// subtests "sqlite" and "postgres": openTestStore called inside opens that
// database. The postgres run needs PostgreSQL (internal/testpg): it is
// skipped without it, unless POSTERN_E2E=1, which makes it fail.
func forEachDB(t *testing.T, fn func(t *testing.T)) {
	t.Helper()
	testpg.ForEachDB(t, fn)
}

// testDialect is the database of the forEachDB subtest t runs in: postgres
// when a "postgres" element is in its name.
func testDialect(t *testing.T) dialect {
	if testpg.OnPostgres(t) {
		return dialectPostgres
	}
	return dialectSQLite
}

// newTestDatabase returns a fresh database for t: a file name in a
// temporary directory on SQLite, a new database's URL on PostgreSQL.
func newTestDatabase(t *testing.T) string {
	t.Helper()
	if testDialect(t) == dialectPostgres {
		return testPG.NewDatabase(t)
	}
	return filepath.Join(t.TempDir(), DatabaseFile)
}

// openRef opens the database ref names: a PostgreSQL URL or an SQLite file.
func openRef(ctx context.Context, ref string, opts Options) (*Store, error) {
	if IsPostgresURL(ref) {
		return OpenPostgres(ctx, ref, opts)
	}
	return Open(ctx, ref, opts)
}

// testMasterKey is a fixed, recognisable master key for tests.
func testMasterKey() []byte {
	k := make([]byte, MasterKeySize)
	for i := range k {
		k[i] = byte(0xA0 + i)
	}
	return k
}

// openTestStore opens a fresh store: on SQLite in a temporary directory,
// or in a new PostgreSQL database inside forEachDB's postgres subtest. It
// returns the database's reference for openRef.
func openTestStore(t *testing.T) (*Store, *fakeclock.Clock, string) {
	t.Helper()
	clock := fakeclock.New()
	path := newTestDatabase(t)
	s, err := openRef(context.Background(), path, Options{Now: clock.Now, MasterKey: testMasterKey()})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s, clock, path
}

// testKeyPair is an ed25519 key pair in the forms the tests need.
type testKeyPair struct {
	private    ed25519.PrivateKey
	privatePEM []byte // OpenSSH PEM, unencrypted
	authorized string // authorized_keys line with comment
	signer     ssh.Signer
}

func newTestKeyPair(t *testing.T, comment string) testKeyPair {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, comment)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey())))
	if comment != "" {
		line += " " + comment
	}
	return testKeyPair{private: priv, privatePEM: pem.EncodeToMemory(block), authorized: line, signer: signer}
}

// knownHostsLine pins kp's public key for host.
func (kp testKeyPair) knownHostsLine(host string) string {
	return host + " " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(kp.signer.PublicKey())))
}

func mustCreateAgent(t *testing.T, s *Store, name string) (*Agent, testKeyPair) {
	t.Helper()
	kp := newTestKeyPair(t, name+"@test")
	a, err := s.CreateAgent(context.Background(), Unaudited(), name, kp.authorized)
	if err != nil {
		t.Fatalf("CreateAgent(%s): %v", name, err)
	}
	return a, kp
}

func mustCreateConnection(t *testing.T, s *Store, alias string, env Env) (*Connection, testKeyPair) {
	t.Helper()
	kp := newTestKeyPair(t, "")
	hostKey := newTestKeyPair(t, "")
	c, err := s.CreateConnection(context.Background(), Unaudited(), NewConnection{
		Alias: alias, Host: "10.0.0.1", User: "deploy", PrivateKey: kp.privatePEM,
		HostKeys: []string{hostKey.knownHostsLine("10.0.0.1")}, Env: env,
	})
	if err != nil {
		t.Fatalf("CreateConnection(%s): %v", alias, err)
	}
	return c, kp
}

// openDecidingStore is openTestStore with the admins the approval tests
// decide as, adm_alice and adm_bob (approvers): the store refuses a
// decision by an id that is no admin's (checkDecider).
func openDecidingStore(t *testing.T) (*Store, *fakeclock.Clock, string) {
	t.Helper()
	s, clock, ref := openTestStore(t)
	for _, a := range []string{"alice", "bob"} {
		if _, err := s.db.Exec(`INSERT INTO admins (id, name, password_hash, disabled, created_at, modified_at, role)
			VALUES (?, ?, '$argon2id$unused', 0, '', '', 'approver')`, "adm_"+a, a); err != nil {
			t.Fatalf("seed admin %s: %v", a, err)
		}
	}
	return s, clock, ref
}
