package usererr

import (
	"errors"
	"fmt"
)

// Error is an error whose Error() is fit to show to a person as it is. It
// may wrap a cause (a sentinel such as store.ErrNotFound, or the error that
// made the message necessary), which errors.Is and errors.As reach through
// Unwrap but which is never part of the message.
type Error struct {
	msg   string
	cause error
}

// Error is the message for the person.
func (e *Error) Error() string { return e.msg }

// Unwrap is the cause, or nil.
func (e *Error) Unwrap() error { return e.cause }

// New is an error whose message is msg.
func New(msg string) error { return &Error{msg: msg} }

// Errorf is New with a message formatted as fmt.Sprintf does. It does not
// wrap: %w would put another error's text, written for logs, into what a
// person reads (go vet refuses it here); use Wrap to keep a cause.
func Errorf(format string, args ...any) error {
	return &Error{msg: fmt.Sprintf(format, args...)}
}

// Wrap is an error whose message is msg and whose cause is cause: errors.Is
// and errors.As find cause through it, the person reads only msg.
func Wrap(cause error, msg string) error { return &Error{msg: msg, cause: cause} }

// As finds the first *Error in err's chain: the outermost one, which knows
// the most of what the person was doing.
func As(err error) (*Error, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e, true
	}
	return nil, false
}

// Message is the message of the first *Error in err's chain, or generic
// when there is none: an error nobody wrote for people (a database
// failure, a bug) is not shown, and the door that calls Message logs it.
func Message(err error, generic string) string {
	if e, ok := As(err); ok {
		return e.msg
	}
	return generic
}
