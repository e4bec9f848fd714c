package model

import (
	"time"

	"github.com/postern/postern/store"
)

// Recording is a recorded operation (store.Recording): what it was, and
// with Events, what it printed, redacted for playback.
type Recording struct {
	ID string `json:"id"`
	// AuditSeq is the seq of the operation's audit row (0 when that row
	// could not be written).
	AuditSeq        int64  `json:"audit_seq"`
	AgentID         string `json:"agent_id"`
	AgentName       string `json:"agent_name"`
	ConnectionID    string `json:"connection_id"`
	ConnectionAlias string `json:"connection_alias"`
	Operation       string `json:"operation"`
	// Mode is exec (stdout and stderr of a command) or pty (a terminal's
	// stream).
	Mode       string `json:"mode"`
	StartedAt  Time   `json:"started_at"`
	DurationMS int64  `json:"duration_ms"`
	// BytesKept is what the recording holds; BytesDropped what came past
	// the bound, counted and not kept.
	BytesKept    int64 `json:"bytes_kept"`
	BytesDropped int64 `json:"bytes_dropped"`
	// Events is the output in order, only when one recording is fetched.
	Events []RecordingEvent `json:"events,omitempty"`
}

// RecordingEvent is one piece of output: OffsetUS microseconds after the
// operation started, on Stream (stdout, stderr or pty), Data as bytes
// (base64 in JSON: output need not be text).
type RecordingEvent struct {
	OffsetUS int64  `json:"offset_us"`
	Stream   string `json:"stream"`
	Data     []byte `json:"data"`
}

// Offset is the event's time after the start.
func (e RecordingEvent) Offset() time.Duration { return time.Duration(e.OffsetUS) * time.Microsecond }

// RecordingOf is r without its events.
func RecordingOf(r store.Recording) Recording {
	return Recording{ID: r.ID, AuditSeq: r.AuditSeq, AgentID: r.AgentID, AgentName: r.AgentName,
		ConnectionID: r.ConnectionID, ConnectionAlias: r.ConnectionAlias, Operation: r.Operation, Mode: r.Mode,
		StartedAt: Time(r.StartedAt), DurationMS: r.Duration.Milliseconds(), BytesKept: r.BytesKept, BytesDropped: r.BytesDropped}
}
