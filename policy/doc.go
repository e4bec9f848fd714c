// Package policy decides what an agent may do through postern, makes a person
// approve what the rules say must be asked, and records every decision in a
// hash-chained audit log with secrets redacted.
//
// # Decisions
//
// Engine.Decide maps (agent, connection, class, operation) to Allow, Deny
// with a reason, or Ask, from the grant's rule for the operation's class. It
// fails closed: no grant, a disabled agent, an unknown class or any error
// reading the store is a denial. A grant's destructive rule on a production
// connection is never Allow; a stored Allow there (written before the rule
// existed, or by hand) is read as Ask with two approvers.
//
// # Approvals
//
// Engine.Authorize carries an Ask through: it writes an approval request
// bound to the exact operation (agent, connection, class, kind and the
// SHA-256 of the exact text) before it waits, then blocks until an admin
// approves or denies it, it expires (DefaultApprovalLifetime), its context
// ends or the engine closes. An approval lets exactly one operation through:
// the first to consume it wins. An agent that gave up waiting and sends the
// same operation again before expiry consumes the approved request, or waits
// on the still-pending one, instead of asking again.
//
// Requests that wait are bounded (Options.MaxPendingPerAgent, 10, and
// MaxPendingPerConnection, 50): past either bound a new request is not
// written but denied at once with TooManyPendingReason, and the approvers
// get one summary notification per episode instead of one per request
// (store.RequestApprovalWithin counts and writes in one transaction).
//
// The stored request keeps two forms of the operation: the SHA-256 of the
// exact text, which is what binds the approval, and the text with secrets
// redacted, which is what an admin reads before deciding. The exact text
// itself is not kept, so a password typed into a command does not sit in the
// approvals table any more than in the audit log.
//
// A decision made through this Engine wakes its waiters at once through a
// channel per request. A decision made by another process (the admin CLI) is
// noticed by one watcher goroutine that polls SQLite's PRAGMA data_version
// every DefaultPollInterval and, when the database changed, re-reads only the
// requests that have waiters.
//
// # Audit
//
// Engine.Audit appends one row per decision: who, where, the class, the
// outcome, the approval and its deciders, the operation with secrets redacted
// (Redact), and once the operation has run its exit status, duration and
// byte counts — never its output. The caller writes the row once, when the
// operation has finished or was refused, so rows are never updated and the
// chain (chain.go) stays verifiable by Verify.
package policy
