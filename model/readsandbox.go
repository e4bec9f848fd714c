package model

import (
	"strings"

	"github.com/postern/postern/store"
)

// ReadSandbox is a connection's read sandbox: the admin's setting, what
// the last probe of the target found, and what follows for read commands
// now. The bastion decides the same from the same fields (bastion's
// planReadRun); Reads says it for a person.
type ReadSandbox struct {
	Setting  string `json:"setting"`   // store.ReadSandboxes
	Reason   string `json:"reason"`    // why it is off; "" otherwise
	Found    string `json:"found"`     // store.SandboxFounds
	Message  string `json:"message"`   // what each mechanism did, in the target's words
	ProbedAt Time   `json:"probed_at"` // null if never probed
	// Reads is how read commands run now: in "bwrap" or "unshare", on
	// the classifier's verdict alone ("classifier"), or "refused" (the
	// setting is require and the target has no sandbox).
	Reads string `json:"reads"`
	// Warning is set for a production connection whose reads rely on the
	// classifier alone; "" otherwise.
	Warning string `json:"warning"`
}

// How read commands run (ReadSandbox.Reads).
const (
	ReadsClassifier = "classifier"
	ReadsRefused    = "refused"
)

// ReadSandboxOf is c's read sandbox.
func ReadSandboxOf(c store.Connection) ReadSandbox {
	v := ReadSandbox{Setting: string(c.ReadSandbox), Reason: c.ReadSandboxReason, Found: string(c.SandboxFound),
		Message: c.SandboxMessage, ProbedAt: Time(c.SandboxProbedAt)}
	switch {
	case c.ReadSandbox == store.ReadSandboxOff:
		v.Reads = ReadsClassifier
	case c.SandboxFound == store.SandboxBwrap || c.SandboxFound == store.SandboxUnshare:
		v.Reads = string(c.SandboxFound)
	case c.ReadSandbox == store.ReadSandboxRequire:
		v.Reads = ReadsRefused
	default:
		v.Reads = ReadsClassifier
	}
	if c.Env == store.EnvProduction && v.Reads == ReadsClassifier {
		v.Warning = "reads on production connection " + c.Alias + " rely on the classifier alone: " + readSandboxWhy(c)
	}
	return v
}

// readSandboxWhy says why reads on c run without a sandbox, and what an
// admin does about it.
func readSandboxWhy(c store.Connection) string {
	switch {
	case c.ReadSandbox == store.ReadSandboxOff:
		return "the read sandbox is off (" + c.ReadSandboxReason + ")"
	case c.SandboxFound == store.SandboxNone:
		return "no sandbox works on the target (" + strings.TrimSpace(c.SandboxMessage) +
			"); install bubblewrap there and run postern conn check " + c.Alias
	}
	return "the target was not probed; run postern conn check " + c.Alias
}

// ReadSandboxText is the read sandbox in a few words for a table: how
// reads run, and the setting when it is not auto ("bwrap", "refused
// (require)", "classifier (off)").
func ReadSandboxText(v ReadSandbox) string {
	if v.Setting == string(store.ReadSandboxAuto) || v.Setting == "" {
		return v.Reads
	}
	return v.Reads + " (" + v.Setting + ")"
}

// ReadSandboxProbe is the outcome of one probe of a target's read sandbox.
type ReadSandboxProbe struct {
	Found   string `json:"found"`   // store.SandboxFounds
	Message string `json:"message"` // what each mechanism did
}
