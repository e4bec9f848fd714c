package bastion

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/postern/postern/internal/testwait"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
)

// addReplica starts a second bastion on h's database, with its own store
// (its own connections to the database) and policy engine, as a second
// `postern serve` would be, and makes runLoad spread the agents over both.
// It is stopped when the test ends. It returns the replica's server.
func (h *harness) addReplica() *Server {
	h.t.Helper()
	ctx := context.Background()
	d := store.Dir{Path: h.dir, DatabaseURL: h.database}
	st, err := d.Open(ctx, store.Options{MaxConns: h.maxConns})
	if err != nil {
		h.t.Fatal(err)
	}
	eng, err := policy.New(policy.Options{Store: st, ApprovalLifetime: h.lifetime})
	if err != nil {
		h.t.Fatal(err)
	}
	hk, err := d.HostKey()
	if err != nil {
		h.t.Fatal(err)
	}
	cfg := Config{Store: st, Policy: eng, HostKey: hk}
	if h.config != nil {
		h.config(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		h.t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	if len(h.replicaAddrs) == 0 {
		h.replicaAddrs = []string{h.addr}
	}
	h.replicaAddrs = append(h.replicaAddrs, ln.Addr().String())
	h.t.Cleanup(func() {
		if err := srv.Shutdown(testwait.Context(h.t)); err != nil {
			h.t.Errorf("replica Shutdown: %v", err)
		}
		if err := <-served; !errors.Is(err, ErrServerClosed) {
			h.t.Errorf("replica Serve: %v", err)
		}
		eng.Close()
		st.Close()
	})
	return srv
}

// BenchmarkLoad200AgentsReplicas is BenchmarkLoad200Agents on two replicas
// on one PostgreSQL database (durable: fsync and synchronous commit on),
// agents spread over both: 200 agents × 50 mixed commands. Besides the
// numbers (latency, wall time, decisions/s over the run), it fails unless
// every command ended as expected (no allowed command refused), the audit
// holds exactly one row per command (none lost) and the chain verifies.
// Use -benchtime 1x; bench/replicas.sh runs it.
func BenchmarkLoad200AgentsReplicas(b *testing.B) {
	requireLoad(b)
	for range b.N {
		b.StopTimer()
		var logs logTally
		h, agents, dir := newMixedLoadOn(b, loadAgents, &logs, benchPG.NewDatabase(b))
		h.addReplica()
		b.StartTimer()
		res := runLoad(b, h, mixedJobs(dir, agents, loadCommands))
		b.StopTimer()
		b.Logf("%s", res.summary())
		if res.failures != 0 {
			b.Fatalf("%d of %d commands failed; want 0. First:\n%s\npostern's warnings and errors:\n%s", res.failures, res.commands, strings.Join(res.failed, "\n"), &logs)
		}
		want := loadAgents * loadCommands
		// Both replicas audit, and the harness's events see only the
		// first one's: the store is polled. Seq numbers the chain from 1
		// without gaps (policy.Verify checks it), so the newest row's Seq
		// is the number of rows.
		ctx := context.Background()
		testwait.Until(b, fmt.Sprintf("%d audit rows from the two replicas", want), func() bool {
			newest, err := h.st.ListAudit(ctx, store.AuditFilter{Limit: 1})
			return err == nil && len(newest) == 1 && newest[0].Seq >= int64(want)
		})
		rows, err := h.st.ListAudit(ctx, store.AuditFilter{})
		if err != nil {
			b.Fatal(err)
		}
		vr, err := policy.Verify(ctx, h.st)
		if err != nil {
			b.Fatal(err)
		}
		if len(rows) != want || vr.Broken != nil || vr.Rows != int64(want) {
			b.Fatalf("audit: %d rows, chain of %d rows broken at %v; want %d rows, intact", len(rows), vr.Rows, vr.Broken, want)
		}
		reportLoad(b, res)
		b.ReportMetric(float64(res.commands)/res.wall.Seconds(), "commands/s")
		b.ReportMetric(float64(want-len(rows)), "lost-rows")
	}
}
