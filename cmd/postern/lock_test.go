package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/postern/postern/model"
)

// TestLockCLI (issue 24), through postern serve, a real sshd and OpenSSH:
// `postern lock agent bot` ends bot's running `sleep 600` (exit 255, as when
// the connection to the bastion is closed, with the lock's words), lists
// the lock, refuses bot's next command naming the lock (126); `unlock`
// lets it run again, as for `lock conn`; `agent disable` ends a running sleep too. A viewer
// and an approver may not lock (exit 2), and the admin's lock is audited
// with its reason.
func TestLockCLI(t *testing.T) {
	r := newRig(t, rigConfig{admins: []string{"olga"}})
	c := r.cli
	pw := writePasswordFile(t, r.password)
	c.ok("", "admin", "add", "vic", "--role", "viewer", "--password-file", pw, "--as", "olga")
	c.ok("", "admin", "add", "pat", "--role", "approver", "--password-file", pw, "--as", "olga")
	c.approveChanges() // a new approver waits for a second admin
	r.serve()

	for _, who := range []string{"vic", "pat"} {
		if res := c.run("", "lock", "agent", "bot", "--as", who); res.code != 2 || !strings.Contains(res.stderr, "that takes the admin role") {
			t.Errorf("lock --as %s: exit %d, stderr %q; want 2, refused for the role", who, res.code, res.stderr)
		}
	}

	run := r.ssh("target", "echo started >&2; sleep 600; echo never")
	run.waitStderr(t, "started")
	out := c.ok("", "lock", "agent", "bot", "--for", "1h", "--reason", "incident 11")
	if !strings.Contains(out, "locked: agent bot is locked until") || !strings.Contains(out, ": incident 11") {
		t.Errorf("lock printed %q; want the lock", out)
	}
	run.wait(t)
	if run.code != 255 || !strings.Contains(run.stderr, "agent bot is locked until") {
		t.Errorf("the running command: exit %d, stderr %q; want 255 with the lock's words", run.code, run.stderr)
	}
	var locks []model.Lock
	if err := json.Unmarshal([]byte(c.ok("", "lock", "list", "-o", "json")), &locks); err != nil {
		t.Fatal(err)
	}
	if len(locks) != 1 || locks[0].Kind != "agent" || locks[0].Name != "bot" || locks[0].Reason != "incident 11" || locks[0].ExpiresAt.IsZero() {
		t.Errorf("lock list = %+v; want bot's lock with its end", locks)
	}
	refused := r.ssh("target", "echo hello")
	refused.wait(t)
	if refused.code != 126 || !strings.Contains(refused.stderr, "agent bot is locked until") {
		t.Errorf("while locked: exit %d, stderr %q; want 126 naming the lock", refused.code, refused.stderr)
	}
	c.ok("", "unlock", "agent", "bot")
	if out := c.ok("", "lock", "list"); !strings.Contains(out, "no locks") {
		t.Errorf("lock list after unlock: %q; want none", out)
	}
	again := r.ssh("target", "echo hello")
	again.wait(t)
	if again.code != 0 || again.stdout != "hello\n" {
		t.Errorf("after unlock: exit %d, stdout %q, stderr %q; want hello", again.code, again.stdout, again.stderr)
	}

	// The same through `lock conn` and `unlock conn`.
	c.ok("", "lock", "conn", "target", "--reason", "incident 13")
	refused = r.ssh("target", "echo hello")
	refused.wait(t)
	if refused.code != 126 || !strings.Contains(refused.stderr, "connection target is locked: incident 13") {
		t.Errorf("while the connection is locked: exit %d, stderr %q; want 126 naming the lock", refused.code, refused.stderr)
	}
	if out := c.ok("", "unlock", "conn", "target"); !strings.Contains(out, "unlocked connection target") {
		t.Errorf("unlock conn printed %q; want it unlocked", out)
	}
	again = r.ssh("target", "echo hello")
	again.wait(t)
	if again.code != 0 || again.stdout != "hello\n" {
		t.Errorf("after unlock conn: exit %d, stdout %q, stderr %q; want hello", again.code, again.stdout, again.stderr)
	}

	run = r.ssh("target", "echo started >&2; sleep 600; echo never")
	run.waitStderr(t, "started")
	c.ok("", "agent", "disable", "bot")
	run.wait(t)
	if run.code != 255 || !strings.Contains(run.stderr, "agent bot was disabled") {
		t.Errorf("agent disable: exit %d, stderr %q; want 255 saying the agent was disabled", run.code, run.stderr)
	}

	var found bool
	for _, row := range c.auditRows() {
		if row.Kind == "admin" && strings.Contains(row.Operation, "lock agent bot for 1h0m0s: incident 11") {
			found = true
		}
	}
	if !found {
		t.Error("no admin audit row of the lock with its reason")
	}
}
