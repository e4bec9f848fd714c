package bastion

import (
	"context"
	"io"
	"sync"
	"time"

	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
)

// DefaultRecordingBound is how many bytes of output one recording keeps
// unless Config.RecordingBound says otherwise; past it the rest is
// counted, not kept.
const DefaultRecordingBound = 8 << 20

// recordingSaveWait bounds the write of a recording to the store.
const recordingSaveWait = 30 * time.Second

// recorder keeps what the target's output streams passed on to the agent,
// for a connection whose Record setting covers the session (issue 24). It
// sees each piece after the agent's write of it returned, so the agent
// receives exactly what it would without it; with recording off there is
// no recorder and the relay does no extra work per byte.
//
// Only output is kept, also for a terminal: what the agent types (a
// password at a sudo prompt, which the terminal does not echo) stays out.
type recorder struct {
	now   func() time.Time
	start time.Time
	bound int64
	pty   bool

	mu      sync.Mutex
	events  []store.RecordingEvent
	kept    int64
	dropped int64
}

func newRecorder(now func() time.Time, start time.Time, bound int64, pty bool) *recorder {
	return &recorder{now: now, start: start, bound: bound, pty: pty}
}

// add keeps a copy of p as an event of stream, up to the bound.
func (r *recorder) add(stream string, p []byte) {
	at := r.now().Sub(r.start)
	r.mu.Lock()
	defer r.mu.Unlock()
	room := r.bound - r.kept
	if room <= 0 {
		r.dropped += int64(len(p))
		return
	}
	keep := p
	if int64(len(keep)) > room {
		keep = keep[:room]
		r.dropped += int64(len(p)) - room
	}
	r.kept += int64(len(keep))
	r.events = append(r.events, store.RecordingEvent{Offset: at, Stream: stream, Data: append([]byte(nil), keep...)})
}

// snapshot is what was kept and dropped so far.
func (r *recorder) snapshot() ([]store.RecordingEvent, int64, int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]store.RecordingEvent(nil), r.events...), r.kept, r.dropped
}

// stdout and stderr wrap the relay's writers to the agent.
func (r *recorder) stdout(w io.Writer) io.Writer {
	stream := store.StreamStdout
	if r.pty {
		stream = store.StreamPty
	}
	return recordingWriter{w: w, r: r, stream: stream}
}

func (r *recorder) stderr(w io.Writer) io.Writer {
	return recordingWriter{w: w, r: r, stream: store.StreamStderr}
}

// recordingWriter writes to w, then records what w took.
type recordingWriter struct {
	w      io.Writer
	r      *recorder
	stream string
}

func (rw recordingWriter) Write(p []byte) (int, error) {
	n, err := rw.w.Write(p)
	if n > 0 {
		rw.r.add(rw.stream, p[:n])
	}
	return n, err
}

// startRecorder is the recorder of x's session when its connection records
// it, else nil.
func (x *execRun) startRecorder() *recorder {
	pty := x.r.pty || x.r.shell
	if x.conn == nil || !x.conn.Record.Records(pty) {
		return nil
	}
	bound := x.s.cfg.RecordingBound
	if bound <= 0 {
		bound = DefaultRecordingBound
	}
	return newRecorder(x.s.cfg.Now, x.start, bound, pty)
}

// saveRecording stores what rec kept, linked to the operation's audit row
// seq. relay calls it where it writes that row, once (before the agent
// learns the exit status, or after the relay when it does not). A failure
// is logged: the command's outcome stands.
func (x *execRun) saveRecording(rec *recorder, seq int64) {
	if rec == nil {
		return
	}
	events, kept, dropped := rec.snapshot()
	mode := store.RecordingExec
	if rec.pty {
		mode = store.RecordingPty
	}
	// The store write outlives a server closing: the operation ran, and
	// what it printed is kept like its audit row.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(x.s.ctx), recordingSaveWait)
	defer cancel()
	_, err := x.s.cfg.Store.SaveRecording(ctx, store.Recording{AuditSeq: seq, AgentID: x.ac.agentID, AgentName: x.ac.agentName,
		ConnectionID: x.conn.ID, ConnectionAlias: x.conn.Alias, Operation: policy.Redact(x.rec.Operation), Mode: mode,
		StartedAt: x.start, Duration: x.s.cfg.Now().Sub(x.start), BytesKept: kept, BytesDropped: dropped}, events)
	if err != nil {
		x.s.log.Error().Err(err).Str("conn_id", x.ac.id).Str("alias", x.conn.Alias).Msg("recording not saved")
	}
}
