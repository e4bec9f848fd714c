package manage

import (
	"context"
	"strings"

	"github.com/postern/postern/model"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
)

// Recordings (issue 24) are read here, for every door: only an admin or
// owner sees one. A recording holds whatever the target printed, which is
// more than the audit log's redacted command lines, so the role that may
// change configuration (and could turn recording on) is the one that may
// read them; viewers and approvers are refused.

// Recordings lists recordings, newest first, without their output.
func (m *Manager) Recordings(ctx context.Context, by policy.Actor, f store.RecordingFilter) ([]model.Recording, error) {
	if err := m.requireRole(ctx, by, store.RoleAdmin, "see recordings"); err != nil {
		return nil, err
	}
	rs, err := m.st.ListRecordings(ctx, f)
	if err != nil {
		return nil, err
	}
	out := make([]model.Recording, 0, len(rs))
	for _, r := range rs {
		out = append(out, model.RecordingOf(r))
	}
	return out, nil
}

// Recording returns recording id with its output, secrets that the
// audit's redaction knows replaced by its markers (policy.Redact), per
// stream: a secret split over two pieces of output is found too.
func (m *Manager) Recording(ctx context.Context, by policy.Actor, id string) (model.Recording, error) {
	if err := m.requireRole(ctx, by, store.RoleAdmin, "see recordings"); err != nil {
		return model.Recording{}, err
	}
	r, events, err := m.st.RecordingEvents(ctx, id)
	if err != nil {
		return model.Recording{}, err
	}
	out := model.RecordingOf(r)
	out.Events = RedactEvents(events)
	return out, nil
}

// RedactEvents is events for playback: each stream's whole text redacted
// with policy.Redact, then cut again where its events were cut, so that
// the timing stays. Each redacted stream's pieces, joined, are exactly its
// redacted text, however the cut points fall. Where the redacted text
// cannot be lined up with the original, the stream plays as one event at
// its first event's time.
func RedactEvents(events []store.RecordingEvent) []model.RecordingEvent {
	var order []string
	text := map[string]*strings.Builder{}
	for _, e := range events {
		b, ok := text[e.Stream]
		if !ok {
			b = &strings.Builder{}
			text[e.Stream] = b
			order = append(order, e.Stream)
		}
		b.Write(e.Data)
	}
	type cut struct {
		orig, red string
		spans     []span // nil: play the stream as one event
		pos       int    // in orig, of the next event
		done      bool   // the single event was played
	}
	cuts := map[string]*cut{}
	for _, name := range order {
		orig := text[name].String()
		red := policy.Redact(orig)
		c := &cut{orig: orig, red: red}
		if red == orig {
			c.spans = []span{{o: 0, r: 0, n: len(orig)}}
		} else {
			c.spans = alignRedacted(orig, red)
		}
		cuts[name] = c
	}
	out := make([]model.RecordingEvent, 0, len(events))
	for _, e := range events {
		c := cuts[e.Stream]
		ev := model.RecordingEvent{OffsetUS: e.Offset.Microseconds(), Stream: e.Stream}
		if c.spans == nil {
			if c.done {
				continue
			}
			c.done = true
			ev.Data = []byte(c.red)
		} else {
			from, to := c.pos, c.pos+len(e.Data)
			c.pos = to
			ev.Data = []byte(c.red[mapPos(c.spans, from, len(c.red)):mapPos(c.spans, to, len(c.red))])
		}
		out = append(out, ev)
	}
	return out
}

// span is a run of text the redaction kept: n bytes at o in the original,
// at r in the redacted text. Between two spans lies a secret and its
// marker.
type span struct{ o, r, n int }

// markerStart begins both markers policy.Redact writes.
const markerStart = "[REDACTED"

// alignRedacted finds the kept runs of orig in red, which is orig with
// some secrets replaced by markers: each run of red up to the next marker
// is found in orig at or after where the previous one ended. nil when that
// fails (a marker right after a marker, or text that is not where it
// should be).
func alignRedacted(orig, red string) []span {
	var spans []span
	i, j := 0, 0
	for {
		m := strings.Index(red[j:], markerStart)
		if m < 0 {
			m = len(red) - j
		}
		if !strings.HasPrefix(orig[i:], red[j:j+m]) {
			return nil
		}
		spans = append(spans, span{o: i, r: j, n: m})
		i, j = i+m, j+m
		if j == len(red) {
			if i != len(orig) {
				return nil
			}
			return spans
		}
		marker := policy.Redacted
		if strings.HasPrefix(red[j:], policy.RedactedKey) {
			marker = policy.RedactedKey
		} else if !strings.HasPrefix(red[j:], marker) {
			return nil
		}
		j += len(marker)
		next := strings.Index(red[j:], markerStart)
		if next < 0 {
			next = len(red) - j
		}
		seg := red[j : j+next]
		switch {
		case seg == "" && j == len(red):
			i = len(orig)
		case seg == "":
			return nil
		default:
			k := strings.Index(orig[i:], seg)
			if k < 0 {
				return nil
			}
			i += k
		}
	}
}

// mapPos is where position p of the original falls in the redacted text:
// in a kept run, the same byte; inside a secret, after its marker.
func mapPos(spans []span, p, end int) int {
	for _, s := range spans {
		if p <= s.o+s.n {
			if p >= s.o {
				return s.r + (p - s.o)
			}
			// Inside the secret before this run: after the marker,
			// where this run starts.
			return s.r
		}
	}
	return end
}
