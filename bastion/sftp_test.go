package bastion

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pkg/sftp"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
)

// sftpBatch runs the real OpenSSH sftp client with a batch file against the
// bastion as user (an alias for the target's own tree, anything else for
// the virtual root).
func (h *harness) sftpBatch(user, batch string) sshResult {
	h.t.Helper()
	requireTool(h.t, "sftp", "openssh-client")
	bf := filepath.Join(h.t.TempDir(), "batch")
	if err := os.WriteFile(bf, []byte(batch), 0o600); err != nil {
		h.t.Fatal(err)
	}
	return h.runClient("", "sftp", append(h.clientOpts("-P"), "-b", bf, user+"@127.0.0.1")...)
}

func (h *harness) scp(args ...string) sshResult {
	h.t.Helper()
	return h.runClient("", "scp", append(h.clientOpts("-P"), args...)...)
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var readWrite = store.Rules{Read: store.RuleAllow, Write: store.RuleAllow, Destructive: store.RuleDeny}

// TestSFTPVirtualRoot: `sftp bastion` lists the agent's aliases, reads
// through /ALIAS/PATH, and cannot write into the virtual root.
func TestSFTPVirtualRoot(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{rules: readWrite})
	remote := t.TempDir()
	writeFile(t, filepath.Join(remote, "r.txt"), "remote\n")
	local := t.TempDir()
	got := h.sftpBatch("agent", strings.Join([]string{
		"ls /",
		"get /web" + remote + "/r.txt " + local + "/r.txt",
		"put " + filepath.Join(remote, "r.txt") + " /web" + remote + "/up.txt",
		"-mkdir /newdir",
		"-put " + filepath.Join(remote, "r.txt") + " /x.txt",
		"-ls /web/../secret",
	}, "\n"))
	if got.code != 0 {
		t.Fatalf("sftp exit %d stdout %q stderr %q; want 0", got.code, got.stdout, got.stderr)
	}
	if !strings.Contains(got.stdout, "web") || strings.Contains(got.stdout, "secret/") {
		t.Errorf("ls / = %q; want web listed and no alias without a grant", got.stdout)
	}
	if s := readFile(t, filepath.Join(local, "r.txt")); s != "remote\n" {
		t.Errorf("downloaded %q; want remote", s)
	}
	if s := readFile(t, filepath.Join(remote, "up.txt")); s != "remote\n" {
		t.Errorf("uploaded %q; want remote", s)
	}
	if strings.Count(got.stderr, "denied")+strings.Count(got.stderr, "ermission") < 2 {
		t.Errorf("stderr %q; want mkdir and put in the virtual root refused", got.stderr)
	}
	if n := h.auditRows(policy.Allowed); n < 2 {
		t.Errorf("allowed audit rows = %d; want the sftp operations audited", n)
	}
}

// TestSFTPDenyLeavesTarget: under the default read-only grant, writes and
// removals are refused and nothing on the target changes.
func TestSFTPDenyLeavesTarget(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	remote := t.TempDir()
	writeFile(t, filepath.Join(remote, "keep.txt"), "keep\n")
	got := h.sftpBatch("web", strings.Join([]string{
		"-rm " + remote + "/keep.txt",
		"-mkdir " + remote + "/d",
		"-rename " + remote + "/keep.txt " + remote + "/moved.txt",
		"-put /etc/hostname " + remote + "/new.txt",
		"ls " + remote,
	}, "\n"))
	if got.code != 0 {
		t.Fatalf("sftp exit %d stderr %q; want 0 (refusals are prefixed with -)", got.code, got.stderr)
	}
	if s := readFile(t, filepath.Join(remote, "keep.txt")); s != "keep\n" {
		t.Errorf("keep.txt = %q after denied operations", s)
	}
	for _, p := range []string{"d", "moved.txt", "new.txt"} {
		if _, err := os.Stat(filepath.Join(remote, p)); !os.IsNotExist(err) {
			t.Errorf("%s exists after a denied operation (stat err %v)", p, err)
		}
	}
	if !strings.Contains(got.stderr, "denied") {
		t.Errorf("stderr %q; want the denial reason", got.stderr)
	}
	if n := h.auditRows(policy.Denied); n < 4 {
		t.Errorf("denied audit rows = %d; want 4", n)
	}
}

// TestSFTPAskApprove: a write waits for an admin, then runs.
func TestSFTPAskApprove(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{rules: writeAsk})
	remote := t.TempDir()
	done := make(chan sshResult, 1)
	go func() { done <- h.sftpBatch("web", "mkdir "+remote+"/made\n") }()
	id := h.waitPending()
	if _, err := h.eng.Approve(context.Background(), id, h.alice, policy.Scope{}); err != nil {
		t.Fatal(err)
	}
	if got := <-done; got.code != 0 {
		t.Fatalf("sftp exit %d stderr %q; want 0", got.code, got.stderr)
	}
	if fi, err := os.Stat(filepath.Join(remote, "made")); err != nil || !fi.IsDir() {
		t.Errorf("approved mkdir did not happen: %v", err)
	}
}

// TestSCPThroughBastion: OpenSSH scp (SFTP mode, the default) in the
// alias's own view, with -r and -p, and into the home directory.
func TestSCPThroughBastion(t *testing.T) {
	t.Parallel()
	requireTool(t, "scp", "openssh-client")
	h := newHarness(t, harnessOpts{rules: readWrite})
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "a.txt"), "alpha\n")
	os.Mkdir(filepath.Join(src, "sub"), 0o755)
	writeFile(t, filepath.Join(src, "sub", "b.txt"), "beta\n")
	os.Chmod(filepath.Join(src, "a.txt"), 0o600)
	dst := t.TempDir()
	if r := h.scp("-r", "-p", src+"/.", "web@127.0.0.1:"+dst+"/"); r.code != 0 {
		t.Fatalf("scp -r -p upload: exit %d stderr %q", r.code, r.stderr)
	}
	if s := readFile(t, filepath.Join(dst, "sub", "b.txt")); s != "beta\n" {
		t.Errorf("sub/b.txt = %q; want beta", s)
	}
	if fi, err := os.Stat(filepath.Join(dst, "a.txt")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("a.txt mode = %v, %v; want 0600 kept by -p", fi, err)
	}
	back := t.TempDir()
	if r := h.scp("web@127.0.0.1:"+dst+"/a.txt", back+"/"); r.code != 0 || readFile(t, filepath.Join(back, "a.txt")) != "alpha\n" {
		t.Errorf("scp download: exit %d stderr %q", r.code, r.stderr)
	}
	// `scp f ALIAS@bastion:` lands in the target user's home.
	name := "postern-scp-home-test-" + filepath.Base(dst)
	home, _ := os.UserHomeDir()
	t.Cleanup(func() { os.Remove(filepath.Join(home, name)) })
	writeFile(t, filepath.Join(src, name), "home\n")
	if r := h.scp(filepath.Join(src, name), "web@127.0.0.1:"); r.code != 0 {
		t.Fatalf("scp to home: exit %d stderr %q", r.code, r.stderr)
	}
	if s := readFile(t, filepath.Join(home, name)); s != "home\n" {
		t.Errorf("%s in home = %q; want home", name, s)
	}
}

// TestSFTPResume: reget and reput continue partial transfers.
func TestSFTPResume(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{rules: readWrite})
	remote, local := t.TempDir(), t.TempDir()
	full := strings.Repeat("0123456789", 10000)
	writeFile(t, filepath.Join(remote, "big"), full)
	writeFile(t, filepath.Join(local, "big"), full[:30000])
	writeFile(t, filepath.Join(local, "up"), full)
	writeFile(t, filepath.Join(remote, "up"), full[:40000])
	got := h.sftpBatch("web", "reget "+remote+"/big "+local+"/big\nreput "+local+"/up "+remote+"/up\n")
	if got.code != 0 {
		t.Fatalf("sftp exit %d stderr %q", got.code, got.stderr)
	}
	if readFile(t, filepath.Join(local, "big")) != full || readFile(t, filepath.Join(remote, "up")) != full {
		t.Error("resumed files differ from the originals")
	}
}

// TestSFTPHostilePaths: .. never leaves an alias, long paths are refused
// cleanly, and the session survives them.
func TestSFTPHostilePaths(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{rules: readWrite})
	got := h.sftpBatch("agent", strings.Join([]string{
		"-ls /web/../../../secret",
		"-get /secret/etc/hostname /dev/null",
		"ls /",
	}, "\n"))
	if got.code != 0 {
		t.Fatalf("sftp exit %d stderr %q; want 0", got.code, got.stderr)
	}
	// OpenSSH's sftp cannot send a NUL or a 5,000-byte path; pkg/sftp can.
	c := h.client()
	defer c.Close()
	sc, err := sftp.NewClient(c)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	for _, p := range []string{"/web/a\x00b", "/web/" + strings.Repeat("a", 5000), "/web/\x1b[31m"} {
		if _, err := sc.Stat(p); err == nil {
			t.Errorf("stat %q succeeded; want it refused", p[:min(len(p), 20)])
		}
	}
	if fi, err := sc.Stat("/web"); err != nil || !fi.IsDir() {
		t.Errorf("stat /web after hostile paths: %v, %v; want the session still serving", fi, err)
	}
	if n := h.auditRowsFor("secret"); n != 0 {
		t.Errorf("%d audit rows reached alias secret; want none", n)
	}
}

// TestSFTPLargeTransfer: 64 MiB up and down through postern, checksums
// equal. That is 32 times the SSH channel window of either leg (2 MiB) and
// of what OpenSSH's sftp keeps in flight (64 requests of 32 KiB), so every
// window and request queue on the way fills and drains many times over. It
// was 256 MiB, which found nothing more and cost about 10 s of CPU, more than
// any other test of the package but pkg/sftp's suite.
func TestSFTPLargeTransfer(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("64 MiB transfer skipped in -short mode")
	}
	h := newHarness(t, harnessOpts{rules: readWrite})
	local, remote := t.TempDir(), t.TempDir()
	src := filepath.Join(local, "big")
	f, err := os.Create(src)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.New()
	if _, err := io.CopyN(io.MultiWriter(f, sum), rand.Reader, 64<<20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	want := sum.Sum(nil)
	got := h.sftpBatch("web", "put "+src+" "+remote+"/big\nget "+remote+"/big "+local+"/back\n")
	if got.code != 0 {
		t.Fatalf("sftp exit %d stderr %q", got.code, got.stderr)
	}
	for _, p := range []string{filepath.Join(remote, "big"), filepath.Join(local, "back")} {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		s := sha256.New()
		io.Copy(s, f)
		f.Close()
		if !bytes.Equal(s.Sum(nil), want) {
			t.Errorf("%s: sha256 differs from the source", p)
		}
	}
}

// auditOps returns the SFTP audit rows' operations, with each row's
// decision and exit status (the target's status code; - if none).
func (h *harness) auditOps() []string {
	h.t.Helper()
	rows, err := h.st.ListAudit(context.Background(), store.AuditFilter{})
	if err != nil {
		h.t.Fatal(err)
	}
	var ops []string
	for _, r := range rows {
		if r.Kind != string(policy.SFTP) {
			continue
		}
		status := "-"
		if r.ExitStatus != nil {
			status = strconv.Itoa(*r.ExitStatus)
		}
		line := fmt.Sprintf("%s %s status %s", r.Decision, r.Operation, status)
		if r.Reason != "" {
			line += " (" + r.Reason + ")"
		}
		ops = append(ops, line)
	}
	return ops
}

// TestSFTPAuditOutcomes: each allowed SFTP operation's audit row carries
// the target's answer: status 0 for success, the target's code and message
// otherwise; and what was set (flags, modes, sizes) is in the operation.
func TestSFTPAuditOutcomes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{rules: allowAll})
	remote, local := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(local, "f"), "0123456789")
	os.Chmod(filepath.Join(local, "f"), 0o600)
	got := h.sftpBatch("web", strings.Join([]string{
		"put " + local + "/f " + remote + "/f",
		"-mkdir " + remote + "/f",
		"-get " + remote + "/missing " + local + "/missing",
		"rename " + remote + "/f " + remote + "/g",
	}, "\n"))
	if got.code != 0 {
		t.Fatalf("sftp exit %d stderr %q", got.code, got.stderr)
	}
	ops := h.auditOps()
	for _, want := range []string{
		`allowed sftp put "` + remote + `/f" (write,create,truncate, mode 0600) status 0`,
		`allowed sftp mkdir "` + remote + `/f" (mode 0777) status 4 (Failure)`,
		`allowed sftp lstat "` + remote + `/missing" status 2 (No such file)`,
		`allowed sftp posix-rename "` + remote + `/f" "` + remote + `/g" status 0`,
	} {
		if !slices.Contains(ops, want) {
			t.Errorf("no audit row %q among:\n  %s", want, strings.Join(ops, "\n  "))
		}
	}
	for _, op := range ops {
		if strings.HasPrefix(op, "allowed") && strings.Contains(op, "status -") {
			t.Errorf("audit row %q: allowed with no outcome", op)
		}
	}
}

// TestSFTPApprovalText: what waits for an admin says what matters; here
// that a rename replaces an existing file, and its size.
func TestSFTPApprovalText(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{rules: writeAsk})
	remote := t.TempDir()
	writeFile(t, filepath.Join(remote, "new"), "new")
	writeFile(t, filepath.Join(remote, "old"), "twelve bytes")
	done := make(chan sshResult, 1)
	go func() { done <- h.sftpBatch("web", "rename "+remote+"/new "+remote+"/old\n") }()
	id := h.waitPending()
	list, err := h.eng.Approvals(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	want := `sftp posix-rename "` + remote + `/new" "` + remote + `/old" (replaces a file of 12 bytes)`
	if len(list) != 1 || list[0].Operation != want {
		t.Errorf("approvals: got %+v; want one for %q", list, want)
	}
	if _, err := h.eng.Approve(context.Background(), id, h.alice, policy.Scope{}); err != nil {
		t.Fatal(err)
	}
	if got := <-done; got.code != 0 || !strings.Contains(got.stderr, "replaces a file of 12 bytes") {
		t.Errorf("sftp exit %d stderr %q; want 0 and the waiting line with the approval text", got.code, got.stderr)
	}
	if s := readFile(t, filepath.Join(remote, "old")); s != "new" {
		t.Errorf("old = %q after the approved rename; want new", s)
	}
}

// TestSCPAsksOnce: `scp -p` in SFTP mode writes over the destination in
// place, truncates it where its writes end, and sets its mode and times;
// all of that is the approved write, so the agent waits for one approval,
// not two, and a longer file it replaces is cut exactly (destructive is
// denied here: a truncation decided on its own would be refused, and
// OpenSSH's scp ignores that refusal).
func TestSCPAsksOnce(t *testing.T) {
	t.Parallel()
	requireTool(t, "scp", "openssh-client")
	h := newHarness(t, harnessOpts{rules: writeAsk})
	src, dst := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(dst, "f"), "an older and much longer file")
	writeFile(t, filepath.Join(src, "f"), "payload")
	os.Chmod(filepath.Join(src, "f"), 0o640)
	mtime := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	os.Chtimes(filepath.Join(src, "f"), mtime, mtime)
	done := make(chan sshResult, 1)
	var finished atomic.Bool
	go func() {
		done <- h.scp("-p", filepath.Join(src, "f"), "web@127.0.0.1:"+dst+"/f")
		finished.Store(true)
		h.events.poke()
	}()
	id := h.waitPending()
	if _, err := h.eng.Approve(context.Background(), id, h.alice, policy.Scope{}); err != nil {
		t.Fatal(err)
	}
	// A second ask would hold scp until the test's deadline: the wait ends
	// at the ask's event too, and says so.
	h.events.await(t, "scp to end or to ask again", func(_ []policy.Record, waits []policy.Approval) bool {
		return finished.Load() || len(waits) > h.events.taken
	})
	select {
	case got := <-done:
		if got.code != 0 {
			t.Fatalf("scp exit %d stderr %q; want 0", got.code, got.stderr)
		}
	default:
		list, _ := h.eng.Approvals(context.Background(), false)
		t.Fatalf("scp asked again after the approval; pending: %+v", list)
	}
	fi, err := os.Stat(filepath.Join(dst, "f"))
	if err != nil || fi.Mode().Perm() != 0o640 || !fi.ModTime().Equal(mtime) {
		t.Errorf("copied file: %v, %v; want mode 0640 and mtime %v kept", fi, err, mtime)
	}
	if s := readFile(t, filepath.Join(dst, "f")); s != "payload" {
		t.Errorf("copied file holds %q; want payload", s)
	}
	if n := h.auditRows(policy.Approved); n != 1 {
		t.Errorf("approved audit rows = %d; want 1", n)
	}
}

// TestSFTPRefusalLines: each refusal reaches the agent's stderr as one
// line naming the operation and the reason, once, with no prefix doubled.
func TestSFTPRefusalLines(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	remote := t.TempDir()
	writeFile(t, filepath.Join(remote, "keep"), "keep")
	got := h.sftpBatch("web", "-rm "+remote+"/keep\n-mkdir "+remote+"/d\n")
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(got.stderr), "\n") {
		if strings.HasPrefix(l, "postern: ") {
			lines = append(lines, strings.TrimRight(l, "\r"))
		}
	}
	want := []string{
		`postern: denied: destructive sftp remove "` + remote + `/keep": `,
		`postern: denied: write sftp mkdir "` + remote + `/d" (mode 0777): `,
	}
	if len(lines) != len(want) {
		t.Fatalf("refusal lines %q; want %d", lines, len(want))
	}
	for i, l := range lines {
		if !strings.HasPrefix(l, want[i]) || strings.Count(l, "postern:") != 1 || strings.Contains(l, "sftpgate: sftpgate") {
			t.Errorf("line %q; want it to start %q, with one prefix", l, want[i])
		}
	}
}
