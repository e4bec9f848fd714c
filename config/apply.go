package config

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/postern/postern/internal/usererr"
	"github.com/postern/postern/manage"
	"github.com/postern/postern/model"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/recipes"
)

// Options configure Apply.
type Options struct {
	DryRun bool // print the files read and the plan, change nothing
	Prune  bool // also remove what the file does not name
	// AllowUnverified keeps every new or changed connection whose key
	// check is not ok (never a host key mismatch), as a connection's own
	// allow_unverified does.
	AllowUnverified bool
	Timeout         time.Duration // bound on each key check; the manager's default if zero
	Actor           policy.Actor  // who the changes are audited as ("via apply")
	Out             io.Writer     // the plan and what became of each change
	// HashPassword hashes a new admin's password (web.HashPassword; the
	// wiring gives it, so that this package does not import the web
	// server). A file that adds an admin without it is refused.
	HashPassword func(password string) (string, error)
}

// Result says what Apply did.
type Result struct {
	Planned   int // changes in the plan
	Done      int // changes made
	Failed    int // changes refused (a key not proved, a name taken meanwhile)
	Unchanged int // declared things that already were as declared
	Kept      int // things the file does not name, kept without Prune
	// Held are changes that loosen production (manage.HeldError): not
	// made, each waiting for a second admin as a change request.
	Held []string
}

// Apply makes the database hold what f declares. See the package doc.
// An error before the first change means nothing was changed (the plan
// failed); a change that fails is reported, counted and the others go on.
func Apply(ctx context.Context, m *manage.Manager, f *File, opts Options) (*Result, error) {
	if opts.Out == nil {
		opts.Out = io.Discard
	}
	p, err := makePlan(ctx, m, f, opts)
	if err != nil {
		return nil, err
	}
	res := &Result{Planned: len(p.changes), Unchanged: p.unchanged, Kept: len(p.kept)}
	// Every line is shown escaped: it may quote what the file holds and
	// what a target answered to the key check.
	say := func(s string) { fmt.Fprintln(opts.Out, policy.VisibleLine(s)) }
	if opts.DryRun {
		for _, r := range p.reads {
			say("reads " + r)
		}
	}
	if len(p.changes) == 0 {
		say("nothing to change")
	}
	for _, c := range p.changes {
		say(c.line)
		if opts.DryRun {
			continue
		}
		note, err := c.do(ctx)
		if note != "" {
			say("    " + note)
		}
		var held *manage.HeldError
		switch {
		case errors.As(err, &held):
			res.Held = append(res.Held, held.Request.ID)
			say("    WAITS for a second admin: change request " + held.Request.ID +
				" (another admin approves it with: postern approvals approve " + held.Request.ID + ")")
			continue
		case err != nil:
			res.Failed++
			say("    FAILED: " + errText(err))
			continue
		}
		res.Done++
	}
	for _, k := range p.kept {
		say("  " + k)
	}
	verb := "applied"
	if opts.DryRun {
		verb = "dry run, nothing changed"
	}
	waiting := ""
	if len(res.Held) > 0 {
		waiting = fmt.Sprintf(", %d waiting for a second admin (%s)", len(res.Held), strings.Join(res.Held, ", "))
	}
	fmt.Fprintf(opts.Out, "%s: %d to change, %d done, %d failed, %d unchanged, %d not in the file%s\n",
		verb, res.Planned, res.Done, res.Failed, res.Unchanged, res.Kept, waiting)
	return res, nil
}

// visibleError is an error whose text quotes what a file holds or names (a
// key, a name, a path): its text shows every control, bidi or other
// invisible character as an escape (policy.VisibleLine), so that none
// reaches the admin's terminal as itself (an ESC[2J in a key would clear
// the screen and could print a fake "applied"). It wraps err.
type visibleError struct{ err error }

func (e visibleError) Error() string { return policy.VisibleLine(e.err.Error()) }
func (e visibleError) Unwrap() error { return e.err }

// errText is an error for the plan's output: the words the layer that
// refused wrote for the admin (its *usererr.Error), or the whole error when
// none did (apply runs on the server, for its operator, who needs the
// cause).
func errText(err error) string { return usererr.Message(err, err.Error()) }

// connectionNote is what a connection's change found: its key check, the
// public line of a generated key.
func connectionNote(res manage.ConnectionResult) string {
	var parts []string
	if res.Checked {
		parts = append(parts, "key check: "+manage.CheckText(res.Check))
	}
	if res.Generated && res.PublicKey != nil && res.Stored {
		parts = append(parts, "install on the target: "+model.AuthorizedKeyLine(res.PublicKey, res.Conn.Alias))
	}
	if res.Checked && res.Stored && res.Check.Status != recipes.StatusOK {
		parts = append(parts, "stored unverified")
	}
	if res.Probed {
		parts = append(parts, "read sandbox probe: "+string(res.Probe.Found))
	}
	return strings.Join(parts, "; ")
}
