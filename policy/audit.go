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
		return 0, fmt.Errorf("policy: audit: %w", err)
	}
	return row.Seq, nil
}
