package config

import (
	"fmt"
	"strings"

	"github.com/postern/postern/store"
)

// readSandboxText is a read sandbox setting as the plan compares and shows
// it: off with its reason, which a change of alone is a change.
func readSandboxText(rs store.ReadSandbox, reason string) string {
	if rs == store.ReadSandboxOff {
		return fmt.Sprintf("off (%s)", reason)
	}
	return string(rs)
}

// readSandboxOf is a declared connection's read sandbox setting, auto when
// left out, and its reason: off needs one, the others take none.
func readSandboxOf(c Connection) (store.ReadSandbox, string, error) {
	rs := store.ReadSandboxAuto
	if c.ReadSandbox != "" {
		var err error
		if rs, err = store.ParseReadSandbox(c.ReadSandbox); err != nil {
			return "", "", fmt.Errorf("read_sandbox %q: want auto, require or off", c.ReadSandbox)
		}
	}
	reason := strings.TrimSpace(c.ReadSandboxReason)
	switch {
	case rs == store.ReadSandboxOff && reason == "":
		return "", "", fmt.Errorf("read_sandbox off needs read_sandbox_reason: what the sandbox breaks on the target")
	case rs != store.ReadSandboxOff && reason != "":
		return "", "", fmt.Errorf("read_sandbox_reason goes with read_sandbox off only")
	}
	return rs, reason, nil
}
