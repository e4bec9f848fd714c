package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
	"unicode"
)

// ReadSandbox is a connection's setting for its read commands: whether
// they run on the target with the whole filesystem read-only (package
// readsandbox), so that a read verdict of the classifier that is wrong
// cannot become a write.
type ReadSandbox string

// The settings.
const (
	// ReadSandboxAuto uses what the last probe found, and runs reads on
	// the classifier's verdict alone where it found nothing. The default.
	ReadSandboxAuto ReadSandbox = "auto"
	// ReadSandboxRequire refuses read commands when no sandbox works on
	// the target (fail closed): what docs/deploy.md recommends for
	// production.
	ReadSandboxRequire ReadSandbox = "require"
	// ReadSandboxOff never sandboxes, for a target where the sandbox
	// breaks something; the connection keeps the admin's reason.
	ReadSandboxOff ReadSandbox = "off"
)

// ReadSandboxes lists the settings, the default first.
var ReadSandboxes = []ReadSandbox{ReadSandboxAuto, ReadSandboxRequire, ReadSandboxOff}

// ParseReadSandbox checks a setting word.
func ParseReadSandbox(s string) (ReadSandbox, error) {
	for _, r := range ReadSandboxes {
		if string(r) == s {
			return r, nil
		}
	}
	return "", invalid("read sandbox %q: want auto, require or off", s)
}

// SandboxFound is what the last probe of a target found: the mechanism
// that runs a command read-only there, none, or unprobed.
type SandboxFound string

// Probe outcomes; a connection's SandboxMessage says more.
const (
	SandboxUnprobed SandboxFound = "unprobed" // never probed
	SandboxBwrap    SandboxFound = "bwrap"    // bubblewrap works
	SandboxUnshare  SandboxFound = "unshare"  // util-linux's unshare and mount work
	SandboxNone     SandboxFound = "none"     // nothing works; the message says why
)

// SandboxFounds lists the probe outcomes, never probed first.
var SandboxFounds = []SandboxFound{SandboxUnprobed, SandboxBwrap, SandboxUnshare, SandboxNone}

// ParseSandboxFound checks a probe outcome word.
func ParseSandboxFound(s string) (SandboxFound, error) {
	for _, f := range SandboxFounds {
		if string(f) == s {
			return f, nil
		}
	}
	return "", invalid("sandbox probe outcome %q: want unprobed, bwrap, unshare or none", s)
}

// SandboxProbe is one probe's outcome as stored with a connection.
type SandboxProbe struct {
	Found    SandboxFound
	Message  string    // what each mechanism did, in the target's words
	ProbedAt time.Time // now if zero
}

// maxSandboxReason bounds the admin's reason for turning the sandbox off,
// and maxSandboxMessage the probe's message: both are shown on one line.
const (
	maxSandboxReason  = MaxSandboxReason
	maxSandboxMessage = 2000
)

// MaxSandboxReason is the longest reason for a read sandbox off, in bytes;
// package manage checks a reason against it with the rules of every text
// one person types for another (policy.CheckAdminText) before the store's
// own check.
const MaxSandboxReason = 500

// checkReadSandbox checks a setting and its reason: off needs a reason
// (why reads on this target may run on the classifier alone is what the
// next admin will ask), the other settings take none. It returns the
// reason as stored.
func checkReadSandbox(alias string, rs ReadSandbox, reason string) (string, error) {
	if _, err := ParseReadSandbox(string(rs)); err != nil {
		return "", err
	}
	reason = strings.TrimSpace(reason)
	switch {
	case rs == ReadSandboxOff && reason == "":
		return "", invalid("connection %s: say why the read sandbox is off (what it breaks on the target)", alias)
	case rs != ReadSandboxOff && reason != "":
		return "", invalid("connection %s: a reason goes with read sandbox off only", alias)
	case len(reason) > maxSandboxReason:
		return "", invalid("connection %s: the read sandbox reason is longer than %d bytes", alias, maxSandboxReason)
	case strings.IndexFunc(reason, unicode.IsControl) >= 0:
		return "", invalid("connection %s: the read sandbox reason has a control character", alias)
	}
	return reason, nil
}

// checkSandboxProbe checks a probe's outcome and gives it its time.
func (s *Store) checkSandboxProbe(p SandboxProbe) (SandboxProbe, error) {
	if _, err := ParseSandboxFound(string(p.Found)); err != nil {
		return p, err
	}
	if p.Found == SandboxUnprobed {
		// Forgetting a probe (the connection now reaches another target).
		return SandboxProbe{Found: SandboxUnprobed}, nil
	}
	if len(p.Message) > maxSandboxMessage {
		p.Message = p.Message[:maxSandboxMessage]
	}
	if p.ProbedAt.IsZero() {
		p.ProbedAt = s.nowUTC()
	}
	return p, nil
}

// SetSandboxProbe records the outcome of a probe of the target of
// connection alias. It bumps the connection's modified_at, so that a
// bastion holding a copy of the row reads it again before the next
// command (ErrConnectionChanged).
func (s *Store) SetSandboxProbe(ctx context.Context, alias string, p SandboxProbe) (*Connection, error) {
	p, err := s.checkSandboxProbe(p)
	if err != nil {
		return nil, err
	}
	return s.updateConnection(ctx, alias, func(tx *sql.Tx, id string) error {
		_, err := tx.ExecContext(ctx, `
			UPDATE connections SET sandbox_found = ?, sandbox_message = ?, sandbox_probed_at = ?, modified_at = ?
			WHERE id = ?`, string(p.Found), p.Message, formatTime(p.ProbedAt), formatTime(s.nowUTC()), id)
		if err != nil {
			return fmt.Errorf("store: update connection %s: %w", alias, err)
		}
		return nil
	})
}
