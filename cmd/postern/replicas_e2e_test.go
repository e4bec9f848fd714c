package main

// Several `postern serve` on one PostgreSQL database behind HAProxy, with
// the real OpenSSH client as the agents and a real sshd as the target.

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/postern/postern/internal/testhaproxy"
	"github.com/postern/postern/internal/testsshd"
	"github.com/postern/postern/internal/testwait"
	"github.com/postern/postern/model"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
)

// TestReplicasBehindHAProxy runs two replicas on one PostgreSQL database
// behind HAProxy in TCP mode and checks issue 16's promises with the real
// ssh client:
//   - agents' connections are spread over both replicas, and both write
//     rows into one audit chain;
//   - approvals decided through either replica's REST API or with the CLI
//     wake the agent, whichever replica holds its session;
//   - replica A is killed with SIGKILL while agents wait on it and one of
//     its operations runs: the agents that were on it lose their session,
//     retry through HAProxy, land on B and wait on the same requests, which
//     survived; once approved each runs exactly once;
//   - the operation that was running on A is audited as failed once A's
//     lease has run out, and nothing else is lost from the audit: every
//     command an agent saw complete has its row, and the chain verifies.
//
// A lease is real time on the replicas' clocks, and a live replica that a
// busy machine keeps from renewing it in time has its running operations
// audited as interrupted: so the replicas' lease lasts as long as the test
// may, and once A is dead the test moves the end of A's lease into the
// past, as time would (policy's TestReplicaRecoversStoppedReplica does the
// same). A replica started then audits A's operation at its start; a
// heartbeat, the other way a replica finds it, runs a third of the lease
// apart, and policy's test covers it.
func TestReplicasBehindHAProxy(t *testing.T) {
	t.Parallel()
	requireSSHClient(t)
	testhaproxy.Require(t)
	tg := newE2ETarget(t, testsshd.Options{})
	c := newPGCLI(t)
	scratch := t.TempDir()
	c.addConn(tg, "target")
	const nAgents = 4
	var agents []*e2eAgent
	for i := range nAgents {
		name := fmt.Sprintf("bot%d", i)
		agents = append(agents, newE2EAgent(t, c, name))
		c.ok("", "grant", name, "target", "--write", "ask", "--destructive", "ask")
	}
	c.ok("", "admin", "add", "alice", "--password-file", writePasswordFile(t, "a long admin password"))
	token := tokenFromOutput(t, c.ok("", "token", "add", "ops", "--admin", "alice"))
	c.approveChanges()

	ctx := testwait.Context(t)
	flags := []string{"--database", c.database, "--approval-ttl", outlast(t), "--replica-lease", outlast(t)}
	a := startServe(t, c.data, flags...)
	b := startServe(t, c.data, flags...)
	replicaA, _ := a.started["replica"].(string)
	if replicaA == "" {
		t.Fatalf("replica A's start log %v names no replica id", a.started)
	}
	lb := testhaproxy.Start(t, a.sshAddr, b.sshAddr)
	t.Logf("replica A %s (%s), replica B %s, HAProxy %s", a.sshAddr, replicaA, b.sshAddr, lb.Addr)

	// Every command an agent saw complete; each must keep one audit row.
	type done struct{ cmd, decision string }
	var completed []done
	mustRun := func(r *agentRun, cmd, decision, want string) {
		t.Helper()
		r.wait(t)
		if r.code != 0 || r.stdout != want {
			t.Fatalf("%s: got exit %d, stdout %q, stderr %q; want 0 and %q", cmd, r.code, r.stdout, r.stderr, want)
		}
		completed = append(completed, done{cmd, decision})
	}

	// 1. Reads through the load balancer, from every agent at once.
	var reads []*agentRun
	for round := range 3 {
		for i, ag := range agents {
			reads = append(reads, ag.ssh(t, lb.Addr, "target", fmt.Sprintf("echo agent-%d-read-%d", i, round)))
		}
	}
	for k, r := range reads {
		i, round := k%nAgents, k/nAgents
		mustRun(r, fmt.Sprintf("echo agent-%d-read-%d", i, round), "allowed", fmt.Sprintf("agent-%d-read-%d\n", i, round))
	}
	for name, p := range map[string]*e2eServe{"A": a, "B": b} {
		if !strings.Contains(p.stderrText(), `"message":"allowed"`) {
			t.Errorf("replica %s decided no command: the load balancer did not spread the agents", name)
		}
	}

	// 2. Writes that ask: decided through A's API, B's API and the CLI,
	// whichever replica holds each agent's session.
	webA, webB := a.web(t), b.web(t)
	approveAPI := func(w *webClient, id string) {
		t.Helper()
		code, body := apiCall(ctx, w, token, http.MethodPost, "/v1/approvals/"+id+"/approve", "")
		if code != http.StatusOK {
			t.Fatalf("POST /v1/approvals/%s/approve: got %d %s; want 200", id, code, body)
		}
	}
	var writes []*agentRun
	var writeCmds []string
	for i, ag := range agents {
		cmd := "touch " + filepath.Join(scratch, fmt.Sprintf("phase2-%d", i))
		writeCmds = append(writeCmds, cmd)
		writes = append(writes, ag.ssh(t, lb.Addr, "target", cmd))
	}
	for i, cmd := range writeCmds {
		req := c.waitPending(writes[i], cmd)
		switch i % 3 {
		case 0:
			approveAPI(webA, req.ID)
		case 1:
			approveAPI(webB, req.ID)
		default:
			c.ok("", "approvals", "approve", req.ID, "--as", "alice")
		}
	}
	for i, r := range writes {
		mustRun(r, writeCmds[i], "approved", "")
	}

	// 3. Agents wait on both replicas, and an operation runs on A (reached
	// directly, so that it surely runs there): then A is killed.
	var waiting []*agentRun
	var waitCmds []string
	reqs := map[string]string{} // command -> approval id
	for i, ag := range agents {
		cmd := "touch " + filepath.Join(scratch, fmt.Sprintf("phase3-%d", i))
		waitCmds = append(waitCmds, cmd)
		waiting = append(waiting, ag.ssh(t, lb.Addr, "target", cmd))
	}
	for i, cmd := range waitCmds {
		reqs[cmd] = c.waitPending(waiting[i], cmd).ID
		// The replica logs the wait right after telling the agent.
		logged := `"approval":"` + reqs[cmd] + `"`
		testwait.Until(t, "a replica to log the wait on "+reqs[cmd], func() bool {
			return strings.Contains(a.stderrText()+b.stderrText(), logged)
		})
	}
	// cat runs until its input ends, which the agent's never does: it ends
	// when its connection does, when A dies, and leaves nothing running on
	// the target.
	const longCmd = "cat"
	input, keepOpen, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { input.Close(); keepOpen.Close() })
	long := agents[0].sshWithInput(t, a.sshAddr, input, "target", longCmd)
	waitJournal(t, c.database, longCmd)
	if code := a.end(syscall.SIGKILL); code != -1 {
		t.Errorf("SIGKILL of replica A: got exit status %d; want -1", code)
	}
	long.wait(t)
	if long.code != 255 {
		t.Errorf("%s on the killed replica: got exit %d; want 255 (connection lost)", longCmd, long.code)
	}

	// The agents that were on A (its log says which requests its sessions
	// waited on) lost their session; they retry through HAProxy, land on B
	// and wait on the same request. Those on B still wait.
	lost := 0
	for i, r := range waiting {
		if !strings.Contains(a.stderrText(), `"approval":"`+reqs[waitCmds[i]]+`"`) {
			select {
			case <-r.done:
				t.Fatalf("%s, waiting on replica B, ended with exit %d when A was killed\nstderr: %s", waitCmds[i], r.code, r.stderr)
			default:
			}
			continue
		}
		r.wait(t)
		if r.code != 255 {
			t.Fatalf("%s: ended with exit %d while waiting on the killed replica; want 255\nstderr: %s", waitCmds[i], r.code, r.stderr)
		}
		lost++
		waiting[i] = agents[i].ssh(t, lb.Addr, "target", waitCmds[i])
		waiting[i].waitStderr(t, "waiting for approval "+reqs[waitCmds[i]])
	}
	t.Logf("%d of %d waiting agents were on the killed replica and retried", lost, nAgents)
	if lost == 0 || lost == nAgents {
		t.Errorf("%d of %d waiting agents were on replica A; want some on each replica", lost, nAgents)
	}
	for i, cmd := range waitCmds {
		if i%2 == 0 {
			approveAPI(webB, reqs[cmd])
		} else {
			c.ok("", "approvals", "approve", reqs[cmd], "--as", "alice")
		}
	}
	for i, r := range waiting {
		mustRun(r, waitCmds[i], "approved", "")
	}
	for i := range agents {
		for _, phase := range []string{"phase2", "phase3"} {
			if _, err := os.Stat(filepath.Join(scratch, fmt.Sprintf("%s-%d", phase, i))); err != nil {
				t.Errorf("%s-%d: %v; want the approved touch to have run", phase, i, err)
			}
		}
	}

	// 4. A's lease runs out, and a replica that starts then audits A's
	// interrupted operation as failed.
	expireReplica(t, c.database, replicaA)
	// It audits before it logs that it serves, which startServe waits for.
	recovering := startServe(t, c.data, flags...)
	if m := recovering.logged("audited operations that a previous run did not see end as failed"); m["operations"] != 1.0 {
		t.Errorf("the replica started after A's lease ran out audited %v operations as failed; want 1 (%s)", m["operations"], longCmd)
	}
	if code := recovering.end(syscall.SIGTERM); code != 0 {
		t.Errorf("SIGTERM of the recovering replica: got exit %d; want 0", code)
	}

	// Nothing lost: one row per completed command, one for the interrupted
	// one, each approval consumed once; the chain verifies.
	// The admin's own changes (agents, grants, the token) are audited too;
	// the agents' operations are the exec rows.
	var rows []model.AuditRow
	for _, r := range c.auditRows() {
		if r.Kind == "exec" {
			rows = append(rows, r)
		}
	}
	for _, d := range completed {
		if n := countRows(rows, d.cmd, d.decision, 0); n != 1 {
			t.Errorf("audit rows for %q: got %d %s with exit 0; want 1\nrows: %s", d.cmd, n, d.decision, rowsText(rows))
		}
	}
	if n := countDecision(rows, longCmd, string(policy.Failed)); n != 1 {
		t.Errorf("audit rows for the interrupted %q: got %d failed; want 1", longCmd, n)
	}
	if len(rows) != len(completed)+1 {
		t.Errorf("audit holds %d exec rows; want %d (one per completed command and the interrupted one)\nrows: %s", len(rows), len(completed)+1, rowsText(rows))
	}
	for _, ap := range c.approvals(true) {
		if ap.Kind == model.KindChange {
			continue // the set-up's token, approved by a second admin
		}
		if ap.Status != "approved" || ap.ConsumedAt.IsZero() {
			t.Errorf("approval %s (%s): status %s, consumed %v; want approved and consumed", ap.ID, ap.Operation, ap.Status, time.Time(ap.ConsumedAt))
		}
	}
	verify := c.run("", "audit", "verify")
	if verify.code != 0 || !strings.Contains(verify.stdout, "audit chain intact") {
		t.Errorf("audit verify: got exit %d, %q %q; want an intact chain", verify.code, verify.stdout, verify.stderr)
	}
	if code := b.end(syscall.SIGTERM); code != 0 {
		t.Errorf("SIGTERM of replica B: got exit %d; want 0\nstderr:\n%s", code, b.stderrText())
	}
}

// countDecision counts the audit rows of op with that decision.
func countDecision(rows []model.AuditRow, op, decision string) int {
	n := 0
	for _, r := range rows {
		if r.Operation == op && r.Decision == decision {
			n++
		}
	}
	return n
}

// expireReplica moves the end of replica id's lease into the past, as time
// does once a dead replica stops renewing it.
func expireReplica(t *testing.T, url, id string) {
	t.Helper()
	db, err := store.OpenSQL(testwait.Context(t), url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	res, err := db.ExecContext(testwait.Context(t), `UPDATE replicas SET expires_at = ? WHERE id = ?`, "2000-01-01T00:00:00.000000000Z", id)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		t.Fatalf("expire replica %s: %d rows, %v; want 1", id, n, err)
	}
}

// waitJournal waits until the database's journal holds a row for op: the
// operation has been let through and is running.
func waitJournal(t *testing.T, url, op string) {
	t.Helper()
	db, err := store.OpenSQL(testwait.Context(t), url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	testwait.Until(t, fmt.Sprintf("a journal row for %q", op), func() bool {
		var n int
		if err := db.QueryRow(`SELECT COUNT(*) FROM inflight WHERE row LIKE ?`, `%"operation":`+jsString(op)+`%`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	})
}
