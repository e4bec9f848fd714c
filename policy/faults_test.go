package policy

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/postern/postern/internal/e2e"
	"github.com/postern/postern/store"
)

// The fault tests make the database fail the way it fails in production:
// another process holds its write lock, its file system is read-only, its
// disk is full. Each fault is real: a second process (this test binary run
// again as TestFaultChild) holds the lock, or runs the engine inside its own
// mount namespace where the data directory is a read-only bind mount or a
// full tmpfs. postern must then refuse (fail closed), never allow, and say
// why; once the fault clears, the database is intact and the audit chain
// verifies.

// Environment of a TestFaultChild process.
const (
	faultModeEnv  = "POSTERN_FAULT_MODE" // lock, readonly or full
	faultDirEnv   = "POSTERN_FAULT_DIR"  // the data directory
	faultMntEnv   = "POSTERN_FAULT_MNT"  // an empty directory for the tmpfs (full)
	faultAgentEnv = "POSTERN_FAULT_AGENT"
	faultConnEnv  = "POSTERN_FAULT_CONN"
)

// faultSkip is the first word of a child's output when this machine cannot
// make the fault (no mount namespaces, for one).
const faultSkip = "FAULT-SKIP:"

// faultBusyTimeout is the engine's busy timeout in the fault tests: short,
// so that a lock held past it fails quickly. It is configuration, not a
// bound on how fast anything must be.
const faultBusyTimeout = 200 * time.Millisecond

// faultRules allow reads and ask for writes: a read needs no write to be
// decided, an ask writes its request before anything waits.
var faultRules = Rules{Read: Allow, Write: Ask, Destructive: Deny}

// faultSetup makes a data directory with agent "bot" and connection "web"
// (faultRules) and one audit row, and closes its store and engine, so that
// the test can open them its own way.
func faultSetup(t *testing.T) (*testEnv, *store.Connection) {
	t.Helper()
	te := newTestEnv(t, nil, Options{})
	c := te.conn("web", store.EnvDev, faultRules)
	op := te.op(c, Read, "uptime")
	auth, err := te.eng.Authorize(context.Background(), op, nil)
	if err != nil {
		t.Fatalf("Authorize before the fault: %v", err)
	}
	if _, err := te.eng.Audit(context.Background(), auth.Record(op)); err != nil {
		t.Fatalf("Audit before the fault: %v", err)
	}
	te.close()
	return te, c
}

// openFaultEngine opens dir's store with faultBusyTimeout and an engine.
func openFaultEngine(tb testing.TB, dir string) (*store.Store, *Engine) {
	tb.Helper()
	st, err := (store.Dir{Path: dir}).Open(context.Background(), store.Options{BusyTimeout: faultBusyTimeout})
	if err != nil {
		tb.Fatalf("open store: %v", err)
	}
	eng, err := New(Options{Store: st})
	if err != nil {
		st.Close()
		tb.Fatalf("New: %v", err)
	}
	tb.Cleanup(func() {
		eng.Close()
		st.Close()
	})
	return st, eng
}

// faultChild starts this test binary as TestFaultChild in mode. newNS runs
// it in a mount namespace of its own.
func faultChild(t *testing.T, mode, dir string, newNS bool, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestFaultChild$", "-test.short", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), faultModeEnv+"="+mode, faultDirEnv+"="+dir)
	cmd.Env = append(cmd.Env, env...)
	if newNS {
		// Go makes every mount private in the new namespace, so nothing
		// the child mounts is seen outside it.
		cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	}
	return cmd
}

// runFaultChild runs a child to its end and fails the test with its output
// unless it passed; a child that could not make its fault skips the test,
// or fails it with POSTERN_E2E=1, where every fault must be made.
func runFaultChild(t *testing.T, cmd *exec.Cmd) string {
	t.Helper()
	out, err := cmd.CombinedOutput()
	if i := strings.Index(string(out), faultSkip); i >= 0 {
		why := strings.TrimSpace(strings.SplitN(string(out[i+len(faultSkip):]), "\n", 2)[0])
		if e2e.Enabled() {
			t.Fatalf("cannot make the fault here, and POSTERN_E2E=1: %s", why)
		}
		t.Skipf("cannot make the fault here: %s", why)
	}
	if err != nil {
		t.Fatalf("fault child: %v; its output:\n%s", err, out)
	}
	if !strings.Contains(string(out), "--- PASS: TestFaultChild") {
		t.Fatalf("fault child did not pass; its output:\n%s", out)
	}
	return string(out)
}

// checkIntact checks, after a fault, that dir's database passes SQLite's
// integrity check and its audit chain verifies, and returns the rows.
func checkIntact(t *testing.T, dir string) int64 {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(dir, store.DatabaseFile)+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var ok string
	if err := db.QueryRow(`PRAGMA integrity_check`).Scan(&ok); err != nil || ok != "ok" {
		t.Errorf("integrity_check: got %q, %v; want ok", ok, err)
	}
	st, err := (store.Dir{Path: dir}).Open(context.Background(), store.Options{})
	if err != nil {
		t.Fatalf("open after the fault: %v", err)
	}
	defer st.Close()
	res, err := Verify(context.Background(), st)
	if err != nil || res.Broken != nil {
		t.Fatalf("Verify after the fault: got %+v, %v; want an intact chain", res, err)
	}
	return res.Rows
}

// wantRefused checks that Authorize refused op for a database fault: a
// failure, nothing allowed, a reason naming fault and nothing waited on.
func wantRefused(t testing.TB, eng *Engine, op Operation, want string) Authorization {
	t.Helper()
	auth, err := eng.Authorize(context.Background(), op, func(a Approval) {
		t.Errorf("Authorize(%s %q) waited on approval %s; want a refusal before any wait", op.Class, op.Text, a.ID)
	})
	if err == nil || auth.Outcome == Allowed || auth.Outcome == Approved {
		t.Fatalf("Authorize(%s %q) = %s, %v; want refused", op.Class, op.Text, auth.Outcome, err)
	}
	if auth.Outcome != Failed {
		t.Errorf("Authorize(%s %q): got outcome %s; want %s", op.Class, op.Text, auth.Outcome, Failed)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("Authorize(%s %q): got error %q; want it to say %q", op.Class, op.Text, err, want)
	}
	t.Logf("refused %s: %v", op.Class, err)
	return auth
}

// TestFailClosedDatabaseLocked: another process holds the database's write
// lock for longer than the busy timeout. An allowed read is refused (its
// audit row could not be written), an ask is refused (its request cannot be
// stored), both saying the database is locked; once the lock is let go,
// operations run again and the chain verifies.
func TestFailClosedDatabaseLocked(t *testing.T) {
	te, c := faultSetup(t)
	ctx := context.Background()
	_, eng := openFaultEngine(t, te.dir)

	holder := faultChild(t, "lock", te.dir, false)
	stdin, err := holder.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	holder.Stderr = os.Stderr
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	released := false
	release := func() {
		if released {
			return
		}
		released = true
		stdin.Close()
		rest, _ := io.ReadAll(stdout)
		if err := holder.Wait(); err != nil {
			t.Errorf("lock holder: %v\n%s", err, rest)
		}
	}
	t.Cleanup(release)
	lines := bufio.NewScanner(stdout)
	for lines.Scan() && lines.Text() != "LOCKED" {
	}
	if lines.Text() != "LOCKED" {
		t.Fatalf("lock holder ended before taking the lock: %v", lines.Err())
	}

	read := te.op(c, Read, "cat /etc/hostname")
	auth := wantRefused(t, eng, read, store.FaultLocked)
	if auth.Decision.Err == nil || !strings.Contains(auth.Decision.Err.Error(), "database is locked") {
		t.Errorf("Decision.Err = %v; want SQLite's database is locked, for the log", auth.Decision.Err)
	}
	rec := auth.Record(read)
	if rec.Outcome != Failed || !strings.Contains(rec.Reason, store.FaultLocked) {
		t.Errorf("Record: got %s %q; want failed, saying the database is locked", rec.Outcome, rec.Reason)
	}
	if _, err := eng.Audit(ctx, rec); err == nil || !strings.Contains(err.Error(), "database is locked") {
		t.Errorf("Audit while locked: got %v; want an error saying the database is locked", err)
	}
	wantRefused(t, eng, te.op(c, Write, "touch /srv/x"), "database is locked")
	wantRefused(t, eng, read, "locked")

	release()
	auth, err = eng.Authorize(ctx, read, nil)
	if err != nil || auth.Outcome != Allowed {
		t.Fatalf("Authorize after the lock was let go: got %s, %v; want allowed", auth.Outcome, err)
	}
	if _, err := eng.Audit(ctx, auth.Record(read)); err != nil {
		t.Fatalf("Audit after the lock was let go: %v", err)
	}
	if rows := checkIntact(t, te.dir); rows != 2 {
		t.Errorf("audit rows: got %d; want 2 (before the lock, after it)", rows)
	}
}

// TestFailClosedDatabaseReadOnly: postern runs with its data directory on a
// read-only file system (a read-only bind mount in the child's own mount
// namespace; chmod would not stop root). Reads are still decided, but an
// allowed read is refused because its audit row could not be written, an
// ask is refused because its request cannot be stored, and the audit write
// fails saying so. The database is unchanged afterwards.
func TestFailClosedDatabaseReadOnly(t *testing.T) {
	te, c := faultSetup(t)
	// A read-only WAL database can be read only while its -wal and -shm
	// files exist; a connection kept open here keeps them, as a running
	// admin CLI would.
	keep := te.sql()
	if _, err := keep.Exec(`SELECT count(*) FROM audit`); err != nil {
		t.Fatal(err)
	}
	cmd := faultChild(t, "readonly", te.dir, true, faultAgentEnv+"="+te.agent.ID, faultConnEnv+"="+c.ID)
	out := runFaultChild(t, cmd)
	t.Logf("child:\n%s", out)
	keep.Close()
	if rows := checkIntact(t, te.dir); rows != 1 {
		t.Errorf("audit rows: got %d; want 1: nothing could be written", rows)
	}
}

// TestFailClosedDiskFull: postern's data directory is on a file system
// with no space left (a small tmpfs in the child's own mount namespace,
// filled to the last byte, so SQLite's writes fail with ENOSPC as on a real
// full disk). An ask is refused (its request cannot be stored), the audit
// write fails, and from then on allowed reads are refused too, all saying
// the disk is full; when space is freed, the next audit row clears the
// refusal, and the database the child copies back is intact and verifies.
func TestFailClosedDiskFull(t *testing.T) {
	te, c := faultSetup(t)
	mnt := t.TempDir()
	cmd := faultChild(t, "full", te.dir, true, faultMntEnv+"="+mnt, faultAgentEnv+"="+te.agent.ID, faultConnEnv+"="+c.ID)
	out := runFaultChild(t, cmd)
	t.Logf("child:\n%s", out)
	// The child wrote, once the space came back, the refused read and an
	// allowed one.
	if rows := checkIntact(t, te.dir); rows != 1+2 {
		t.Errorf("audit rows: got %d; want 3", rows)
	}
}

// TestFaultChild is the other process of the fault tests; it does nothing
// unless started by one of them.
func TestFaultChild(t *testing.T) {
	mode, dir := os.Getenv(faultModeEnv), os.Getenv(faultDirEnv)
	if mode == "" {
		t.Skip("the fault tests run this as a child process")
	}
	switch mode {
	case "lock":
		holdLock(t, dir)
	case "readonly":
		readOnlyChild(t, dir)
	case "full":
		diskFullChild(t, dir, os.Getenv(faultMntEnv))
	default:
		t.Fatalf("unknown fault mode %q", mode)
	}
}

// holdLock takes the database's write lock (BEGIN IMMEDIATE), says LOCKED
// on stdout, and holds it until stdin ends.
func holdLock(t *testing.T, dir string) {
	db, err := sql.Open("sqlite", filepath.Join(dir, store.DatabaseFile)+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	fmt.Println("LOCKED")
	io.Copy(io.Discard, os.Stdin)
	if _, err := conn.ExecContext(ctx, `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
}

// faultOps are the child's operations: an allowed read and an asked write.
func faultOps() (read, write Operation) {
	agent, conn := os.Getenv(faultAgentEnv), os.Getenv(faultConnEnv)
	read = Operation{AgentID: agent, ConnectionID: conn, Class: Read, Kind: Exec, Text: "cat /etc/hostname"}
	write = Operation{AgentID: agent, ConnectionID: conn, Class: Write, Kind: Exec, Text: "touch /srv/x"}
	return read, write
}

// readOnlyChild bind-mounts dir read-only over itself, then runs the engine
// on it.
func readOnlyChild(t *testing.T, dir string) {
	if err := syscall.Mount(dir, dir, "", syscall.MS_BIND, ""); err != nil {
		fmt.Println(faultSkip, "bind mount:", err)
		t.Skip()
	}
	if err := syscall.Mount("", dir, "", syscall.MS_REMOUNT|syscall.MS_BIND|syscall.MS_RDONLY, ""); err != nil {
		fmt.Println(faultSkip, "remount read-only:", err)
		t.Skip()
	}
	if err := os.WriteFile(filepath.Join(dir, "probe"), nil, 0o600); !errors.Is(err, syscall.EROFS) {
		t.Fatalf("write in the read-only mount: got %v; want EROFS", err)
	}
	ctx := context.Background()
	_, eng := openFaultEngine(t, dir)
	read, write := faultOps()
	if d := eng.Decide(ctx, read); d.Rule != Allow {
		t.Errorf("Decide(read): got %s (%s, %v); want allow: reading still works", d.Rule, d.Reason, d.Err)
	}
	auth := wantRefused(t, eng, read, store.FaultReadOnly)
	if _, err := eng.Audit(ctx, auth.Record(read)); err == nil || !strings.Contains(err.Error(), "readonly") {
		t.Errorf("Audit on a read-only database: got %v; want an error saying it is read-only", err)
	}
	wantRefused(t, eng, write, "readonly")
	wantRefused(t, eng, read, store.FaultReadOnly)
}

// diskFullChild mounts a small tmpfs on mnt, copies the data directory into
// it, fills it, and runs the engine there; then frees the space, checks that
// the engine recovers, and copies the database back over dir's.
func diskFullChild(t *testing.T, dir, mnt string) {
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=8m,mode=0700"); err != nil {
		fmt.Println(faultSkip, "mount tmpfs:", err)
		t.Skip()
	}
	data := filepath.Join(mnt, "data")
	copyDir(t, dir, data)
	ctx := context.Background()
	st, eng := openFaultEngine(t, data)
	read, write := faultOps()

	// Take the last free byte. The WAL has room for a few frames left by
	// the open; writes past it hit ENOSPC.
	filler := filepath.Join(mnt, "filler")
	fill(t, filler)

	auth := wantRefused(t, eng, write, "full")
	if _, err := eng.Audit(ctx, auth.Record(write)); err == nil || !strings.Contains(err.Error(), "full") {
		// A commit small enough to fit the WAL's spare room would succeed:
		// the disk is not full for it. Say so rather than pass.
		t.Fatalf("Audit on a full disk: got %v; want an error saying it is full", err)
	}
	refused := wantRefused(t, eng, read, store.FaultFull)

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	// The refusals are audited once there is room again; the first row
	// written clears the guard.
	if _, err := eng.Audit(ctx, refused.Record(read)); err != nil {
		t.Fatalf("Audit after space was freed: %v", err)
	}
	a, err := eng.Authorize(ctx, read, nil)
	if err != nil || a.Outcome != Allowed {
		t.Fatalf("Authorize(read) after space was freed: got %s, %v; want allowed", a.Outcome, err)
	}
	if _, err := eng.Audit(ctx, a.Record(read)); err != nil {
		t.Fatalf("Audit after space was freed: %v", err)
	}
	eng.Close()
	st.Close()
	b, err := os.ReadFile(filepath.Join(data, store.DatabaseFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		os.Remove(filepath.Join(dir, store.DatabaseFile+suffix))
	}
	if err := os.WriteFile(filepath.Join(dir, store.DatabaseFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// fill writes to path until the file system is full.
func fill(t *testing.T, path string) {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for n := len(buf); n > 0; n /= 2 {
		for {
			if _, err := f.Write(buf[:n]); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("fill: %v", err)
				}
				break
			}
		}
	}
}

// copyDir copies the regular files of src into a new directory dst.
func copyDir(t *testing.T, src, dst string) {
	if err := os.MkdirAll(dst, 0o700); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestApprovalRecheckedAfterWait: an admin approves a waiting request after
// the agent's grant was revoked or its class set to deny meanwhile; the
// operation is refused, because the grant decides before any approval.
func TestApprovalRecheckedAfterWait(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		tests := []struct {
			name    string
			change  func(te *testEnv)
			want    string
			noGrant bool
		}{
			{"class set to deny", func(te *testEnv) {
				if _, err := te.st.SetGrant(context.Background(), store.Unaudited(), "bot", "web", Rules{Read: Allow, Write: Deny, Destructive: Deny}); err != nil {
					t.Fatal(err)
				}
			}, "write operations on web are denied", false},
			{"grant revoked", func(te *testEnv) {
				if err := te.st.RevokeGrant(context.Background(), store.Unaudited(), "bot", "web"); err != nil {
					t.Fatal(err)
				}
			}, "no such connection", true},
			{"still ask", func(te *testEnv) {}, "", false},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				te := newTestEnv(t, nil, Options{})
				c := te.conn("web", store.EnvDev, faultRules)
				op := te.op(c, Write, "systemctl restart app")
				a, done := authorizeAsync(t, context.Background(), te.eng, op)
				tt.change(te)
				if _, err := te.eng.Approve(context.Background(), a.ID, te.admin("alice"), Scope{}); err != nil {
					t.Fatalf("Approve: %v", err)
				}
				r := result(t, done)
				if tt.want == "" {
					if r.err != nil || r.auth.Outcome != Approved {
						t.Fatalf("Authorize: got %s, %v; want approved", r.auth.Outcome, r.err)
					}
					return
				}
				var de *DeniedError
				if !errors.As(r.err, &de) || r.auth.Outcome != Denied {
					t.Fatalf("Authorize: got %s, %v; want denied", r.auth.Outcome, r.err)
				}
				if !strings.Contains(de.Reason, tt.want) || !strings.Contains(de.Reason, "changed while approval") || de.NoGrant != tt.noGrant {
					t.Errorf("got reason %q, NoGrant %v; want one saying %q, NoGrant %v", de.Reason, de.NoGrant, tt.want, tt.noGrant)
				}
				if rec := r.auth.Record(op); rec.Outcome != Denied || rec.ApprovalID != a.ID {
					t.Errorf("Record: got %s for %q; want denied for %s", rec.Outcome, rec.ApprovalID, a.ID)
				}
			})
		}
	})
}
