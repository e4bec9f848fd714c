package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/postern/postern/metrics"
)

// fakeHeads is a headSource whose head and failure the test sets.
type fakeHeads struct {
	// mu protects the fields below it.
	mu   sync.Mutex
	seq  int64
	hash []byte
	err  error
	// queued are the heads queued for notification channels, each with
	// its give-up time.
	queued []queuedHead
}

type queuedHead struct {
	head   string
	giveUp time.Time
}

func (f *fakeHeads) QueueAuditHead(_ context.Context, head string, giveUp time.Time) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queued = append(f.queued, queuedHead{head, giveUp.UTC()})
	return 1, nil
}

func (f *fakeHeads) queuedHeads() []queuedHead {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.queued)
}

func (f *fakeHeads) set(seq int64, hash byte, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq, f.hash, f.err = seq, bytes.Repeat([]byte{hash}, 32), err
}

func (f *fakeHeads) AuditHead(context.Context) (int64, []byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return 0, nil, f.err
	}
	return f.seq, f.hash, nil
}

// headLines are the publisher's log lines, decoded.
func headLines(t *testing.T, log *lockedBuffer) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(log.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		lines = append(lines, m)
	}
	return lines
}

// headMetrics reads the postern_audit_head_* series from reg: the seq
// gauge, the info series' hash label and the publish time.
func headMetrics(t *testing.T, reg *prometheus.Registry) (seq float64, hash string, at time.Time) {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			switch f.GetName() {
			case "postern_audit_head_seq":
				seq = m.GetGauge().GetValue()
			case "postern_audit_head_info":
				for _, l := range m.GetLabel() {
					if l.GetName() == "hash" {
						hash = l.GetValue()
					}
				}
			case "postern_audit_head_published_timestamp_seconds":
				at = time.Unix(0, int64(m.GetGauge().GetValue()*1e9)).UTC()
			}
		}
	}
	return seq, hash, at
}

// TestAuditHeadPublisher: the head is published at start, then every
// interval and not before, to the log and the metrics; a failed read is
// logged and the next interval tries again; the goroutine ends with its
// context, and the publish at shutdown runs after it with a context of its
// own. Time is synctest's.
func TestAuditHeadPublisher(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval = 15 * time.Minute
		src := &fakeHeads{}
		src.set(3, 0xaa, nil)
		reg := prometheus.NewRegistry()
		m, err := metrics.New(reg)
		if err != nil {
			t.Fatal(err)
		}
		log := &lockedBuffer{}
		p := &headPublisher{src: src, log: zerolog.New(log), metrics: m, interval: interval}
		start := time.Now().UTC()
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			p.run(ctx)
		}()

		type want struct {
			trigger string
			seq     float64
		}
		check := func(step string, wants []want, wantSeq float64, wantHash string, wantAt time.Time) {
			t.Helper()
			var got []want
			for _, l := range headLines(t, log) {
				seq, _ := l["seq"].(float64)
				trig, _ := l["trigger"].(string)
				if l["message"] != "audit head" {
					trig = "failed: " + trig
				}
				got = append(got, want{trig, seq})
			}
			if !slices.Equal(got, wants) {
				t.Errorf("%s: got log lines %v; want %v\nlog:\n%s", step, got, wants, log.String())
			}
			seq, hash, at := headMetrics(t, reg)
			if seq != wantSeq || hash != wantHash || !at.Equal(wantAt) {
				t.Errorf("%s: got metrics seq %v, hash %s, at %v; want %v, %s, %v", step, seq, hash, at, wantSeq, wantHash, wantAt)
			}
		}
		aa, bb, cc := strings.Repeat("aa", 32), strings.Repeat("bb", 32), strings.Repeat("cc", 32)

		synctest.Wait()
		check("at start", []want{{"start", 3}}, 3, aa, start)
		if l := headLines(t, log)[0]; l["head"] != "3:"+aa || l["hash"] != aa || l["level"] != "info" {
			t.Errorf("start line: got %v; want info with head 3:%s and hash %s", l, aa, aa)
		}

		src.set(7, 0xbb, nil)
		time.Sleep(interval - time.Nanosecond)
		synctest.Wait()
		check("just before the interval", []want{{"start", 3}}, 3, aa, start)
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		check("at the interval", []want{{"start", 3}, {"interval", 7}}, 7, bb, start.Add(interval))

		src.set(0, 0, errors.New("database gone"))
		time.Sleep(interval)
		synctest.Wait()
		check("read failed", []want{{"start", 3}, {"interval", 7}, {"failed: interval", 0}}, 7, bb, start.Add(interval))

		src.set(8, 0xcc, nil)
		time.Sleep(interval)
		synctest.Wait()
		check("after the failure", []want{{"start", 3}, {"interval", 7}, {"failed: interval", 0}, {"interval", 8}}, 8, cc, start.Add(3*interval))

		cancel()
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("run still running after its context ended")
		}
		time.Sleep(3 * interval)
		synctest.Wait()
		stopped := start.Add(3 * interval)
		check("after the end", []want{{"start", 3}, {"interval", 7}, {"failed: interval", 0}, {"interval", 8}}, 8, cc, stopped)

		src.set(9, 0xbb, nil)
		p.publishFinal(ctx) // ctx has ended: the final publish must not use its end
		check("at shutdown", []want{{"start", 3}, {"interval", 7}, {"failed: interval", 0}, {"interval", 8}, {"shutdown", 9}},
			9, bb, stopped.Add(3*interval))

		// Every head published is queued for the channels that subscribe
		// to audit.head, to give up when the next one is due; a failed
		// read queues nothing.
		wantQueued := []queuedHead{
			{"3:" + aa, start.Add(interval)},
			{"7:" + bb, start.Add(2 * interval)},
			{"8:" + cc, start.Add(4 * interval)},
			{"9:" + bb, stopped.Add(4 * interval)},
		}
		if got := src.queuedHeads(); !slices.Equal(got, wantQueued) {
			t.Errorf("queued heads: got %v; want %v", got, wantQueued)
		}
	})
}

// TestAuditHeadPublisherNoMetrics: without a metrics listener serve passes nil
// metrics, and the head still goes to the log.
func TestAuditHeadPublisherNoMetrics(t *testing.T) {
	src := &fakeHeads{}
	src.set(2, 0x01, nil)
	log := &lockedBuffer{}
	p := &headPublisher{src: src, log: zerolog.New(log), interval: time.Minute}
	p.publishFinal(t.Context())
	lines := headLines(t, log)
	if len(lines) != 1 || lines[0]["head"] != "2:"+strings.Repeat("01", 32) || lines[0]["trigger"] != "shutdown" {
		t.Errorf("got log lines %v; want one shutdown line with head 2:0101...", lines)
	}
}

func TestAuditExportSince(t *testing.T) {
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		in        string
		wantSeq   int64
		wantSince time.Time
		wantErr   bool
	}{
		{"every row", "", 1, time.Time{}, false},
		{"a seq", "42", 42, time.Time{}, false},
		{"an RFC 3339 time", "2026-05-01T10:00:00Z", 1, time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC), false},
		{"a duration ago", "90m", 1, now.Add(-90 * time.Minute), false},
		{"seq 0", "0", 0, time.Time{}, true},
		{"a seq too big", "99999999999999999999", 0, time.Time{}, true},
		{"nonsense", "yesterday", 0, time.Time{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seq, since, err := parseExportSince(tt.in, now)
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseExportSince(%q): got error %v; want error %v", tt.in, err, tt.wantErr)
			}
			if seq != tt.wantSeq || !since.Equal(tt.wantSince) {
				t.Errorf("parseExportSince(%q): got %d, %v; want %d, %v", tt.in, seq, since, tt.wantSeq, tt.wantSince)
			}
		})
	}
}
