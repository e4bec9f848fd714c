package policy

import (
	"errors"
	"fmt"
	"strings"

	"github.com/postern/postern/internal/usererr"
)

// Sentinel errors for errors.Is. Every error the package returns starts with
// "policy: ". A refusal that a person must read (a decision that came too
// late or from the wrong admin, a scope not allowed, input refused) also
// carries its words after the prefix as a *usererr.Error, which every door
// shows as it is.
var (
	// ErrDenied: the operation may not run (rule, admin or missing grant).
	ErrDenied = errors.New("policy: denied")
	// ErrExpired: the approval request expired before it was decided, or
	// before an admin tried to decide it.
	ErrExpired = errors.New("policy: approval request expired")
	// ErrAlreadyDecided: another decision got to the request first.
	ErrAlreadyDecided = errors.New("policy: approval request already decided")
	// ErrSameApprover: the admin who gave the first of two approvals tried to
	// give the second.
	ErrSameApprover = errors.New("policy: second approval must come from a different admin")
	// ErrInvalidAdmin: a decision without a registered admin's identity,
	// or with a name that is empty or has a comma or control character
	// (the audit log lists deciders comma-separated).
	ErrInvalidAdmin = errors.New("policy: invalid admin name")
	// ErrScope: the scope asked for with an approval is not allowed: wider
	// than one request for a production destructive operation, or longer
	// than MaxScope.
	ErrScope = errors.New("policy: approval scope not allowed")
	// ErrAlreadyUsed: the approval already let its one operation through.
	ErrAlreadyUsed = errors.New("policy: approval already used")
	// ErrClosed: the engine was closed while the caller waited.
	ErrClosed = errors.New("policy: engine closed")
	// ErrConnectionChanged: the operation names the version of the
	// connection row its caller classified it with (Operation's
	// ConnectionModifiedAt), and the row has changed since. It comes
	// wrapped in a DeniedError; nothing was journaled or asked, so the
	// caller may read the connection again, classify again and retry.
	ErrConnectionChanged = errors.New("policy: the connection changed since the operation was classified")
	// ErrInvalidText: text an admin typed for others to read (a denial's
	// reason) breaks the rules of CheckAdminText: too long, more than one
	// line, or a control or invisible character.
	ErrInvalidText = errors.New("policy: invalid text")
)

// refusef is a refusal worded for a person: the sentinel's own words (its
// text without "policy: "), then the formatted detail. The error reads
// "policy: " and those words for the log; the words alone are a
// *usererr.Error wrapping sentinel, for the doors. The detail names only
// what the person gave or may see (an approval's id, an admin's name),
// never a connection's address or a key.
func refusef(sentinel error, format string, args ...any) error {
	return refusal(sentinel, strings.TrimPrefix(sentinel.Error(), "policy: ")+": "+fmt.Sprintf(format, args...))
}

// refusal is refusef with the whole of a person's words given.
func refusal(sentinel error, words string) error {
	return fmt.Errorf("policy: %w", usererr.Wrap(sentinel, words))
}

// DeniedError says why an operation was denied. NoGrant is true when the
// agent has no grant for the connection (or either does not exist); callers
// then say "no such alias", so that an agent cannot learn which connections
// exist. It matches ErrDenied, and Err when set.
type DeniedError struct {
	// Reason says why; for an admin's denial of an approval request it
	// names the admin ("approval apr_… was denied by alice: not now").
	Reason  string
	NoGrant bool
	// Err is why a denial failed closed (Decision.Err): the decision could
	// not be made, as opposed to a rule or an admin saying no. nil for those.
	Err error
}

func (e *DeniedError) Error() string { return "policy: denied: " + e.Reason }

// Is makes errors.Is(err, ErrDenied) true.
func (e *DeniedError) Is(target error) bool { return target == ErrDenied }

// Unwrap gives errors.Is and errors.As the cause of a fail-closed denial,
// such as ErrConnectionChanged.
func (e *DeniedError) Unwrap() error { return e.Err }

// AlreadyDecidedError reports that an approval request was no longer pending
// when an admin tried to decide it, typically because a concurrent decision
// won. It matches ErrAlreadyDecided.
type AlreadyDecidedError struct {
	ID       string
	Status   string   // approved, denied or expired
	Deciders []string // who decided it
}

func (e *AlreadyDecidedError) Error() string { return "policy: " + e.words() }

// words is the refusal as a person reads it.
func (e *AlreadyDecidedError) words() string {
	msg := fmt.Sprintf("approval %s was already %s", e.ID, e.Status)
	if len(e.Deciders) > 0 {
		msg += " by " + strings.Join(e.Deciders, " and ")
	}
	return msg
}

// Is makes errors.Is(err, ErrAlreadyDecided) true.
func (e *AlreadyDecidedError) Is(target error) bool { return target == ErrAlreadyDecided }

// Unwrap is the refusal in a person's words, a *usererr.Error.
func (e *AlreadyDecidedError) Unwrap() error { return usererr.New(e.words()) }
