package bastion

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/postern/postern/internal/testwait"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
	"golang.org/x/crypto/ssh"
)

var writeAsk = store.Rules{Read: store.RuleAllow, Write: store.RuleAsk, Destructive: store.RuleDeny}

func TestAskExpires(t *testing.T) {
	t.Parallel()
	// The approval's lifetime is what this test trips: nothing in it has
	// to happen before the request expires.
	h := newHarness(t, harnessOpts{rules: writeAsk, lifetime: time.Second})
	file := filepath.Join(t.TempDir(), "made")
	got := h.ssh("", "127.0.0.1", "web", "touch "+file)
	if got.code != ExitRefused || !strings.Contains(got.stderr, "expired") {
		t.Fatalf("exit %d stderr %q; want %d and expired", got.code, got.stderr, ExitRefused)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("file exists after an expired approval (stat err %v)", err)
	}
	if n := h.auditCount(policy.Expired); n != 1 {
		t.Errorf("expired audit rows = %d; want 1", n)
	}
}

// startSSH starts the real ssh client in the background and returns it.
func (h *harness) startSSH(args ...string) *exec.Cmd {
	h.t.Helper()
	cmd := exec.CommandContext(testwait.Context(h.t), "ssh", append(h.clientOpts("-p"), args...)...)
	if err := cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	return cmd
}

// TestDisconnectedAgentRetriesApproved: the agent gives up waiting, an
// admin approves, and the same command sent again runs without a new ask.
func TestDisconnectedAgentRetriesApproved(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{rules: writeAsk})
	file := filepath.Join(t.TempDir(), "made")
	cmd := h.startSSH("127.0.0.1", "web", "touch "+file)
	id := h.waitPending()
	cmd.Process.Kill()
	cmd.Wait()
	// The bastion has seen the agent go once it audits the wait as asked;
	// approving before that would let the waiting session take the
	// approval.
	if n := h.auditCount(policy.Asked); n != 1 {
		t.Fatalf("asked audit rows after the agent left = %d; want 1", n)
	}
	if _, err := h.eng.Approve(context.Background(), id, h.alice, policy.Scope{}); err != nil {
		t.Fatal(err)
	}
	got := h.ssh("", "127.0.0.1", "web", "touch "+file)
	if got.code != 0 {
		t.Fatalf("retry exit %d stderr %q; want 0", got.code, got.stderr)
	}
	if strings.Contains(got.stderr, "waiting") {
		t.Errorf("retry waited again (stderr %q); want the approved request consumed", got.stderr)
	}
	if _, err := os.Stat(file); err != nil {
		t.Errorf("retried command did not run: %v", err)
	}
	// Single use: a third run asks again.
	third := make(chan sshResult, 1)
	go func() { third <- h.ssh("", "127.0.0.1", "web", "touch "+file) }()
	id2 := h.waitPending()
	if id2 == id {
		t.Errorf("third run reused approval %s; want a new request", id)
	}
	h.eng.Deny(context.Background(), id2, h.alice, "once is enough")
	r := <-third
	if r.code != ExitRefused {
		t.Errorf("third run exit %d; want %d", r.code, ExitRefused)
	}
	// The denial names its admin once (issue 25: "…by admin: not now (by
	// admin)").
	if want := "was denied by alice: once is enough\r\n"; !strings.Contains(r.stderr, want) || strings.Count(r.stderr, "alice") != 1 {
		t.Errorf("third run stderr %q; want %q, alice named once", r.stderr, want)
	}
}

// TestRestartWhilePending: postern restarts while a request waits; after
// the restart an admin approves it and the agent's retry runs.
func TestRestartWhilePending(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{rules: writeAsk})
	file := filepath.Join(t.TempDir(), "made")
	cmd := h.startSSH("127.0.0.1", "web", "touch "+file)
	id := h.waitPending()
	h.stop()
	cmd.Wait() // the restart ends the waiting session
	h.start()
	if _, err := h.eng.Approve(context.Background(), id, h.alice, policy.Scope{}); err != nil {
		t.Fatalf("approve %s after restart: %v", id, err)
	}
	got := h.ssh("", "127.0.0.1", "web", "touch "+file)
	if got.code != 0 {
		t.Fatalf("retry after restart exit %d stderr %q; want 0", got.code, got.stderr)
	}
	if _, err := os.Stat(file); err != nil {
		t.Errorf("command did not run after restart and approval: %v", err)
	}
}

// TestTargetLostMidCommand: the target's session process dies under a
// running command; the agent gets 255 and the reason.
func TestTargetLostMidCommand(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{rules: allowAll})
	got := h.ssh("", "127.0.0.1", "web", "echo started; kill -9 $PPID; sleep 5")
	if got.code != ExitUnreachable {
		t.Fatalf("exit %d stdout %q stderr %q; want %d", got.code, got.stdout, got.stderr, ExitUnreachable)
	}
	if !strings.Contains(got.stderr, "lost") {
		t.Errorf("stderr %q; want the reason the target was lost", got.stderr)
	}
	if row := h.lastAudit("web", 1); row.Decision != string(policy.Failed) {
		t.Errorf("audit row: decision %q; want failed", row.Decision)
	}
	h.waitPoolClients(h.connection("web"), 0) // the session's sshd took the connection with it
}

// TestManySessionsOneConnection: one agent connection carries 32 sessions
// at once, as Ansible's multiplexing needs.
func TestManySessionsOneConnection(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	c := h.client()
	defer c.Close()
	const n = 32
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() {
			s, err := c.NewSession()
			if err != nil {
				errs <- err
				return
			}
			defer s.Close()
			out, err := s.Output("web echo ok")
			if err == nil && string(out) != "ok\n" {
				err = errorf("output %q; want ok", out)
			}
			errs <- err
		}()
	}
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			t.Errorf("session: %v", err)
		}
	}
}

// TestGrantChangesOnOpenConnection: sessions on one agent connection route
// with cached grants, but a revoked grant is refused at once and a new one
// is found without reconnecting.
func TestGrantChangesOnOpenConnection(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	c := h.client()
	defer c.Close()
	run := func(cmd string) (string, error) {
		s, err := c.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		out, err := s.CombinedOutput(cmd)
		return string(out), err
	}
	if out, err := run("web echo one"); err != nil || out != "one\n" {
		t.Fatalf("first run: %q, %v; want one", out, err)
	}
	ctx := context.Background()
	if err := h.st.RevokeGrant(ctx, store.Unaudited(), "agent1", "web"); err != nil {
		t.Fatal(err)
	}
	if out, err := run("web echo two"); err == nil || !strings.Contains(out, "unknown alias") {
		t.Errorf("after revoke: %q, %v; want refused as an unknown alias", out, err)
	}
	if _, err := h.st.SetGrant(ctx, store.Unaudited(), "agent1", "secret", store.DefaultRules()); err != nil {
		t.Fatal(err)
	}
	if out, err := run("secret echo three"); err != nil || out != "three\n" {
		t.Errorf("new grant on the open connection: %q, %v; want three", out, err)
	}
}

// TestRecipeClassifies: a connection made from a recipe classifies by it.
// cisco-ios has no shell: its exact `show version` is read (and reaches the
// target, whose sh has no such command), while `ls`, read for a shell, is
// write there and denied by the default grant.
func TestRecipeClassifies(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{recipe: "cisco-ios"})
	if got := h.ssh("", "127.0.0.1", "web", "show version"); got.code != 127 {
		t.Errorf("show version: exit %d stderr %q; want 127 (allowed as read, not found on this target)", got.code, got.stderr)
	}
	if got := h.ssh("", "127.0.0.1", "web", "ls"); got.code != ExitRefused {
		t.Errorf("ls: exit %d stderr %q; want %d (write on a target without a shell)", got.code, got.stderr, ExitRefused)
	}
}

// TestWaitingSessionDoesNotStallConnection: while one session waits for an
// approval and its agent keeps resizing the terminal, another session on
// the same connection still runs. (On a terminal the command is an
// interactive shell, hence destructive=ask.)
func TestWaitingSessionDoesNotStallConnection(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{rules: destructiveAsk})
	c := h.client()
	defer c.Close()
	waiting, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer waiting.Close()
	if err := waiting.RequestPty("xterm", 24, 80, ssh.TerminalModes{}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "made")
	if err := waiting.Start("web touch " + file); err != nil {
		t.Fatal(err)
	}
	id := h.waitPending()
	for i := 0; i < 100; i++ {
		if err := waiting.WindowChange(24+i%10, 80); err != nil {
			t.Fatalf("window change %d: %v", i, err)
		}
	}
	other, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	out, err := other.Output("web echo still-serving")
	other.Close()
	if err != nil || string(out) != "still-serving\n" {
		t.Fatalf("second session while the first waits: %q, %v; want still-serving", out, err)
	}
	if _, err := h.eng.Approve(context.Background(), id, h.alice, policy.Scope{}); err != nil {
		t.Fatal(err)
	}
	if err := waiting.Wait(); err != nil {
		t.Errorf("approved session: %v", err)
	}
	if _, err := os.Stat(file); err != nil {
		t.Errorf("approved command did not run: %v", err)
	}
}
