package bastion

import (
	"testing"
)

// TestStdinEOF: the agent's EOF on stdin reaches the command as EOF, and the
// command runs on after it: `echo x | ssh bastion web 'cat; echo after'`
// prints what it prints directly, by both routing forms and over a
// ControlMaster.
func TestStdinEOF(t *testing.T) {
	h := newHarness(t, harnessOpts{rules: allowAll})
	const want = "x\nafter-eof\n"
	for _, p := range h.execPaths(t, true) {
		t.Run(p.name, func(t *testing.T) {
			out, err := pipeline(t, `echo x | "$@"`, "", p.args(nil, "cat; echo after-eof"))
			if out != want || err != nil {
				t.Errorf("echo x | ssh ... 'cat; echo after-eof': got %q, %v; want %q, nil", out, err, want)
			}
		})
	}
}
