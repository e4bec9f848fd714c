package bastion

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
)

// This file holds the load tests: many agents at once through one
// postern to one real sshd, every command's outcome and audit row counted.
// They log latency and memory and assert none of it but a wide memory
// bound: on a shared 2-core machine a timing threshold would fail on the
// neighbours' load, not on postern. The Benchmark functions report the
// same numbers as metrics for bench/RESULTS.md (bench/load.sh runs them).

const (
	loadAgents        = 200 // agents of TestLoad200Agents, each with its own key and grant
	loadCommands      = 50  // commands per agent, one after another on one connection
	sleepAgents       = 50  // agents of TestLoad1000Sleep
	sleepConnsPer     = 2   // connections per agent
	sleepSessionsPer  = 10  // concurrent sessions per connection
	loadSessionsTotal = sleepAgents * sleepConnsPer * sleepSessionsPer
)

// loadRules let reads and writes run and deny destructive commands, so a
// run has both outcomes.
var loadRules = store.Rules{Read: store.RuleAllow, Write: store.RuleAllow, Destructive: store.RuleDeny}

// mixedCommand is command i of an agent's fifty, cycling through three
// reads, a write and a denied destructive command. No two denied commands
// of an agent are identical or adjacent: RepeatDeniedStreak identical
// denials in a row would make postern slow the agent down, which
// TestRepeatedDenialsSlowDown covers and this test must not measure.
type mixedCommand struct {
	cmd    string
	class  string // what postern classifies it as
	code   int    // the exit status the agent must see
	stdout string // its output, if checked
}

func newMixedCommand(dir, agent string, i int) mixedCommand {
	switch i % 5 {
	case 0:
		s := agent + "-" + strconv.Itoa(i)
		return mixedCommand{cmd: "echo " + s, class: "read", stdout: s + "\n"}
	case 1:
		return mixedCommand{cmd: "cat " + filepath.Join(dir, "small"), class: "read", stdout: smallFile}
	case 2:
		return mixedCommand{cmd: "true", class: "read"}
	case 3:
		return mixedCommand{cmd: fmt.Sprintf("echo %d > %s", i, filepath.Join(dir, agent+".out")), class: "write"}
	default:
		return mixedCommand{cmd: fmt.Sprintf("rm -f %s %s", filepath.Join(dir, agent+".keep"), filepath.Join(dir, agent+".gone-"+strconv.Itoa(i))),
			class: "destructive", code: ExitRefused}
	}
}

// smallFile is what the read `cat` prints.
const smallFile = "a small file read by every agent\n"

// lastWrite is the index of an agent's last write command among n.
func lastWrite(n int) int {
	for i := n - 1; i >= 0; i-- {
		if i%5 == 3 {
			return i
		}
	}
	return -1
}

// mixedJobs are one job per agent: dial, then run n mixed commands one
// after another, as an agent's loop over one connection (a ControlMaster)
// does. Each command's exit status and output are checked.
func mixedJobs(dir string, agents []loadAgent, n int) []loadJob {
	var jobs []loadJob
	for _, a := range agents {
		jobs = append(jobs, func(lr *loadRun) error {
			c, err := lr.clients.dial(a)
			if err != nil {
				return fmt.Errorf("%s: log in: %w", a.name, err)
			}
			for i := 0; i < n; i++ {
				mc := newMixedCommand(dir, a.name, i)
				out, stderr, code, err := lr.exec(c, "web "+mc.cmd)
				switch {
				case err != nil:
					return fmt.Errorf("%s: %q: %w", a.name, mc.cmd, err)
				case code != mc.code:
					lr.fail("%s: %q: exit %d, stderr %q; want %d", a.name, mc.cmd, code, strings.TrimSpace(stderr), mc.code)
				case mc.code == ExitRefused && !strings.Contains(stderr, "denied"):
					lr.fail("%s: %q: stderr %q; want a denial", a.name, mc.cmd, stderr)
				case mc.stdout != "" && out != mc.stdout:
					lr.fail("%s: %q: stdout %q; want %q", a.name, mc.cmd, out, mc.stdout)
				}
			}
			return nil
		})
	}
	return jobs
}

// newMixedLoad starts a harness with n load agents and the files their
// commands use, in a directory it returns.
func newMixedLoad(tb testing.TB, n int, logs *logTally) (*harness, []loadAgent, string) {
	tb.Helper()
	return newMixedLoadOn(tb, n, logs, "")
}

// newMixedLoadOn is newMixedLoad on the PostgreSQL database at url (SQLite
// if "").
func newMixedLoadOn(tb testing.TB, n int, logs *logTally, url string) (*harness, []loadAgent, string) {
	tb.Helper()
	// POSTERN_BENCH_DB_CONNS sets the store's connection bound for a
	// benchmark that compares bounds (-1: none); the default otherwise.
	maxConns, _ := strconv.Atoi(os.Getenv("POSTERN_BENCH_DB_CONNS"))
	h := newHarness(tb, harnessOpts{rules: loadRules, target: loadTargetOptions(), config: logs.configure, maxConns: maxConns, database: url})
	agents := h.addLoadAgents(n, "load", loadRules)
	dir := tb.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "small"), []byte(smallFile), 0o644); err != nil {
		tb.Fatal(err)
	}
	for _, a := range agents {
		if err := os.WriteFile(filepath.Join(dir, a.name+".keep"), []byte("keep"), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	return h, agents, dir
}

// maxHeapPerSession bounds the peak heap growth per concurrent session in
// the load tests. A session costs postern an agent channel, an upstream
// channel and the relay's buffers (relayBufferSize each way), and the
// in-process client its own channel; each agent connection adds its SSH
// transport. Tens to a few hundred KiB in all; 4 MiB, two full channel
// windows (sshChannelWindow), is reached only if output is buffered
// without flow control, which is the failure this bound is for.
const maxHeapPerSession = 2 * sshChannelWindow

// TestLoad200Agents: 200 agents, each with its own key and grant, log in at
// once and each run 50 commands one after another through postern to one
// real sshd: reads (echo, cat, true) and writes that run, and rm that the
// grant denies. Every command ends with the expected status and output,
// the writes happened and the denied rm did not, the audit log holds
// exactly one row per command with the right agent, class and decision,
// and its chain verifies. Latency and memory are logged, not asserted
// (BenchmarkLoad200Agents reports them), except a wide memory bound.
//
// 50 commands stay within an agent's command burst (DefaultCommandBurst),
// so the default rate limit is in place but never reached: this measures
// postern's command path, not the limiter.
func TestLoad200Agents(t *testing.T) {
	requireLoad(t)
	leakCheck(t)
	var logs logTally
	h, agents, dir := newMixedLoad(t, loadAgents, &logs)

	res := runLoad(t, h, mixedJobs(dir, agents, loadCommands))
	t.Logf("200 agents × 50 commands: %s", res.summary())
	defer logs.report(t)
	want := loadAgents * loadCommands
	if res.commands != want || res.failures != 0 {
		t.Errorf("commands started %d, failed %d; want %d, 0. First failures:\n%s", res.commands, res.failures, want, strings.Join(res.failed, "\n"))
	}
	if res.heapPerSession() > maxHeapPerSession {
		t.Errorf("peak heap growth per session = %.0f B; want at most %d", res.heapPerSession(), maxHeapPerSession)
	}
	if os.Getenv("POSTERN_BENCH_DB_CONNS") == "" && res.peakDBConns > store.DefaultMaxConns {
		t.Errorf("peak database connections = %d; want at most store.DefaultMaxConns (%d)", res.peakDBConns, store.DefaultMaxConns)
	}

	// What ran: each agent's last write is in its file, and its denied rm
	// left the file it named.
	for _, a := range agents {
		b, err := os.ReadFile(filepath.Join(dir, a.name+".out"))
		if got, want := strings.TrimSpace(string(b)), strconv.Itoa(lastWrite(loadCommands)); err != nil || got != want {
			t.Errorf("%s.out = %q (err %v); want %q, the last write", a.name, got, err, want)
		}
		if _, err := os.Stat(filepath.Join(dir, a.name+".keep")); err != nil {
			t.Errorf("%s.keep after denied rm: %v; want it kept", a.name, err)
		}
	}

	// The audit log: one row per command, per agent and per decision.
	rows := waitAuditRows(h, want)
	if len(rows) != want {
		t.Errorf("audit rows = %d; want %d, one per command", len(rows), want)
	}
	type tally struct{ allowed, denied, read, write, destructive, other int }
	per := map[string]*tally{}
	otherRows := 0
	for _, r := range rows {
		c := per[r.AgentName]
		if c == nil {
			c = &tally{}
			per[r.AgentName] = c
		}
		switch {
		case r.Decision == string(policy.Allowed) && r.ExitStatus != nil && *r.ExitStatus == 0:
			c.allowed++
		case r.Decision == string(policy.Denied) && r.ExitStatus == nil:
			c.denied++
		default:
			c.other++
			if otherRows++; otherRows <= 5 {
				t.Errorf("audit row %d: agent %s, decision %s, exit %v, reason %q; want allowed with exit 0, or denied", r.Seq, r.AgentName, r.Decision, r.ExitStatus, r.Reason)
			}
		}
		switch r.Class {
		case "read":
			c.read++
		case "write":
			c.write++
		case "destructive":
			c.destructive++
		}
	}
	if otherRows > 5 {
		t.Errorf("... and %d more audit rows neither allowed with exit 0 nor denied", otherRows-5)
	}
	wantTally := tally{}
	for i := 0; i < loadCommands; i++ {
		mc := newMixedCommand(dir, "x", i)
		if mc.code == ExitRefused {
			wantTally.denied++
		} else {
			wantTally.allowed++
		}
		switch mc.class {
		case "read":
			wantTally.read++
		case "write":
			wantTally.write++
		case "destructive":
			wantTally.destructive++
		}
	}
	if len(per) != loadAgents {
		t.Errorf("agents in the audit log = %d; want %d", len(per), loadAgents)
	}
	bad := 0
	for _, a := range agents {
		got := per[a.name]
		if got == nil {
			got = &tally{}
		}
		if *got != wantTally {
			if bad++; bad <= 5 {
				t.Errorf("audit rows of %s = %+v; want %+v", a.name, *got, wantTally)
			}
		}
	}
	if bad > 5 {
		t.Errorf("... and %d more agents with wrong audit rows", bad-5)
	}

	vr, err := policy.Verify(context.Background(), h.st)
	if err != nil {
		t.Fatal(err)
	}
	if vr.Broken != nil || vr.Rows != int64(want) {
		t.Errorf("audit chain: %d rows, broken %v; want %d rows, intact", vr.Rows, vr.Broken, want)
	}
}

// sleepJobs spread total concurrent `sleep 1` sessions over agents with
// conns connections each and perConn sessions on each connection: one job
// per connection, whose sessions all start at once.
func sleepJobs(agents []loadAgent, conns, perConn int) []loadJob {
	var jobs []loadJob
	for _, a := range agents {
		for range conns {
			jobs = append(jobs, func(lr *loadRun) error {
				c, err := lr.clients.dial(a)
				if err != nil {
					return fmt.Errorf("%s: log in: %w", a.name, err)
				}
				var wg sync.WaitGroup
				for range perConn {
					wg.Add(1)
					go func() {
						defer wg.Done()
						_, stderr, code, err := lr.exec(c, "web sleep 1")
						if err != nil || code != 0 {
							lr.fail("%s: sleep 1: exit %d, err %v, stderr %q; want 0", a.name, code, err, strings.TrimSpace(stderr))
						}
					}()
				}
				wg.Wait()
				return nil
			})
		}
	}
	return jobs
}

// TestLoad1000Sleep: 1,000 `sleep 1` sessions at once through postern all
// end with exit status 0 and one audit row each. They are spread over 50
// agents with 2 connections of 10 sessions each, so that neither an
// agent's command burst (DefaultCommandBurst, 100) nor a connection's
// session limit (DefaultMaxSessionsPerConn, 64) is what this tests: the
// server keeps its default limits. Upstream, the pool carries at most
// DefaultUpstreamMaxSessions (8) per connection, so about 125 connections
// to the target, whose MaxStartups and MaxSessions are raised so that the
// target is not the limit either.
func TestLoad1000Sleep(t *testing.T) {
	requireLoad(t)
	leakCheck(t)
	var logs logTally
	h := newHarness(t, harnessOpts{target: loadTargetOptions(), config: logs.configure})
	agents := h.addLoadAgents(sleepAgents, "sleep", store.DefaultRules())

	res := runLoad(t, h, sleepJobs(agents, sleepConnsPer, sleepSessionsPer))
	t.Logf("1000 × sleep 1 at once: %s", res.summary())
	defer logs.report(t)
	if res.commands != loadSessionsTotal || res.failures != 0 {
		t.Errorf("sessions started %d, failed %d; want %d, 0. First failures:\n%s", res.commands, res.failures, loadSessionsTotal, strings.Join(res.failed, "\n"))
	}
	if res.heapPerSession() > maxHeapPerSession {
		t.Errorf("peak heap growth per session = %.0f B; want at most %d", res.heapPerSession(), maxHeapPerSession)
	}

	rows := waitAuditRows(h, loadSessionsTotal)
	perAgent := map[string]int{}
	for _, r := range rows {
		if r.Decision != string(policy.Allowed) || r.ExitStatus == nil || *r.ExitStatus != 0 {
			t.Errorf("audit row %d: agent %s, decision %s, exit %v, reason %q; want allowed, exit 0", r.Seq, r.AgentName, r.Decision, r.ExitStatus, r.Reason)
		}
		perAgent[r.AgentName]++
	}
	if len(rows) != loadSessionsTotal {
		t.Errorf("audit rows = %d; want %d", len(rows), loadSessionsTotal)
	}
	for _, a := range agents {
		if got, want := perAgent[a.name], sleepConnsPer*sleepSessionsPer; got != want {
			t.Errorf("audit rows of %s = %d; want %d", a.name, got, want)
		}
	}
	vr, err := policy.Verify(context.Background(), h.st)
	if err != nil {
		t.Fatal(err)
	}
	if vr.Broken != nil || vr.Rows != int64(loadSessionsTotal) {
		t.Errorf("audit chain: %d rows, broken %v; want %d rows, intact", vr.Rows, vr.Broken, loadSessionsTotal)
	}
}

// BenchmarkLoad200Agents reports TestLoad200Agents' numbers: latency per
// command (p50-ms, p99-ms, from session open to exit status) and peak heap
// growth per concurrent session (peak-KiB/session, test clients included).
// Each iteration is a whole run on a new bastion: use -benchtime 1x.
func BenchmarkLoad200Agents(b *testing.B) {
	requireLoad(b)
	for range b.N {
		b.StopTimer()
		var logs logTally
		h, agents, dir := newMixedLoad(b, loadAgents, &logs)
		b.StartTimer()
		res := runLoad(b, h, mixedJobs(dir, agents, loadCommands))
		b.Logf("%s", res.summary())
		if res.failures != 0 {
			b.Fatalf("%d of %d commands failed; want 0. First:\n%s\npostern's warnings and errors:\n%s", res.failures, res.commands, strings.Join(res.failed, "\n"), &logs)
		}
		reportLoad(b, res)
	}
}

// BenchmarkLoad1000Sleep reports TestLoad1000Sleep's numbers: wall-s for
// the 1,000 concurrent `sleep 1` sessions, their latency (p50-ms, p99-ms,
// sleep included) and peak-KiB/session. Use -benchtime 1x.
func BenchmarkLoad1000Sleep(b *testing.B) {
	requireLoad(b)
	for range b.N {
		b.StopTimer()
		var logs logTally
		h := newHarness(b, harnessOpts{target: loadTargetOptions(), config: logs.configure})
		agents := h.addLoadAgents(sleepAgents, "sleep", store.DefaultRules())
		b.StartTimer()
		res := runLoad(b, h, sleepJobs(agents, sleepConnsPer, sleepSessionsPer))
		b.Logf("%s", res.summary())
		if res.failures != 0 {
			b.Fatalf("%d of %d sessions failed; want 0. First:\n%s\npostern's warnings and errors:\n%s", res.failures, res.commands, strings.Join(res.failed, "\n"), &logs)
		}
		reportLoad(b, res)
	}
}
