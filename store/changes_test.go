package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// testChain is a stand-in for policy.ChainHash: the store only carries the
// function, and what these tests check is which rows get appended.
func testChain(prev []byte, row *AuditRow) []byte {
	h := sha256.New()
	h.Write(prev)
	h.Write([]byte(strconv.FormatInt(row.Seq, 10) + row.Operation))
	return h.Sum(nil)
}

func pendingRow(op string) *PendingAudit {
	return &PendingAudit{Row: AuditRow{Kind: "admin", Decision: "changed", Operation: op, Deciders: []string{"alice"}},
		Chain: testChain}
}

func auditOps(t *testing.T, s *Store) []string {
	t.Helper()
	rows, err := s.ListAudit(context.Background(), AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rows {
		out = append(out, r.Operation)
	}
	return out
}

// TestAudited: a change made with a pending audit row appends the row in
// its own transaction, filled with the new record's id; a refused change
// appends nothing; the row is appended once, by the first write.
func TestAudited(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		s, _, _ := openTestStore(t)
		ctx := context.Background()
		kp := newTestKeyPair(t, "bot")

		p := pendingRow("agent add bot")
		a, err := s.CreateAgent(ctx, Audited(p), "bot", kp.authorized)
		if err != nil {
			t.Fatal(err)
		}
		got := p.Stored()
		if got == nil || got.AgentID != a.ID || got.AgentName != "bot" || got.Seq != 1 {
			t.Fatalf("stored row %+v; want seq 1 with the new agent's id %s", got, a.ID)
		}

		refused := pendingRow("agent add bot again")
		if _, err := s.CreateAgent(ctx, Audited(refused), "bot", newTestKeyPair(t, "x").authorized); !errors.Is(err, ErrDuplicate) {
			t.Fatalf("second bot: %v; want ErrDuplicate", err)
		}
		if refused.Stored() != nil {
			t.Error("a refused change stored its audit row")
		}

		// A change that fails inside its transaction (the last key) rolls the
		// row back with it.
		last := pendingRow("agent key remove")
		if _, err := s.RemoveAgentKey(ctx, Audited(last), "bot", a.Keys[0].Fingerprint); !errors.Is(err, ErrInvalid) {
			t.Fatalf("removing the last key: %v; want ErrInvalid", err)
		}
		once := pendingRow("agent disable bot")
		aud := Audited(once)
		if _, err := s.SetAgentDisabled(ctx, aud, "bot", true); err != nil {
			t.Fatal(err)
		}
		if _, err := s.SetAgentDisabled(ctx, aud, "bot", false); err != nil {
			t.Fatal(err)
		}
		if ops := auditOps(t, s); strings.Join(ops, "|") != "agent add bot|agent disable bot" {
			t.Errorf("audit rows %q; want the add and one disable", ops)
		}
	})
}

// TestAuditedConcurrent: audited changes from many goroutines each get
// their own row, in one gapless sequence.
func TestAuditedConcurrent(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		s, _, _ := openTestStore(t)
		ctx := context.Background()
		const n = 20
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				name := "a" + strconv.Itoa(i)
				_, err := s.CreateAgent(ctx, Audited(pendingRow("agent add "+name)), name, newTestKeyPair(t, name).authorized)
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		rows, err := s.ListAudit(ctx, AuditFilter{})
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range rows {
			if r.Seq != int64(i+1) {
				t.Fatalf("row %d has seq %d; want %d", i, r.Seq, i+1)
			}
		}
		if len(rows) != n {
			t.Errorf("%d rows; want %d", len(rows), n)
		}
	})
}

// TestUpdateConnection: a connection changed in place keeps its id, grants
// and the key it had unless given another; the key check is recorded with
// the change; production is refused while a grant allows destructive.
func TestUpdateConnection(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		s, _, _ := openTestStore(t)
		ctx := context.Background()
		mustCreateAgent(t, s, "bot")
		c, kp := mustCreateConnection(t, s, "web", EnvDev)
		if _, err := s.SetGrant(ctx, Unaudited(), "bot", "web", Rules{Read: RuleAllow, Write: RuleAsk, Destructive: RuleAllow}); err != nil {
			t.Fatal(err)
		}
		host, port, user := "10.0.0.9", 2222, "ops"
		newHost := newTestKeyPair(t, "")
		got, err := s.UpdateConnection(ctx, Unaudited(), "web", ConnectionChange{Host: &host, Port: &port, User: &user,
			HostKeys: []string{newHost.knownHostsLine(host)}, Check: &KeyCheck{Status: KeyRejected, Message: "Permission denied"}})
		if err != nil {
			t.Fatal(err)
		}
		if got.ID != c.ID || got.Addr() != "10.0.0.9:2222" || got.User != "ops" || got.KeyStatus != KeyRejected ||
			got.KeyMessage != "Permission denied" || got.KeyCheckedAt.IsZero() || got.HostKeys[0] != newHost.knownHostsLine(host) {
			t.Errorf("updated: %+v", got)
		}
		pub, err := s.ConnectionPublicKey(ctx, c.ID)
		if err != nil || string(pub.Marshal()) != string(kp.signer.PublicKey().Marshal()) {
			t.Errorf("the key after an update without one: %v; want the old key kept", err)
		}
		prod := EnvProduction
		if _, err := s.UpdateConnection(ctx, Unaudited(), "web", ConnectionChange{Env: &prod}); !errors.Is(err, ErrInvalid) ||
			!strings.Contains(err.Error(), "allow destructive") {
			t.Errorf("to production with destructive=allow granted: %v; want refused", err)
		}
		if _, err := s.SetGrant(ctx, Unaudited(), "bot", "web", Rules{Read: RuleAllow, Write: RuleAsk, Destructive: RuleAsk}); err != nil {
			t.Fatal(err)
		}
		rekey := newTestKeyPair(t, "")
		got, err = s.UpdateConnection(ctx, Unaudited(), "web", ConnectionChange{Env: &prod, PrivateKey: rekey.privatePEM})
		if err != nil || got.Env != EnvProduction || got.KeyStatus != KeyRejected {
			t.Fatalf("to production with a new key: %+v, %v; want production, the status kept", got, err)
		}
		signer, err := s.ConnectionSigner(ctx, c.ID)
		if err != nil || string(signer.PublicKey().Marshal()) != string(rekey.signer.PublicKey().Marshal()) {
			t.Errorf("the key after re-keying: %v; want the new one, sealed for the same id", err)
		}
		if g, err := s.GrantByNames(ctx, "bot", "web"); err != nil || g.ConnectionID != c.ID {
			t.Errorf("grant after the changes: %+v, %v; want kept", g, err)
		}
		for name, ch := range map[string]ConnectionChange{
			"bad host":   {Host: ptr("a b")},
			"bad port":   {Port: ptr(70000)},
			"bad user":   {User: ptr("a@b")},
			"bad env":    {Env: ptr(Env("prod"))},
			"bad pin":    {HostKeys: []string{"nonsense"}},
			"bad key":    {PrivateKey: []byte("nonsense")},
			"bad status": {Check: &KeyCheck{Status: "great"}},
		} {
			if _, err := s.UpdateConnection(ctx, Unaudited(), "web", ch); !errors.Is(err, ErrInvalid) {
				t.Errorf("%s: %v; want ErrInvalid", name, err)
			}
		}
		if _, err := s.UpdateConnection(ctx, Unaudited(), "nowhere", ConnectionChange{Host: &host}); !errors.Is(err, ErrNotFound) {
			t.Errorf("unknown alias: %v; want ErrNotFound", err)
		}
	})
}

func ptr[T any](v T) *T { return &v }

// TestTokenScopes: a token's scope is stored, defaults to approve, and
// each scope allows what the narrower ones do.
func TestTokenScopes(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		s, _, _ := openTestStore(t)
		ctx := context.Background()
		a, err := s.CreateAdmin(ctx, Unaudited(), "alice", "$argon2id$x", RoleOwner)
		if err != nil {
			t.Fatal(err)
		}
		hash := func(c string) string { return strings.Repeat(c, 64) }
		for i, tt := range []struct {
			scope TokenScope
			want  TokenScope
		}{{"", ScopeApprove}, {ScopeRead, ScopeRead}, {ScopeAdmin, ScopeAdmin}} {
			tok, err := s.CreateConsoleToken(ctx, Unaudited(), "t"+strconv.Itoa(i), hash(strconv.Itoa(i)), a.ID, tt.scope)
			if err != nil || tok.Scope != tt.want {
				t.Errorf("token of scope %q: %+v, %v; want scope %s", tt.scope, tok, err, tt.want)
			}
		}
		if _, err := s.CreateConsoleToken(ctx, Unaudited(), "bad", hash("9"), a.ID, "root"); !errors.Is(err, ErrInvalid) {
			t.Errorf("scope root: %v; want ErrInvalid", err)
		}
		allows := map[TokenScope][]TokenScope{ScopeRead: {ScopeRead}, ScopeApprove: {ScopeRead, ScopeApprove},
			ScopeAdmin: {ScopeRead, ScopeApprove, ScopeAdmin}}
		for have, ok := range allows {
			for _, need := range TokenScopes {
				want := false
				for _, x := range ok {
					want = want || x == need
				}
				if got := have.Allows(need); got != want {
					t.Errorf("%s.Allows(%s) = %v; want %v", have, need, got, want)
				}
			}
		}
		if TokenScope("").Allows(ScopeRead) {
			t.Error("an empty scope allows read; want nothing")
		}
	})
}

// TestMigration0008KeepsProvedStatuses: a connection checked ok or rejected
// before check_status existed shows the same after the migration; one never
// checked shows unchecked.
func TestMigration0008KeepsProvedStatuses(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), DatabaseFile)
	db, err := openDB(path, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := migrate(ctx, db, dialectSQLite, 7); err != nil {
		t.Fatal(err)
	}
	for _, x := range []struct{ id, alias, status string }{{"con_a", "a", "ok"}, {"con_b", "b", "rejected"}, {"con_c", "c", "unknown"}} {
		if _, err := db.ExecContext(ctx, `INSERT INTO connections (id, alias, host, port, target_user, sealed_key, host_keys,
			env, key_status, created_at, modified_at) VALUES (?, ?, 'h', 22, 'u', x'00', '', 'dev', ?, '', '')`,
			x.id, x.alias, x.status); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cs, err := s.ListConnections(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]KeyStatus{"a": KeyOK, "b": KeyRejected, "c": KeyUnchecked}
	for _, c := range cs {
		if c.KeyStatus != want[c.Alias] {
			t.Errorf("%s: %s; want %s", c.Alias, c.KeyStatus, want[c.Alias])
		}
	}
}

// TestUpdateNotifyChannel: a channel's format, events, URL and secret
// change in place; a slack channel cannot keep a secret.
func TestUpdateNotifyChannel(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		s, _, _ := openTestStore(t)
		ctx := context.Background()
		ch, err := s.CreateNotifyChannel(ctx, Unaudited(), NewNotifyChannel{Name: "ops", URL: "https://h.example/one", OnPending: true,
			Secret: []byte("s1")})
		if err != nil {
			t.Fatal(err)
		}
		url, secret, on := "https://h.example/two", []byte("s2"), true
		got, err := s.UpdateNotifyChannel(ctx, Unaudited(), "ops", NotifyChannelChange{URL: &url, Secret: &secret, OnDecided: &on})
		if err != nil || !got.OnPending || !got.OnDecided || got.URLShown != "https://h.example/…" || got.ID != ch.ID {
			t.Fatalf("update: %+v, %v", got, err)
		}
		target, err := s.NotifyChannelTarget(ctx, ch.ID)
		if err != nil || target.URL != url || string(target.Secret) != "s2" {
			t.Errorf("sealed after the update: %q %q %v; want the new URL and secret", target.URL, target.Secret, err)
		}
		slack := NotifySlack
		if _, err := s.UpdateNotifyChannel(ctx, Unaudited(), "ops", NotifyChannelChange{Format: &slack}); !errors.Is(err, ErrInvalid) {
			t.Errorf("slack with a secret: %v; want ErrInvalid", err)
		}
		var none []byte
		if got, err = s.UpdateNotifyChannel(ctx, Unaudited(), "ops", NotifyChannelChange{Format: &slack, Secret: &none}); err != nil || got.HasSecret {
			t.Errorf("slack without its secret: %+v, %v", got, err)
		}
	})
}

// TestLock: one lock per data directory; the second is refused naming the
// holder's pid, and the lock is free again once released.
func TestLock(t *testing.T) {
	d := Dir{Path: t.TempDir()}
	l, err := d.Lock()
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.Lock()
	var le *LockedError
	if !errors.As(err, &le) || le.PID != os.Getpid() || !strings.Contains(err.Error(), "process "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("second lock: %v; want a LockedError naming pid %d", err, os.Getpid())
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	l2, err := d.Lock()
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	l2.Unlock()
}

// TestBackupWhileWriting: a backup taken while another connection keeps
// appending audit rows is one consistent snapshot: its rows are a gapless
// prefix of the live log.
func TestBackupWhileWriting(t *testing.T) {
	s, _, _ := openTestStore(t)
	ctx := context.Background()
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if _, err := s.AppendAudit(ctx, AuditRow{Kind: "exec", Operation: "op" + strconv.Itoa(i)}, testChain); err != nil {
				done <- err
				return
			}
		}
	}()
	// Some rows before, some during.
	if _, err := s.AppendAudit(ctx, AuditRow{Kind: "exec", Operation: "first"}, testChain); err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(t.TempDir(), "copy.db")
	err := s.Backup(ctx, dest)
	close(stop)
	if werr := <-done; werr != nil {
		t.Fatal(werr)
	}
	if err != nil {
		t.Fatal(err)
	}
	copyDB, err := sql.Open("sqlite", dest)
	if err != nil {
		t.Fatal(err)
	}
	defer copyDB.Close()
	var n, maxSeq int64
	var check string
	if err := copyDB.QueryRow(`SELECT COUNT(*), COALESCE(MAX(seq), 0) FROM audit`).Scan(&n, &maxSeq); err != nil {
		t.Fatal(err)
	}
	if err := copyDB.QueryRow(`PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
		t.Fatalf("integrity_check of the copy: %q, %v", check, err)
	}
	if n == 0 || n != maxSeq {
		t.Errorf("the copy holds %d rows up to seq %d; want a gapless prefix", n, maxSeq)
	}
	if st, err := os.Stat(dest); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("copy's mode: %v %v; want 0600", st, err)
	}
	if err := s.Backup(ctx, dest); err == nil {
		t.Error("a backup over an existing file succeeded; want refused")
	}
}

// TestZeroAuditRefused: a configuration change given the zero Audit
// (neither a row nor a fixture's) is refused and writes nothing.
func TestZeroAuditRefused(t *testing.T) {
	s, _, _ := openTestStore(t)
	ctx := context.Background()
	if _, err := s.CreateAgent(ctx, Audit{}, "bot", newTestKeyPair(t, "bot").authorized); err == nil {
		t.Fatal("CreateAgent with the zero Audit: no error; want refused")
	}
	if _, err := s.AgentByName(ctx, "bot"); !errors.Is(err, ErrNotFound) {
		t.Errorf("bot after the refused change: %v; want not found", err)
	}
}

// TestUnauditedOnlyInTests: no file but a test's writes configuration
// without an audit row.
func TestUnauditedOnlyInTests(t *testing.T) {
	var found []string
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != "..":
			return filepath.SkipDir
		case d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go"):
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.Contains(string(b), "Unaudited()") && !strings.HasSuffix(path, filepath.Join("store", "auditctx.go")) {
			found = append(found, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) > 0 {
		t.Errorf("files outside tests that call Unaudited: %v; want none", found)
	}
}
