package web

import (
	"context"
	"path/filepath"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/postern/postern/internal/fakeclock"
	"github.com/postern/postern/internal/testkey"
	"github.com/postern/postern/manage"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/recipes"
	"github.com/postern/postern/store"
)

// testBackend is what the API and page tests serve from: a store with a
// master key, a policy engine and the recipe catalog, on one clock. Cleanup
// closes the engine, then the store.
type testBackend struct {
	st   *store.Store
	eng  *policy.Engine
	cat  *recipes.Catalog
	path string // the database file, for tests that tamper with it
}

func newTestBackend(t testing.TB, clock *fakeclock.Clock) testBackend {
	t.Helper()
	mk := make([]byte, store.MasterKeySize)
	for i := range mk {
		mk[i] = byte(0xA0 + i)
	}
	path := filepath.Join(t.TempDir(), store.DatabaseFile)
	st, err := store.Open(context.Background(), path, store.Options{Now: clock.Now, MasterKey: mk})
	if err != nil {
		t.Fatalf("store.Open: %v", err)
	}
	eng, err := policy.New(policy.Options{Store: st, Now: clock.Now})
	if err != nil {
		st.Close()
		t.Fatalf("policy.New: %v", err)
	}
	t.Cleanup(func() {
		eng.Close()
		st.Close()
	})
	cat, err := recipes.Load()
	if err != nil {
		t.Fatalf("recipes.Load: %v", err)
	}
	return testBackend{st: st, eng: eng, cat: cat, path: path}
}

// newTestKeyPair is a real ed25519 key pair (internal/testkey).
func newTestKeyPair(t testing.TB) testkey.Pair { return testkey.New(t, "") }

// addTestConnection creates a connection with a real ed25519 key and
// returns it with its private key file.
func addTestConnection(t testing.TB, st *store.Store, alias string, env store.Env) (*store.Connection, []byte) {
	t.Helper()
	key, host := newTestKeyPair(t), newTestKeyPair(t)
	c, err := st.CreateConnection(context.Background(), store.Unaudited(), store.NewConnection{
		Alias: alias, Host: "127.0.0.1", Port: 2022, User: "deploy", PrivateKey: key.PrivatePEM,
		HostKeys: []string{"127.0.0.1 " + host.Authorized}, Env: env,
	})
	if err != nil {
		t.Fatalf("CreateConnection(%s): %v", alias, err)
	}
	return c, key.PrivatePEM
}

// fakeChecker answers key checks without dialing: check gets the target
// (its Name is the connection's alias).
type fakeChecker func(t recipes.Target) recipes.Result

func (f fakeChecker) Check(_ context.Context, t recipes.Target, _ ssh.Signer, _ *recipes.Recipe) recipes.Result {
	return f(t)
}

// withChecker is a Config edit whose manager answers key checks with check.
func withChecker(t testing.TB, check fakeChecker) func(*Config) {
	return func(c *Config) {
		m, err := manage.New(manage.Config{Store: c.Store, Catalog: c.Catalog, Checker: check})
		if err != nil {
			t.Fatalf("manage.New: %v", err)
		}
		c.Manager = m
	}
}
