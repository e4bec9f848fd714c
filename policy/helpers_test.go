package policy

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/postern/postern/internal/testkey"
	"github.com/postern/postern/internal/testpg"
	"github.com/postern/postern/internal/testwait"
	"github.com/postern/postern/store"
)

// posternBin is the postern binary built by TestMain for the cross-process
// tests, or "" with buildErr saying why not.
var (
	posternBin string
	buildErr   error
)

// TestMain builds cmd/postern once for the tests that run the admin CLI as a
// separate process, and checks after all tests that no goroutine leaked (the
// engine's watcher must stop on Close). A build failure fails only the tests
// that need the binary.
func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "postern-policy-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if !testing.Short() {
		posternBin = filepath.Join(dir, "postern")
		args := []string{"build", "-o", posternBin}
		if ov := os.Getenv("POSTERN_TEST_OVERLAY"); ov != "" {
			// go build -overlay, to test against a tree that does not
			// build yet while other packages are in progress.
			args = append(args, "-overlay", ov)
		}
		out, err := exec.Command("go", append(args, "github.com/postern/postern/cmd/postern")...).CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build cmd/postern: %v\n%s", err, out)
			posternBin = ""
		}
	}
	code := testpg.Main(m, true, &testPG, &benchPG)
	os.RemoveAll(dir)
	os.Exit(code)
}

// testPG is the PostgreSQL server of this package's tests, started by the
// first test that needs it and stopped by TestMain; its databases are
// copies of a migrated one.
var testPG = testpg.Shared{Template: migratedTemplate}

// migratedTemplate runs the store's migrations on the template database.
func migratedTemplate(ctx context.Context, url string) error {
	s, err := store.OpenPostgres(ctx, url, store.Options{})
	if err != nil {
		return err
	}
	return s.Close()
}

// forEachDB runs fn on SQLite and on PostgreSQL (testpg.ForEachDB): newTestEnv called
// inside uses that database.
func forEachDB(t *testing.T, fn func(t *testing.T)) {
	t.Helper()
	testpg.ForEachDB(t, fn)
}

// onPostgres reports whether t runs in forEachDB's postgres subtest.
func onPostgres(t *testing.T) bool { return testpg.OnPostgres(t) }

// testEnv is a data directory with a store and an engine over it.
type testEnv struct {
	t     *testing.T
	db    string // the PostgreSQL URL inside forEachDB's postgres subtest; "" for SQLite
	dir   string // the data directory (postern.db inside on SQLite)
	now   func() time.Time
	opts  Options
	st    *store.Store
	eng   *Engine
	agent *store.Agent
}

// newTestEnv creates a data directory, one agent "bot", and opens an engine.
// now is the clock for both store and engine (time.Now if nil).
func newTestEnv(t *testing.T, now func() time.Time, opts Options) *testEnv {
	t.Helper()
	dir := t.TempDir()
	if now == nil {
		now = time.Now
	}
	te := &testEnv{t: t, dir: dir, now: now, opts: opts}
	if onPostgres(t) {
		te.db = testPG.NewDatabase(t)
	}
	if _, err := te.storeDir().Init(context.Background(), store.Options{Now: now}); err != nil {
		t.Fatalf("Init: %v", err)
	}
	te.open()
	t.Cleanup(te.close)
	kp := newKeyPair(t)
	a, err := te.st.CreateAgent(context.Background(), store.Unaudited(), "bot", kp.Authorized)
	if err != nil {
		t.Fatalf("CreateAgent: %v", err)
	}
	te.agent = a
	// The admins the tests decide as (admin(name)), registered so that the
	// CLI's --as finds them.
	for _, name := range []string{"alice", "bob", "carol"} {
		if _, err := te.st.CreateAdmin(context.Background(), store.Unaudited(), name, "$argon2id$unused", store.RoleOwner); err != nil {
			t.Fatalf("CreateAdmin(%s): %v", name, err)
		}
	}
	return te
}

// open opens the store and engine; close closes them. Together they are a
// restart of postern.
func (te *testEnv) open() {
	te.t.Helper()
	st, err := te.storeDir().Open(context.Background(), store.Options{Now: te.now})
	if err != nil {
		te.t.Fatalf("Open: %v", err)
	}
	opts := te.opts
	opts.Store, opts.Now = st, te.now
	eng, err := New(opts)
	if err != nil {
		te.t.Fatalf("New: %v", err)
	}
	te.st, te.eng = st, eng
}

func (te *testEnv) close() {
	if te.eng != nil {
		te.eng.Close()
		te.st.Close()
		te.eng, te.st = nil, nil
	}
}

func (te *testEnv) restart() {
	te.close()
	te.open()
}

// conn creates a connection with env and grants "bot" rules on it.
func (te *testEnv) conn(alias string, env store.Env, rules Rules) *store.Connection {
	te.t.Helper()
	ctx := context.Background()
	kp, hk := newKeyPair(te.t), newKeyPair(te.t)
	c, err := te.st.CreateConnection(ctx, store.Unaudited(), store.NewConnection{
		Alias: alias, Host: "10.0.0.1", User: "deploy", PrivateKey: kp.PrivatePEM,
		HostKeys: []string{"10.0.0.1 " + hk.Authorized}, Env: env,
	})
	if err != nil {
		te.t.Fatalf("CreateConnection: %v", err)
	}
	if _, err := te.st.SetGrant(ctx, store.Unaudited(), "bot", alias, rules); err != nil {
		te.t.Fatalf("SetGrant: %v", err)
	}
	return c
}

// op is an operation of "bot" on c.
func (te *testEnv) op(c *store.Connection, class Class, text string) Operation {
	return Operation{AgentID: te.agent.ID, ConnectionID: c.ID, Class: class, Kind: Exec, Text: text}
}

// storeDir is the test's data directory, on its database.
func (te *testEnv) storeDir() store.Dir {
	return store.Dir{Path: te.dir, DatabaseURL: te.db}
}

// dbRef names the test's database: the SQLite file or the PostgreSQL URL.
func (te *testEnv) dbRef() string {
	if te.db != "" {
		return te.db
	}
	return filepath.Join(te.dir, store.DatabaseFile)
}

// sql opens the database directly, for tests that tamper with it.
func (te *testEnv) sql() *sql.DB {
	te.t.Helper()
	db, err := store.OpenSQL(context.Background(), te.dbRef())
	if err != nil {
		te.t.Fatal(err)
	}
	te.t.Cleanup(func() { db.Close() })
	return db
}

func (te *testEnv) exec(query string, args ...any) {
	te.t.Helper()
	if _, err := te.sql().Exec(query, args...); err != nil {
		te.t.Fatalf("%s: %v", query, err)
	}
}

// newKeyPair is a real ed25519 key pair (internal/testkey).
func newKeyPair(t testing.TB) testkey.Pair { return testkey.New(t, "") }

// waitResult is what a background Authorize returned.
type waitResult struct {
	auth Authorization
	err  error
}

// authorizeAsync runs Authorize in a goroutine and returns the approval
// request once it is stored, and a channel for the result.
func authorizeAsync(t *testing.T, ctx context.Context, e *Engine, op Operation) (Approval, <-chan waitResult) {
	t.Helper()
	asked := make(chan Approval, 1)
	done := make(chan waitResult, 1)
	go func() {
		auth, err := e.Authorize(ctx, op, func(a Approval) { asked <- a })
		done <- waitResult{auth, err}
	}()
	select {
	case a := <-asked:
		return a, done
	case r := <-done:
		t.Fatalf("Authorize returned before asking: outcome %s, err %v", r.auth.Outcome, r.err)
	case <-testwait.End(t):
		t.Fatal("Authorize did not ask by the test's deadline")
	}
	return Approval{}, nil
}

// result waits (bounded) for a background Authorize.
func result(t *testing.T, done <-chan waitResult) waitResult {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-testwait.End(t):
		t.Fatal("Authorize did not return by the test's deadline")
	}
	return waitResult{}
}

// admin is the identity of a registered admin (alice or bob), as the CLI's
// --as resolves it, for deciding in this process.
func (te *testEnv) admin(name string) Decider {
	te.t.Helper()
	a, err := te.st.ResolveAdmin(context.Background(), name)
	if err != nil {
		te.t.Fatalf("admin %s: %v", name, err)
	}
	return Decider{AdminID: a.ID, Name: a.Name}
}

// waitListening waits until st hears of changes made by other connections
// (PostgreSQL's notifications), so that a test that counts what the
// watcher reads starts from a quiet store. On SQLite it returns at once.
func waitListening(t *testing.T, st *store.Store) {
	t.Helper()
	if !st.Postgres() {
		return
	}
	for !st.Listening() {
		select {
		case <-st.Changed():
		case <-testwait.End(t):
			t.Fatal("the store did not start listening by the test's deadline")
		}
	}
}
