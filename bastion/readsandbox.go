package bastion

import (
	"context"
	"fmt"
	"strings"

	"github.com/postern/postern/policy"
	"github.com/postern/postern/readsandbox"
	"github.com/postern/postern/store"
)

// readRun is how a command runs on its target as far as the read sandbox
// goes: every exec that postern lets through as read, whatever form it came
// in (a command, rsync --server --sender, scp -f, git-upload-pack), runs in
// the sandbox the connection's target supports, so that a read verdict the
// classifier got wrong cannot become a write to a file. See package
// readsandbox, and docs/read-sandbox.md for what the sandbox does not
// stop.
type readRun struct {
	// command is what the target's sshd is given: the agent's command,
	// wrapped when sandboxed.
	command string
	// sandbox is the mechanism the command runs under, "" for none.
	sandbox readsandbox.Mechanism
	// refusal, when set, is why the command is refused before any
	// decision: the connection requires the sandbox and the target has
	// none (fail closed).
	refusal string
	// note is what the audit row adds for a read that runs without the
	// sandbox on a connection whose setting or probe says so (off, or
	// auto on a target probed to have none): why, so that an admin
	// reading the audit sees which reads relied on the classifier alone.
	// A connection never probed (made before the read sandbox, or added
	// without a check) adds none: conn list, the page and the metrics say
	// that it is unprobed, once, rather than every row of its audit.
	note string
}

// planReadRun decides how the command of r runs on conn for class. Only
// reads are sandboxed: a command allowed as write or destructive is meant
// to write.
//
// With the setting auto (the default), the mechanism the last probe of the
// target found is used, and a target probed to have none, or never
// probed, runs reads on the classifier's verdict alone, which the audit
// row says. With require, such a target refuses reads. With off, reads
// are never sandboxed, for the reason the admin recorded.
func planReadRun(r route, class policy.Class, conn *store.Connection) readRun {
	run := readRun{command: r.command}
	if class != policy.Read || r.shell {
		return run
	}
	switch conn.ReadSandbox {
	case store.ReadSandboxOff:
		run.note = "no read sandbox: off for this connection (" + conn.ReadSandboxReason + ")"
		return run
	case store.ReadSandboxAuto, store.ReadSandboxRequire:
	default:
		// A setting this build does not know: fail closed.
		run.refusal = fmt.Sprintf("read sandbox setting %q of %s is unknown to this postern", conn.ReadSandbox, conn.Alias)
		return run
	}
	var m readsandbox.Mechanism
	switch conn.SandboxFound {
	case store.SandboxBwrap:
		m = readsandbox.Bwrap
	case store.SandboxUnshare:
		m = readsandbox.Unshare
	}
	if m == "" {
		why := "no sandbox works on the target (" + conn.SandboxMessage + ")"
		if conn.SandboxFound != store.SandboxNone {
			why = "the target was not probed for one (postern conn check " + conn.Alias + ")"
		}
		if conn.ReadSandbox == store.ReadSandboxRequire {
			run.refusal = "reads on " + conn.Alias + " must run read-only (read sandbox: require), and " + why
			return run
		}
		if conn.SandboxFound == store.SandboxNone {
			run.note = "no read sandbox: " + why + "; it ran on the classifier's verdict alone"
		}
		return run
	}
	w, err := readsandbox.Wrap(m, r.command)
	if err != nil {
		run.refusal = err.Error()
		return run
	}
	run.command, run.sandbox = w, m
	return run
}

// connectionCurrent returns policy.ErrConnectionChanged when the stored row
// of conn is newer than conn (a copy an agent connection kept), so that
// the command is decided again with the stored row (see execRun.decide),
// and an error when the row cannot be read. A refusal made before the
// policy decides calls it: the policy makes the same check for every
// command it decides, but a refused one never reaches it.
func (s *Server) connectionCurrent(ctx context.Context, conn *store.Connection) error {
	stored, err := s.cfg.Store.ConnectionByID(ctx, conn.ID)
	if err != nil {
		return fmt.Errorf("bastion: read connection %s: %w", conn.Alias, err)
	}
	if !stored.ModifiedAt.Equal(conn.ModifiedAt) {
		return policy.ErrConnectionChanged
	}
	return nil
}

// sandboxLabel is the metrics label of how a read ran (metrics.ReadCommand).
func (run readRun) sandboxLabel() string {
	switch {
	case run.refusal != "":
		return "refused"
	case run.sandbox != "":
		return string(run.sandbox)
	}
	return "none"
}

// joinReason appends note to an audit reason.
func joinReason(reason, note string) string {
	if note == "" {
		return reason
	}
	if reason == "" {
		return note
	}
	return strings.TrimSuffix(reason, "; ") + "; " + note
}
