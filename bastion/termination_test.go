package bastion

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/postern/postern/internal/testsshd"
	"github.com/postern/postern/internal/testwait"
	"github.com/postern/postern/policy"
)

// These tests pin that when the agent's side of a session ends (the reader
// of its output exits, or the agent goes away), the command on the target
// ends as it does for a direct OpenSSH client: each runs the same real
// client pipeline directly and through postern, by both routing forms and
// over a ControlMaster, against a real sshd, and looks for the remote
// process on the target afterwards.

// terminationTarget is a target of the test's own that logs at DEBUG2,
// where sshd writes "rcvd eow" when an eow@openssh.com reaches a channel:
// the tests count those lines.
func terminationTarget() *testsshd.Options { return &testsshd.Options{LogLevel: "DEBUG2"} }

// TestTerminationReaderExits: `ssh ... 'yes MARKER' | head -1` returns, and
// the remote yes ends (by SIGPIPE): the client's eow@openssh.com reaches the
// target, whose sshd closes the command's stdout. The audit row says how
// the command ended.
func TestTerminationReaderExits(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{rules: allowAll, target: terminationTarget()})
	rows := 0
	for _, p := range h.execPaths(t, true) {
		t.Run(p.name, func(t *testing.T) {
			marker := newMarker(t)
			eows := h.target.LogCount("rcvd eow")
			out, _ := pipeline(t, `"$@" | head -1`, "", p.args(nil, "yes "+marker))
			if want := marker + "\n"; out != want {
				t.Errorf("head -1 printed %q; want %q", out, want)
			}
			waitRemoteGone(t, marker)
			// sshd logs the eow before it closes the command's output, but
			// the line reaches the test through a pipe: wait for it.
			h.target.WaitLog(t, "rcvd eow", eows+1)
			if !p.postern {
				return
			}
			rows++
			row := h.lastAudit("web", rows)
			if row.Operation != "yes "+marker || row.Decision != string(policy.Allowed) || row.ExitStatus != nil ||
				!strings.Contains(row.Reason, "eow@openssh.com") || !strings.HasSuffix(row.Reason, "ended by signal PIPE") {
				t.Errorf("audit row: operation %q decision %q exit %v reason %q; want %q, allowed, no exit status, eow and ended by signal PIPE",
					row.Operation, row.Decision, row.ExitStatus, row.Reason, "yes "+marker)
			}
		})
	}
}

// TestTerminationReaderExitsPty: with a pty, sshd's answer to eow closes
// only its copy of the terminal's output, so `yes` blocks on the full
// terminal instead of dying, directly as through postern: the pipeline
// ends when the user types ^C. The eow reaches the target all the same.
//
// The reader is `grep -m1`: sshd at DEBUG2 writes a few lines of its own to
// the terminal before the command starts.
func TestTerminationReaderExitsPty(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{rules: allowAll, target: terminationTarget()})
	// Not over a ControlMaster: there the pty comes in raw mode (-isig:
	// the master has no terminal to copy modes from), so ^C is a plain
	// byte, directly as through postern.
	for _, p := range h.execPaths(t, false) {
		t.Run(p.name, func(t *testing.T) {
			marker := newMarker(t)
			eows := h.target.LogCount("rcvd eow")
			ctx := testwait.Context(t)
			cmd := pipelineCommand(ctx, t, "bash", append([]string{"-c", `"$@" | grep -m1 "$0"`, marker, "ssh"}, p.args([]string{"-tt"}, "yes "+marker)...)...)
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			defer stdin.Close()
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(stdout).ReadString('\n')
			if want := marker + "\r\n"; line != want {
				t.Errorf("grep -m1 printed %q (%v); want %q", line, err, want)
			}
			h.target.WaitLog(t, "rcvd eow", eows+1)
			if _, err := stdin.Write([]byte{0x03}); err != nil { // ^C
				t.Fatal(err)
			}
			_ = cmd.Wait()
			if ctx.Err() != nil {
				t.Fatal("pipeline had not ended at the test's deadline after ^C")
			}
			waitRemoteGone(t, marker)
		})
	}
}

// TestTerminationTailF: `ssh ... tail -f FILE | head -1` returns once the
// file grows past the line head took: the client's write fails, its eow
// reaches the target, and tail, whose output is gone, ends. The file keeps
// growing, as a log does, until ssh has ended: with one line only, direct
// OpenSSH itself sometimes hung on a loaded machine (tail had written its
// line before sshd closed its side of the pipe, and nothing more came to
// fail), which is no behaviour of postern's.
func TestTerminationTailF(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{rules: allowAll, target: terminationTarget()})
	for _, p := range h.execPaths(t, true) {
		t.Run(p.name, func(t *testing.T) {
			marker := newMarker(t)
			file := filepath.Join(t.TempDir(), marker)
			writeFile(t, file, "first\n")
			ctx := testwait.Context(t)
			cmd := pipelineCommand(ctx, t, "ssh", p.args(nil, "tail -f "+file)...)
			// The test is head -1: it reads a line and closes the pipe,
			// so that the line appended next finds no reader.
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stdout = w
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			w.Close()
			line, err := bufio.NewReader(r).ReadString('\n')
			r.Close()
			if line != "first\n" {
				t.Fatalf("first line %q (%v); want %q", line, err, "first\n")
			}
			f, err := os.OpenFile(file, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			ended := make(chan struct{})
			go func() {
				_ = cmd.Wait()
				close(ended)
			}()
			testwait.Until(t, "ssh tail -f to end after its reader went", func() bool {
				if _, err := f.WriteString("more\n"); err != nil {
					t.Fatal(err)
				}
				select {
				case <-ended:
					return true
				default:
					return false
				}
			})
			waitRemoteGone(t, marker)
		})
	}
}

// TestTerminationAgentGone: the agent's client is killed mid-command (over
// a ControlMaster, the mux client). The command ends on the target as it
// does when a direct client is killed (by SIGPIPE at its next write, or by
// SIGHUP when it has a pty), and the audit row says that the agent went
// away and how the command ended.
func TestTerminationAgentGone(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{rules: allowAll})
	tests := []struct {
		name    string
		extra   []string
		command func(marker string) string
		signal  string
	}{
		{name: "writing", command: func(m string) string { return "yes " + m }, signal: "PIPE"},
		{name: "pty idle", extra: []string{"-tt"}, command: func(m string) string { return "echo " + m + "; sleep 600; echo " + m }, signal: "HUP"},
	}
	rows := 0
	paths := h.execPaths(t, true)
	for _, tt := range tests {
		for _, p := range paths {
			t.Run(tt.name+"/"+p.name, func(t *testing.T) {
				marker := newMarker(t)
				command := tt.command(marker)
				cmd := exec.CommandContext(testwait.Context(t), "ssh", p.args(tt.extra, command)...)
				stdin, err := cmd.StdinPipe() // open, as a user's terminal would be
				if err != nil {
					t.Fatal(err)
				}
				defer stdin.Close()
				stdout, err := cmd.StdoutPipe()
				if err != nil {
					t.Fatal(err)
				}
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				// The marker is the first line, with a pty too: the target's
				// shell reads no start-up file of the machine's user (its
				// HOME is empty), which printed here before (pyenv's rehash,
				// when shells started at once).
				line, err := bufio.NewReader(stdout).ReadString('\n')
				if strings.TrimSpace(line) != marker {
					cmd.Process.Kill()
					cmd.Wait()
					t.Fatalf("first line %q (%v); want %q", line, err, marker)
				}
				if err := cmd.Process.Kill(); err != nil {
					t.Fatal(err)
				}
				_ = cmd.Wait()
				waitRemoteGone(t, marker)
				if !p.postern {
					return
				}
				rows++
				row := h.lastAudit("web", rows)
				// A ControlMaster whose client was killed sends eow, then
				// closes the channel: the reason names both. A session with
				// a terminal says so first.
				prefix := "the agent went away while the command ran; "
				if len(tt.extra) > 0 {
					prefix = policy.TerminalNote + "; " + prefix
				}
				if row.Operation != command || row.Decision != string(policy.Allowed) || row.ExitStatus != nil ||
					!strings.HasPrefix(row.Reason, prefix) || !strings.HasSuffix(row.Reason, "; ended by signal "+tt.signal) {
					t.Errorf("audit row: operation %q decision %q exit %v reason %q; want %q, allowed, no exit status, the agent went away and signal %s",
						row.Operation, row.Decision, row.ExitStatus, row.Reason, command, tt.signal)
				}
			})
		}
	}
}
