package main

// Fault tests of the whole binary: postern itself dies. The bastion
// package's faults_test.go covers the target's faults in process; here the
// process that dies is postern serve, so it has to be one.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/postern/postern/internal/testwait"
	"github.com/postern/postern/model"
)

// TestKilledWithPendingRequests kills postern serve with SIGKILL while two
// agents wait for approvals, and checks that a crash loses nothing an
// approval promises (a request is stored before anything waits on it, and
// survives a restart): the agents get a clean error at once (ssh exits 255 saying the
// connection closed; no hang), the requests are still pending in the
// database, the audit chain verifies and holds a row for every command that
// completed (the last one finishing just before the kill), and after a
// restart on the same data directory each request is decided (one over the
// API, one with the CLI) and consumed by the agent's retry of the same
// command — the retry of a request approved meanwhile runs at once, the
// retry of one still pending waits on that same request — exactly once.
func TestKilledWithPendingRequests(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigConfig{grant: []string{"--write", "ask", "--destructive", "ask"}, admins: []string{"ops-admin"}})
	c, agent, scratch := r.cli, r.agent, r.scratch
	token := tokenFromOutput(t, c.ok("", "token", "add", "ops", "--admin", "ops-admin"))
	c.approveChanges()
	ctx := testwait.Context(t)
	p := r.serve("--approval-ttl", outlast(t))

	// Reads that complete before the kill; each must keep its audit row.
	var completed []string
	runRead := func(command, want string) {
		t.Helper()
		a := agent.ssh(t, p.sshAddr, "target", command)
		a.wait(t)
		if a.code != 0 || a.stdout != want {
			t.Fatalf("%s: got exit %d, stdout %q, stderr %q; want 0 and %q", command, a.code, a.stdout, a.stderr, want)
		}
		completed = append(completed, command)
	}
	for i := range 3 {
		runRead(fmt.Sprintf("echo before-kill-%d", i), fmt.Sprintf("before-kill-%d\n", i))
	}

	fileA, fileB := filepath.Join(scratch, "a"), filepath.Join(scratch, "b")
	cmdA, cmdB := "touch "+fileA, "touch "+fileB
	waitA, waitB := agent.ssh(t, p.sshAddr, "target", cmdA), agent.ssh(t, p.sshAddr, "target", cmdB)
	reqA, reqB := c.waitPending(waitA, cmdA), c.waitPending(waitB, cmdB)

	// One more read, and the kill the moment it has completed: its row must
	// have been written before the agent was told it completed.
	runRead("echo last-before-kill", "last-before-kill\n")
	if code := p.end(syscall.SIGKILL); code != -1 {
		t.Errorf("SIGKILL: got exit status %d; want -1 (killed by the signal)", code)
	}

	for _, w := range []struct {
		name string
		run  *agentRun
		id   string
	}{{"a", waitA, reqA.ID}, {"b", waitB, reqB.ID}} {
		w.run.wait(t)
		if w.run.code != 255 {
			t.Errorf("waiting agent %s: got exit %d; want 255 (the bastion's connection was lost)\nstderr: %s", w.name, w.run.code, w.run.stderr)
		}
		if !strings.Contains(w.run.stderr, "waiting for approval "+w.id) {
			t.Errorf("waiting agent %s: got stderr %q; want the waiting line for %s", w.name, w.run.stderr, w.id)
		}
		// OpenSSH says why it stopped after the waiting line: "Connection
		// closed by ..." (FIN) or "Connection reset by ..." (RST).
		after := w.run.stderr[strings.Index(w.run.stderr, w.id)+len(w.id):]
		if !strings.Contains(after, "closed") && !strings.Contains(after, "reset") {
			t.Errorf("waiting agent %s: got stderr %q; want ssh's message that the connection closed or was reset", w.name, w.run.stderr)
		}
	}
	for _, f := range []string{fileA, fileB} {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Errorf("%s after the kill: got %v; want nothing to have run", f, err)
		}
	}

	// The database as the killed postern left it.
	pending := c.approvals(false)
	want := []string{reqA.ID, reqB.ID}
	slices.Sort(want)
	if ids := approvalIDs(pending); !slices.Equal(ids, want) {
		t.Errorf("pending after the kill: got %v; want %v", ids, want)
	}
	verify := c.run("", "audit", "verify")
	if verify.code != 0 || !strings.Contains(verify.stdout, "audit chain intact") {
		t.Errorf("audit verify after the kill: got exit %d, %q %q; want 0 and an intact chain", verify.code, verify.stdout, verify.stderr)
	}
	rows := c.auditRows()
	for _, cmd := range completed {
		if n := countRows(rows, cmd, "allowed", 0); n != 1 {
			// A miss here means the row was written after the agent had
			// been told the command ended.
			t.Errorf("audit rows for the completed %q: got %d allowed with exit 0; want 1\nrows: %s", cmd, n, rowsText(rows))
		}
	}

	// Restart on the same data directory.
	p = r.serve("--approval-ttl", outlast(t))
	web := p.web(t)

	// A: approved over the API first; the retry consumes it and runs at once.
	code, body := apiCall(ctx, web, token, http.MethodPost, "/v1/approvals/"+reqA.ID+"/approve", "")
	if code != http.StatusOK {
		t.Fatalf("POST /v1/approvals/%s/approve: got %d %s; want 200", reqA.ID, code, body)
	}
	retryA := agent.ssh(t, p.sshAddr, "target", cmdA)
	retryA.wait(t)
	if retryA.code != 0 {
		t.Errorf("retry of the approved %q: got exit %d, stderr %q; want 0", cmdA, retryA.code, retryA.stderr)
	}
	if strings.Contains(retryA.stderr, "waiting for approval") {
		t.Errorf("retry of the approved %q: got stderr %q; want no wait", cmdA, retryA.stderr)
	}

	// B: retried while still pending; the retry waits on the same request,
	// and runs once an admin approves it with the CLI.
	retryB := agent.ssh(t, p.sshAddr, "target", cmdB)
	retryB.waitStderr(t, "waiting for approval "+reqB.ID)
	if got := approvalIDs(c.approvals(false)); !slices.Equal(got, []string{reqB.ID}) {
		t.Errorf("pending while B's retry waits: got %v; want [%s] (the retry waits on the stored request)", got, reqB.ID)
	}
	c.ok("", "approvals", "approve", reqB.ID, "--as", "ops-admin")
	retryB.wait(t)
	if retryB.code != 0 {
		t.Errorf("retry of %q after approval: got exit %d, stderr %q; want 0", cmdB, retryB.code, retryB.stderr)
	}
	for _, f := range []string{fileA, fileB} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("%s after the approved retry: %v; want it made", f, err)
		}
	}

	// Each approval was consumed, once.
	byID := map[string]model.Approval{}
	for _, a := range c.approvals(true) {
		byID[a.ID] = a
	}
	for _, id := range []string{reqA.ID, reqB.ID} {
		if a := byID[id]; a.Status != "approved" || a.ConsumedAt.IsZero() {
			t.Errorf("approval %s after the retry: got status %q, consumed at %v; want approved and consumed", id, a.Status, a.ConsumedAt)
		}
	}
	again := agent.ssh(t, p.sshAddr, "target", cmdA)
	reqAgain := c.waitPending(again, cmdA)
	if reqAgain.ID == reqA.ID {
		t.Errorf("a second retry of %q waits on %s again; want a new request (an approval is single use)", cmdA, reqA.ID)
	}
	c.ok("", "approvals", "deny", reqAgain.ID, "--reason", "once was enough", "--as", "ops-admin")
	again.wait(t)
	if again.code != 126 {
		t.Errorf("second retry after its denial: got exit %d, stderr %q; want 126", again.code, again.stderr)
	}

	if code := p.end(syscall.SIGTERM); code != 0 {
		t.Errorf("SIGTERM after the restart: got exit %d; want 0\nstderr:\n%s", code, p.stderrText())
	}
	verify = c.run("", "audit", "verify")
	if verify.code != 0 || !strings.Contains(verify.stdout, "audit chain intact") {
		t.Errorf("audit verify at the end: got exit %d, %q %q; want 0 and an intact chain", verify.code, verify.stdout, verify.stderr)
	}
	rows = c.auditRows()
	for _, want := range []struct {
		cmd, decision, approval string
		exit                    int
		n                       int
	}{
		{cmdA, "approved", reqA.ID, 0, 1},
		{cmdB, "approved", reqB.ID, 0, 1},
		{cmdA, "denied", reqAgain.ID, -1, 1},
	} {
		n := 0
		for _, r := range rows {
			if r.Operation == want.cmd && r.Decision == want.decision && r.ApprovalID == want.approval &&
				(want.exit < 0 || (r.ExitStatus != nil && *r.ExitStatus == want.exit)) {
				n++
			}
		}
		if n != want.n {
			t.Errorf("audit rows %s %q (approval %s): got %d; want %d\nrows: %s", want.decision, want.cmd, want.approval, n, want.n, rowsText(rows))
		}
	}
}

// tokenFromOutput is the token on the second line of `postern token add`;
// the output itself is never printed, since it holds the token.
func tokenFromOutput(t *testing.T, out string) string {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[1], "pst_") {
		t.Fatalf("token add: got %d lines; want the token (pst_...) on the second", len(lines))
	}
	return lines[1]
}

func approvalIDs(list []model.Approval) []string {
	ids := make([]string, 0, len(list))
	for _, a := range list {
		ids = append(ids, a.ID)
	}
	slices.Sort(ids)
	return ids
}

// countRows counts the audit rows of operation op with that decision and
// exit status.
func countRows(rows []model.AuditRow, op, decision string, exit int) int {
	n := 0
	for _, r := range rows {
		if r.Operation == op && r.Decision == decision && r.ExitStatus != nil && *r.ExitStatus == exit {
			n++
		}
	}
	return n
}

// rowsText is the audit rows for a failure message.
func rowsText(rows []model.AuditRow) string {
	b, _ := json.MarshalIndent(rows, "", "  ")
	return string(b)
}
