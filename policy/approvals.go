package policy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/postern/postern/store"
)

// Authorization is the result of Authorize: what was decided and, when the
// operation was approved, the approval it consumed. It is filled in on every
// return, including refusals, so that the caller can audit with Record.
type Authorization struct {
	Decision Decision
	// Outcome is Allowed or Approved when the operation may run (err nil);
	// otherwise Denied, Expired, Asked (the caller stopped waiting) or Failed.
	Outcome  Outcome
	Approval *Approval // the request, when the rule was Ask and one was made or found
	Err      error     // the error Authorize returned, for Record's reason
	// InflightID is the journal row written before an allowed or approved
	// operation runs; Record carries it to Audit, which removes it.
	InflightID string
}

// Deciders lists the admins who decided the approval, if any.
func (a Authorization) Deciders() []string {
	if a.Approval == nil {
		return nil
	}
	return a.Approval.Deciders()
}

// TooManyPendingReason is the reason of a denial by the bound on waiting
// requests (Options.MaxPendingPerAgent, MaxPendingPerConnection): what the
// agent reads and the audit row keeps.
const TooManyPendingReason = store.TooManyPendingReason

// Authorize decides op and, when the rule says ask, obtains the approval:
// it returns nil when the operation may run now, exactly once.
//
// For Ask it first looks for an identical request of the same agent on the
// same connection that is approved and unused (consumed at once) or still
// pending (waited on); otherwise it writes a new request, calls onWait (may
// be nil) so the caller can tell the agent what it waits for, and waits.
// onWait is called before the wait and after the request is stored. When
// the agent or the connection already has as many requests waiting as
// its bound allows, nothing is stored and the operation is denied at once
// with TooManyPendingReason.
//
// Errors: *DeniedError (rule, admin or no grant; matches ErrDenied),
// ErrExpired, ErrAlreadyUsed, ErrClosed, the context's error, or a store
// error (Outcome Failed).
func (e *Engine) Authorize(ctx context.Context, op Operation, onWait func(Approval)) (Authorization, error) {
	d := e.Decide(ctx, op)
	auth, err := e.authorize(ctx, op, d, onWait)
	// The rule counted is the grant's, as decided first: an ask that was
	// denied by an admin stays under ask.
	e.metrics.Decision(string(op.Class), string(d.Rule), string(auth.Outcome))
	return auth, err
}

// authorize carries Authorize on from the decision d.
func (e *Engine) authorize(ctx context.Context, op Operation, d Decision, onWait func(Approval)) (Authorization, error) {
	auth := Authorization{Decision: d}
	fail := func(o Outcome, err error) (Authorization, error) {
		auth.Outcome, auth.Err = o, err
		return auth, err
	}
	switch d.Rule {
	case Allow:
		auth.Outcome = Allowed
		if d.Scope != nil {
			auth.Outcome, auth.Approval = Approved, d.Scope
		}
		if reason, err := e.begin(ctx, &auth, op); err != nil {
			auth.Decision.Rule, auth.Decision.Reason, auth.Decision.Err = Deny, reason, err
			return fail(Failed, &DeniedError{Reason: reason})
		}
		return auth, nil
	case Deny:
		o := Denied
		if d.Err != nil {
			o = Failed
		}
		return fail(o, &DeniedError{Reason: d.Reason, NoGrant: d.NoGrant, Err: d.Err})
	}
	a, outcome, err := e.st.RequestApprovalWithin(ctx, store.Approval{
		AgentID:         d.AgentID,
		ConnectionID:    d.ConnectionID,
		Class:           string(op.Class),
		Kind:            string(op.Kind),
		Operation:       Redact(op.Text),
		Reasons:         Redact(op.Reasons),
		OperationSHA256: OperationHash(op.Text),
		ApprovalsNeeded: d.ApprovalsNeeded,
		AgentReason:     agentReason(op.AgentReason),
		SourceAddr:      op.SourceAddr,
		TerminalLife:    op.TerminalLife,
	}, e.lifetime, e.pending)
	var bound *store.PendingBoundError
	if errors.As(err, &bound) {
		// A denial like a rule's, audited with its reason; the approvers
		// were told once, by the summary the episode's first refusal
		// queued.
		if bound.Summary {
			e.log.Warn().Str("agent", d.AgentName).Str("alias", d.ConnectionAlias).Str("bound", bound.Scope).
				Int("waiting", bound.Waiting).Msg("bound on waiting requests reached; further requests are denied until the queue drains")
		}
		return fail(Denied, &DeniedError{Reason: TooManyPendingReason})
	}
	if err != nil {
		return fail(Failed, fmt.Errorf("policy: request approval: %w", err))
	}
	auth.Approval = &a
	if outcome == store.RequestClaimed {
		auth.Outcome = Approved
		if reason, err := e.begin(ctx, &auth, op); err != nil {
			auth.Decision.Rule, auth.Decision.Reason, auth.Decision.Err = Deny, reason, err
			return fail(Failed, &DeniedError{Reason: reason})
		}
		e.log.Info().Str("approval", a.ID).Str("agent", d.AgentName).Str("alias", d.ConnectionAlias).
			Msg("approved request consumed by a retry")
		return auth, nil
	}
	// Counted before the agent is told, so that whoever sees the wait
	// (the agent, a test's hook) finds it in the pending gauge.
	e.metrics.ApprovalWaitStarted()
	waitStart := time.Now()
	if onWait != nil {
		onWait(a)
	}
	auth, err = e.waitApproval(ctx, op, auth)
	e.metrics.ApprovalWaitEnded(string(auth.Outcome), time.Since(waitStart))
	return auth, err
}

// waitApproval waits for auth's approval request to be decided and says
// whether op may run.
func (e *Engine) waitApproval(ctx context.Context, op Operation, auth Authorization) (Authorization, error) {
	fail := func(o Outcome, err error) (Authorization, error) {
		auth.Outcome, auth.Err = o, err
		return auth, err
	}
	a := *auth.Approval
	got, err := e.Wait(ctx, a.ID)
	if got.ID != "" {
		auth.Approval = &got
	}
	switch {
	case err == nil:
		// The grant was read before the wait, which can last minutes: an
		// admin may have revoked it or set the class to deny meanwhile, and
		// an approval of the operation does not outrank that. The approval
		// stays consumed: it was for this operation, which does not run.
		// The connection may change during the wait (a key check moves its
		// row) without making the approved operation another one: only
		// the grant is checked again.
		again := op
		again.ConnectionModifiedAt = time.Time{}
		if now := e.Decide(ctx, again); now.Rule == Deny {
			auth.Decision = now
			o := Denied
			if now.Err != nil {
				o = Failed
			}
			return fail(o, &DeniedError{Reason: "the grant changed while approval " + a.ID + " waited: " + now.Reason, NoGrant: now.NoGrant, Err: now.Err})
		}
		auth.Outcome = Approved
		if reason, err := e.begin(ctx, &auth, op); err != nil {
			auth.Decision.Rule, auth.Decision.Reason, auth.Decision.Err = Deny, reason, err
			return fail(Failed, &DeniedError{Reason: reason})
		}
		return auth, nil
	case errors.Is(err, ErrDenied):
		return fail(Denied, err)
	case errors.Is(err, ErrExpired):
		return fail(Expired, err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), errors.Is(err, ErrClosed):
		return fail(Asked, err)
	}
	return fail(Failed, err)
}

// OperationHash is the hex SHA-256 of the exact operation text, which binds
// an approval to the operation it was asked for.
func OperationHash(text string) string {
	sum := sha256.Sum256([]byte(text))
	return hex.EncodeToString(sum[:])
}

// Wait blocks until approval request id is decided and, if it was approved,
// consumes it for the caller. It returns the request and nil when the caller
// may run the operation, and otherwise *DeniedError, ErrExpired,
// ErrAlreadyUsed (another caller consumed it), ErrClosed or the context's
// error. Every wait is bounded by the request's expiry.
//
// A waiter registers for wakeups before it reads the request, so a decision
// committed between the read and the wait is never missed.
func (e *Engine) Wait(ctx context.Context, id string) (Approval, error) {
	for {
		ch, release, err := e.register(id)
		if err != nil {
			return Approval{}, err
		}
		a, err := e.st.GetApproval(ctx, id)
		if err != nil {
			release()
			return Approval{}, fmt.Errorf("policy: wait for approval %s: %w", id, err)
		}
		switch a.Status {
		case store.ApprovalApproved:
			release()
			return e.consume(ctx, a)
		case store.ApprovalDenied:
			release()
			return a, &DeniedError{Reason: deniedReason(a)}
		case store.ApprovalExpired:
			release()
			return a, fmt.Errorf("%w: %s was not decided within %v", ErrExpired, id, a.ExpiresAt.Sub(a.CreatedAt))
		}
		left := a.ExpiresAt.Sub(e.now())
		if left <= 0 {
			release()
			got, changed, err := e.st.ExpireApproval(ctx, id)
			if err != nil {
				return a, fmt.Errorf("policy: expire approval %s: %w", id, err)
			}
			if !changed && got.Status == store.ApprovalPending {
				// The store's clock is behind ours: give it a moment rather
				// than spin.
				if err := e.sleep(ctx, e.poll); err != nil {
					return a, err
				}
			}
			continue // re-read: a decision may have beaten the expiry
		}
		timer := time.NewTimer(left)
		select {
		case <-ch:
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			release()
			return a, fmt.Errorf("policy: stopped waiting for approval %s: %w", id, ctx.Err())
		case <-e.done:
			timer.Stop()
			release()
			return a, ErrClosed
		}
		timer.Stop()
		release()
	}
}

// sleep waits for d, the context or Close.
func (e *Engine) sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("policy: stopped waiting: %w", ctx.Err())
	case <-e.done:
		return ErrClosed
	}
}

func deniedReason(a Approval) string {
	msg := "approval " + a.ID + " was denied by " + a.DecidedBy
	if a.Reason != "" {
		// Deny refuses a reason that would not show as itself; one
		// stored before that rule, or by hand, is escaped here.
		msg += ": " + VisibleLine(a.Reason)
	}
	return msg
}

// consume takes an approved request for the caller; of several callers only
// one gets it.
func (e *Engine) consume(ctx context.Context, a Approval) (Approval, error) {
	got, ok, err := e.st.ConsumeApproval(ctx, a.ID)
	if err != nil {
		return a, fmt.Errorf("policy: consume approval %s: %w", a.ID, err)
	}
	if !ok {
		return got, fmt.Errorf("%w: %s", ErrAlreadyUsed, a.ID)
	}
	return got, nil
}

// Approve records by's approval of request id, of the given scope, and
// wakes its waiters. For a request that needs two admins, the first call
// records a pending second approval and returns the request still pending;
// the second call, by a different admin (a different AdminID, whatever the
// names), approves it. Errors: ErrInvalidAdmin, ErrScope, ErrSameApprover,
// *AlreadyDecidedError (matches ErrAlreadyDecided), ErrExpired, or a store
// error (store.ErrNotFound for an unknown id).
func (e *Engine) Approve(ctx context.Context, id string, by Decider, scope Scope) (Approval, error) {
	return e.decide(ctx, store.Decision{ID: id, Approve: true, By: by}, scope)
}

// Deny records by's denial of request id, with an optional reason shown to
// the agent, and wakes its waiters. The reason, trimmed of surrounding
// spaces, must pass CheckAdminText (at most MaxDenyReason bytes on one line,
// every character visible), or nothing is recorded and the error matches
// ErrInvalidText: this is the one place the rule is kept, for every door.
// Other errors as for Approve.
func (e *Engine) Deny(ctx context.Context, id string, by Decider, reason string) (Approval, error) {
	reason = strings.TrimSpace(reason)
	if err := CheckAdminText("reason", reason, MaxDenyReason); err != nil {
		return Approval{}, err
	}
	return e.decide(ctx, store.Decision{ID: id, By: by, Reason: reason}, Scope{})
}

func (e *Engine) decide(ctx context.Context, d store.Decision, scope Scope) (Approval, error) {
	d.By.Name = strings.TrimSpace(d.By.Name)
	if err := checkAdmin(d.By); err != nil {
		return Approval{}, err
	}
	if err := e.scopeFor(ctx, &d, scope); err != nil {
		return Approval{}, err
	}
	id, admin := d.ID, d.By.Name
	a, outcome, err := e.st.DecideApproval(ctx, d)
	if err != nil {
		return Approval{}, fmt.Errorf("policy: decide approval %s: %w", id, err)
	}
	switch outcome {
	case store.DecideApproved, store.DecideDenied:
		e.notify(id)
		ev := e.log.Info().Str("approval", id).Str("admin", admin).Str("status", a.Status)
		if a.Scope != store.ScopeRequest {
			ev = ev.Str("scope", string(a.Scope)).Time("scope_until", a.ScopeExpiresAt)
		}
		ev.Msg("approval decided")
		return a, nil
	case store.DecideFirstApproval:
		e.log.Info().Str("approval", id).Str("admin", admin).Msg("first of two approvals recorded")
		return a, nil
	case store.DecideSameApprover:
		return a, refusef(ErrSameApprover, "%s already approved %s", admin, id)
	case store.DecideExpired:
		e.notify(id)
		return a, refusef(ErrExpired, "%s expired at %s", id, a.ExpiresAt.Format(time.RFC3339))
	}
	return a, &AlreadyDecidedError{ID: id, Status: a.Status, Deciders: a.Deciders()}
}

// scopeFor checks scope against the request and sets d's scope from it. A
// production destructive request is never scoped, whatever its stored
// number of approvals says (its connection may have moved to production
// since it was asked).
func (e *Engine) scopeFor(ctx context.Context, d *store.Decision, scope Scope) error {
	if scope.Kind == "" || scope.Kind == store.ScopeRequest {
		if scope.For != 0 {
			return refusef(ErrScope, "an approval of one request has no duration")
		}
		return nil
	}
	if !scope.Kind.Valid() {
		return refusef(ErrScope, "unknown scope %q; want request, operation or class", scope.Kind)
	}
	if !d.Approve {
		return refusef(ErrScope, "a denial has no scope")
	}
	if scope.For <= 0 || scope.For > MaxScope {
		return refusef(ErrScope, "a %s scope lasts more than 0 and at most %v, not %v", scope.Kind, MaxScope, scope.For)
	}
	a, err := e.st.GetApproval(ctx, d.ID)
	if err != nil {
		return fmt.Errorf("policy: decide approval %s: %w", d.ID, err)
	}
	if a.ApprovalsNeeded != 1 || Class(a.Class) == Destructive && a.ConnectionEnv == store.EnvProduction {
		return refusef(ErrScope, "a destructive operation on a production connection is approved one operation at a time, by two admins")
	}
	if a.TerminalLife > 0 {
		return refusef(ErrScope, "a session with a terminal is an interactive shell: it is approved one session at a time, never with a scope")
	}
	d.Scope, d.ScopeExpiresAt = scope.Kind, e.now().Add(scope.For)
	return nil
}

// RevokeScope ends the scope of approval id at once; operations it would
// have let through are asked again.
func (e *Engine) RevokeScope(ctx context.Context, id string, by Decider) (Approval, error) {
	if err := checkAdmin(by); err != nil {
		return Approval{}, err
	}
	a, err := e.st.RevokeScope(ctx, id, by)
	if err != nil {
		return Approval{}, fmt.Errorf("policy: revoke scope of %s: %w", id, err)
	}
	e.log.Info().Str("approval", id).Str("admin", by.Name).Str("scope", string(a.Scope)).Msg("approval scope revoked")
	return a, nil
}

// checkAdmin rejects a decision without an admin's identity, and names
// that would be ambiguous in the audit log's comma-separated deciders.
func checkAdmin(by Decider) error {
	if by.AdminID == "" {
		return refusef(ErrInvalidAdmin, "a decision needs a registered admin")
	}
	if by.Name == "" {
		return refusef(ErrInvalidAdmin, "a decision needs the admin's name")
	}
	if strings.ContainsFunc(by.Name, func(r rune) bool { return r == ',' || r < ' ' || r == 0x7f }) {
		return refusef(ErrInvalidAdmin, "%q has a comma or control character", by.Name)
	}
	return nil
}

// Approvals lists pending requests, or all requests when all is true, after
// marking overdue ones expired so that the list tells the truth.
func (e *Engine) Approvals(ctx context.Context, all bool) ([]Approval, error) {
	if _, err := e.st.ExpireApprovals(ctx); err != nil {
		return nil, fmt.Errorf("policy: list approvals: %w", err)
	}
	list, err := e.st.ListApprovals(ctx, all)
	if err != nil {
		return nil, fmt.Errorf("policy: list approvals: %w", err)
	}
	return list, nil
}
