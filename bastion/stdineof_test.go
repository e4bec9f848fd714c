package bastion

import (
	"bufio"
	"fmt"
	"strings"
	"testing"

	"github.com/postern/postern/internal/testwait"
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
// agent's ssh stops reading its stdin, as it does directly. The command
// waits, with its stdin closed, until the client has said (at -vv) that
// the eow reached it; sshd sends it at its first write to the closed pipe.
func TestStdinClosedByCommand(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{rules: allowAll})
	for _, p := range h.execPaths(t, false) {
		t.Run(p.name, func(t *testing.T) {
			gate, open := newGate(t)
			remote := fmt.Sprintf("exec 0<&-; : %s; read _ < %s; echo done", newMarker(t), gate)
			ctx := testwait.Context(t)
			cmd := pipelineCommand(ctx, t, "bash", append([]string{"-c", `yes | "$@" 2>&1`, "bash", "ssh"}, p.args([]string{"-vv"}, remote)...)...)
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			r := bufio.NewReader(stdout)
			eow := linesUntil(r, &out, func(line string) bool { return strings.Contains(line, "rcvd eow") })
			if eow {
				open()
			}
			linesUntil(r, &out, func(string) bool { return false })
			err = cmd.Wait()
			if !eow {
				t.Fatalf("the client's -vv output has no \"rcvd eow\" (%v):\n%s", err, grepLines(out.String(), "channel 0"))
			}
			if err != nil || !strings.Contains("\n"+out.String(), "\ndone\n") {
				t.Errorf("yes | ssh -vv ... '%s': %v; no line done in its output:\n%s", remote, err, out.String())
			}
		})
	}
}
