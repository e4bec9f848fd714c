package bastion

import (
	"bytes"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/postern/postern/internal/fakeclock"
	"github.com/postern/postern/store"
)

// shortWriter takes at most n bytes of each write, then fails.
type shortWriter struct {
	bytes.Buffer
	n int
}

func (w *shortWriter) Write(p []byte) (int, error) {
	if len(p) > w.n {
		w.Buffer.Write(p[:w.n])
		return w.n, errors.New("short write")
	}
	return w.Buffer.Write(p)
}

// TestRecorder: the agent's writer gets every byte as it would without a
// recorder; the recorder keeps what the writer took, with its time and
// stream (pty for a terminal's stdout), up to the bound, and counts the
// rest.
func TestRecorder(t *testing.T) {
	cases := []struct {
		name          string
		bound         int64
		pty           bool
		writes        []string
		limit         int // per write the agent's writer takes
		kept, dropped int64
		stream        string
	}{
		{"under the bound", 100, false, []string{"abc", "def"}, 1 << 20, 6, 0, store.StreamStdout},
		{"at the bound", 4, false, []string{"abc", "def"}, 1 << 20, 4, 2, store.StreamStdout},
		{"past it", 2, true, []string{"abc", "def"}, 1 << 20, 2, 4, store.StreamPty},
		{"short write", 100, false, []string{"abcdef"}, 2, 2, 0, store.StreamStdout},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clock := fakeclock.New()
			start := clock.Now()
			r := newRecorder(clock.Now, start, tc.bound, tc.pty)
			agent := &shortWriter{n: tc.limit}
			w := r.stdout(agent)
			var sent bytes.Buffer
			for _, s := range tc.writes {
				clock.Advance(time.Millisecond)
				n, _ := w.Write([]byte(s))
				sent.WriteString(s[:n])
			}
			if agent.String() != sent.String() {
				t.Errorf("the agent got %q; want %q", agent.String(), sent.String())
			}
			events, kept, dropped := r.snapshot()
			if kept != tc.kept || dropped != tc.dropped {
				t.Errorf("kept %d, dropped %d; want %d, %d", kept, dropped, tc.kept, tc.dropped)
			}
			var got bytes.Buffer
			for i, e := range events {
				got.Write(e.Data)
				if e.Stream != tc.stream || e.Offset != time.Duration(i+1)*time.Millisecond {
					t.Errorf("event %d: %s at %v; want %s at %v", i, e.Stream, e.Offset, tc.stream, time.Duration(i+1)*time.Millisecond)
				}
			}
			if want := sent.String()[:tc.kept]; got.String() != want {
				t.Errorf("recorded %q; want %q", got.String(), want)
			}
		})
	}
}

// BenchmarkOutputWriter: the cost per 32 KiB piece of output of the
// relay's writer to the agent, without a recorder (recording off) and
// with one, under the bound (a copy kept) and past it (counted only).
func BenchmarkOutputWriter(b *testing.B) {
	piece := make([]byte, relayBufferSize)
	cases := []struct {
		name  string
		bound int64 // -1: no recorder
	}{{"off", -1}, {"kept", DefaultRecordingBound}, {"past the bound", 0}}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			var n atomic.Int64
			var agent io.Writer = countingWriter{io.Discard, &n}
			w := agent
			var r *recorder
			if tc.bound >= 0 {
				r = newRecorder(time.Now, time.Now(), tc.bound, false)
				w = r.stdout(agent)
			}
			b.SetBytes(int64(len(piece)))
			for b.Loop() {
				if tc.bound > 0 && r.kept >= tc.bound {
					// A new session: "kept" measures output under the bound.
					r = newRecorder(time.Now, time.Now(), tc.bound, false)
					w = r.stdout(agent)
				}
				_, _ = w.Write(piece)
			}
		})
	}
}
