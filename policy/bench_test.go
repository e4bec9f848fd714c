package policy

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/postern/postern/internal/testwait"
	"github.com/postern/postern/store"
)

// benchEnv is newTestEnv for benchmarks.
func benchEnv(b *testing.B) (*testEnv, *store.Connection) {
	b.Helper()
	dir := b.TempDir()
	if _, err := (store.Dir{Path: dir}).Init(context.Background(), store.Options{}); err != nil {
		b.Fatal(err)
	}
	st, err := (store.Dir{Path: dir}).Open(context.Background(), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	eng, err := New(Options{Store: st})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { eng.Close(); st.Close() })
	ctx := context.Background()
	kp, hk := newKeyPair(b), newKeyPair(b)
	a, err := st.CreateAgent(ctx, "bot", kp.Authorized)
	if err != nil {
		b.Fatal(err)
	}
	c, err := st.CreateConnection(ctx, store.NewConnection{Alias: "web", Host: "h", User: "u",
		PrivateKey: kp.PrivatePEM, HostKeys: []string{"h " + hk.Authorized}})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := st.SetGrant(ctx, "bot", "web", Rules{Read: Allow, Write: Ask, Destructive: Deny}); err != nil {
		b.Fatal(err)
	}
	// Decisions are made by a registered admin.
	if _, err := st.CreateAdmin(ctx, "alice", "$argon2id$unused"); err != nil {
		b.Fatal(err)
	}
	return &testEnv{dir: dir, st: st, eng: eng, agent: a}, c
}

// BenchmarkDecideAndAudit measures the bastion's per-operation cost for an
// allowed operation: one decision and one audit row (hash-chained, in its
// own transaction). Goal: at least 5,000 per second.
func BenchmarkDecideAndAudit(b *testing.B) {
	te, c := benchEnv(b)
	ctx := context.Background()
	exit := 0
	i := 0
	start := time.Now()
	for b.Loop() {
		op := Operation{AgentID: te.agent.ID, ConnectionID: c.ID, Class: Read, Kind: Exec,
			Text: fmt.Sprintf("grep -c ERROR /var/log/app.%d.log", i)}
		i++
		auth, err := te.eng.Authorize(ctx, op, nil)
		if err != nil {
			b.Fatal(err)
		}
		rec := auth.Record(op)
		rec.ExitStatus, rec.Duration, rec.BytesOut = &exit, time.Millisecond, 42
		if _, err := te.eng.Audit(ctx, rec); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(i)/time.Since(start).Seconds(), "decisions/s")
}

// BenchmarkDecideAndAuditParallel is BenchmarkDecideAndAudit from many
// goroutines, as many agent sessions would run; audit appends serialize on
// SQLite's write lock.
func BenchmarkDecideAndAuditParallel(b *testing.B) {
	te, c := benchEnv(b)
	ctx := context.Background()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			op := Operation{AgentID: te.agent.ID, ConnectionID: c.ID, Class: Read, Kind: Exec, Text: "uptime"}
			auth, err := te.eng.Authorize(ctx, op, nil)
			if err != nil {
				b.Error(err)
				return
			}
			if _, err := te.eng.Audit(ctx, auth.Record(op)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "decisions/s")
}

// BenchmarkWakeLatency measures, for an approval decided in this process,
// the time from the start of Approve to the waiter's return from Authorize
// with the approval consumed: the decision's commit, the wakeup, the
// waiter's re-read and its consuming UPDATE. Goal: p99 under 5 ms.
func BenchmarkWakeLatency(b *testing.B) {
	te, c := benchEnv(b)
	ctx := context.Background()
	alice, err := te.st.ResolveAdmin(ctx, "alice")
	if err != nil {
		b.Fatal(err)
	}
	var lat []time.Duration
	i := 0
	for b.Loop() {
		op := Operation{AgentID: te.agent.ID, ConnectionID: c.ID, Class: Write, Kind: Exec,
			Text: fmt.Sprintf("systemctl restart app@%d", i)}
		i++
		asked := make(chan Approval, 1)
		woke := make(chan time.Time, 1)
		go func() {
			_, err := te.eng.Authorize(ctx, op, func(a Approval) { asked <- a })
			if err != nil {
				b.Error(err)
			}
			woke <- time.Now()
		}()
		a := <-asked
		// Let the waiter register for its wakeup, so that the wakeup is
		// what is timed rather than the request's first read.
		testwait.Until(b, time.Minute, "the waiter to register", func() bool { return len(te.eng.waitingIDs()) == 1 })
		start := time.Now()
		if _, err := te.eng.Approve(ctx, a.ID, Decider{AdminID: alice.ID, Name: alice.Name}, Scope{}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, (<-woke).Sub(start))
	}
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[int(p*float64(len(lat)-1))]) / float64(time.Millisecond)
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(lat[len(lat)-1])/float64(time.Millisecond), "max-ms")
}
