package store

import (
	"context"
	"database/sql"
	"errors"
	"sync"
)

// Audited changes.
//
// An admin's change (a connection re-pinned, a grant set, a token made) is
// audited in the same transaction that makes it: either both are stored or
// neither is, so that the audit log never misses a change that happened nor
// shows one that did not. The store's write methods each run their own
// transaction, so the row rides in the context: Audit.bind attaches it, and
// the first write transaction made with that context appends it before it
// commits. Methods that create a record fill in its id with
// noteAuditSubject, since the caller cannot know it beforehand.

// PendingAudit is an audit row waiting for the change it records.
type PendingAudit struct {
	Row   AuditRow
	Chain ChainFunc

	// mu protects stored: the context may reach more than one goroutine.
	mu     sync.Mutex
	stored *AuditRow
}

// Stored is the row as appended, or nil while the change has not been
// committed (or failed).
func (p *PendingAudit) Stored() *AuditRow {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stored
}

// pendingAuditKey is the context key of a *PendingAudit.
type pendingAuditKey struct{}

// Audit is the audit row a configuration change is written with. Every
// store method that changes configuration (agents, connections, grants,
// tokens, admins, notification channels, change requests) takes one as its
// second argument, so that a change without its row does not compile, and
// appends it in the transaction of the change. Audited wraps a row
// (policy.ChangeAudit makes them); Unaudited is for test fixtures, and
// TestUnauditedOnlyInTests keeps it out of every other file.
type Audit struct {
	p       *PendingAudit
	fixture bool
}

// Audited is the audit argument that appends p with the change.
func Audited(p *PendingAudit) Audit { return Audit{p: p} }

// Unaudited is the audit argument of a test's fixture: the change is
// written without a row. No code outside tests may use it.
func Unaudited() Audit { return Audit{fixture: true} }

// bind is ctx carrying a's row for the method's transaction; the zero
// Audit (neither a row nor a fixture's) is refused, so that forgetting the
// row fails rather than writes unaudited.
func (a Audit) bind(ctx context.Context) (context.Context, error) {
	switch {
	case a.fixture:
		return ctx, nil
	case a.p == nil || a.p.Chain == nil:
		return ctx, errors.New("store: a configuration change needs its audit row")
	}
	return withAudit(ctx, a.p), nil
}

// withAudit returns ctx carrying p: the next write transaction made with it
// (one store method call) appends p.Row before it commits. A call that
// changes nothing (refused input, a record that does not exist) appends
// nothing.
func withAudit(ctx context.Context, p *PendingAudit) context.Context {
	return context.WithValue(ctx, pendingAuditKey{}, p)
}

func pendingAudit(ctx context.Context) *PendingAudit {
	p, _ := ctx.Value(pendingAuditKey{}).(*PendingAudit)
	if p == nil || p.Chain == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stored != nil {
		return nil
	}
	return p
}

// noteAuditSubject fills the ids and names a pending audit row leaves
// empty, for the method that creates the record it is about.
func noteAuditSubject(ctx context.Context, agentID, agentName, connectionID, alias string) {
	p := pendingAudit(ctx)
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	r := &p.Row
	for _, f := range []struct {
		dst *string
		val string
	}{
		{&r.AgentID, agentID}, {&r.AgentName, agentName}, {&r.ConnectionID, connectionID}, {&r.ConnectionAlias, alias},
	} {
		if *f.dst == "" {
			*f.dst = f.val
		}
	}
}

// appendPendingAudit appends ctx's pending audit row, if any, in tx; the
// caller commits tx and then calls the returned func to mark it stored.
func (s *Store) appendPendingAudit(ctx context.Context, tx *sql.Tx) (func(), error) {
	p := pendingAudit(ctx)
	if p == nil {
		return func() {}, nil
	}
	p.mu.Lock()
	row := p.Row
	p.mu.Unlock()
	if err := checkDeciders(row.Deciders); err != nil {
		return nil, err
	}
	stored, err := appendAuditTx(ctx, tx, row, p.Chain, auditStmts{}, s.nowUTC)
	if err != nil {
		return nil, err
	}
	return func() {
		p.mu.Lock()
		p.stored = &stored
		p.mu.Unlock()
	}, nil
}
