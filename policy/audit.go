package policy

import (
	"context"
	"fmt"
	"strings"
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
	// Reason says why it was denied or failed, the scope it ran under, or
	// how an operation that ran ended where ExitStatus cannot say (a
	// signal, the agent gone); "" otherwise.
	Reason     string
	ApprovalID string
	Deciders   []string // admins who approved or denied
	// Operation is the exact operation text; Audit redacts it before
	// storing. Never put the operation's output here.
	Operation string
	// ExitStatus is the command's exit status, or for an SFTP operation
	// the target's SFTP status code (0 for success); nil if it did not
	// run or gave none.
	ExitStatus *int
	Duration   time.Duration
	BytesIn    int64 // from the agent to the target
	BytesOut   int64 // from the target to the agent
	// InflightID is the operation's journal row (from Authorization);
	// Audit removes it in the transaction that appends this row.
	InflightID string
	// AgentReason is what the agent said the operation is for; Audit
	// redacts and cuts it as an approval does. SourceAddr is where the
	// agent connected from.
	AgentReason string
	SourceAddr  string
	// SessionID names the agent's SSH connection the operation came over
	// ("" for none, as for an admin's change), so that the rows of one
	// connection can be read together.
	SessionID string
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
		InflightID:      a.InflightID,
		AgentReason:     op.AgentReason,
		SourceAddr:      op.SourceAddr,
		SessionID:       op.SessionID,
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
	case d.Scope != nil && a.Err == nil:
		r.Reason = fmt.Sprintf("within the %s scope of approval %s, until %s", d.Scope.Scope, d.Scope.ID,
			d.Scope.ScopeExpiresAt.UTC().Format(time.RFC3339))
	case a.Err != nil && d.Err != nil:
		// A fail-closed decision: the store error is for the server log,
		// the audit keeps the reason the agent was given.
		r.Reason = d.Reason
	case a.Err != nil:
		r.Reason = Redact(a.Err.Error())
	}
	if op.TerminalLife > 0 {
		// The row says so in words (its duration says how long it
		// lasted): the command alone would read like one without.
		r.Reason = strings.TrimPrefix(r.Reason+"; "+TerminalNote, "; ")
	}
	return r
}

// TerminalNote is what a session with a terminal's audit row and request
// say of it.
const TerminalNote = "with a terminal: an interactive shell"

// Audit appends r to the audit log, with the operation redacted, and returns
// its sequence number.
func (e *Engine) Audit(ctx context.Context, r Record) (int64, error) {
	if r.Time.IsZero() {
		r.Time = e.now()
	}
	var row store.AuditRow
	var err error
	start := time.Now()
	if r.InflightID != "" && e.journal != nil {
		row, err = e.finish(ctx, r.InflightID, auditRow(r), ChainHash)
	} else {
		row, err = e.appendAudit(ctx, auditRow(r), ChainHash)
	}
	e.metrics.AuditWrite(time.Since(start))
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

// auditRow is r as the store keeps it: the operation redacted.
func auditRow(r Record) store.AuditRow {
	return store.AuditRow{
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
		AgentReason:     agentReason(r.AgentReason),
		SourceAddr:      r.SourceAddr,
		SessionID:       r.SessionID,
		ChainVersion:    chainCurrent,
	}
}

// InterruptedReason is the audit reason of an operation that a previous run
// of postern let through and did not see end.
const InterruptedReason = "postern stopped while the operation ran; how it ended is unknown"

// RecoverInterrupted appends an audit row, decision failed, for every
// operation that a previous run of postern let through and did not see end
// (it was killed or lost power while the operation ran), so that nothing
// that reached a target goes unrecorded. It returns how many it recorded.
// `postern serve` calls it before it accepts agents. The operations of
// replicas whose lease still runs are left alone (a replica serving the
// same database is running them), unless ReplicaOptions.Exclusive says no
// other can be; a replica's heartbeat recovers them once the lease runs
// out.
func (e *Engine) RecoverInterrupted(ctx context.Context) (int, error) {
	if e.journal == nil {
		return 0, nil
	}
	n, err := e.journal.RecoverInflight(ctx, ChainHash, InterruptedReason,
		store.RecoverOptions{Self: e.replica.ID, All: e.replicaOpts.Exclusive})
	if err != nil {
		return n, fmt.Errorf("policy: recover interrupted operations: %w", err)
	}
	return n, nil
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

// begin writes the journal row of an allowed or approved operation before
// it runs, and records its id in auth. It returns a reason for the agent
// and an error when the operation must not run because its record could not
// be kept.
//
// An allowed operation's audit row is written when it ends, so a database
// that cannot take rows must stop it before it runs: postern fails closed.
// Two checks: the last audit write did not fail (a full disk may show only
// there), and the journal row can be written now (a lock held by another
// process, a read-only or a full database show there). After an audit
// failure for a lock or a read-only database, a journal row written clears
// the first check; after any other, the next audit row written does (that
// of the refusal, which the caller records).
func (e *Engine) begin(ctx context.Context, auth *Authorization, op Operation) (string, error) {
	e.healthMu.Lock()
	auditErr := e.auditErr
	e.healthMu.Unlock()
	journalClears := false
	if auditErr != nil {
		switch store.Fault(auditErr) {
		case store.FaultLocked, store.FaultReadOnly:
			journalClears = e.journal != nil
		}
		if !journalClears {
			return refusalReason("the audit log cannot be written", auditErr), fmt.Errorf("policy: refused: %w", auditErr)
		}
	}
	if e.journal == nil {
		return "", nil
	}
	r := auth.Record(op)
	if r.Time.IsZero() {
		r.Time = e.now()
	}
	id, err := e.journal.BeginInflight(ctx, e.replica.ID, auditRow(r))
	if err != nil {
		return refusalReason("the decision cannot be recorded", err), fmt.Errorf("policy: refused: %w", err)
	}
	auth.InflightID = id
	if journalClears {
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
