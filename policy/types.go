package policy

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/postern/postern/store"
)

// Class is what an operation can do: read < write < destructive.
//
// It is a string, not shellclass.Class, on purpose: shellclass's zero value is
// Read (right for a classifier that only ever raises a class), but here a
// zero value must fail closed, and the empty Class is invalid and denied.
// Convert with ParseClass(c.String()).
type Class string

// The classes, in rising order.
const (
	Read        Class = "read"
	Write       Class = "write"
	Destructive Class = "destructive"
)

// ParseClass parses "read", "write" or "destructive" (any case).
func ParseClass(s string) (Class, error) {
	c := Class(strings.ToLower(strings.TrimSpace(s)))
	if !c.Valid() {
		return "", fmt.Errorf("policy: unknown class %q; want read, write or destructive", s)
	}
	return c, nil
}

// Valid reports whether c is one of the three classes.
func (c Class) Valid() bool { return c == Read || c == Write || c == Destructive }

// Rule is a grant's answer for one class: allow, ask or deny. It is the
// store's type, so that a grant read from the database needs no conversion.
// The empty Rule is invalid and treated as Deny.
type Rule = store.Rule

// The rules.
const (
	Allow = store.RuleAllow
	Ask   = store.RuleAsk
	Deny  = store.RuleDeny
)

// Rules is a grant's rule for each class.
type Rules = store.Rules

// DefaultRules is what a new grant gets: read allowed, the rest denied.
// postern ships read-only, and an admin turns the rest on.
func DefaultRules() Rules { return store.DefaultRules() }

// ruleFor returns the rule of rules for class c, or an error (and Deny)
// for an invalid class or a rule word that is not allow, ask or deny.
func ruleFor(rules Rules, c Class) (Rule, error) {
	var r Rule
	switch c {
	case Read:
		r = rules.Read
	case Write:
		r = rules.Write
	case Destructive:
		r = rules.Destructive
	default:
		return Deny, fmt.Errorf("policy: invalid class %q", c)
	}
	if _, err := store.ParseRule(string(r)); err != nil {
		return Deny, fmt.Errorf("policy: %s rule: %w", c, err)
	}
	return r, nil
}

// Kind is how an operation reaches the target.
type Kind string

// The kinds of operation.
const (
	Exec Kind = "exec" // a command, or an interactive shell
	SFTP Kind = "sftp" // one SFTP request
)

// Valid reports whether k is Exec or SFTP.
func (k Kind) Valid() bool { return k == Exec || k == SFTP }

// Outcome is what became of an operation, as the audit log records it.
type Outcome string

// The outcomes.
const (
	// Allowed: the rule allowed it; it ran.
	Allowed Outcome = "allowed"
	// Asked: an approval was requested but the agent stopped waiting before
	// it was decided; nothing ran.
	Asked Outcome = "asked"
	// Approved: an admin (two on production) approved it; it ran.
	Approved Outcome = "approved"
	// Denied: the rule or an admin denied it, or there was no grant.
	Denied Outcome = "denied"
	// Expired: nobody decided the approval in time; nothing ran.
	Expired Outcome = "expired"
	// Failed: a policy error refused it (fail closed), or it was allowed but
	// could not be started.
	Failed Outcome = "failed"
)

// Operation is one thing an agent asks to do.
type Operation struct {
	AgentID string
	// ConnectionID names the connection; when empty, ConnectionAlias does.
	ConnectionID    string
	ConnectionAlias string
	// ConnectionModifiedAt, when set, is the modified_at of the connection
	// row the caller classified the operation with (a copy it keeps across
	// operations). If the row has changed since, Authorize and Decide refuse
	// with ErrConnectionChanged before deciding anything, so that a command
	// is never decided, or relayed, with a stale recipe, host or pinned key.
	ConnectionModifiedAt time.Time
	Class                Class
	Kind                 Kind
	// Text is the exact operation: the command line for Exec, the method
	// and paths for SFTP ("remove /srv/a"). Approvals bind to its SHA-256;
	// the audit log keeps it redacted.
	Text string
	// Reasons says why Text is in Class (the classifier's reasons in one
	// line). It is shown to the admin who decides an approval, redacted;
	// it is not part of what the approval binds to.
	Reasons string
	// AgentReason is what the agent says the operation is for
	// (POSTERN_REASON). It is shown to the admin and kept with the
	// approval, redacted and cut to MaxAgentReason; it binds nothing.
	AgentReason string
	// SourceAddr is the address the agent connected from, for the admin.
	SourceAddr string
	// SessionID names the agent's SSH connection (see Record.SessionID);
	// the operation's audit row, and its journal row, carry it.
	SessionID string
	// TerminalLife is set for a session with a terminal: any command on a
	// pty is an interactive shell (a pager's or prompt's `!cmd` runs what
	// is typed), so its class is destructive, it is approved on its own
	// and never by a scope, and once let through it runs at most this
	// long. Zero for an operation without a terminal.
	TerminalLife time.Duration
}

// MaxAgentReason bounds an agent's stated reason, in bytes: a sentence or
// two for the admin, not a document.
const MaxAgentReason = 500

// agentReason is r as an approval and the audit log keep it: redacted like
// the operation, escaped with VisibleLine, cut at MaxAgentReason on a
// character boundary. The agent's words are not refused (the agent cannot
// be asked to retype them) but made harmless: a newline, a terminal escape
// or a bidirectional control (U+202A–U+202E, U+2066–U+2069) is kept as
// <U+…>, so that every place that shows the reason (the page, the CLI,
// notifications, the audit log) shows it on one line and as sent.
// VisibleLine leaves an escaped text as it is, so a door that escapes again
// shows the same.
func agentReason(r string) string {
	r = VisibleLine(Redact(strings.TrimSpace(r)))
	if len(r) <= MaxAgentReason {
		return r
	}
	cut := MaxAgentReason
	for cut > 0 && !utf8.RuneStart(r[cut]) {
		cut--
	}
	return r[:cut] + "…"
}

// Decider is the admin who decides an approval: AdminID is the identity
// the two-person rule compares; Name is shown and audited.
type Decider = store.Decider

// MaxScope is the longest an approval's scope may last: long enough for a
// working day's deployment, short enough that an elevation is never
// forgotten.
const MaxScope = 8 * time.Hour

// Scope is the size an admin gives an approval. The zero value is one
// request.
type Scope struct {
	// Kind is store.ScopeRequest (or ""), store.ScopeOperation or
	// store.ScopeClass.
	Kind store.Scope
	// For is how long a wider scope lasts, from the decision; at most
	// MaxScope. Zero for a request.
	For time.Duration
}

// ParseScope reads a scope as people and the API give it: kind "request"
// (or ""), "operation" or "class", and for a duration such as "30m" (empty
// or "0" for a request). It checks the form only; Approve checks the rest.
func ParseScope(kind, dur string) (Scope, error) {
	k := store.Scope(strings.ToLower(strings.TrimSpace(kind)))
	if k == "" {
		k = store.ScopeRequest
	}
	if !k.Valid() {
		return Scope{}, refusef(ErrScope, "unknown scope %q; want request, operation or class", kind)
	}
	var d time.Duration
	if dur = strings.TrimSpace(dur); dur != "" && dur != "0" {
		var err error
		if d, err = time.ParseDuration(dur); err != nil {
			return Scope{}, refusef(ErrScope, "duration %q: want a duration such as 30m or 2h", dur)
		}
	}
	if k != store.ScopeRequest && d == 0 {
		return Scope{}, refusef(ErrScope, "a %s scope needs a duration (at most %v)", k, MaxScope)
	}
	return Scope{Kind: k, For: d}, nil
}
