package policy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/postern/postern/metrics"
	"github.com/postern/postern/store"
)

// DefaultApprovalLifetime is how long an approval request waits for a
// decision, and how long an approved request stays usable by a retry.
// Two minutes is long enough for an admin who watches the page and short
// enough that an agent's session is not held open for a human who is away.
const DefaultApprovalLifetime = 2 * time.Minute

// DefaultMaxPendingPerAgent bounds the approval requests of one agent that
// wait for a decision at once; past it a new request is denied at once.
// One agent opened 60 requests in 6 seconds (issue 23), each a card and a
// notification: nobody reviews sixty cards, and the one that matters is
// lost among them. Ten is more than a person decides in one sitting and
// more than an agent working in earnest has waiting.
const DefaultMaxPendingPerAgent = 10

// DefaultMaxPendingPerConnection bounds the approval requests on one
// connection, of every agent, that wait at once: five agents at their own
// bound, so that a connection several agents share still has room while
// no set of agents can bury its approvers.
const DefaultMaxPendingPerConnection = 50

// DefaultPollInterval is how often the watcher checks PRAGMA data_version for
// decisions made by another process. At 100 ms a decision made with the admin
// CLI reaches its waiter well within 250 ms (docs/perf-policy.md measures
// it), and the check costs one tiny query on an idle database.
const DefaultPollInterval = 100 * time.Millisecond

// Store is what the engine needs from package store; *store.Store
// implements it. It is an interface so that tests can inject failures.
type Store interface {
	PolicyFacts(ctx context.Context, agentID, connectionID, alias string) (store.PolicyFacts, error)
	RequestApprovalWithin(ctx context.Context, req store.Approval, lifetime time.Duration, limits store.PendingLimits) (store.Approval, store.RequestOutcome, error)
	GetApproval(ctx context.Context, id string) (store.Approval, error)
	ConsumeApproval(ctx context.Context, id string) (store.Approval, bool, error)
	DecideApproval(ctx context.Context, d store.Decision) (store.Approval, store.DecideOutcome, error)
	ActiveScope(ctx context.Context, agentID, connectionID, class, operationSHA256 string) (store.Approval, bool, error)
	RevokeScope(ctx context.Context, id string, by store.Decider) (store.Approval, error)
	ExpireApproval(ctx context.Context, id string) (store.Approval, bool, error)
	ExpireApprovals(ctx context.Context) (int64, error)
	ListApprovals(ctx context.Context, all bool) ([]store.Approval, error)
	ApprovalStatuses(ctx context.Context, ids []string) (map[string]string, error)
	AppendAudit(ctx context.Context, row store.AuditRow, chain store.ChainFunc) (store.AuditRow, error)
	ScanAudit(ctx context.Context, fn func(store.AuditRow) error) error
	DataVersion(ctx context.Context) (int64, error)
}

// preparer is implemented by *store.Store: statements for the per-operation
// queries, prepared once. New uses them when the store offers them.
type preparer interface {
	PreparePolicy(ctx context.Context) (*store.PolicyStatements, error)
}

// journal is implemented by *store.Store: the journal of operations that
// were let through and have not ended (store/migrations/0004_inflight.sql).
// Writing an operation's journal row before it runs is what proves that its
// audit row can be recorded, and what lets a restart record an operation
// whose end postern did not see.
type journal interface {
	BeginInflight(ctx context.Context, owner string, row store.AuditRow) (string, error)
	FinishInflight(ctx context.Context, id string, row store.AuditRow, chain store.ChainFunc) (store.AuditRow, error)
	RecoverInflight(ctx context.Context, chain store.ChainFunc, reason string, opts store.RecoverOptions) (int, error)
}

// Approval is a stored approval request.
type Approval = store.Approval

// Options configure New.
type Options struct {
	Store            Store            // required
	Now              func() time.Time // time.Now if nil; give it the store's clock
	ApprovalLifetime time.Duration    // DefaultApprovalLifetime if zero
	PollInterval     time.Duration    // DefaultPollInterval if zero
	Logger           *zerolog.Logger  // no logging if nil
	// MaxPendingPerAgent and MaxPendingPerConnection bound the requests
	// that wait for a decision at once (DefaultMaxPendingPerAgent and
	// DefaultMaxPendingPerConnection if zero; negative is an error).
	MaxPendingPerAgent      int
	MaxPendingPerConnection int
	// Replica, when set, registers the engine as one replica of the
	// database (postern serve): its operations are journaled under its id,
	// and a heartbeat keeps its lease and recovers the operations of
	// replicas that stopped (replica.go). Nil for the admin CLI and tests.
	Replica *ReplicaOptions
	// Metrics counts decisions, approval waits and audit writes; none if
	// nil.
	Metrics *metrics.Metrics
}

// Engine makes decisions, runs approvals and writes the audit log. It is safe
// for concurrent use. Close it to stop its watcher goroutine and release its
// waiters; it does not close the store.
type Engine struct {
	st       Store
	now      func() time.Time
	lifetime time.Duration
	poll     time.Duration
	pending  store.PendingLimits // the bounds on waiting requests
	log      zerolog.Logger
	metrics  *metrics.Metrics // nil-safe

	// facts and appendAudit are the store's methods, or their prepared
	// forms from prepared, which Close releases.
	facts       func(ctx context.Context, agentID, connectionID, alias string) (store.PolicyFacts, error)
	appendAudit func(ctx context.Context, row store.AuditRow, chain store.ChainFunc) (store.AuditRow, error)
	prepared    *store.PolicyStatements
	// journal is the store's journal, or nil for a store without one (a
	// test's fake); finish is its FinishInflight, prepared when it can be.
	journal journal
	finish  func(ctx context.Context, id string, row store.AuditRow, chain store.ChainFunc) (store.AuditRow, error)

	// replica is this engine's registration when Options.Replica was set
	// (its zero value otherwise), renewed through replicas; set in New.
	replica     store.Replica
	replicaOpts ReplicaOptions
	replicas    replicaStore

	// healthMu guards auditErr. It is never held while calling the store.
	healthMu sync.Mutex
	// auditErr is the failure of the last Audit, and nil once an Audit
	// succeeds again. While it is set, Authorize lets nothing run: an
	// operation that ran must leave an audit row.
	auditErr error

	// life ends with Close (cancel); done is its Done channel, on which
	// waiters and the watcher return, and life also aborts the watcher's
	// in-flight queries.
	life      context.Context
	cancel    context.CancelFunc
	done      <-chan struct{}
	closeOnce sync.Once
	watcherWG sync.WaitGroup

	// mu guards waiters, watching and closed. It is never held while
	// calling the store.
	mu sync.Mutex
	// waiters maps an approval id to the slot its waiters block on. A
	// decision closes the slot's channel and removes it; a waiter that
	// finds the request still pending registers again.
	waiters  map[string]*waitSlot
	watching bool // the watcher goroutine has been started
	closed   bool
}

// New returns an engine over opts.Store. The watcher goroutine starts with
// the first wait, so a short-lived engine (the admin CLI) starts none.
func New(opts Options) (*Engine, error) {
	if opts.Store == nil {
		return nil, errors.New("policy: New needs a store")
	}
	if opts.MaxPendingPerAgent < 0 || opts.MaxPendingPerConnection < 0 {
		return nil, fmt.Errorf("policy: bounds on waiting requests %d per agent, %d per connection: want 0 (the default) or more",
			opts.MaxPendingPerAgent, opts.MaxPendingPerConnection)
	}
	e := &Engine{
		st:       opts.Store,
		now:      opts.Now,
		lifetime: opts.ApprovalLifetime,
		poll:     opts.PollInterval,
		log:      zerolog.Nop(),
		waiters:  make(map[string]*waitSlot),
		metrics:  opts.Metrics,
		pending: store.PendingLimits{
			PerAgent:      cmp.Or(opts.MaxPendingPerAgent, DefaultMaxPendingPerAgent),
			PerConnection: cmp.Or(opts.MaxPendingPerConnection, DefaultMaxPendingPerConnection),
		},
	}
	e.life, e.cancel = context.WithCancel(context.Background())
	e.done = e.life.Done()
	if e.now == nil {
		e.now = time.Now
	}
	if e.lifetime <= 0 {
		e.lifetime = DefaultApprovalLifetime
	}
	if e.poll <= 0 {
		e.poll = DefaultPollInterval
	}
	if opts.Logger != nil {
		e.log = *opts.Logger
	}
	e.facts, e.appendAudit = opts.Store.PolicyFacts, opts.Store.AppendAudit
	if j, ok := opts.Store.(journal); ok {
		e.journal, e.finish = j, j.FinishInflight
	}
	if p, ok := opts.Store.(preparer); ok {
		ps, err := p.PreparePolicy(context.Background())
		if err != nil {
			e.cancel()
			return nil, fmt.Errorf("policy: %w", err)
		}
		e.prepared, e.facts, e.appendAudit = ps, ps.PolicyFacts, ps.AppendAudit
		if e.journal != nil {
			e.finish = ps.FinishInflight
		}
	}
	if opts.Replica != nil {
		if err := e.joinReplicas(*opts.Replica); err != nil {
			e.Close()
			return nil, err
		}
	}
	return e, nil
}

// Close stops the watcher, makes every current and future Wait return
// ErrClosed and releases the prepared statements. Close the engine before
// its store. It is safe to call more than once.
func (e *Engine) Close() error {
	var err error
	e.closeOnce.Do(func() {
		e.mu.Lock()
		e.closed = true
		e.mu.Unlock()
		e.cancel()
		e.watcherWG.Wait()
		e.unregister()
		if e.prepared != nil {
			err = e.prepared.Close()
		}
	})
	return err
}

// ApprovalLifetime is how long this engine's approval requests live.
func (e *Engine) ApprovalLifetime() time.Duration { return e.lifetime }

// PendingLimits are this engine's bounds on waiting requests.
func (e *Engine) PendingLimits() store.PendingLimits { return e.pending }

// Decision is the answer for one operation.
type Decision struct {
	Rule   Rule   // Allow, Ask or Deny; never empty
	Reason string // why, for Deny; safe to show the agent
	// NoGrant: the agent has no grant for the connection, or the agent or
	// connection does not exist. Callers answer "no such alias".
	NoGrant bool
	// ApprovalsNeeded is 2 for Ask on a production destructive operation,
	// when two different admins must approve, and 1 for any other Ask.
	ApprovalsNeeded int
	// Err is the error behind a fail-closed denial, for the server's log;
	// never show it to the agent.
	Err error

	// What the decision was about, for messages and the audit log.
	AgentID         string
	AgentName       string
	ConnectionID    string
	ConnectionAlias string
	Env             string
	DecidedAt       time.Time
	// Scope is set when the rule said ask and an active scope of an
	// earlier approval lets the operation through: Rule is then Allow,
	// and the operation is audited as approved by that approval.
	Scope *Approval
}

// Decide answers op from the grant's rule for op.Class. It never returns an
// error: anything that goes wrong is a Deny carrying the error in Err.
func (e *Engine) Decide(ctx context.Context, op Operation) Decision {
	d := Decision{Rule: Deny, AgentID: op.AgentID, ConnectionID: op.ConnectionID,
		ConnectionAlias: op.ConnectionAlias, DecidedAt: e.now()}
	if !op.Class.Valid() {
		d.Reason = "the operation has no valid class"
		d.Err = fmt.Errorf("policy: invalid class %q", op.Class)
		return d
	}
	if !op.Kind.Valid() {
		d.Reason = "the operation has no valid kind"
		d.Err = fmt.Errorf("policy: invalid kind %q", op.Kind)
		return d
	}
	f, err := e.facts(ctx, op.AgentID, op.ConnectionID, op.ConnectionAlias)
	if errors.Is(err, store.ErrNotFound) {
		d.NoGrant = true
		d.Reason = "no such connection"
		return d
	}
	if err != nil {
		d.Reason = "policy error; refused"
		if f := store.Fault(err); f != "" {
			d.Reason = "policy error (" + f + "); refused"
		}
		d.Err = fmt.Errorf("policy: decide: %w", err)
		return d
	}
	d.AgentName, d.ConnectionID, d.ConnectionAlias, d.Env = f.AgentName, f.ConnectionID, f.ConnectionAlias, f.Env
	if !op.ConnectionModifiedAt.IsZero() && !op.ConnectionModifiedAt.Equal(f.ConnectionModifiedAt) {
		d.Reason = "the connection changed while the operation was being decided; refused"
		d.Err = ErrConnectionChanged
		return d
	}
	switch {
	case f.AgentDisabled:
		d.Reason = "agent " + f.AgentName + " is disabled"
		return d
	case f.Lock != nil && f.Lock.Kind == store.LockAgent:
		d.Reason = f.Lock.Words()
		return d
	case !f.HasGrant:
		d.NoGrant = true
		d.Reason = "no such connection"
		return d
	case f.Lock != nil:
		// After the grant check: an agent learns of a lock only on a
		// connection it may see.
		d.Reason = f.Lock.Words()
		return d
	}
	rules := Rules{Read: Rule(f.ReadRule), Write: Rule(f.WriteRule), Destructive: Rule(f.DestructiveRule)}
	rule, err := ruleFor(rules, op.Class)
	if err != nil {
		// An unknown rule word in the database: refuse.
		d.Reason = "policy error; refused"
		d.Err = fmt.Errorf("policy: grant of %s on %s: %w", f.AgentName, f.ConnectionAlias, err)
		return d
	}
	twoPerson := f.Env == string(store.EnvProduction) && op.Class == Destructive
	if twoPerson && rule == Allow {
		// store.ValidateGrant forbids this at grant time; a stored allow here was
		// written around it, so ask rather than trust it.
		rule = Ask
	}
	d.Rule = rule
	switch rule {
	case Deny:
		d.Reason = fmt.Sprintf("%s operations on %s are denied for %s", op.Class, f.ConnectionAlias, f.AgentName)
	case Ask:
		d.ApprovalsNeeded = 1
		if twoPerson {
			d.ApprovalsNeeded = 2
			return d // never scoped: one operation, two people, every time
		}
		e.applyScope(ctx, &d, op)
	}
	return d
}

// applyScope lets an asked operation through when an admin approved it, or
// its class, with a scope that is still active. A failure to read the
// scopes leaves the decision at Ask: the safer outcome.
func (e *Engine) applyScope(ctx context.Context, d *Decision, op Operation) {
	if op.TerminalLife > 0 {
		return // no scope covers a session with a terminal
	}
	a, ok, err := e.st.ActiveScope(ctx, d.AgentID, d.ConnectionID, string(op.Class), OperationHash(op.Text))
	if err != nil {
		e.log.Warn().Err(err).Str("agent", d.AgentName).Str("alias", d.ConnectionAlias).
			Msg("reading approval scopes failed; asking instead")
		return
	}
	if ok {
		d.Rule, d.Scope = Allow, &a
	}
}
