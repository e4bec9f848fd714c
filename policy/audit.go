package policy

import (
	"context"
	"fmt"
	"time"

	"github.com/postern/postern/store"
)

// Record is one audit row as the caller knows it. The caller writes it once,
// when the operation has finished or was refused: rows are never updated,
// which keeps the hash chain simple and every row final when written.
type Record struct {
	Time            time.Time // when the decision was made; now if zero
	AgentID         string
	AgentName       string
	ConnectionID    string
	ConnectionAlias string
	Class           Class
	Kind            Kind
	Outcome         Outcome
	Reason          string // why it was denied or failed; "" otherwise
	ApprovalID      string
	Deciders        []string // admins who approved or denied
	// Operation is the exact operation text; Audit redacts it before
	// storing. Never put the operation's output here.
	Operation  string
	ExitStatus *int // nil if it did not run or gave no status
	Duration   time.Duration
	BytesIn    int64 // from the agent to the target
	BytesOut   int64 // from the target to the agent
}

// Record returns the audit record for an authorization, for the caller to
// complete with the exit status, duration and byte counts once the
// operation has run.
func (a Authorization) Record(op Operation) Record {
	d := a.Decision
	r := Record{
		Time:            d.DecidedAt,
		AgentID:         d.AgentID,
		AgentName:       d.AgentName,
		ConnectionID:    d.ConnectionID,
		ConnectionAlias: d.ConnectionAlias,
		Class:           op.Class,
		Kind:            op.Kind,
		Outcome:         a.Outcome,
		Deciders:        a.Deciders(),
		Operation:       op.Text,
	}
	if r.AgentID == "" {
		r.AgentID = op.AgentID
	}
	if r.ConnectionAlias == "" {
		r.ConnectionAlias = op.ConnectionAlias
	}
	if a.Approval != nil {
		r.ApprovalID = a.Approval.ID
	}
	switch {
	case a.Err != nil && d.Err != nil:
		// A fail-closed decision: the store error is for the server log,
		// the audit keeps the reason the agent was given.
		r.Reason = d.Reason
	case a.Err != nil:
		r.Reason = Redact(a.Err.Error())
	}
	return r
}

// Audit appends r to the audit log, with the operation redacted, and returns
// its sequence number.
func (e *Engine) Audit(ctx context.Context, r Record) (int64, error) {
	if r.Time.IsZero() {
		r.Time = e.now()
	}
	row, err := e.appendAudit(ctx, store.AuditRow{
		Time:            r.Time,
		AgentID:         r.AgentID,
		AgentName:       r.AgentName,
		ConnectionID:    r.ConnectionID,
		ConnectionAlias: r.ConnectionAlias,
		Class:           string(r.Class),
		Kind:            string(r.Kind),
		Decision:        string(r.Outcome),
		Reason:          r.Reason,
		ApprovalID:      r.ApprovalID,
		Deciders:        r.Deciders,
		Operation:       Redact(r.Operation),
		ExitStatus:      r.ExitStatus,
		Duration:        r.Duration,
		BytesIn:         r.BytesIn,
		BytesOut:        r.BytesOut,
	}, ChainHash)
	if err != nil {
		err = fmt.Errorf("policy: audit: %w", err)
		if ctx.Err() == nil {
			e.setAuditErr(err)
		}
		return 0, err
	}
	e.setAuditErr(nil)
	return row.Seq, nil
}

// setAuditErr records the outcome of an audit write: err trips the guard
// that keeps Authorize from letting anything run, nil clears it. Each change
// is logged once, not per operation.
func (e *Engine) setAuditErr(err error) {
	e.healthMu.Lock()
	was := e.auditErr
	e.auditErr = err
	e.healthMu.Unlock()
	switch {
	case err != nil && was == nil:
		e.log.Error().Err(err).Msg("audit log cannot be written; refusing every operation until an audit row is written again")
	case err == nil && was != nil:
		e.log.Info().Msg("audit log writable again; operations are decided as usual")
	}
}

// recordable returns nil when an allowed operation's audit row can be
// written when it ends, and otherwise the reason to give the agent and the
// error for the log.
//
// An allowed operation is audited only once it has run, so a database that
// cannot take the row must stop it before it runs: postern fails closed.
// Two checks, both cheap next to the row itself: the last audit write did
// not fail (a full disk shows only there), and the database's write lock
// can be taken now (another process holding it, or a read-only database,
// shows there). After an audit failure, the next audit row written (that of
// the refusal, which the caller records) clears the first check.
func (e *Engine) recordable(ctx context.Context) (string, error) {
	e.healthMu.Lock()
	auditErr := e.auditErr
	e.healthMu.Unlock()
	// A lock or a read-only database is seen by the lock check as well, so
	// once that passes the audit failure is over; a full disk or an I/O
	// error is seen only by a write, and the guard stays until one works.
	probeClears := false
	if auditErr != nil {
		switch store.Fault(auditErr) {
		case store.FaultLocked, store.FaultReadOnly:
			probeClears = e.writable != nil
		}
		if !probeClears {
			return refusalReason("the audit log cannot be written", auditErr), fmt.Errorf("policy: refused: %w", auditErr)
		}
	}
	if e.writable == nil {
		return "", nil
	}
	if err := e.writable(ctx); err != nil {
		return refusalReason("the decision cannot be recorded", err), fmt.Errorf("policy: refused: %w", err)
	}
	if probeClears {
		e.setAuditErr(nil)
	}
	return "", nil
}

// refusalReason says why an operation was refused for a database fault, in
// words safe to show the agent: what failed and, when the store can tell,
// the fault ("the database is locked by another process").
func refusalReason(what string, err error) string {
	if f := store.Fault(err); f != "" {
		return what + " (" + f + "); refused, nothing ran"
	}
	return what + "; refused, nothing ran"
}
