package auditsink

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/postern/postern/internal/testwait"
	"github.com/postern/postern/model"
	"github.com/postern/postern/store"
)

// TestRecord: a record is the row as the CLI's export and the API give it
// (model.AuditRow), on one line.
func TestRecord(t *testing.T) {
	exit := 3
	row := store.AuditRow{Seq: 9, Time: time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC), Hash: []byte{0xab, 0xcd},
		AgentID: "agt_1", AgentName: "bot", ConnectionID: "con_1", ConnectionAlias: "web", Class: "write",
		Kind: "exec", Decision: "approved", Reason: "ask rule", ApprovalID: "apr_1", Deciders: []string{"ann", "bo"},
		Operation: "rm x\ny", ExitStatus: &exit, Duration: 2 * time.Second, BytesIn: 5, BytesOut: 6,
		AgentReason: "cleanup", SourceAddr: "10.0.0.1:22"}
	rec, err := Record(&row)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(rec, '\n') {
		t.Fatalf("record %q has a newline", rec)
	}
	var got map[string]any
	if err := json.Unmarshal(rec, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"id": "9", "seq": 9.0, "time": "2026-01-02T03:04:05.000006Z", "hash": "abcd", "agent": "bot",
		"agent_id": "agt_1", "connection": "web", "connection_id": "con_1", "class": "write", "kind": "exec",
		"decision": "approved", "reason": "ask rule", "approval_id": "apr_1", "deciders": []any{"ann", "bo"},
		"operation": "rm x\ny", "exit_status": 3.0, "duration_ms": 2000.0, "bytes_in": 5.0, "bytes_out": 6.0,
		"source_addr": "10.0.0.1:22", "agent_reason": "cleanup"}
	for k, v := range want {
		if gv, ok := got[k]; !ok || !jsonEqual(gv, v) {
			t.Errorf("%s: got %v; want %v", k, gv, v)
		}
	}
	api, _ := json.Marshal(model.AuditRowOf(row))
	if string(api) != string(rec) {
		t.Errorf("record %s; want the API's shape %s", rec, api)
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// TestShipperOrderAndResume: rows go out in seq order in batches of at
// most Batch; a new shipper (a restart) resumes after the stored cursor,
// sending no row twice when the last run stored its cursor.
func TestShipperOrderAndResume(t *testing.T) {
	st, _ := testStore(t)
	ctx := testwait.Context(t)
	appendRows(t, st, 7)
	sink := newMemSink()
	sh := newShipper(t, st, sink, "rep_a", Options{Batch: 3, Exclusive: true})
	if err := sh.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := sink.seqs(); !slices.Equal(got, upTo(7)) {
		t.Fatalf("first run: got %v; want %v", got, upTo(7))
	}
	appendRows(t, st, 4)
	sh2 := newShipper(t, st, sink, "rep_b", Options{Batch: 3, Exclusive: true})
	if err := sh2.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := sink.seqs(); !slices.Equal(got, upTo(11)) {
		t.Fatalf("after a restart: got %v; want %v", got, upTo(11))
	}
	cs, err := st.AuditSinkCursors(ctx)
	if err != nil || len(cs) != 1 || cs[0].Seq != 11 {
		t.Fatalf("cursor: got %+v, %v; want test at 11", cs, err)
	}
}

// TestShipperRunFollowsAndAtLeastOnce: Run ships rows as they are written;
// a Send that fails in the middle of a batch (some rows delivered) is sent
// again from the cursor, so the receiver sees every row, in order, the
// delivered ones of the failed batch twice; the failure is counted.
func TestShipperRunFollowsAndAtLeastOnce(t *testing.T) {
	st, _ := testStore(t)
	appendRows(t, st, 5)
	sink := newMemSink()
	sink.failAfter = 2
	sh := newShipper(t, st, sink, "rep_a", Options{Batch: 4, Exclusive: true})
	ctx, cancel := context.WithCancel(testwait.Context(t))
	done := make(chan struct{})
	go func() {
		defer close(done)
		sh.Run(ctx)
	}()
	defer func() {
		cancel()
		testwait.Done(t, "Run to return", done)
	}()
	testwait.Until(t, "rows 1-5 delivered", func() bool { return len(dedupe(t, sink.seqs())) == 5 })
	appendRows(t, st, 3)
	testwait.Until(t, "rows 6-8 delivered", func() bool { return len(dedupe(t, sink.seqs())) == 8 })
	got := sink.seqs()
	want := []int64{1, 2, 1, 2, 3, 4, 5, 6, 7, 8}
	if !slices.Equal(got, want) {
		t.Fatalf("delivered: got %v; want %v", got, want)
	}
}

// TestShipperLease: while one replica holds a sink another ships nothing;
// when the holder stops without releasing (killed), the other takes over
// once the lease has run out and resumes at the cursor; a holder that
// flushes at shutdown hands the sink over at once.
func TestShipperLease(t *testing.T) {
	st, clock := testStore(t)
	ctx := testwait.Context(t)
	appendRows(t, st, 3)
	const lease = time.Minute
	sinkA, sinkB := newMemSink(), newMemSink()
	a := newShipper(t, st, sinkA, "rep_a", Options{Lease: lease, Now: clock.Now})
	b := newShipper(t, st, sinkB, "rep_b", Options{Lease: lease, Now: clock.Now})
	if n, err := a.step(ctx); err != nil || n != 3 {
		t.Fatalf("a's step: got %d, %v; want 3 rows", n, err)
	}
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := sinkB.seqs(); len(got) != 0 {
		t.Fatalf("b shipped %v while a held the sink; want nothing", got)
	}
	// a is killed: it neither ships nor releases.
	appendRows(t, st, 2)
	clock.Advance(lease + time.Second)
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := sinkB.seqs(); !slices.Equal(got, []int64{4, 5}) {
		t.Fatalf("b after a's lease ran out: got %v; want [4 5]", got)
	}
	// a comes back: it renews its lease before sending and finds it lost;
	// b released the sink at its flush, so a takes it again from the
	// cursor (b's 5) and sends only what is new.
	if n, err := a.step(ctx); err != nil && err != errNotHeld || n != 0 {
		t.Fatalf("a's step after losing the lease: got %d, %v; want 0 rows", n, err)
	}
	appendRows(t, st, 1)
	if err := a.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := sinkA.seqs(); !slices.Equal(got, []int64{1, 2, 3, 6}) {
		t.Fatalf("a: got %v; want [1 2 3 6]", got)
	}
}
