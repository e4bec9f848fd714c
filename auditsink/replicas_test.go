package auditsink

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/postern/postern/internal/testwait"
	"github.com/postern/postern/store"
)

// holderSink records which replica delivered each seq.
type holderSink struct {
	holder string
	log    *deliveries
}

type deliveries struct {
	mu   sync.Mutex
	seqs []int64
	by   []string
}

func (h *holderSink) Send(_ context.Context, rows []store.AuditRow) error {
	h.log.mu.Lock()
	defer h.log.mu.Unlock()
	for _, r := range rows {
		h.log.seqs = append(h.log.seqs, r.Seq)
		h.log.by = append(h.log.by, h.holder)
	}
	return nil
}

func (h *holderSink) Close() error { return nil }

func (d *deliveries) snapshot() ([]int64, []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.seqs), slices.Clone(d.by)
}

// TestShipperReplicasPostgres: two replicas on one PostgreSQL database
// run a shipper of the same sink; one ships, and the rows arrive once, in
// order; when it stops (flushing, which gives the lease up) the other
// takes over from the cursor, and the rows after arrive from it.
func TestShipperReplicasPostgres(t *testing.T) {
	url := testPG.NewDatabase(t)
	ctx := testwait.Context(t)
	open := func() *store.Store {
		st, err := store.OpenPostgres(ctx, url, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	stA, stB := open(), open()
	log := &deliveries{}
	// a's lease is long enough that a busy machine does not let it run
	// out between renewals, so the test sees no takeover but the one it
	// makes. b, which holds nothing until then, retries its claim every
	// third of its own lease: a short one, so that it takes the released
	// sink over in a fraction of a second rather than a's ten.
	const lease, bLease = 30 * time.Second, 300 * time.Millisecond
	a := newShipper(t, stA, &holderSink{"rep_a", log}, "rep_a", Options{Lease: lease})
	b := newShipper(t, stB, &holderSink{"rep_b", log}, "rep_b", Options{Lease: bLease})
	// a claims first.
	if _, err := a.step(ctx); err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	aDone := make(chan struct{})
	wg.Go(func() {
		defer close(aDone)
		a.Run(runCtx)
	})
	bCtx, bCancel := context.WithCancel(ctx)
	wg.Go(func() { b.Run(bCtx) })
	defer func() {
		cancel()
		bCancel()
		wg.Wait()
	}()

	appendRows(t, stA, 3)
	appendRows(t, stB, 2)
	// Delivered, and the cursor moved past them: a stopped before its
	// cursor moved would send them again, as at least once allows, and
	// this test is about the hand-over, not about that.
	testwait.Until(t, "rows 1-5 delivered and the cursor at 5", func() bool {
		s, _ := log.snapshot()
		cs, err := stA.AuditSinkCursors(ctx)
		return len(s) >= 5 && err == nil && len(cs) == 1 && cs[0].Seq >= 5
	})
	seqs, by := log.snapshot()
	if !slices.Equal(seqs, upTo(5)) || slices.Contains(by, "rep_b") {
		t.Fatalf("while a holds the sink: got %v from %v; want 1-5 once each, all from rep_a", seqs, by)
	}

	// a stops: its flush gives the lease up; b claims it within a third
	// of its lease and ships what comes next.
	cancel()
	testwait.Done(t, "a's Run to return", aDone)
	if err := a.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	appendRows(t, stB, 2)
	testwait.Until(t, "rows 6-7 delivered", func() bool { s, _ := log.snapshot(); return len(s) >= 7 })
	seqs, by = log.snapshot()
	if !slices.Equal(seqs, upTo(7)) || by[5] != "rep_b" || by[6] != "rep_b" {
		t.Fatalf("after a stopped: got %v from %v; want 1-7 once each, 6 and 7 from rep_b", seqs, by)
	}
}
