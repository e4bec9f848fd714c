package main

import (
	"context"
	"strings"
	"testing"

	"github.com/postern/postern/internal/testkey"
	"github.com/postern/postern/internal/testpg"
	"github.com/postern/postern/internal/testwait"
	"github.com/postern/postern/model"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
)

// TestMigrateFromSQLite: `postern migrate --from-sqlite DIR --database URL`
// moves an installation with agents, admins, tokens, a connection with its
// sealed key, approvals in every state, an audit log and a journal row left
// by a killed serve; every list shows the same on PostgreSQL, the audit
// chain verifies with the same head, the sealed key still opens, and a
// second migrate into the now full database is refused. The database
// password appears in no output.
func TestMigrateFromSQLite(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	agent := writeKeyFiles(t, "claude", "")
	c.ok("", "agent", "add", "claude", "--key", agent.pub)
	c.ok("", "admin", "add", "alice", "--password-file", writePasswordFile(t, "a long admin password"))
	c.ok("", "token", "add", "ci", "--admin", "alice")
	populateForMigration(t, c.data)

	url := testPG.NewDatabase(t)
	r := runCLI(t, "", "migrate", "--from-sqlite", c.data, "--database", url)
	if r.code != 0 {
		t.Fatalf("migrate: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "audit chain intact on PostgreSQL") {
		t.Errorf("migrate output lacks the chain check:\n%s", r.stdout)
	}
	if strings.Contains(r.stdout+r.stderr, testpg.Password) {
		t.Errorf("migrate output carries the database password:\n%s%s", r.stdout, r.stderr)
	}
	pg := &cli{t: t, data: c.data, database: url}
	for _, args := range [][]string{
		{"agent", "list", "-o", "json"}, {"conn", "list", "-o", "json"}, {"grant", "list", "-o", "json"},
		{"approvals", "list", "--all", "-o", "json"}, {"audit", "-o", "json"}, {"audit", "verify"},
		{"admin", "list"}, {"token", "list"},
	} {
		if got, want := pg.ok("", args...), c.ok("", args...); got != want {
			t.Errorf("postern %s differs after the move:\nPostgreSQL:\n%s\nSQLite:\n%s", strings.Join(args, " "), got, want)
		}
	}
	// The sealed key opens with the same master key.
	st, err := (store.Dir{Path: c.data, DatabaseURL: url}).Open(context.Background(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	conn, err := st.ConnectionByAlias(context.Background(), "web")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.ConnectionSigner(context.Background(), conn.ID); err != nil {
		t.Errorf("the moved connection's key does not open: %v", err)
	}

	// The journal row came along, for the first replica to recover.
	db, err := store.OpenSQL(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var left int
	if err := db.QueryRow(`SELECT COUNT(*) FROM inflight`).Scan(&left); err != nil || left != 1 {
		t.Errorf("journal rows on PostgreSQL: got %d, %v; want 1", left, err)
	}
	// The token alice asked for waits for a second admin, a change
	// request that moves with the rest.
	kinds := map[string]int{}
	for _, a := range pg.approvals(true) {
		kinds[a.Kind]++
	}
	if kinds[model.KindChange] != 1 || len(kinds) != 2 || kinds["exec"]+kinds["sftp"] != 3 {
		t.Errorf("approvals after the move: got %v; want 3 operations (pending, approved, denied) and alice's token waiting", kinds)
	}

	again := runCLI(t, "", "migrate", "--from-sqlite", c.data, "--database", url)
	if again.code == 0 || !strings.Contains(again.stderr, "already holds postern data") {
		t.Errorf("second migrate: exit %d, stderr %q; want a refusal naming the data already there", again.code, again.stderr)
	}
}

// populateForMigration gives the data directory's SQLite database a
// connection, a grant, audit rows, approvals pending, approved and denied,
// and a journal row of an operation that was running when serve died.
func populateForMigration(t *testing.T, dir string) {
	t.Helper()
	ctx := context.Background()
	st, err := (store.Dir{Path: dir}).Open(ctx, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	kp, hk := testkey.New(t, ""), testkey.New(t, "")
	conn, err := st.CreateConnection(ctx, store.Unaudited(), store.NewConnection{Alias: "web", Host: "10.0.0.5", User: "deploy",
		PrivateKey: kp.PrivatePEM, HostKeys: []string{"10.0.0.5 " + hk.Authorized}, Env: store.EnvDev})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.SetGrant(ctx, store.Unaudited(), "claude", "web", policy.Rules{Read: policy.Allow, Write: policy.Ask, Destructive: policy.Ask}); err != nil {
		t.Fatal(err)
	}
	eng, err := policy.New(policy.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	agent, err := st.AgentByName(ctx, "claude")
	if err != nil {
		t.Fatal(err)
	}
	alice, err := st.ResolveAdmin(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	op := func(class policy.Class, text string) policy.Operation {
		return policy.Operation{AgentID: agent.ID, ConnectionID: conn.ID, Class: class, Kind: policy.Exec, Text: text}
	}
	for i := range 5 {
		o := op(policy.Read, "uptime #"+string(rune('0'+i)))
		auth, err := eng.Authorize(ctx, o, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := eng.Audit(ctx, auth.Record(o)); err != nil {
			t.Fatal(err)
		}
	}
	// ask makes a request and stops waiting on it once it is stored.
	ask := func(text string) policy.Approval {
		wctx, cancel := context.WithDeadline(ctx, testwait.Deadline(t))
		defer cancel()
		var asked policy.Approval
		eng.Authorize(wctx, op(policy.Write, text), func(a policy.Approval) { asked = a; cancel() })
		return asked
	}
	ask("systemctl reload nginx") // stays pending
	a := ask("apt-get upgrade -y")
	if _, err := eng.Approve(ctx, a.ID, policy.Decider{AdminID: alice.ID, Name: alice.Name}, policy.Scope{}); err != nil {
		t.Fatal(err)
	}
	d := ask("rm -rf /srv/cache")
	if _, err := eng.Deny(ctx, d.ID, policy.Decider{AdminID: alice.ID, Name: alice.Name}, "not today"); err != nil {
		t.Fatal(err)
	}
	// Running when serve died: its journal row stays.
	if _, err := eng.Authorize(ctx, op(policy.Read, "tail -f /var/log/syslog"), nil); err != nil {
		t.Fatal(err)
	}
}
