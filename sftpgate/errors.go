package sftpgate

import (
	"errors"
	"io"
	"io/fs"
	"strconv"
	"strings"

	"github.com/pkg/sftp"
)

// statusError is an error the request server turns into a status packet
// with code and msg as its message.
//
// pkg/sftp's statusFromError sends err.Error() as the message and takes the
// code from the first sftp.ErrSSHFx* value errors.As finds; returning
// sftp.ErrSSHFxPermissionDenied itself would send its generic text and lose
// the reason an agent needs to see (which rule refused, or which approval
// expired). An *sftp.StatusError is no help: the request server does not
// look inside it and answers SSH_FX_FAILURE.
type statusError struct {
	code error // one of the sftp.ErrSSHFx* values
	msg  string
	// refused marks the gate's own refusals, matched by ErrRefused.
	refused bool
}

func (e *statusError) Error() string { return e.msg }

// Unwrap exposes the status code to pkg/sftp and ErrRefused to callers.
func (e *statusError) Unwrap() []error {
	if e.refused {
		return []error{e.code, ErrRefused}
	}
	return []error{e.code}
}

// refuse answers permission denied with msg and relays nothing.
func refuse(msg string) error {
	return &statusError{code: sftp.ErrSSHFxPermissionDenied, msg: msg, refused: true}
}

// failure answers SSH_FX_FAILURE with msg, for what the gate cannot do
// rather than will not do (a rename across two targets, for example).
func failure(msg string) error {
	return &statusError{code: sftp.ErrSSHFxFailure, msg: msg}
}

// notFound answers SSH_FX_NO_SUCH_FILE, as OpenSSH does for a missing path:
// clients branch on the code (scp, for one, to create a directory).
func notFound() error {
	return &statusError{code: sftp.ErrSSHFxNoSuchFile, msg: "No such file"}
}

// relayError turns an upstream client's error into the status the target
// gave, with the target's own message, so that the agent reads what it would
// have read talking to the target directly. io.EOF is returned as is: the
// request server compares it by identity to end reads and listings.
func relayError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, io.EOF) {
		return io.EOF
	}
	var se *sftp.StatusError
	if errors.As(err, &se) {
		return &statusError{code: se.FxCode(), msg: statusMessage(se)}
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return notFound()
	case errors.Is(err, fs.ErrPermission):
		return &statusError{code: sftp.ErrSSHFxPermissionDenied, msg: "Permission denied"}
	}
	return &statusError{code: sftp.ErrSSHFxFailure, msg: "sftpgate: target: " + err.Error()}
}

// statusMessage recovers the target's message from an *sftp.StatusError,
// which keeps it unexported and formats it as `sftp: "MSG" (CODE)`.
func statusMessage(se *sftp.StatusError) string {
	s := se.Error()
	rest, ok := strings.CutPrefix(s, "sftp: ")
	if i := strings.LastIndex(rest, " ("); ok && i >= 0 {
		if msg, err := strconv.Unquote(rest[:i]); err == nil && msg != "" {
			return msg
		}
	}
	return s
}
