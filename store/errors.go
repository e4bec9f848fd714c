package store

import (
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/postern/postern/internal/usererr"
)

// Sentinel errors that callers branch on with errors.Is. Every error the
// package returns starts with "store: " and wraps at most one of these.
var (
	// ErrNotFound: no record with that name, alias or id.
	ErrNotFound = errors.New("not found")
	// ErrDuplicate: a unique name, alias, key or grant already exists.
	ErrDuplicate = errors.New("already exists")
	// ErrInvalid: the input cannot be stored as given (malformed key, bad
	// rule word, unknown environment, a rule that the environment forbids).
	ErrInvalid = errors.New("invalid")
	// ErrNoMasterKey: a sealed secret was needed but no master key was loaded.
	ErrNoMasterKey = errors.New("no master key")
	// ErrWrongMasterKey: the master key does not open what it sealed.
	ErrWrongMasterKey = errors.New("master key does not match")
	// ErrForbidden: the admin's role does not allow the decision (a
	// viewer, a disabled or removed admin).
	ErrForbidden = errors.New("not allowed")
)

// ConflictError reports a uniqueness conflict: the kind of record and the
// value that is already taken. It matches ErrDuplicate with errors.Is.
type ConflictError struct {
	Kind  string // "agent", "agent key", "connection", "grant"
	Value string // the taken name, alias or fingerprint
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("store: %s %s already exists", e.Kind, e.Value)
}

// Is makes errors.Is(err, ErrDuplicate) true for a *ConflictError.
func (e *ConflictError) Is(target error) bool { return target == ErrDuplicate }

// Unwrap is the conflict in the admin's words (a *usererr.Error): the name
// that is taken is one the admin typed.
func (e *ConflictError) Unwrap() error {
	return usererr.Wrap(ErrDuplicate, e.Kind+" "+e.Value+" already exists")
}

// notFound builds the usual `store: agent "x" not found` error. The record
// named is one the person asked for, so the words after the prefix are a
// *usererr.Error that the doors show.
func notFound(kind, value string) error {
	return shown(ErrNotFound, fmt.Sprintf("%s %q not found", kind, value))
}

// invalid builds an error that wraps ErrInvalid, with a message written for
// the person who typed the input, which the doors show as it is:
// invalid("agent name %q has spaces", name). Quote what was typed with %q,
// which escapes control and invisible characters.
func invalid(format string, args ...any) error {
	return shown(ErrInvalid, fmt.Sprintf(format, args...))
}

// shown is "store: " and msg, with msg a *usererr.Error wrapping sentinel:
// the log reads where it came from, a person reads msg.
func shown(sentinel error, msg string) error {
	return fmt.Errorf("store: %w", usererr.Wrap(sentinel, msg))
}

// isUniqueViolation reports whether err is SQLite refusing a duplicate in a
// UNIQUE column. The methods check for duplicates inside their transaction
// first, to name what is taken; this is the backstop if a row arrives by a
// path that skipped the check.
func isUniqueViolation(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
	}
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == pgUniqueViolation
}

// isForeignKeyViolation reports whether err is the database refusing a row
// that names a record that does not exist.
func isForeignKeyViolation(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code() == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY || strings.Contains(se.Error(), "FOREIGN KEY")
	}
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == pgForeignKeyViolation
}

// Database faults that Fault names.
const (
	FaultLocked   = "the database is locked by another process"
	FaultReadOnly = "the database is read-only"
	FaultFull     = "the disk holding the database is full"
	FaultIO       = "the database cannot be read or written (I/O error)"
	// FaultUnreachable is PostgreSQL's server out of reach: down, restarting,
	// refusing connections, or the connection to it broken.
	FaultUnreachable = "the database server cannot be reached"
)

// Fault says what keeps the database from answering when err is SQLite
// refusing for lack of a lock, permission, space or a working disk (one of
// the Fault constants), and "" for any other error. Callers that refuse an
// operation because of err use it to say why in words an operator acts on.
func Fault(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pgFault(pe.Code)
	}
	var se *sqlite.Error
	if !errors.As(err, &se) {
		if isConnectionLoss(err) {
			return FaultUnreachable
		}
		return ""
	}
	// The primary result code is the low byte of the extended one.
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return FaultLocked
	case sqlite3.SQLITE_READONLY:
		return FaultReadOnly
	case sqlite3.SQLITE_FULL:
		return FaultFull
	case sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN:
		return FaultIO
	}
	return ""
}

// pgFault is Fault for a PostgreSQL error code.
func pgFault(code string) string {
	switch code {
	case pgLockNotAvailable, pgDeadlockDetected:
		return FaultLocked
	case pgReadOnlyTx:
		return FaultReadOnly
	case pgDiskFull, pgOutOfMemory:
		return FaultFull
	case pgIOError:
		return FaultIO
	case pgAdminShutdown, pgCrashShutdown, pgCannotConnectNow, pgTooManyConnections:
		return FaultUnreachable
	}
	return ""
}

// Invalidf is an error for input the caller refuses before it reaches the
// store, worded and matched (errors.Is ErrInvalid) like the store's own, so
// that the CLI, the API and the page show it the same way: its message
// after "store: " is a *usererr.Error.
func Invalidf(format string, args ...any) error { return invalid(format, args...) }
