package bastion

import (
	"errors"
	"os/exec"
	"strconv"
	"testing"

	"github.com/postern/postern/internal/testwait"
	"github.com/postern/postern/policy"
)

// TestExitOutcomeAudited: the agent's client exits as it does directly, and
// the command's audit row records how the command ended: its exit status,
// or, for a command killed by a signal, no status and the signal in the
// reason (the row has no column of its own for it).
func TestExitOutcomeAudited(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{rules: allowAll})
	paths := h.execPaths(t, false)
	direct, viaPostern := paths[0], paths[1]
	status := func(n int) *int { return &n }
	tests := []struct {
		command    string
		wantStatus *int
		wantReason string
	}{
		{"exit 0", status(0), ""},
		{"exit 3", status(3), ""},
		{"postern-no-such-command", status(127), ""},
		{"kill -TERM $$", nil, "ended by signal TERM"},
		{"kill -KILL $$", nil, "ended by signal KILL"},
	}
	for i, tt := range tests {
		t.Run(tt.command, func(t *testing.T) {
			code := func(p execPath) int {
				err := exec.CommandContext(testwait.Context(t), "ssh", p.args(nil, tt.command)...).Run()
				var ee *exec.ExitError
				if err != nil && !errors.As(err, &ee) {
					t.Fatalf("ssh: %v", err)
				}
				if ee != nil {
					return ee.ExitCode()
				}
				return 0
			}
			if got, want := code(viaPostern), code(direct); got != want {
				t.Errorf("client exit code through postern: got %d; want %d (direct)", got, want)
			}
			row := h.lastAudit("web", i+1)
			if row.Operation != tt.command || row.Decision != string(policy.Allowed) ||
				statusText(row.ExitStatus) != statusText(tt.wantStatus) || row.Reason != tt.wantReason {
				t.Errorf("audit row: operation %q decision %q exit %s reason %q; want %q, allowed, exit %s, reason %q",
					row.Operation, row.Decision, statusText(row.ExitStatus), row.Reason, tt.command, statusText(tt.wantStatus), tt.wantReason)
			}
		})
	}
}

// statusText shows an audit row's exit status: a number, or "none".
func statusText(p *int) string {
	if p == nil {
		return "none"
	}
	return strconv.Itoa(*p)
}
