package policy

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/postern/postern/store"
)

// replica opens a second store and engine on te's database, as another
// `postern serve` would, closed when the test ends.
func (te *testEnv) replica(opts Options) (*store.Store, *Engine) {
	te.t.Helper()
	st, err := te.storeDir().Open(context.Background(), store.Options{Now: te.now})
	if err != nil {
		te.t.Fatal(err)
	}
	opts.Store, opts.Now = st, te.now
	eng, err := New(opts)
	if err != nil {
		st.Close()
		te.t.Fatal(err)
	}
	te.t.Cleanup(func() {
		eng.Close()
		st.Close()
	})
	return st, eng
}

// TestReplicaDecisionWakesWaiter: an approval decided on one replica wakes
// the agent waiting on another. The waiting replica polls once an hour, so
// on PostgreSQL only the database's notification can wake it; on SQLite the
// test polls as the bastion does.
func TestReplicaDecisionWakesWaiter(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		te := newTestEnv(t, nil, Options{})
		poll := time.Hour
		if !onPostgres(t) {
			poll = DefaultPollInterval
		}
		st, waiting := te.replica(Options{PollInterval: poll})
		waitListening(t, st)
		c := te.conn("web", store.EnvDev, askAll)
		op := te.op(c, Write, "systemctl reload nginx")
		a, done := authorizeAsync(t, context.Background(), waiting, op)
		start := time.Now()
		if _, err := te.eng.Approve(context.Background(), a.ID, te.admin("alice"), Scope{}); err != nil {
			t.Fatal(err)
		}
		r := result(t, done)
		t.Logf("cross-replica wake: %v", time.Since(start))
		if r.err != nil || r.auth.Outcome != Approved {
			t.Fatalf("Authorize on the other replica = %s, %v; want approved", r.auth.Outcome, r.err)
		}
	})
}

// TestReplicaRetriesRunOnce: two concurrent retries of one approved
// operation, on two replicas, run it exactly once; the other asks anew.
func TestReplicaRetriesRunOnce(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		te := newTestEnv(t, nil, Options{})
		_, other := te.replica(Options{})
		c := te.conn("web", store.EnvDev, askAll)
		op := te.op(c, Write, "deploy.sh --once")
		ctx := context.Background()
		// The agent asked, gave up, and an admin approved meanwhile.
		wctx, cancel := context.WithCancel(ctx)
		a, done := authorizeAsync(t, wctx, te.eng, op)
		cancel()
		result(t, done)
		if _, err := te.eng.Approve(ctx, a.ID, te.admin("alice"), Scope{}); err != nil {
			t.Fatal(err)
		}
		const rounds = 10
		for round := range rounds {
			if round > 0 {
				// Again, on a fresh approved request.
				wctx, cancel := context.WithCancel(ctx)
				a, done = authorizeAsync(t, wctx, te.eng, op)
				cancel()
				result(t, done)
				if _, err := te.eng.Approve(ctx, a.ID, te.admin("alice"), Scope{}); err != nil {
					t.Fatal(err)
				}
			}
			var wg sync.WaitGroup
			outcomes := make(chan Outcome, 2)
			for _, eng := range []*Engine{te.eng, other} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rctx, cancel := context.WithCancel(ctx)
					defer cancel()
					auth, err := eng.Authorize(rctx, op, func(Approval) { cancel() })
					if err != nil && !errors.Is(err, context.Canceled) {
						t.Errorf("retry: %v", err)
					}
					outcomes <- auth.Outcome
				}()
			}
			wg.Wait()
			close(outcomes)
			ran := 0
			for o := range outcomes {
				if o == Approved {
					ran++
				}
			}
			if ran != 1 {
				t.Fatalf("round %d: %d retries ran approval %s; want exactly 1", round, ran, a.ID)
			}
		}
	})
}

// TestReplicaAuditOneChain: audit rows appended by two replicas at once
// make one chain that verifies, with every row.
func TestReplicaAuditOneChain(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		te := newTestEnv(t, nil, Options{})
		st2, other := te.replica(Options{})
		c := te.conn("web", store.EnvDev, Rules{Read: Allow, Write: Allow, Destructive: Deny})
		ctx := context.Background()
		const each = 40
		var wg sync.WaitGroup
		for _, eng := range []*Engine{te.eng, other} {
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range each / 4 {
						op := te.op(c, Read, "uptime")
						auth, err := eng.Authorize(ctx, op, nil)
						if err != nil {
							t.Errorf("Authorize: %v", err)
							return
						}
						if _, err := eng.Audit(ctx, auth.Record(op)); err != nil {
							t.Errorf("Audit: %v", err)
						}
					}
				}()
			}
		}
		wg.Wait()
		res, err := Verify(ctx, st2)
		if err != nil || res.Broken != nil || res.Rows != 2*each {
			t.Fatalf("Verify = %d rows, broken %v, %v; want %d intact rows", res.Rows, res.Broken, err, 2*each)
		}
	})
}

// TestReplicaRecoversStoppedReplica: the operations of a replica that
// stopped while they ran are audited as failed by another replica's
// heartbeat once the stopped one's lease ran out — and not before: a
// replica that starts leaves a live one's operations alone.
func TestReplicaRecoversStoppedReplica(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		te := newTestEnv(t, nil, Options{})
		ctx := context.Background()
		c := te.conn("web", store.EnvDev, Rules{Read: Allow, Write: Allow, Destructive: Deny})
		const lease = time.Hour // no heartbeat runs in the test's time
		_, first := te.replica(Options{Replica: &ReplicaOptions{Host: "one", PID: 1, Lease: lease}})
		if first.ReplicaID() == "" {
			t.Fatal("no replica id")
		}
		auth, err := first.Authorize(ctx, te.op(c, Write, "./long-job.sh"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if auth.InflightID == "" {
			t.Fatal("no journal row")
		}
		_, second := te.replica(Options{Replica: &ReplicaOptions{Host: "two", PID: 2, Lease: lease}})
		if n, err := second.RecoverInterrupted(ctx); err != nil || n != 0 {
			t.Fatalf("RecoverInterrupted while the first replica lives: got %d, %v; want 0", n, err)
		}
		// The first replica dies without a word: its registration stays
		// until its lease ends. Move the lease's end into the past, as
		// time would.
		te.exec(`UPDATE replicas SET expires_at = ? WHERE id = ?`, "2000-01-01T00:00:00.000000000Z", first.ReplicaID())
		second.beat(ctx)
		rows, err := te.st.ListAudit(ctx, store.AuditFilter{})
		if err != nil || len(rows) != 1 || rows[0].Decision != string(Failed) || rows[0].Reason != InterruptedReason {
			t.Fatalf("audit after the heartbeat: %+v, %v; want one failed row, %q", rows, err, InterruptedReason)
		}
		if n := te.countInflight(); n != 0 {
			t.Errorf("%d journal rows left; want 0", n)
		}
	})
}
