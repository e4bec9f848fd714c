package auditsink

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/postern/postern/internal/fakeclock"
	"github.com/postern/postern/store"
)

// chain stands in for policy.ChainHash: the sinks only carry the hash.
func chain(prev []byte, r *store.AuditRow) []byte {
	h := sha256.Sum256(fmt.Appendf(prev, "%d %s", r.Seq, r.Operation))
	return h[:]
}

// testStore is an SQLite store in a temporary directory, on a fake clock
// (for the leases).
func testStore(t *testing.T) (*store.Store, *fakeclock.Clock) {
	t.Helper()
	clock := fakeclock.New()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), store.DatabaseFile), store.Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, clock
}

// appendRows appends n rows whose operations are "op N" (N from the seq
// the row will get).
func appendRows(t *testing.T, st *store.Store, n int) {
	t.Helper()
	ctx := context.Background()
	for range n {
		seq, _, err := st.AuditHead(ctx)
		if err != nil {
			t.Fatal(err)
		}
		exit := 0
		row := store.AuditRow{AgentID: "agt_1", AgentName: "bot", ConnectionID: "con_1", ConnectionAlias: "web",
			Class: "read", Kind: "exec", Decision: "allowed", Operation: fmt.Sprintf("op %d", seq+1),
			ExitStatus: &exit, Duration: 1500 * time.Millisecond, BytesOut: 12, SourceAddr: "127.0.0.1:5555"}
		if _, err := st.AppendAudit(ctx, row, chain); err != nil {
			t.Fatal(err)
		}
	}
}

// seqsOf reads the seq of each JSON record.
func seqsOf(t *testing.T, recs [][]byte) []int64 {
	t.Helper()
	var out []int64
	for _, r := range recs {
		var v struct {
			Seq int64 `json:"seq"`
		}
		if err := json.Unmarshal(r, &v); err != nil {
			t.Fatalf("record %q: %v", r, err)
		}
		out = append(out, v.Seq)
	}
	return out
}

// upTo is 1, 2, ..., n.
func upTo(n int) []int64 {
	var s []int64
	for i := 1; i <= n; i++ {
		s = append(s, int64(i))
	}
	return s
}

// memSink records the seqs it was sent; failAfter, when set, makes the
// next Send deliver that many rows and then fail (a failure mid-batch).
type memSink struct {
	mu        sync.Mutex
	got       []int64
	failAfter int // < 0: do not fail
	notify    chan struct{}
}

func newMemSink() *memSink { return &memSink{failAfter: -1, notify: make(chan struct{}, 1)} }

func (m *memSink) Send(_ context.Context, rows []store.AuditRow) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	defer func() {
		select {
		case m.notify <- struct{}{}:
		default:
		}
	}()
	for i, r := range rows {
		if m.failAfter >= 0 && i == m.failAfter {
			m.failAfter = -1
			return fmt.Errorf("receiver failed after %d rows", i)
		}
		m.got = append(m.got, r.Seq)
	}
	return nil
}

func (m *memSink) Close() error { return nil }

func (m *memSink) seqs() []int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.got)
}

// newShipper is a shipper of sink over st with short waits.
func newShipper(t *testing.T, st Store, sink Sink, holder string, o Options) *Shipper {
	t.Helper()
	o.Name, o.Sink, o.Store, o.Holder, o.Log = "test", sink, st, holder, zerolog.Nop()
	if o.Poll == 0 {
		o.Poll = time.Millisecond
	}
	if o.MinBackoff == 0 {
		o.MinBackoff, o.MaxBackoff = time.Millisecond, 4*time.Millisecond
	}
	sh, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return sh
}

// dedupe drops the repeats of an at-least-once delivery: a seq at or
// below the largest seen. It fails t when a seq comes out of order (a
// jump forward over a seq not yet delivered).
func dedupe(t *testing.T, seqs []int64) []int64 {
	t.Helper()
	var out []int64
	var last int64
	for _, s := range seqs {
		switch {
		case s <= last:
		case s == last+1:
			out = append(out, s)
			last = s
		default:
			t.Fatalf("delivered %v: seq %d after %d skips a row", seqs, s, last)
		}
	}
	return out
}
