package manage

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/postern/postern/internal/testpg"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/recipes"
	"github.com/postern/postern/store"
)

// fakeChecker answers key checks without dialing, and counts them.
type fakeChecker struct {
	result recipes.Result
	calls  int
	last   recipes.Target
}

func (f *fakeChecker) Check(_ context.Context, t recipes.Target, _ ssh.Signer, _ *recipes.Recipe) recipes.Result {
	f.calls++
	f.last = t
	return f.result
}

var alice = policy.Actor{Name: "alice", Via: "test", Role: store.RoleOwner}

// registered makes the named admins in st directly, as fixtures (the
// first an owner, the rest of role), and returns each as an actor of the
// test door.
func registered(t *testing.T, st *store.Store, role store.Role, names ...string) []policy.Actor {
	t.Helper()
	var out []policy.Actor
	for _, n := range names {
		a, err := st.CreateAdmin(context.Background(), store.Unaudited(), n, "$argon2id$x", role)
		if err != nil {
			t.Fatalf("CreateAdmin(%s): %v", n, err)
		}
		out = append(out, policy.Actor{Name: a.Name, AdminID: a.ID, Via: "test", Role: store.RoleOwner})
	}
	return out
}

// approveHeld wants err to be a change waiting for a second admin, has
// second approve it, and returns the request as decided.
func approveHeld(t *testing.T, m *Manager, second policy.Actor, err error) store.ChangeRequest {
	t.Helper()
	var held *HeldError
	if !errors.As(err, &held) {
		t.Fatalf("got %v; want a change that waits for a second admin", err)
	}
	c, err := m.DecideChange(context.Background(), second, held.Request.ID, true, "")
	if err != nil || c.Status != store.ChangeApproved {
		t.Fatalf("DecideChange(%s) by %s = %s, %v; want approved", held.Request.ID, second.Name, c.Status, err)
	}
	return c
}

// testPG is the PostgreSQL server of the test binary, started by the first
// test that runs on it (testpg.ForEachDB's postgres subtests) and stopped
// by TestMain.
var testPG testpg.Shared

func TestMain(m *testing.M) {
	os.Exit(testpg.Main(m, false, &testPG))
}

// newTestManager is a Manager on a new store: SQLite, or PostgreSQL inside
// testpg.ForEachDB's postgres subtest.
func newTestManager(t *testing.T) (*Manager, *store.Store, *fakeChecker) {
	t.Helper()
	mk := make([]byte, store.MasterKeySize)
	for i := range mk {
		mk[i] = byte(i + 1)
	}
	var st *store.Store
	var err error
	if testpg.OnPostgres(t) {
		st, err = store.OpenPostgres(context.Background(), testPG.NewDatabase(t), store.Options{MasterKey: mk})
	} else {
		st, err = store.Open(context.Background(), filepath.Join(t.TempDir(), store.DatabaseFile), store.Options{MasterKey: mk})
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cat, err := recipes.Load()
	if err != nil {
		t.Fatal(err)
	}
	chk := &fakeChecker{result: recipes.Result{Status: recipes.StatusOK, Message: "ran true"}}
	m, err := New(Config{Store: st, Catalog: cat, Checker: chk,
		ScanHostKey: func(context.Context, string) (ssh.PublicKey, error) { return nil, errors.New("no answer") }})
	if err != nil {
		t.Fatal(err)
	}
	return m, st, chk
}

func newKey(t *testing.T) ([]byte, ssh.PublicKey) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	signer, _ := ssh.NewSignerFromKey(priv)
	return pem.EncodeToMemory(block), signer.PublicKey()
}

func hostKeyLine(t *testing.T) string {
	t.Helper()
	_, pub := newKey(t)
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub)))
}

// adminOps lists the audit log's admin rows, and checks the chain.
func adminOps(t *testing.T, st *store.Store) []store.AuditRow {
	t.Helper()
	ctx := context.Background()
	v, err := policy.Verify(ctx, st)
	if err != nil || v.Broken != nil {
		t.Fatalf("audit chain: %v %v", err, v.Broken)
	}
	rows, err := st.ListAudit(ctx, store.AuditFilter{Kind: string(policy.Admin)})
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestAddConnectionRules: what each key check outcome does to an add.
func TestAddConnectionRules(t *testing.T) {
	tests := []struct {
		name     string
		status   recipes.Status
		allow    bool
		generate bool
		stored   bool
	}{
		{"ok", recipes.StatusOK, false, false, true},
		{"rejected", recipes.StatusRejected, false, false, false},
		{"rejected, allowed", recipes.StatusRejected, true, false, true},
		{"unreachable", recipes.StatusUnreachable, false, false, false},
		{"unreachable, allowed", recipes.StatusUnreachable, true, false, true},
		{"unproved", recipes.StatusUnproved, false, false, false},
		{"unproved, allowed", recipes.StatusUnproved, true, false, true},
		{"mismatch", recipes.StatusHostKeyMismatch, false, false, false},
		{"mismatch, allowed", recipes.StatusHostKeyMismatch, true, false, false},
		{"generated, rejected", recipes.StatusRejected, false, true, true},
		{"generated, mismatch", recipes.StatusHostKeyMismatch, true, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, st, chk := newTestManager(t)
			chk.result = recipes.Result{Status: tt.status, Message: "the target's words"}
			spec := ConnectionSpec{Alias: "web", Host: "10.0.0.5", User: "deploy", HostKeys: []string{hostKeyLine(t)},
				GenerateKey: tt.generate}
			if !tt.generate {
				spec.PrivateKey, _ = newKey(t)
			}
			res, err := m.AddConnection(context.Background(), alice, spec, CheckOptions{AllowUnverified: tt.allow})
			var ns *NotStoredError
			if tt.stored != (err == nil) || !tt.stored && !errors.As(err, &ns) {
				t.Fatalf("AddConnection: %v; want stored %v (a NotStoredError otherwise)", err, tt.stored)
			}
			if chk.calls != 1 || chk.last.Name != "web" || chk.last.Addr != "10.0.0.5:22" {
				t.Errorf("checks: %d, last %+v; want one of web at 10.0.0.5:22", chk.calls, chk.last)
			}
			_, lookErr := st.ConnectionByAlias(context.Background(), "web")
			if tt.stored != (lookErr == nil) || res.Stored != tt.stored {
				t.Errorf("stored: %v (lookup %v); want %v", res.Stored, lookErr, tt.stored)
			}
			rows := adminOps(t, st)
			if tt.stored != (len(rows) == 1) {
				t.Fatalf("admin rows %d; want one exactly when stored", len(rows))
			}
			if tt.stored {
				if res.Conn.KeyStatus != KeyStatusOf(tt.status) || res.Conn.KeyMessage != "the target's words" {
					t.Errorf("recorded %s %q; want %s and the message", res.Conn.KeyStatus, res.Conn.KeyMessage, tt.status)
				}
				r := rows[0]
				if r.ConnectionID != res.Conn.ID || r.ConnectionAlias != "web" || r.Deciders[0] != "alice" ||
					r.Decision != "changed" || !strings.HasPrefix(r.Operation, "conn add web: deploy@10.0.0.5:22") ||
					!strings.Contains(r.Reason, "via test") {
					t.Errorf("audit row %+v", r)
				}
				if tt.generate != strings.Contains(r.Operation, "(generated)") || res.Generated != tt.generate {
					t.Errorf("generated %v, operation %q", res.Generated, r.Operation)
				}
			}
		})
	}
}

// TestUpdateConnectionChecks: an edit re-runs the check only when what it
// depends on changes; a refused edit leaves the connection as it was.
func TestUpdateConnectionChecks(t *testing.T) {
	m, st, chk := newTestManager(t)
	ctx := context.Background()
	key, pub := newKey(t)
	if _, err := m.AddConnection(ctx, alice, ConnectionSpec{Alias: "web", Host: "h", User: "u", PrivateKey: key,
		HostKeys: []string{hostKeyLine(t)}}, CheckOptions{}); err != nil {
		t.Fatal(err)
	}
	prod := store.EnvProduction
	res, err := m.UpdateConnection(ctx, alice, "web", ConnectionEdit{Env: &prod}, CheckOptions{})
	if err != nil || res.Checked || chk.calls != 1 || res.Conn.Env != store.EnvProduction {
		t.Fatalf("env only: %+v, %v, %d checks; want stored without a check", res, err, chk.calls)
	}
	chk.result = recipes.Result{Status: recipes.StatusUnreachable, Message: "cannot reach"}
	port := 2200
	res, err = m.UpdateConnection(ctx, alice, "web", ConnectionEdit{Port: &port}, CheckOptions{})
	var ns *NotStoredError
	if !errors.As(err, &ns) || res.Stored || chk.calls != 2 || chk.last.Addr != "h:2200" {
		t.Fatalf("port to a dead one: %v, %d checks at %s; want refused after checking h:2200", err, chk.calls, chk.last.Addr)
	}
	if c, _ := st.ConnectionByAlias(ctx, "web"); c.Port != store.DefaultSSHPort || c.KeyStatus != store.KeyOK {
		t.Errorf("after a refused edit: %+v; want port 22 and ok kept", c)
	}
	chk.result = recipes.Result{Status: recipes.StatusOK}
	newKeyPEM, newPub := newKey(t)
	// Re-keying a production connection waits for a second admin; the
	// key check ran when it was asked.
	res, err = m.UpdateConnection(ctx, alice, "web", ConnectionEdit{PrivateKey: newKeyPEM}, CheckOptions{})
	if res.Stored || !res.Checked || string(res.PreviousPublicKey.Marshal()) != string(pub.Marshal()) ||
		string(res.PublicKey.Marshal()) != string(newPub.Marshal()) {
		t.Fatalf("re-key: %+v, %v", res, err)
	}
	if got, _ := st.ConnectionPublicKey(ctx, res.Conn.ID); string(got.Marshal()) != string(pub.Marshal()) {
		t.Fatal("the re-key of a production connection was made before a second admin approved it")
	}
	approveHeld(t, m, registered(t, st, store.RoleApprover, "bob")[0], err)
	if got, _ := st.ConnectionPublicKey(ctx, res.Conn.ID); string(got.Marshal()) != string(newPub.Marshal()) {
		t.Fatal("the approved re-key was not made")
	}
	if _, err := m.UpdateConnection(ctx, alice, "web", ConnectionEdit{}, CheckOptions{}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("an empty edit: %v; want ErrInvalid (nothing to change)", err)
	}
	var scan *HostKeyScanError
	if _, err := m.UpdateConnection(ctx, alice, "web", ConnectionEdit{AcceptNewHostKey: true}, CheckOptions{}); !errors.As(err, &scan) {
		t.Errorf("accept-new with no answer: %v; want a HostKeyScanError", err)
	}
	ops := adminOps(t, st)
	rekey := "key " + ssh.FingerprintSHA256(pub) + " -> " + ssh.FingerprintSHA256(newPub)
	if len(ops) != 5 || !strings.Contains(ops[1].Operation, "env dev -> production") ||
		ops[2].Decision != "requested" || !strings.Contains(ops[2].Operation, rekey) ||
		ops[3].Decision != "approved" || !strings.Contains(ops[4].Operation, rekey) ||
		strings.Join(ops[4].Deciders, ",") != "alice,bob" {
		t.Errorf("admin rows: %+v; want add, the env change, the re-key asked, approved and made by alice and bob", ops)
	}
}

// TestTokensAndGrantsAudited: a token's value exists only in the answer,
// the store keeps its hash; grants and their removal are audited with the
// rules before and after.
func TestTokensAndGrantsAudited(t *testing.T) {
	m, st, _ := newTestManager(t)
	ctx := context.Background()
	if _, err := m.AddAdmin(ctx, alice, "alice", "$argon2id$x", store.RoleOwner); err != nil {
		t.Fatal(err)
	}
	// An admin token waits for a second admin; its value is the maker's
	// now and opens nothing until then.
	value, _, err := m.AddToken(ctx, alice, TokenMaker{Admin: "alice"}, "ci", "ALICE", store.ScopeAdmin)
	sum := sha256.Sum256([]byte(value))
	if _, err := st.ConsoleTokenByHash(ctx, hex.EncodeToString(sum[:])); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the token before approval: %v; want not found", err)
	}
	approveHeld(t, m, registered(t, st, store.RoleApprover, "bob")[0], err)
	tok, err := st.ConsoleTokenByName(ctx, "ci")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(value, TokenPrefix) || tok.TokenSHA256 != hex.EncodeToString(sum[:]) || tok.Scope != store.ScopeAdmin ||
		tok.AdminName != "alice" {
		t.Errorf("token %+v for value %q", tok, value)
	}
	key, _ := newKey(t)
	if _, err := m.AddConnection(ctx, alice, ConnectionSpec{Alias: "web", Host: "h", User: "u", PrivateKey: key,
		HostKeys: []string{hostKeyLine(t)}}, CheckOptions{}); err != nil {
		t.Fatal(err)
	}
	_, agentPub := newKey(t)
	if _, err := m.AddAgent(ctx, alice, "bot", []string{strings.TrimSpace(string(ssh.MarshalAuthorizedKey(agentPub)))}); err != nil {
		t.Fatal(err)
	}
	ask := store.RuleAsk
	if _, err := m.SetGrant(ctx, alice, "bot", "web", RulesChange{Write: &ask}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.RevokeGrant(ctx, alice, "bot", "web"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.RemoveToken(ctx, alice, "ci"); err != nil {
		t.Fatal(err)
	}
	var ops []string
	for _, r := range adminOps(t, st) {
		if strings.Contains(r.Operation, value) || strings.Contains(r.Reason, value) {
			t.Errorf("audit row %d holds the token", r.Seq)
		}
		ops = append(ops, r.Operation)
	}
	want := []string{"admin add alice", "token add ci: of admin alice, scope admin", "change chg_",
		"token add ci: of admin alice, scope admin (change chg_", "conn add web:", "agent add bot:",
		"grant bot web: read=allow write=ask destructive=deny (new)", "grant revoke bot web: was read=allow write=ask destructive=deny",
		"token remove ci: of admin alice, scope admin"}
	if len(ops) != len(want) {
		t.Fatalf("admin rows %q; want %d", ops, len(want))
	}
	for i := range want {
		if !strings.HasPrefix(ops[i], want[i]) {
			t.Errorf("admin row %d: %q; want it to start %q", i+1, ops[i], want[i])
		}
	}
}

// TestTokenOnlyForItsMaker: a token is made only for the admin who makes
// it, never wider than the token that makes it, and assign does not hand
// one admin's token to another (issue 23).
func TestTokenOnlyForItsMaker(t *testing.T) {
	m, st, _ := newTestManager(t)
	ctx := context.Background()
	registered(t, st, store.RoleOwner, "alice", "bob")
	bob, err := st.ResolveAdmin(ctx, "bob")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		maker     TokenMaker
		admin     string
		scope     store.TokenScope
		wantCode  string // "" for made
		wantOwner string
	}{
		{"for another admin by name", TokenMaker{Admin: "alice"}, "bob", store.ScopeApprove, "token_for_other_admin", ""},
		{"for another admin by id", TokenMaker{Admin: "alice"}, bob.ID, store.ScopeApprove, "token_for_other_admin", ""},
		{"for another admin, another case", TokenMaker{Admin: "alice", Scope: store.ScopeAdmin}, "BOB", store.ScopeRead, "token_for_other_admin", ""},
		{"wider than the making token", TokenMaker{Admin: "alice", Scope: store.ScopeApprove}, "", store.ScopeAdmin, "scope_too_wide", ""},
		// (A read token is made at once; wider ones wait for a second
		// admin: TestDualControl.)
		{"for oneself, named", TokenMaker{Admin: "alice", Scope: store.ScopeAdmin}, "ALICE", store.ScopeRead, "", "alice"},
		{"for oneself, unnamed", TokenMaker{Admin: bob.ID, Scope: store.ScopeApprove}, "", store.ScopeRead, "", "bob"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, tok, err := m.AddToken(ctx, alice, tt.maker, fmt.Sprintf("t%d", i), tt.admin, tt.scope)
			var re *TokenRefusedError
			switch {
			case tt.wantCode == "" && err != nil:
				t.Fatalf("AddToken: %v; want a token of %s", err, tt.wantOwner)
			case tt.wantCode == "" && tok.AdminName != tt.wantOwner:
				t.Errorf("token of %q; want %q", tok.AdminName, tt.wantOwner)
			case tt.wantCode != "" && (!errors.As(err, &re) || re.Code != tt.wantCode):
				t.Errorf("AddToken: %v (token %+v); want a refusal %s", err, tok, tt.wantCode)
			}
		})
	}
	toks, err := st.ListConsoleTokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(toks) != 2 {
		t.Errorf("stored tokens: %d; want the 2 made for their makers", len(toks))
	}
	// Assign: bob's token is not alice's to take, nor alice's to give.
	var re *TokenRefusedError
	if _, err := m.AssignToken(ctx, alice, TokenMaker{Admin: "alice"}, "t5", ""); !errors.As(err, &re) {
		t.Errorf("alice assigning bob's token to herself: %v; want refused", err)
	}
	if _, err := m.AssignToken(ctx, alice, TokenMaker{Admin: "alice"}, "t4", "bob"); !errors.As(err, &re) {
		t.Errorf("alice assigning her token to bob: %v; want refused", err)
	}
	if tok, err := st.ConsoleTokenByName(ctx, "t5"); err != nil || tok.AdminName != "bob" {
		t.Errorf("t5 after the refused assign: %+v, %v; want bob's still", tok, err)
	}
}
