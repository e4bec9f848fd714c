package auditsink

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/postern/postern/internal/testwait"
	"github.com/postern/postern/metrics"
)

// readLines reads a JSON lines file's records; a missing file has none.
func readLines(t *testing.T, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for l := range bytes.Lines(b) {
		if !bytes.HasSuffix(l, []byte("\n")) {
			t.Fatalf("%s: last line %q has no newline", path, l)
		}
		out = append(out, bytes.TrimSuffix(l, []byte("\n")))
	}
	return out
}

// TestFileSinkRotation: the file rotates by size into PATH.1 .. PATH.keep
// (the oldest deleted), a batch is never split, a new run appends, and
// read oldest to newest the kept files hold the newest rows in order with
// none missing between them.
func TestFileSinkRotation(t *testing.T) {
	st, _ := testStore(t)
	ctx := testwait.Context(t)
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	appendRows(t, st, 1)
	rec, _ := st.ListAuditAfter(ctx, 0, time.Time{}, 1)
	one, err := Record(&rec[0])
	if err != nil {
		t.Fatal(err)
	}
	// Room for about three records per file (the records differ in length
	// by a digit or two at most).
	maxSize := int64(3*(len(one)+1) + 8)
	const keep = 2
	appendRows(t, st, 9)
	sh := newShipper(t, st, NewFileSink(path, maxSize, keep), "rep_a", Options{Batch: 2, Exclusive: true})
	if err := sh.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// A restart appends to the file that is there.
	appendRows(t, st, 10)
	sh = newShipper(t, st, NewFileSink(path, maxSize, keep), "rep_b", Options{Batch: 2, Exclusive: true})
	if err := sh.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + "." + strconv.Itoa(keep+1)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s.%d: got %v; want it deleted (keep %d)", path, keep+1, err, keep)
	}
	var all []int64
	for _, p := range []string{path + ".2", path + ".1", path} {
		lines := readLines(t, p)
		if len(lines) == 0 || len(lines)%2 != 0 {
			t.Fatalf("%s: got %d lines; want whole batches of 2, at least one", p, len(lines))
		}
		fi, _ := os.Stat(p)
		if fi.Size() > maxSize {
			t.Errorf("%s: got %d bytes; want at most %d", p, fi.Size(), maxSize)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v; want 0600", p, fi.Mode().Perm())
		}
		all = append(all, seqsOf(t, lines)...)
	}
	want := upTo(20)[20-len(all):]
	if !slices.Equal(all, want) {
		t.Fatalf("kept rows: got %v; want the newest in order %v", all, want)
	}
}

// TestHTTPSinkRetry: a batch is one JSON array POSTed as application/json;
// a collector that refuses (503) gets the same rows again after a backoff,
// each failure counted, and then every row in order, at most Batch a body.
func TestHTTPSinkRetry(t *testing.T) {
	st, _ := testStore(t)
	var mu sync.Mutex
	var bodies [][]json.RawMessage
	refuse := 2
	got := make(chan struct{}, 100)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("request: got %s %q; want POST application/json", r.Method, r.Header.Get("Content-Type"))
		}
		if refuse > 0 {
			refuse--
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		var arr []json.RawMessage
		if err := json.Unmarshal(b, &arr); err != nil {
			t.Errorf("body %q: %v", b, err)
		}
		bodies = append(bodies, arr)
		got <- struct{}{}
	}))
	defer srv.Close()
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	sm, err := m.AuditSinks([]string{"test"})
	if err != nil {
		t.Fatal(err)
	}
	appendRows(t, st, 5)
	sh := newShipper(t, st, NewHTTPSink(srv.URL+"/ingest", nil), "rep_a", Options{Batch: 2, Exclusive: true, Metrics: sm})
	ctx, cancel := context.WithCancel(testwait.Context(t))
	done := make(chan struct{})
	go func() {
		defer close(done)
		sh.Run(ctx)
	}()
	for range 3 {
		testwait.Recv(t, "a batch accepted", got)
	}
	testwait.Until(t, "the cursor at 5 and none behind", func() bool {
		cs, err := st.AuditSinkCursors(ctx)
		return err == nil && len(cs) == 1 && cs[0].Seq == 5 && sinkMetric(t, reg, "postern_audit_sink_rows_behind") == 0
	})
	cancel()
	testwait.Done(t, "Run to return", done)
	mu.Lock()
	defer mu.Unlock()
	var seqs []int64
	for _, b := range bodies {
		if len(b) > 2 {
			t.Errorf("a body of %d rows; want at most 2", len(b))
		}
		for _, r := range b {
			seqs = append(seqs, seqsOf(t, [][]byte{r})...)
		}
	}
	if !slices.Equal(seqs, upTo(5)) {
		t.Fatalf("accepted: got %v; want %v", seqs, upTo(5))
	}
	if f := sinkMetric(t, reg, "postern_audit_sink_send_failures_total"); f != 2 {
		t.Errorf("send failures: got %v; want 2", f)
	}
	if b := sinkMetric(t, reg, "postern_audit_sink_rows_behind"); b != 0 {
		t.Errorf("rows behind: got %v; want 0", b)
	}
}

// TestHTTPSinkErrorHidesQuery: a failed Send's error, which the shipper
// logs, names the collector's URL without its query, where a collector's
// token may be.
func TestHTTPSinkErrorHidesQuery(t *testing.T) {
	st, _ := testStore(t)
	ctx := testwait.Context(t)
	appendRows(t, st, 1)
	rows, err := st.ListAuditAfter(ctx, 0, time.Time{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.NotFoundHandler())
	base := srv.URL
	srv.Close() // nothing listens: the request fails in net/http
	err = NewHTTPSink(base+"/ingest?token=s3cret", nil).Send(ctx, rows)
	if err == nil || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), base+"/ingest") {
		t.Errorf("error: got %v; want one that names %s/ingest without the token", err, base)
	}
}

// sinkMetric is the value of metric name's series for the sink "test".
func sinkMetric(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "sink" && l.GetValue() == "test" {
					return m.GetGauge().GetValue() + m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no series %s{sink=\"test\"}", name)
	return 0
}

// syslogFrame matches one RFC 5424 message as SyslogSink writes it.
var syslogFrame = regexp.MustCompile(`^<(\d+)>1 \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z \S+ postern \d+ audit - (\{.*\})$`)

// syslogReceiver accepts TCP connections on loopback and reads
// octet-counted frames; each frame's JSON record goes to frames. Its
// connections can be cut (as a receiver's restart would).
type syslogReceiver struct {
	ln     net.Listener
	frames chan []byte
	mu     sync.Mutex
	conns  []net.Conn
	wg     sync.WaitGroup
	t      *testing.T
}

func newSyslogReceiver(t *testing.T) *syslogReceiver {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &syslogReceiver{ln: ln, frames: make(chan []byte, 1000), t: t}
	r.wg.Go(r.accept)
	t.Cleanup(func() {
		ln.Close()
		r.cut()
		r.wg.Wait()
	})
	return r
}

func (r *syslogReceiver) accept() {
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.mu.Lock()
		r.conns = append(r.conns, c)
		r.mu.Unlock()
		r.wg.Go(func() { r.read(c) })
	}
}

func (r *syslogReceiver) read(c net.Conn) {
	br := bufio.NewReader(c)
	for {
		n, err := br.ReadString(' ')
		if err != nil {
			return
		}
		size, err := strconv.Atoi(strings.TrimSuffix(n, " "))
		if err != nil {
			r.t.Errorf("frame length %q: %v", n, err)
			return
		}
		msg := make([]byte, size)
		if _, err := io.ReadFull(br, msg); err != nil {
			return
		}
		m := syslogFrame.FindSubmatch(msg)
		if m == nil {
			r.t.Errorf("message %q is not the RFC 5424 form", msg)
			return
		}
		if string(m[1]) != "110" {
			r.t.Errorf("PRI: got %s; want 110 (log audit, info)", m[1])
		}
		r.frames <- m[2]
	}
}

// cut closes every connection the receiver accepted.
func (r *syslogReceiver) cut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.conns {
		c.Close()
	}
	r.conns = nil
}

func (r *syslogReceiver) recv(t *testing.T, n int) []int64 {
	t.Helper()
	var recs [][]byte
	for range n {
		recs = append(recs, testwait.Recv(t, "a syslog message", r.frames))
	}
	return seqsOf(t, recs)
}

// TestSyslogSink: rows arrive as RFC 5424 messages, octet-counted, with
// the JSON record as MSG, in order; after the receiver closed the
// connection the sink notices before sending, connects again and loses
// nothing.
func TestSyslogSink(t *testing.T) {
	st, _ := testStore(t)
	ctx := testwait.Context(t)
	rcv := newSyslogReceiver(t)
	sh := newShipper(t, st, NewSyslogSink(rcv.ln.Addr().String()), "rep_a", Options{Batch: 3, Exclusive: true})
	appendRows(t, st, 4)
	if n, err := sh.step(ctx); err != nil || n != 3 {
		t.Fatalf("step: got %d, %v; want 3 rows", n, err)
	}
	if got := rcv.recv(t, 3); !slices.Equal(got, upTo(3)) {
		t.Fatalf("got %v; want %v", got, upTo(3))
	}
	rcv.cut()
	appendRows(t, st, 2)
	if err := sh.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := rcv.recv(t, 3); !slices.Equal(got, []int64{4, 5, 6}) {
		t.Fatalf("after the receiver closed: got %v; want [4 5 6]", got)
	}
}
