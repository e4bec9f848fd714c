package store

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// TestRecordingEventsRoundTrip: the event list decodes to what was
// encoded, whatever the bytes; damage is an error, not garbage.
func TestRecordingEventsRoundTrip(t *testing.T) {
	cases := []struct {
		name   string
		events []RecordingEvent
	}{
		{"none", nil},
		{"one", []RecordingEvent{{Offset: 1500 * time.Microsecond, Stream: StreamStdout, Data: []byte("hello\n")}}},
		{"streams", []RecordingEvent{
			{Offset: 0, Stream: StreamStdout, Data: []byte{0, 1, 0xff}},
			{Offset: time.Second, Stream: StreamStderr, Data: []byte("err")},
			{Offset: time.Hour, Stream: StreamPty, Data: []byte{}},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := encodeEvents(tc.events)
			if err != nil {
				t.Fatal(err)
			}
			got, err := decodeEvents(b)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.events) {
				t.Fatalf("got %d events; want %d", len(got), len(tc.events))
			}
			for i := range got {
				w := tc.events[i]
				if got[i].Offset != w.Offset || got[i].Stream != w.Stream || !bytes.Equal(got[i].Data, w.Data) {
					t.Errorf("event %d: got %+v; want %+v", i, got[i], w)
				}
			}
			if len(b) > 1 {
				if _, err := decodeEvents(b[:len(b)-1]); err == nil && len(tc.events[len(tc.events)-1].Data) > 0 {
					t.Errorf("a truncated list decoded without an error")
				}
			}
		})
	}
	if _, err := encodeEvents([]RecordingEvent{{Stream: "stdin"}}); err == nil {
		t.Errorf("an unknown stream encoded without an error")
	}
}

// TestRecordings: a recording is stored sealed (its output is not in the
// database file), read back with its events, listed newest first without
// them, and deleted once older than the cutoff (the clock is fake).
func TestRecordings(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		ctx := context.Background()
		s, clock, ref := openTestStore(t)
		secret := []byte("output-only-in-the-sealed-blob-7c41")
		old, err := s.SaveRecording(ctx, Recording{AuditSeq: 7, AgentID: "agt_1", AgentName: "bot", ConnectionID: "con_1",
			ConnectionAlias: "web", Operation: "printf x", Mode: RecordingExec, StartedAt: clock.Now(), Duration: time.Second,
			BytesKept: int64(len(secret)), BytesDropped: 3},
			[]RecordingEvent{{Offset: time.Millisecond, Stream: StreamStdout, Data: secret}})
		if err != nil {
			t.Fatal(err)
		}
		clock.Advance(48 * time.Hour)
		newer, err := s.SaveRecording(ctx, Recording{AgentName: "bot", ConnectionAlias: "db", Mode: RecordingPty,
			StartedAt: clock.Now()}, nil)
		if err != nil {
			t.Fatal(err)
		}

		rec, events, err := s.RecordingEvents(ctx, old.ID)
		if err != nil {
			t.Fatal(err)
		}
		if rec.AuditSeq != 7 || rec.ConnectionAlias != "web" || rec.BytesDropped != 3 || rec.Duration != time.Second ||
			!rec.StartedAt.Equal(old.StartedAt) {
			t.Errorf("read back %+v; want what was saved (%+v)", rec, old)
		}
		if len(events) != 1 || !bytes.Equal(events[0].Data, secret) || events[0].Stream != StreamStdout {
			t.Errorf("events %+v; want the one saved", events)
		}
		if _, _, err := s.RecordingEvents(ctx, "rec_none"); !errors.Is(err, ErrNotFound) {
			t.Errorf("an unknown recording: got %v; want ErrNotFound", err)
		}

		list, err := s.ListRecordings(ctx, RecordingFilter{})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range list {
			ids = append(ids, r.ID)
		}
		if want := []string{newer.ID, old.ID}; !reflect.DeepEqual(ids, want) {
			t.Errorf("list: got %v; want %v (newest first)", ids, want)
		}
		if list, _ := s.ListRecordings(ctx, RecordingFilter{Connection: "web"}); len(list) != 1 || list[0].ID != old.ID {
			t.Errorf("list of connection web: got %+v; want only %s", list, old.ID)
		}

		if testDialect(t) == dialectSQLite {
			// Every file of the database (the WAL too) holds the output
			// only sealed.
			files, _ := filepath.Glob(ref + "*")
			for _, f := range files {
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				if bytes.Contains(b, secret) {
					t.Errorf("%s holds a recording's output in plain text", filepath.Base(f))
				}
			}
		}

		// Retention of a day: the first, two days old, goes.
		n, err := s.DeleteRecordingsBefore(ctx, clock.Now().Add(-24*time.Hour))
		if err != nil || n != 1 {
			t.Fatalf("delete before a day ago: got %d, %v; want 1", n, err)
		}
		if _, _, err := s.RecordingEvents(ctx, old.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("the old recording after the sweep: got %v; want ErrNotFound", err)
		}
		if _, _, err := s.RecordingEvents(ctx, newer.ID); err != nil {
			t.Errorf("the newer recording after the sweep: %v; want it kept", err)
		}
	})
}

// TestConnectionRecordSetting: off unless set; set on add and by update;
// a word that is not a setting is refused.
func TestConnectionRecordSetting(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		ctx := context.Background()
		s, _, _ := openTestStore(t)
		c, _ := mustCreateConnection(t, s, "web", EnvDev)
		if c.Record != RecordOff {
			t.Errorf("new connection records %q; want off", c.Record)
		}
		all := RecordAll
		got, err := s.UpdateConnection(ctx, Unaudited(), "web", ConnectionChange{Record: &all})
		if err != nil || got.Record != RecordAll {
			t.Fatalf("update to all: got %v, %v; want all", got, err)
		}
		bad := Record("everything")
		if _, err := s.UpdateConnection(ctx, Unaudited(), "web", ConnectionChange{Record: &bad}); !errors.Is(err, ErrInvalid) {
			t.Errorf("update to %q: got %v; want ErrInvalid", bad, err)
		}
	})
}
