package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/postern/postern/internal/testwait"
)

// TestMigrationsParity: SQLite's and PostgreSQL's migrations are the same
// steps (same numbers and names), and the schemas they make have the same
// tables, columns (type, NOT NULL, primary key, in order), unique
// constraints, indexes and foreign keys. A step added to one database's
// directory and not the other's fails here.
func TestMigrationsParity(t *testing.T) {
	ctx := context.Background()
	lite, err := dialectMigrations(dialectSQLite)
	if err != nil {
		t.Fatal(err)
	}
	pg, err := dialectMigrations(dialectPostgres)
	if err != nil {
		t.Fatal(err)
	}
	var liteNames, pgNames []string
	for _, m := range lite {
		liteNames = append(liteNames, m.name)
	}
	for _, m := range pg {
		pgNames = append(pgNames, m.name)
	}
	if !slices.Equal(liteNames, pgNames) {
		t.Fatalf("migration steps differ:\nsqlite:   %v\npostgres: %v", liteNames, pgNames)
	}

	s, err := Open(ctx, filepath.Join(t.TempDir(), DatabaseFile), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p, err := OpenPostgres(ctx, testPG.NewDatabase(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	got, want := describePostgres(t, p.db), describeSQLite(t, s.db)
	if got != want {
		t.Errorf("schemas differ\n--- sqlite\n%s\n--- postgres\n%s", want, got)
	}
	if !strings.Contains(want, "table audit") || !strings.Contains(want, "fk notify_outbox(approval_id)") {
		t.Fatalf("the description misses what it describes:\n%s", want)
	}
}

// schemaLines sorts and joins a schema description.
func schemaLines(lines []string) string {
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// normType maps a column type to the shared name.
func normType(typ string) string {
	switch strings.ToLower(typ) {
	case "integer", "bigint":
		return "int"
	case "text":
		return "text"
	case "blob", "bytea":
		return "bytes"
	}
	return "?" + typ
}

func queryStrings(t *testing.T, db *sql.DB, q string, args ...any) [][]string {
	t.Helper()
	rows, err := db.Query(q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out [][]string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		row := make([]string, len(cols))
		for i, v := range vals {
			row[i] = v.String
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func describeSQLite(t *testing.T, db *sql.DB) string {
	t.Helper()
	var lines []string
	for _, tb := range queryStrings(t, db, `SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'`) {
		table := tb[0]
		lines = append(lines, "table "+table)
		for _, c := range queryStrings(t, db, `SELECT cid, name, type, "notnull", pk FROM pragma_table_info(?)`, table) {
			lines = append(lines, fmt.Sprintf("column %s.%02s %s %s notnull=%s pk=%v", table, c[0], c[1], normType(c[2]), c[3], c[4] != "0"))
		}
		for _, ix := range queryStrings(t, db, `SELECT name, "unique", origin, partial FROM pragma_index_list(?)`, table) {
			var cols []string
			for _, c := range queryStrings(t, db, `SELECT name FROM pragma_index_info(?) ORDER BY seqno`, ix[0]) {
				cols = append(cols, c[0])
			}
			switch ix[2] {
			case "c":
				lines = append(lines, fmt.Sprintf("index %s on %s(%s) unique=%v partial=%v", ix[0], table, strings.Join(cols, ","), ix[1] == "1", ix[3] == "1"))
			case "u":
				lines = append(lines, fmt.Sprintf("unique %s(%s)", table, strings.Join(cols, ",")))
			}
		}
		for _, fk := range queryStrings(t, db, `SELECT "from", "table", "to", on_delete FROM pragma_foreign_key_list(?)`, table) {
			lines = append(lines, fmt.Sprintf("fk %s(%s) -> %s(%s) on delete %s", table, fk[0], fk[1], fk[2], fk[3]))
		}
	}
	return schemaLines(lines)
}

func describePostgres(t *testing.T, db *sql.DB) string {
	t.Helper()
	var lines []string
	for _, tb := range queryStrings(t, db, `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'`) {
		table := tb[0]
		lines = append(lines, "table "+table)
		pk := map[string]bool{}
		for _, c := range queryStrings(t, db, `SELECT a.attname FROM pg_index i
			JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
			WHERE i.indrelid = ?::regclass AND i.indisprimary`, table) {
			pk[c[0]] = true
		}
		for _, c := range queryStrings(t, db, `SELECT ordinal_position - 1, column_name, data_type, is_nullable FROM information_schema.columns
			WHERE table_schema = 'public' AND table_name = ?`, table) {
			notnull := "0"
			if c[3] == "NO" {
				notnull = "1"
			}
			if table == "audit" && c[1] == "seq" || table == "schema_version" && c[1] == "version" {
				// SQLite's INTEGER PRIMARY KEY is the rowid, which it
				// reports as nullable and never lets be NULL.
				notnull = "0"
			}
			lines = append(lines, fmt.Sprintf("column %s.%02s %s %s notnull=%s pk=%v", table, c[0], c[1], normType(c[2]), notnull, pk[c[1]]))
		}
		for _, ix := range queryStrings(t, db, `SELECT ic.relname, i.indisunique, i.indpred IS NOT NULL,
				COALESCE((SELECT contype FROM pg_constraint WHERE conindid = i.indexrelid), ''),
				(SELECT string_agg(a.attname, ',' ORDER BY k.ord) FROM unnest(i.indkey) WITH ORDINALITY k(attnum, ord)
					JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum)
			FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid
			WHERE i.indrelid = ?::regclass AND NOT i.indisprimary`, table) {
			switch ix[3] {
			case "u":
				lines = append(lines, fmt.Sprintf("unique %s(%s)", table, ix[4]))
			default:
				lines = append(lines, fmt.Sprintf("index %s on %s(%s) unique=%v partial=%v", ix[0], table, ix[4], ix[1] == "true", ix[2] == "true"))
			}
		}
		for _, fk := range queryStrings(t, db, `SELECT a.attname, cf.relname, af.attname,
				CASE c.confdeltype WHEN 'c' THEN 'CASCADE' WHEN 'n' THEN 'SET NULL' WHEN 'r' THEN 'RESTRICT' ELSE 'NO ACTION' END
			FROM pg_constraint c
			JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]
			JOIN pg_class cf ON cf.oid = c.confrelid
			JOIN pg_attribute af ON af.attrelid = c.confrelid AND af.attnum = c.confkey[1]
			WHERE c.conrelid = ?::regclass AND c.contype = 'f'`, table) {
			lines = append(lines, fmt.Sprintf("fk %s(%s) -> %s(%s) on delete %s", table, fk[0], fk[1], fk[2], fk[3]))
		}
	}
	return schemaLines(lines)
}

// TestRebind: ? outside literals, quoted identifiers, dollar-quoted bodies
// and comments becomes $1, $2, ...; everything else is left as it is.
func TestRebind(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"none", `SELECT 1`, `SELECT 1`},
		{"several", `SELECT a FROM t WHERE b = ? AND c IN (?, ?)`, `SELECT a FROM t WHERE b = $1 AND c IN ($2, $3)`},
		{"literal", `SELECT '?', ? FROM t WHERE x = 'it''s ?'`, `SELECT '?', $1 FROM t WHERE x = 'it''s ?'`},
		{"identifier", `SELECT "a?b" FROM t WHERE y = ?`, `SELECT "a?b" FROM t WHERE y = $1`},
		{"line comment", "SELECT ? -- why?\nFROM t WHERE z = ?", "SELECT $1 -- why?\nFROM t WHERE z = $2"},
		{"block comment", `SELECT /* ? */ ?`, `SELECT /* ? */ $1`},
		{"dollar body", `CREATE FUNCTION f() AS $$ SELECT '?' $$; SELECT ?`, `CREATE FUNCTION f() AS $$ SELECT '?' $$; SELECT $1`},
		{"dollar tag", `DO $x$ SELECT ? $x$; SELECT ?`, `DO $x$ SELECT ? $x$; SELECT $1`},
		{"parameter is no tag", `SELECT $1, ?`, `SELECT $1, $1`},
		{"unterminated literal", `SELECT ?, 'abc`, `SELECT $1, 'abc`},
		{"unterminated comment", `SELECT ? /* ?`, `SELECT $1 /* ?`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := rebind(tt.in); got != tt.want {
				t.Errorf("rebind(%q) = %q; want %q", tt.in, got, tt.want)
			}
		})
	}
}

// FuzzRebind: rebind never panics, keeps every byte that is not a ?, and
// leaves a query without ? as it is.
func FuzzRebind(f *testing.F) {
	for _, s := range []string{`SELECT ?`, `'?'`, `$$?$$`, `$a$ ? $a$ ?`, `-- ?` + "\n?", `/* ? */ ?`, `"?" ?`, `$`, `'`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		got := rebind(q)
		if !strings.Contains(q, "?") && got != q {
			t.Fatalf("rebind(%q) = %q; want it unchanged", q, got)
		}
		// Each ? rebind replaced became one $N: as many new $ as ? gone.
		gone := strings.Count(q, "?") - strings.Count(got, "?")
		added := strings.Count(got, "$") - strings.Count(q, "$")
		if gone < 0 || gone != added {
			t.Fatalf("rebind(%q) = %q: %d ? replaced, %d $ added; want equal", q, got, gone, added)
		}
		// Undoing the replacements, in order, gives q back.
		back := got
		for i := gone; i >= 1; i-- {
			p := "$" + strconv.Itoa(i)
			j := strings.LastIndex(back, p)
			if j < 0 {
				t.Fatalf("rebind(%q) = %q: no %s", q, got, p)
			}
			back = back[:j] + "?" + back[j+len(p):]
		}
		if gone > 0 && back != q && !strings.Contains(q, "$") {
			t.Fatalf("rebind(%q) = %q: undone gives %q", q, got, back)
		}
	})
}

// TestPostgresURLs: only postgres URLs are taken, and no message or
// redacted form carries the password.
func TestPostgresURLs(t *testing.T) {
	const pw = "s3cret-pw-in-url"
	for _, tt := range []struct {
		url  string
		want string
	}{
		{"postgres://u:" + pw + "@db.example:5432/postern?sslmode=require", "postgres://u:xxxxx@db.example:5432/postern?sslmode=require"},
		{"postgresql://u@db/postern", "postgresql://u@db/postern"},
		{"postgres://u@db/postern?password=" + pw, "postgres://u@db/postern?password=xxxxx"},
	} {
		if got := RedactURL(tt.url); got != tt.want {
			t.Errorf("RedactURL = %q; want %q", got, tt.want)
		}
	}
	for _, bad := range []string{"mysql://u:" + pw + "@h/db", "/var/lib/postern.db", "postgres://u:" + pw + "@h:notaport/db"} {
		_, err := OpenPostgres(context.Background(), bad, Options{})
		if err == nil {
			t.Errorf("OpenPostgres(%s): got nil error", RedactURL(bad))
			continue
		}
		if strings.Contains(err.Error(), pw) {
			t.Errorf("OpenPostgres error carries the password: %v", err)
		}
	}
	// A server that refuses the connection: the error names the server,
	// never the password.
	_, err := OpenPostgres(context.Background(), "postgres://u:"+pw+"@127.0.0.1:1/db?connect_timeout=2", Options{})
	if err == nil || strings.Contains(err.Error(), pw) || Fault(err) != FaultUnreachable {
		t.Errorf("OpenPostgres of a closed port: got %v (fault %q); want an error without the password, fault %q", err, Fault(err), FaultUnreachable)
	}
}

// TestPostgresNotifications: a change to an approval made through another
// store (another replica) closes Changed and moves DataVersion; while the
// notification connection is down DataVersion moves on every read (the
// poll fallback), and the store listens again by itself once the database
// can be reached. The store under test reaches PostgreSQL through a TCP
// proxy that the test cuts and restores.
func TestPostgresNotifications(t *testing.T) {
	ctx := context.Background()
	url := testPG.NewDatabase(t)
	proxy := startCutProxy(t, testPG.Get(t).Addr())
	a, err := OpenPostgres(ctx, strings.Replace(url, testPG.Get(t).Addr(), proxy.addr(), 1), Options{MasterKey: testMasterKey()})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := OpenPostgres(ctx, url, Options{MasterKey: testMasterKey()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	waitListening(t, a)

	agent, _ := mustCreateAgent(t, b, "bot")
	conn, _ := mustCreateConnection(t, b, "web", EnvDev)
	v1, _ := a.DataVersion(ctx)
	if v2, _ := a.DataVersion(ctx); v2 != v1 {
		t.Errorf("no change to approvals: DataVersion %d then %d; want equal", v1, v2)
	}
	request := func(op string) Approval {
		t.Helper()
		ap, _, err := b.RequestApproval(ctx, Approval{AgentID: agent.ID, ConnectionID: conn.ID, Class: "write", Kind: "exec",
			Operation: op, OperationSHA256: fmt.Sprintf("%064x", sha256Sum(op)), ApprovalsNeeded: 1}, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return ap
	}
	ch := a.Changed()
	ap := request("x")
	waitClosed(t, ch, "a new request made by another store")
	ch = a.Changed()
	v3, _ := a.DataVersion(ctx)
	if v3 == v1 {
		t.Errorf("after a new request: DataVersion still %d", v3)
	}
	admin, err := b.CreateAdmin(ctx, Unaudited(), "alice", "$argon2id$unused", RoleOwner)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.DecideApproval(ctx, Decision{ID: ap.ID, Approve: true, By: Decider{AdminID: admin.ID, Name: admin.Name}}); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, ch, "a decision made by another store")

	// Cut every connection to the database and refuse new ones: the
	// store notices (Changed is closed), and while it cannot listen every
	// read of DataVersion is a new value, so that pollers read.
	ch = a.Changed()
	proxy.cut()
	waitClosed(t, ch, "the notification connection was cut")
	if a.Listening() {
		t.Fatal("Listening after the connection was cut and new ones refused")
	}
	d1, _ := a.DataVersion(ctx)
	if d2, _ := a.DataVersion(ctx); d2 == d1 {
		t.Errorf("notifications down: DataVersion %d then %d; want a new value on every read", d1, d2)
	}
	request("made while a could not listen")
	proxy.restore()
	waitListening(t, a)
	d3, _ := a.DataVersion(ctx)
	if d3 == d1 {
		t.Errorf("listening again: DataVersion still %d; want it moved (what was missed must be read)", d3)
	}
	if got, err := a.ListApprovals(ctx, false); err != nil || len(got) != 1 {
		t.Errorf("pending approvals through the restored store: got %d, %v; want 1", len(got), err)
	}
}

func sha256Sum(s string) [32]byte { return sha256.Sum256([]byte(s)) }

// cutProxy relays TCP connections to a target until cut, which closes
// them all and refuses new ones until restore.
type cutProxy struct {
	ln     net.Listener
	target string
	// mu guards down and conns.
	mu    sync.Mutex
	down  bool
	conns []net.Conn
	wg    sync.WaitGroup
}

func startCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.cut()
		p.wg.Wait()
	})
	return p
}

func (p *cutProxy) addr() string { return p.ln.Addr().String() }

func (p *cutProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() { defer p.wg.Done(); io.Copy(up, c); up.Close() }()
		go func() { defer p.wg.Done(); io.Copy(c, up); c.Close() }()
	}
}

func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *cutProxy) restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

// waitListening waits until s listens for notifications.
func waitListening(t *testing.T, s *Store) {
	t.Helper()
	for !s.Listening() {
		select {
		case <-s.Changed():
		case <-testwait.End(t):
			t.Fatal("the store did not start listening by the test's deadline")
		}
	}
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-testwait.End(t):
		t.Fatalf("Changed was not closed by the test's deadline after %s", what)
	}
}

// TestPostgresWriteLockAcrossStores: a write transaction of one replica
// holds the write lock until it ends; another replica's write waits for it
// and fails with FaultLocked once lock_timeout (the busy timeout) runs out.
func TestPostgresWriteLockAcrossStores(t *testing.T) {
	ctx := context.Background()
	url := testPG.NewDatabase(t)
	s, err := OpenPostgres(ctx, url, Options{BusyTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Hold the lock as another replica's transaction would.
	holder, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, pgLockWrite); err != nil {
		t.Fatal(err)
	}
	_, err = s.CreateAgent(ctx, Unaudited(), "bot", newTestKeyPair(t, "").authorized)
	if Fault(err) != FaultLocked {
		t.Errorf("write while another replica holds the lock: got %v (fault %q); want fault %q", err, Fault(err), FaultLocked)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateAgent(ctx, Unaudited(), "bot", newTestKeyPair(t, "").authorized); err != nil {
		t.Errorf("write after the lock was released: %v", err)
	}
}

// TestPostgresBackupRefused: `postern backup` copies an SQLite database; on
// PostgreSQL it refuses, naming the tools to use, and writes nothing.
func TestPostgresBackupRefused(t *testing.T) {
	ctx := context.Background()
	s, err := OpenPostgres(ctx, testPG.NewDatabase(t), Options{MasterKey: testMasterKey()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	dest := filepath.Join(t.TempDir(), "backup")
	_, err = BackupDir(ctx, s, Dir{Path: t.TempDir()}, dest, BackupOptions{})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "pg_dump") {
		t.Errorf("BackupDir on PostgreSQL: got %v; want an invalid error naming pg_dump", err)
	}
	if _, err := os.Stat(dest); !os.IsNotExist(err) {
		t.Errorf("BackupDir on PostgreSQL left %s: %v", dest, err)
	}
}
