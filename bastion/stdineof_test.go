package bastion

import (
	"strings"
	"testing"
)

// TestStdinEOF: the agent's EOF on stdin reaches the command as EOF, and the
// command runs on after it: `echo x | ssh bastion web 'cat; echo after'`
// prints what it prints directly, by both routing forms and over a
// ControlMaster.
func TestStdinEOF(t *testing.T) {
	t.Parallel()
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

// TestStdinClosedByCommand: a command that closes its stdin while the agent
// still sends makes the target's sshd send eow@openssh.com (sshd sends it
// only to a client that says it is OpenSSH), and postern passes it on: the
// agent's ssh stops reading its stdin, as it does directly.
func TestStdinClosedByCommand(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{rules: allowAll})
	for _, p := range h.execPaths(t, false) {
		t.Run(p.name, func(t *testing.T) {
			out, err := pipeline(t, `yes | "$@" 2>&1`, "", p.args([]string{"-vv"}, "exec 0<&-; sleep 1; echo done"))
			if err != nil || !strings.Contains("\n"+out, "\ndone\n") {
				t.Errorf("yes | ssh -vv ... 'exec 0<&-; sleep 1; echo done': %v; no line done in its output:\n%s", err, out)
			}
			if !strings.Contains(out, "rcvd eow") {
				t.Errorf("the client's -vv output has no \"rcvd eow\":\n%s", grepLines(out, "channel 0"))
			}
		})
	}
}
