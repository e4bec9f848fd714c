package bastion

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/postern/postern/internal/e2e"
	"github.com/postern/postern/internal/testsshd"
	"github.com/postern/postern/internal/testwait"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
	"github.com/rs/zerolog"
	"golang.org/x/crypto/ssh"
)

// The load tests drive postern with x/crypto SSH clients in this process,
// one client connection per agent connection. Real `ssh` processes would be
// closer to an agent's life, but 200 agents × 50 commands would be 10,000
// process starts (each with its own key exchange) on a 2-core machine: the
// numbers would measure process spawning and the client's handshakes, not
// postern. The flip side is that the clients share postern's heap, so the
// memory figures below are upper bounds for postern alone (see loadResult).

// A load run's waits (an agent's handshake, the whole run, the last audit
// rows) end at the test's deadline (testwait.Deadline): they guard against
// a hang, and a busy machine may stretch any of them. 200 agents arrive at
// once from one address, so most wait for one of postern's handshake slots
// (admission.go), whose lease the harness stretches to the deadline too
// (patient).
const (
	// loadSampleEvery is how often memory and session counts are sampled.
	// runtime.ReadMemStats stops the world briefly; every 50 ms it costs
	// far less than the load itself.
	loadSampleEvery = 50 * time.Millisecond
	// maxLoadFailures is how many failures a run keeps to print.
	maxLoadFailures = 20
)

// requireLoad skips a load test or benchmark unless POSTERN_E2E=1: they
// need a real sshd (openssh-server) and about a minute of two cores, which
// a developer's `go test ./...` should not pay. CI sets POSTERN_E2E=1.
func requireLoad(tb testing.TB) {
	tb.Helper()
	if !e2e.Enabled() {
		tb.Skip("load test: runs with POSTERN_E2E=1 and needs openssh-server's sshd (about a minute on 2 cores)")
	}
	testsshd.Require(tb)
}

// loadTargetOptions raise the target sshd's limits so that the target is
// not what a load test measures: postern's pool carries at most
// DefaultUpstreamMaxSessions sessions per upstream connection, so 1,000
// sessions are about 125 connections, far past sshd's default MaxStartups
// (10:30:100) if they arrived together. The empty HOME keeps the test
// user's ~/.bashrc (pyenv on the recorded machine) out of every command,
// and LogLevel ERROR keeps sshd's log of thousands of sessions out of the
// heap that the tests measure. A load test has a target of its own, so that
// no other test's sessions are counted in its numbers.
func loadTargetOptions() *testsshd.Options {
	return &testsshd.Options{MaxStartups: "1000:30:2000", MaxSessions: 64, LogLevel: "ERROR"}
}

// loadAgent is one registered agent of a load test.
type loadAgent struct {
	name   string
	signer ssh.Signer
	index  int // its number among the run's agents; picks its replica
}

// addLoadAgents registers n agents named prefix-0 ... prefix-(n-1), each
// with its own ed25519 key (kept in memory only) and a grant on the
// harness's connection "web" with rules.
func (h *harness) addLoadAgents(n int, prefix string, rules store.Rules) []loadAgent {
	h.t.Helper()
	ctx := context.Background()
	agents := make([]loadAgent, n)
	for i := range agents {
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			h.t.Fatal(err)
		}
		signer, err := ssh.NewSignerFromKey(priv)
		if err != nil {
			h.t.Fatal(err)
		}
		name := fmt.Sprintf("%s-%d", prefix, i)
		if _, err := h.st.CreateAgent(ctx, store.Unaudited(), name, string(ssh.MarshalAuthorizedKey(signer.PublicKey()))); err != nil {
			h.t.Fatal(err)
		}
		if _, err := h.st.SetGrant(ctx, store.Unaudited(), name, "web", rules); err != nil {
			h.t.Fatal(err)
		}
		agents[i] = loadAgent{name: name, signer: signer, index: i}
	}
	return agents
}

// loadClients dials agent connections to the bastion and closes them all
// at the end of a run, or at once when the run's deadline passes, which
// ends every wait on them.
type loadClients struct {
	addr string
	// addrs, when set, are several replicas' addresses: agent i dials
	// addrs[i % len(addrs)], as a load balancer would spread them.
	addrs []string
	end   time.Time // the run's deadline, which bounds each handshake

	// mu guards clients and closed.
	mu      sync.Mutex
	clients []*ssh.Client
	closed  bool
}

// dial logs in to the bastion as a: TCP connect and handshake before the
// run's deadline.
func (lc *loadClients) dial(a loadAgent) (*ssh.Client, error) {
	addr := lc.addr
	if len(lc.addrs) > 0 {
		addr = lc.addrs[a.index%len(lc.addrs)]
	}
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	conn.SetDeadline(lc.end)
	cfg := &ssh.ClientConfig{User: a.name, Auth: []ssh.AuthMethod{ssh.PublicKeys(a.signer)}, HostKeyCallback: ssh.InsecureIgnoreHostKey()}
	c, chans, reqs, err := ssh.NewClientConn(conn, addr, cfg)
	if err != nil {
		conn.Close()
		return nil, err
	}
	conn.SetDeadline(time.Time{})
	client := ssh.NewClient(c, chans, reqs)
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.closed {
		client.Close()
		return nil, errors.New("load run over")
	}
	lc.clients = append(lc.clients, client)
	return client, nil
}

// closeAll closes every client dialled so far and any dialled later.
func (lc *loadClients) closeAll() {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	lc.closed = true
	for _, c := range lc.clients {
		c.Close()
	}
}

// loadResult is what a load run measured.
type loadResult struct {
	commands  int             // commands started
	failures  int             // commands whose outcome was not the expected one
	failed    []string        // the first maxLoadFailures of them
	wall      time.Duration   // from the start signal to the last command's end
	latencies []time.Duration // per command, session open to exit status; sorted

	// peakSessions is the most agent sessions open at once, counted by the
	// clients (from before the session opens until its exit status).
	peakSessions int64
	// peakUpstreamSessions and peakUpstreamClients are the most sessions
	// and connections postern's pool held to the target at once.
	peakUpstreamSessions, peakUpstreamClients int
	// peakDBConns is the most database connections the store held open at
	// once; dbWaits and dbWait how often and how long a caller waited for
	// one (store.Stats).
	peakDBConns int
	dbWaits     int64
	dbWait      time.Duration

	// heapInuse and sys are the peaks of runtime.MemStats' HeapInuse and
	// Sys during the run, less their values just before it (after a GC),
	// in bytes. They cover the whole test process: postern, and the
	// agents' x/crypto clients that share its heap, so per session they
	// are an upper bound for postern alone.
	heapInuse, sys uint64
}

// quantile is the q quantile (nearest rank) of the sorted latencies.
func (r loadResult) quantile(q float64) time.Duration {
	if len(r.latencies) == 0 {
		return 0
	}
	i := int(q*float64(len(r.latencies))+0.999999) - 1
	return r.latencies[min(max(i, 0), len(r.latencies)-1)]
}

// heapPerSession is the peak heap growth per peak concurrent session.
func (r loadResult) heapPerSession() float64 {
	if r.peakSessions == 0 {
		return 0
	}
	return float64(r.heapInuse) / float64(r.peakSessions)
}

// summary is one line of the run's numbers, for t.Logf.
func (r loadResult) summary() string {
	return fmt.Sprintf("%d commands in %v; latency p50 %v, p99 %v, max %v; peak sessions %d (upstream %d on %d connections); "+
		"peak growth HeapInuse %.1f MiB (%.1f KiB per session), Sys %.1f MiB; database connections peak %d, %d waits for %v; failures %d",
		r.commands, r.wall.Round(time.Millisecond), r.quantile(0.5).Round(10*time.Microsecond), r.quantile(0.99).Round(10*time.Microsecond),
		r.quantile(1).Round(time.Millisecond), r.peakSessions, r.peakUpstreamSessions, r.peakUpstreamClients,
		float64(r.heapInuse)/(1<<20), r.heapPerSession()/1024, float64(r.sys)/(1<<20),
		r.peakDBConns, r.dbWaits, r.dbWait.Round(time.Millisecond), r.failures)
}

// reportLoad reports a run's numbers as benchmark metrics.
func reportLoad(b *testing.B, r loadResult) {
	b.ReportMetric(float64(r.quantile(0.5).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(r.quantile(0.99).Microseconds())/1000, "p99-ms")
	b.ReportMetric(r.heapPerSession()/1024, "peak-KiB/session")
	b.ReportMetric(float64(r.peakSessions), "peak-sessions")
	b.ReportMetric(r.wall.Seconds(), "wall-s")
	b.ReportMetric(float64(r.peakDBConns), "peak-db-conns")
	b.ReportMetric(float64(r.dbWait.Microseconds())/1000, "db-wait-ms")
}

// loadJob is one agent's part of a run: it dials, runs its commands and
// reports each through the run.
type loadJob func(lr *loadRun) error

// loadRun runs jobs concurrently, each in its own goroutine owned by run,
// while a sampler records memory and session counts. Every goroutine ends
// before run returns: the jobs when their commands end, or when the bound
// passes and every client is closed under them.
type loadRun struct {
	h       *harness
	clients *loadClients
	start   chan struct{} // closed when every job may begin

	inflight atomic.Int64 // sessions open now (client side)

	// mu guards the fields below.
	mu        sync.Mutex
	latencies []time.Duration
	failures  int
	failed    []string
	commands  int
}

// fail records a command (or a dial) that did not end as expected.
func (lr *loadRun) fail(format string, args ...any) {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	lr.failures++
	if len(lr.failed) < maxLoadFailures {
		lr.failed = append(lr.failed, fmt.Sprintf(format, args...))
	}
}

// exec runs cmd on a new session of c and returns its stdout, stderr and
// exit status; err is set when the session did not end with an exit
// status. Its latency, from before the session opens to the exit status,
// is recorded.
func (lr *loadRun) exec(c *ssh.Client, cmd string) (stdout, stderr string, code int, err error) {
	lr.inflight.Add(1)
	start := time.Now()
	stdout, stderr, code, err = runSession(c, cmd)
	took := time.Since(start)
	lr.inflight.Add(-1)
	if err == nil {
		lr.count(took)
	} else {
		lr.count(0)
	}
	return stdout, stderr, code, err
}

// count notes one command started, and its latency if it ended with an
// exit status (took > 0).
func (lr *loadRun) count(took time.Duration) {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	lr.commands++
	if took > 0 {
		lr.latencies = append(lr.latencies, took)
	}
}

// runLoad runs jobs at once against h and returns what was measured. It
// fails tb only for a run that did not end by the test's deadline;
// commands that went wrong are in the result's failures.
func runLoad(tb testing.TB, h *harness, jobs []loadJob) loadResult {
	tb.Helper()
	end := testwait.Deadline(tb)
	lr := &loadRun{h: h, clients: &loadClients{addr: h.addr, addrs: h.replicaAddrs, end: end}, start: make(chan struct{})}
	conn, err := h.st.ConnectionByAlias(context.Background(), "web")
	if err != nil {
		tb.Fatal(err)
	}

	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var res loadResult
	dbBefore := h.st.Stats()

	// The sampler: owned by runLoad, ends when stop is closed.
	stop, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(loadSampleEvery)
		defer tick.Stop()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			res.heapInuse = max(res.heapInuse, ms.HeapInuse)
			res.sys = max(res.sys, ms.Sys)
			res.peakSessions = max(res.peakSessions, lr.inflight.Load())
			ps := h.srv.pool.Stats(conn)
			res.peakUpstreamSessions = max(res.peakUpstreamSessions, ps.Sessions)
			res.peakUpstreamClients = max(res.peakUpstreamClients, ps.Clients)
			res.peakDBConns = max(res.peakDBConns, h.st.Stats().OpenConnections)
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()

	var wg sync.WaitGroup
	for _, job := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-lr.start
			if err := job(lr); err != nil {
				lr.fail("%v", err)
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	began := time.Now()
	close(lr.start)
	timer := time.NewTimer(time.Until(end))
	defer timer.Stop()
	timedOut := false
	select {
	case <-done:
	case <-timer.C:
		timedOut = true
		lr.clients.closeAll() // ends every session and dial of the run
		<-done
	}
	res.wall = time.Since(began)
	lr.clients.closeAll()
	close(stop)
	<-sampled
	if timedOut {
		tb.Fatalf("load run did not end by the test's deadline (%v); every client was closed (%d commands started)", res.wall.Round(time.Second), lr.commands)
	}

	res.heapInuse -= min(res.heapInuse, base.HeapInuse)
	res.sys -= min(res.sys, base.Sys)
	dbAfter := h.st.Stats()
	res.dbWaits, res.dbWait = dbAfter.WaitCount-dbBefore.WaitCount, dbAfter.WaitDuration-dbBefore.WaitDuration
	res.commands, res.failures, res.failed = lr.commands, lr.failures, lr.failed
	res.latencies = lr.latencies
	slices.Sort(res.latencies)
	return res
}

// waitAuditRows waits until the bastion has audited want records (postern
// writes a session's row just after the session ends), bounded by the
// test's deadline, and returns every row of the audit log; the caller's
// count says what is missing when the wait ends short.
func waitAuditRows(h *harness, want int) []store.AuditRow {
	h.t.Helper()
	start := time.Now()
	if !h.events.awaitUntil(testwait.Deadline(h.t), func(audits []policy.Record, _ []policy.Approval) bool { return len(audits) >= want }) {
		h.t.Errorf("waited %v for %d audit records; %s", time.Since(start).Round(time.Millisecond), want, h.events.summary())
	}
	rows, err := h.st.ListAudit(context.Background(), store.AuditFilter{})
	if err != nil {
		h.t.Fatal(err)
	}
	return rows
}

// logTally counts the bastion's warnings and errors by message, so that a
// load test that fails can say what postern said (once per message, with a
// count, never per line).
type logTally struct {
	// mu guards counts.
	mu     sync.Mutex
	counts map[string]int
}

// Write takes one zerolog JSON line.
func (lt *logTally) Write(p []byte) (int, error) {
	var line struct {
		Level   string `json:"level"`
		Message string `json:"message"`
		Error   string `json:"error"`
	}
	if err := json.Unmarshal(p, &line); err != nil {
		line.Message = strings.TrimSpace(string(p))
	}
	key := line.Level + ": " + line.Message
	if line.Error != "" {
		key += ": " + line.Error
	}
	lt.mu.Lock()
	defer lt.mu.Unlock()
	if lt.counts == nil {
		lt.counts = map[string]int{}
	}
	lt.counts[key]++
	return len(p), nil
}

// logger is a warn-level logger that feeds lt.
func (lt *logTally) logger() zerolog.Logger {
	return zerolog.New(lt).Level(zerolog.WarnLevel)
}

// String lists the messages with their counts, most frequent first.
func (lt *logTally) String() string {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	keys := slices.SortedFunc(maps.Keys(lt.counts), func(a, b string) int { return lt.counts[b] - lt.counts[a] })
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%6d %s\n", lt.counts[k], k)
	}
	return b.String()
}

// configure points a harness's bastion logger at lt.
func (lt *logTally) configure(c *Config) { c.Logger = lt.logger() }

// report logs what postern warned about, if anything.
func (lt *logTally) report(tb testing.TB) {
	tb.Helper()
	if s := lt.String(); s != "" {
		tb.Logf("postern's warnings and errors, by message:\n%s", s)
	}
}
