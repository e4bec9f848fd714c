package manage

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
)

// TestRecordSettingDualControl: recording more on a production connection
// applies at once; recording less waits for a second admin, and is made
// when one approves (issue 24).
func TestRecordSettingDualControl(t *testing.T) {
	r := newDualRig(t)
	ctx := context.Background()
	all, exec, off := store.RecordAll, store.RecordExec, store.RecordOff
	if _, err := r.m.UpdateConnection(ctx, r.alice, "web", ConnectionEdit{Record: &all}, CheckOptions{}); err != nil {
		t.Fatalf("off -> all: %v; want it made at once", err)
	}
	for _, to := range []*store.Record{&exec, &off} {
		_, err := r.m.UpdateConnection(ctx, r.alice, "web", ConnectionEdit{Record: to}, CheckOptions{})
		req := held(t, "all -> "+string(*to), err)
		if !strings.Contains(req.Before, "record=all") || !strings.Contains(req.After, "record="+string(*to)) {
			t.Errorf("change before %q after %q; want record=all then record=%s", req.Before, req.After, *to)
		}
		if c, _ := r.st.ConnectionByAlias(ctx, "web"); c.Record != store.RecordAll {
			t.Fatalf("before approval the connection records %q; want all", c.Record)
		}
		if _, err := r.m.DecideChange(ctx, r.bob, req.ID, to == &off, ""); err != nil && to == &off {
			t.Fatalf("bob approving: %v", err)
		}
	}
	if c, _ := r.st.ConnectionByAlias(ctx, "web"); c.Record != store.RecordOff {
		t.Errorf("after bob approved off the connection records %q; want off", c.Record)
	}
}

// TestRecordingRoles: admins and owners see recordings; viewers and
// approvers are refused with a RoleError.
func TestRecordingRoles(t *testing.T) {
	r := newDualRig(t)
	ctx := context.Background()
	rec, err := r.st.SaveRecording(ctx, store.Recording{ConnectionAlias: "web", Mode: store.RecordingExec},
		[]store.RecordingEvent{{Stream: store.StreamStdout, Data: []byte("hi\n")}})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		who  policy.Actor
		want bool
	}{{r.alice, true}, {r.vera, false}, {r.pat, false}}
	for _, tc := range cases {
		got, err := r.m.Recording(ctx, tc.who, rec.ID)
		_, lerr := r.m.Recordings(ctx, tc.who, store.RecordingFilter{})
		if tc.want {
			if err != nil || lerr != nil || len(got.Events) != 1 || string(got.Events[0].Data) != "hi\n" {
				t.Errorf("%s: got %+v, %v, %v; want the recording", tc.who.Name, got, err, lerr)
			}
			continue
		}
		var re *RoleError
		if !errors.As(err, &re) || !errors.As(lerr, &re) {
			t.Errorf("%s: got %v and %v; want a RoleError for both", tc.who.Name, err, lerr)
		}
	}
}

// TestRedactEvents: secrets the redaction knows are redacted on playback,
// also when split over two pieces of output; each stream's pieces joined
// are its redacted text, and the pieces keep their times.
func TestRedactEvents(t *testing.T) {
	ev := func(ms int, stream, data string) store.RecordingEvent {
		return store.RecordingEvent{Offset: time.Duration(ms) * time.Millisecond, Stream: stream, Data: []byte(data)}
	}
	cases := []struct {
		name   string
		in     []store.RecordingEvent
		secret string
		want   map[string]string // stream → joined text
	}{
		{"plain", []store.RecordingEvent{ev(0, "stdout", "a\n"), ev(5, "stderr", "b\n"), ev(9, "stdout", "c\n")}, "",
			map[string]string{"stdout": "a\nc\n", "stderr": "b\n"}},
		{"split secret", []store.RecordingEvent{ev(0, "stdout", "DB_PASSWORD=hunt"), ev(3, "stdout", "er2 ok\n")}, "hunter2",
			map[string]string{"stdout": "DB_PASSWORD=" + policy.Redacted + " ok\n"}},
		{"token between streams", []store.RecordingEvent{ev(0, "stdout", "token ghp_"), ev(1, "stderr", "warn\n"),
			ev(2, "stdout", "abcdefghijklmnopqrstuvwxyz0123456789AB\nend\n")}, "abcdefghijklmnopqrstuvwxyz0123456789AB",
			map[string]string{"stdout": "token " + policy.Redacted + "\nend\n", "stderr": "warn\n"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := RedactEvents(tc.in)
			got := map[string]string{}
			for _, e := range out {
				got[e.Stream] += string(e.Data)
				if tc.secret != "" && strings.Contains(string(e.Data), tc.secret) {
					t.Errorf("a piece holds the secret: %q", e.Data)
				}
			}
			for stream, want := range tc.want {
				if got[stream] != want {
					t.Errorf("%s: got %q; want %q", stream, got[stream], want)
				}
			}
			if len(out) != len(tc.in) {
				t.Fatalf("got %d pieces; want %d (one per event)", len(out), len(tc.in))
			}
			for i := range out {
				if out[i].OffsetUS != tc.in[i].Offset.Microseconds() || out[i].Stream != tc.in[i].Stream {
					t.Errorf("piece %d at %dus on %s; want %v on %s", i, out[i].OffsetUS, out[i].Stream, tc.in[i].Offset, tc.in[i].Stream)
				}
			}
		})
	}
}
