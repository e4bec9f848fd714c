package bastion

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/postern/postern/internal/testsshd"
	"github.com/postern/postern/internal/testwait"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
)

// This file pins what an agent sees, what the audit says and what the pool
// does when the target fails: killed under a running command, down when an
// approved command is about to run, or back with another host key.

// connection returns the stored connection alias.
func (h *harness) connection(alias string) *store.Connection {
	h.t.Helper()
	c, err := h.st.ConnectionByAlias(context.Background(), alias)
	if err != nil {
		h.t.Fatal(err)
	}
	return c
}

// lastAudit waits until the bastion has audited minRows records of alias
// (a row follows the end of the agent's session), then returns the newest
// audit row of alias in the store.
func (h *harness) lastAudit(alias string, minRows int) store.AuditRow {
	h.t.Helper()
	h.events.await(h.t, fmt.Sprintf("%d audit records of %s", minRows, alias), func(audits []policy.Record, _ []policy.Approval) bool {
		n := 0
		for _, r := range audits {
			if r.ConnectionAlias == alias {
				n++
			}
		}
		return n >= minRows
	})
	rows, err := h.st.ListAudit(context.Background(), store.AuditFilter{Connection: alias})
	if err != nil {
		h.t.Fatal(err)
	}
	if len(rows) < minRows {
		h.t.Fatalf("audit rows of %s = %d; want at least %d", alias, len(rows), minRows)
	}
	return rows[len(rows)-1]
}

// waitPoolClients waits until the pool holds want clients for conn. The
// pool announces nothing: this polls.
func (h *harness) waitPoolClients(conn *store.Connection, want int) {
	h.t.Helper()
	testwait.Until(h.t, fmt.Sprintf("%d pool clients for %s", want, conn.Alias), func() bool {
		return h.srv.pool.Stats(conn).Clients == want
	})
}

// bgSSH is a real ssh client running in the background until the test's
// deadline at most, with its stdout readable line by line.
type bgSSH struct {
	cmd    *exec.Cmd
	stdout *bufio.Reader
	stderr bytes.Buffer
	cancel context.CancelFunc
}

// sshBackground starts the real ssh client as the agent.
func (h *harness) sshBackground(args ...string) *bgSSH {
	h.t.Helper()
	ctx, cancel := context.WithCancel(testwait.Context(h.t))
	b := &bgSSH{cancel: cancel}
	b.cmd = exec.CommandContext(ctx, "ssh", append(h.clientOpts("-p"), args...)...)
	out, err := b.cmd.StdoutPipe()
	if err != nil {
		h.t.Fatal(err)
	}
	b.stdout = bufio.NewReader(out)
	b.cmd.Stderr = &b.stderr
	if err := b.cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() {
		cancel()
		_ = b.cmd.Wait()
	})
	return b
}

// wait returns the client's exit status and stderr.
func (b *bgSSH) wait(t testing.TB) (int, string) {
	t.Helper()
	_, _ = b.stdout.WriteTo(io.Discard) // the rest of stdout, so that Wait is not held
	err := b.cmd.Wait()
	b.cancel()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("ssh: %v", err)
	}
	return b.cmd.ProcessState.ExitCode(), b.stderr.String()
}

// TestTargetKilledMidCommand: the target's sshd and its sessions are killed
// (SIGKILL) under a running command. The agent gets 255 and a message, the
// audit row says failed, the pool evicts the dead client; while the target
// is down a command answers 255 "unreachable"; once sshd is back the next
// command dials anew and runs.
func TestTargetKilledMidCommand(t *testing.T) {
	leakCheck(t)
	h := newHarness(t, harnessOpts{rules: allowAll, target: &testsshd.Options{}}) // killed and restarted
	conn := h.connection("web")
	if got := h.ssh("", "127.0.0.1", "web", "echo warm"); got.code != 0 {
		t.Fatalf("warm-up: exit %d stderr %q; want 0", got.code, got.stderr)
	}
	h.waitPoolClients(conn, 1)

	run := h.sshBackground("127.0.0.1", "web", "echo started; sleep 600; echo finished") // killed with the target
	if line, err := run.stdout.ReadString('\n'); err != nil || line != "started\n" {
		t.Fatalf("first line %q, %v; want started", line, err)
	}
	h.target.Kill()
	code, stderr := run.wait(t)
	if code != ExitUnreachable || !strings.Contains(stderr, "lost connection to web") {
		t.Errorf("killed mid-command: exit %d stderr %q; want %d and \"lost connection to web\"", code, stderr, ExitUnreachable)
	}
	row := h.lastAudit("web", 2)
	if row.Decision != string(policy.Failed) || row.ExitStatus == nil || *row.ExitStatus != ExitUnreachable || row.Reason == "" {
		t.Errorf("audit row: decision %q exit %v reason %q; want failed, 255 and a reason", row.Decision, row.ExitStatus, row.Reason)
	}
	h.waitPoolClients(conn, 0)

	got := h.ssh("", "127.0.0.1", "web", "echo down")
	if got.code != ExitUnreachable || !strings.Contains(got.stderr, "web unreachable") {
		t.Errorf("target down: exit %d stderr %q; want %d and \"web unreachable\"", got.code, got.stderr, ExitUnreachable)
	}
	if strings.Count(got.stderr, "unreachable") != 1 {
		t.Errorf("stderr %q says unreachable more than once", got.stderr)
	}
	if row := h.lastAudit("web", 3); row.Decision != string(policy.Failed) {
		t.Errorf("audit row while down: decision %q; want failed", row.Decision)
	}

	h.target.Restart(t)
	if got := h.ssh("", "127.0.0.1", "web", "echo back"); got.code != 0 || got.stdout != "back\n" {
		t.Fatalf("after restart: exit %d stdout %q stderr %q; want 0 and back", got.code, got.stdout, got.stderr)
	}
	h.waitPoolClients(conn, 1)
}

// TestTargetDownWhenApproved: a write waits for an admin; the target dies
// meanwhile; the approval then leads to 255 "unreachable", nothing ran, and
// the audit row says failed and names the approval.
func TestTargetDownWhenApproved(t *testing.T) {
	leakCheck(t)
	h := newHarness(t, harnessOpts{rules: writeAsk, target: &testsshd.Options{}}) // killed
	file := filepath.Join(t.TempDir(), "made")
	run := h.sshBackground("127.0.0.1", "web", "touch "+file)
	id := h.waitPending()
	h.target.Kill()
	if _, err := h.eng.Approve(context.Background(), id, h.alice, policy.Scope{}); err != nil {
		t.Fatal(err)
	}
	code, stderr := run.wait(t)
	if code != ExitUnreachable || !strings.Contains(stderr, "web unreachable") {
		t.Errorf("exit %d stderr %q; want %d and \"web unreachable\"", code, stderr, ExitUnreachable)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("file exists though the target was down (stat err %v)", err)
	}
	row := h.lastAudit("web", 1)
	if row.Decision != string(policy.Failed) || row.ApprovalID != id || row.Reason == "" {
		t.Errorf("audit row: decision %q approval %q reason %q; want failed, %s and a reason", row.Decision, row.ApprovalID, row.Reason, id)
	}
}

// TestTargetHostKeyChanged: the target comes back with another host key
// (rebuilt, or an attacker in the middle) while the pool holds a client to
// the old one. The agent is refused with "host key of web changed", nothing
// runs, and the audit row says failed.
func TestTargetHostKeyChanged(t *testing.T) {
	leakCheck(t)
	h := newHarness(t, harnessOpts{rules: allowAll, target: &testsshd.Options{}}) // re-keyed and restarted
	if got := h.ssh("", "127.0.0.1", "web", "true"); got.code != 0 {
		t.Fatalf("before the change: exit %d stderr %q; want 0", got.code, got.stderr)
	}
	h.target.NewHostKey(t)
	h.target.Restart(t)
	file := filepath.Join(t.TempDir(), "made")
	got := h.ssh("", "127.0.0.1", "web", "touch "+file)
	if got.code != ExitUnreachable || !strings.Contains(got.stderr, "host key of web changed") {
		t.Errorf("exit %d stderr %q; want %d and \"host key of web changed\"", got.code, got.stderr, ExitUnreachable)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("command ran on a target with a changed host key (stat err %v)", err)
	}
	if row := h.lastAudit("web", 2); row.Decision != string(policy.Failed) || !strings.Contains(row.Reason, "host key of web changed") {
		t.Errorf("audit row: decision %q reason %q; want failed and the host key change", row.Decision, row.Reason)
	}
}
