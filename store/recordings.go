package store

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Record is a connection's recording setting: what of its sessions'
// output postern keeps, sealed, for an admin to play back (issue 24).
// Recording is a choice with privacy costs (SECURITY.md), so it is off
// unless an admin turns it on.
type Record string

// The settings.
const (
	// RecordOff records nothing: the default.
	RecordOff Record = "off"
	// RecordExec records the output (stdout and stderr, with timing) of
	// exec commands without a terminal.
	RecordExec Record = "exec"
	// RecordAll records that and the terminal stream of sessions with a
	// pty (an interactive shell, a command on a terminal).
	RecordAll Record = "all"
)

// Records lists the settings, the default first.
var Records = []Record{RecordOff, RecordExec, RecordAll}

// ParseRecord checks a setting word.
func ParseRecord(s string) (Record, error) {
	for _, r := range Records {
		if string(r) == s {
			return r, nil
		}
	}
	return "", invalid("record %q: want off, exec or all", s)
}

// Rank orders the settings by how much they record: lowering it is a
// loosening of a production connection's oversight.
func (r Record) Rank() int {
	switch r {
	case RecordExec:
		return 1
	case RecordAll:
		return 2
	}
	return 0
}

// Records reports whether a session with (pty) or without a terminal is
// recorded under this setting.
func (r Record) Records(pty bool) bool {
	return r == RecordAll || r == RecordExec && !pty
}

// Streams of a recording's events.
const (
	StreamStdout = "stdout"
	StreamStderr = "stderr"
	// StreamPty is the terminal's output: on a pty, stdout and the
	// command's stderr are one stream.
	StreamPty = "pty"
)

// RecordingEvent is one piece of output as it reached the agent: Offset
// from the start of the operation, the stream, the bytes.
type RecordingEvent struct {
	Offset time.Duration
	Stream string
	Data   []byte
}

// Modes of a recording.
const (
	RecordingExec = "exec" // an exec command without a terminal
	RecordingPty  = "pty"  // a session with a terminal
)

// Recording is one recorded operation, without its events.
type Recording struct {
	ID string
	// AuditSeq is the seq of the operation's audit row; 0 when that row
	// could not be written.
	AuditSeq        int64
	AgentID         string
	AgentName       string
	ConnectionID    string
	ConnectionAlias string
	// Operation is the command as audited (redacted).
	Operation string
	Mode      string // RecordingExec or RecordingPty
	StartedAt time.Time
	Duration  time.Duration
	// BytesKept is what the events hold; BytesDropped what came past the
	// bound, counted and not kept.
	BytesKept    int64
	BytesDropped int64
}

// prefixRecording is the id prefix of recordings.
const prefixRecording = "rec"

// recordingFormat is the first byte of a recording's plaintext: the
// version of the event encoding below.
const recordingFormat = 1

// encodedStreams are the streams as encoded: each one's code is its
// index, stored in sealed recordings, so a new stream goes at the end. A
// function, not a variable, so that the package holds no mutable state.
func encodedStreams() []string { return []string{StreamStdout, StreamStderr, StreamPty} }

// encodeEvents is the plaintext of a recording: the format byte, then for
// each event the offset in microseconds (uvarint), the stream's code, the
// length (uvarint) and the bytes.
func encodeEvents(events []RecordingEvent) ([]byte, error) {
	n := 1
	for _, e := range events {
		n += 2*binary.MaxVarintLen64 + 1 + len(e.Data)
	}
	out := make([]byte, 0, n)
	out = append(out, recordingFormat)
	for _, e := range events {
		code := slices.Index(encodedStreams(), e.Stream)
		if code < 0 {
			return nil, fmt.Errorf("store: recording: unknown stream %q", e.Stream)
		}
		off := max(e.Offset.Microseconds(), 0)
		out = binary.AppendUvarint(out, uint64(off))
		out = append(out, byte(code))
		out = binary.AppendUvarint(out, uint64(len(e.Data)))
		out = append(out, e.Data...)
	}
	return out, nil
}

// decodeEvents reverses encodeEvents.
func decodeEvents(b []byte) ([]RecordingEvent, error) {
	if len(b) == 0 || b[0] != recordingFormat {
		return nil, errors.New("store: recording: unknown format")
	}
	b = b[1:]
	names := encodedStreams()
	var events []RecordingEvent
	for len(b) > 0 {
		off, n := binary.Uvarint(b)
		if n <= 0 || len(b) < n+1 {
			return nil, errors.New("store: recording: truncated event")
		}
		code := int(b[n])
		b = b[n+1:]
		size, m := binary.Uvarint(b)
		if code >= len(names) || m <= 0 || uint64(len(b)-m) < size {
			return nil, errors.New("store: recording: damaged event")
		}
		b = b[m:]
		events = append(events, RecordingEvent{Offset: time.Duration(off) * time.Microsecond, Stream: names[code],
			Data: append([]byte(nil), b[:size]...)})
		b = b[size:]
	}
	return events, nil
}

// SaveRecording stores rec with its events, sealed with the master key as
// one blob, and returns it with its id. It is not configuration (no Audit
// argument): it records what an operation, audited on its own row
// (rec.AuditSeq), printed.
func (s *Store) SaveRecording(ctx context.Context, rec Recording, events []RecordingEvent) (Recording, error) {
	if rec.Mode != RecordingExec && rec.Mode != RecordingPty {
		return rec, fmt.Errorf("store: recording: mode %q", rec.Mode)
	}
	plain, err := encodeEvents(events)
	if err != nil {
		return rec, err
	}
	rec.ID = newID(prefixRecording)
	sealed, err := s.sealFor(plain, rec.ID)
	clear(plain)
	if err != nil {
		return rec, err
	}
	if rec.StartedAt.IsZero() {
		rec.StartedAt = s.nowUTC()
	}
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO recordings (id, audit_seq, agent_id, agent_name, connection_id,
			connection_alias, operation, mode, started_at, duration_ms, bytes_kept, bytes_dropped, sealed)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			rec.ID, rec.AuditSeq, rec.AgentID, rec.AgentName, rec.ConnectionID, rec.ConnectionAlias, rec.Operation,
			rec.Mode, formatTime(rec.StartedAt), max(rec.Duration.Milliseconds(), 0), rec.BytesKept, rec.BytesDropped, sealed)
		if err != nil {
			return fmt.Errorf("store: save recording: %w", err)
		}
		return nil
	})
	return rec, err
}

const recordingColumns = `id, audit_seq, agent_id, agent_name, connection_id, connection_alias, operation, mode,
	started_at, duration_ms, bytes_kept, bytes_dropped`

func scanRecording(r rowScanner, extra ...any) (Recording, error) {
	var rec Recording
	var started string
	var ms int64
	err := r.Scan(append([]any{&rec.ID, &rec.AuditSeq, &rec.AgentID, &rec.AgentName, &rec.ConnectionID, &rec.ConnectionAlias,
		&rec.Operation, &rec.Mode, &started, &ms, &rec.BytesKept, &rec.BytesDropped}, extra...)...)
	if err != nil {
		return rec, err
	}
	rec.Duration = time.Duration(ms) * time.Millisecond
	rec.StartedAt, err = parseTime(started)
	return rec, err
}

// RecordingEvents returns recording id and its events, opened with the
// master key.
func (s *Store) RecordingEvents(ctx context.Context, id string) (Recording, []RecordingEvent, error) {
	var sealed []byte
	rec, err := scanRecording(s.queryRow(ctx, `SELECT `+recordingColumns+`, sealed FROM recordings WHERE id = ?`, id), &sealed)
	if errors.Is(err, sql.ErrNoRows) {
		return rec, nil, notFound("recording", id)
	}
	if err != nil {
		return rec, nil, fmt.Errorf("store: read recording %s: %w", id, err)
	}
	if s.sealer == nil {
		return rec, nil, fmt.Errorf("store: cannot open recording %s: %w", id, s.keyErr)
	}
	plain, err := s.sealer.open(sealed, id)
	if err != nil {
		return rec, nil, fmt.Errorf("store: master key does not open recording %s: %w", id, ErrWrongMasterKey)
	}
	events, err := decodeEvents(plain)
	clear(plain)
	return rec, events, err
}

// RecordingFilter selects recordings: of one connection (alias or id),
// the newest Limit (0: all).
type RecordingFilter struct {
	Connection string
	Limit      int
}

// ListRecordings lists recordings, newest first, without their events.
func (s *Store) ListRecordings(ctx context.Context, f RecordingFilter) ([]Recording, error) {
	q := `SELECT ` + recordingColumns + ` FROM recordings`
	var args []any
	if f.Connection != "" {
		q += ` WHERE connection_alias = ? OR connection_id = ?`
		args = append(args, f.Connection, f.Connection)
	}
	q += ` ORDER BY started_at DESC, id`
	if f.Limit > 0 {
		q += ` LIMIT ?`
		args = append(args, f.Limit)
	}
	rows, err := s.query(ctx, q, args...)
	return collect(rows, err, "list recordings", func(r rowScanner) (Recording, error) { return scanRecording(r) })
}

// DeleteRecordingsBefore deletes the recordings of operations started
// before cutoff (the retention sweep) and returns how many.
func (s *Store) DeleteRecordingsBefore(ctx context.Context, cutoff time.Time) (int64, error) {
	var n int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM recordings WHERE started_at < ?`, formatTime(cutoff))
		if err != nil {
			return fmt.Errorf("store: delete old recordings: %w", err)
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}
