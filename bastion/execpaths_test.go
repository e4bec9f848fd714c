package bastion

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/postern/postern/internal/testwait"
)

// This file holds what the exec stream tests share: the ways a real
// OpenSSH client reaches a command (directly, and through postern by both
// routing forms, each also over a ControlMaster connection), a pipeline of
// them that a hang cannot hold past the test's deadline, and a look at the
// target's processes.

// execPath is one way an agent's OpenSSH client runs a command on the
// harness's target.
type execPath struct {
	name string
	// postern is false for the direct paths, which are the reference.
	postern bool
	opts    []string // client options
	dest    string   // destination
	route   []string // words before the command (the alias, for `ssh bastion web CMD`)
}

// args returns the ssh arguments that run command, with the options in
// extra.
func (p execPath) args(extra []string, command string) []string {
	return join(p.opts, extra, []string{p.dest}, p.route, []string{command})
}

// directOpts are the options of an OpenSSH client that logs in to the
// target directly, with the target's own user key.
func (h *harness) directOpts() []string {
	return []string{"-F", "/dev/null", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
		"-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "-o", "IdentitiesOnly=yes",
		"-i", filepath.Join(h.target.Dir, "id_ed25519"), "-p", strconv.Itoa(h.target.Port)}
}

// execPaths returns the direct path and the paths through postern: `ssh
// bastion web CMD` and `ssh web@bastion CMD`. With mux, each also comes
// over a ControlMaster (a master started here, ended with the test), as
// `-o ControlMaster=auto -o ControlPath=...` clients use it.
func (h *harness) execPaths(t *testing.T, mux bool) []execPath {
	t.Helper()
	paths := []execPath{
		{name: "direct", opts: h.directOpts(), dest: h.target.User + "@127.0.0.1"},
		{name: "bastion_ALIAS", postern: true, opts: h.clientOpts("-p"), dest: "127.0.0.1", route: []string{"web"}},
		{name: "ALIAS@bastion", postern: true, opts: h.clientOpts("-p"), dest: "web@127.0.0.1"},
	}
	if !mux {
		return paths
	}
	// A socket path must fit in sun_path (108 bytes): t.TempDir() may not.
	dir, err := os.MkdirTemp("", "pcm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	for i, p := range paths {
		muxOpts := []string{"-o", "ControlMaster=auto", "-o", "ControlPath=" + filepath.Join(dir, strconv.Itoa(i))}
		startMaster(t, join(p.opts, []string{"-M", "-N"}, muxOpts, []string{p.dest}), muxOpts)
		p.name += "_ControlMaster"
		p.opts = join(p.opts, muxOpts)
		paths = append(paths, p)
	}
	return paths
}

// startMaster runs an OpenSSH ControlMaster (ssh with args) until the test
// ends, and waits until it answers `ssh -O check`.
func startMaster(t *testing.T, args, muxOpts []string) {
	t.Helper()
	ctx := testwait.Context(t)
	master := exec.CommandContext(ctx, "ssh", args...)
	var stderr bytes.Buffer
	master.Stderr = &stderr
	if err := master.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = master.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = master.Process.Kill()
		<-exited
	})
	check := join([]string{"-F", "/dev/null"}, muxOpts, []string{"-O", "check", "127.0.0.1"})
	testwait.Until(t, "ControlMaster "+strings.Join(args, " ")+" to answer", func() bool {
		select {
		case <-exited:
			t.Fatalf("ControlMaster exited: %s", stderr.String())
		default:
		}
		return exec.CommandContext(ctx, "ssh", check...).Run() == nil
	})
}

// join concatenates argument lists into a new slice.
func join(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// pipeline runs a bash pipeline script with "$@" set to ssh and args, and
// returns its stdout. It fails the test when the pipeline has not ended by
// the test's deadline (it hung), and then kills its whole process group.
func pipeline(t *testing.T, script string, stdin string, args []string) (string, error) {
	t.Helper()
	ctx := testwait.Context(t)
	cmd := pipelineCommand(ctx, t, "bash", append([]string{"-c", script, "bash", "ssh"}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s had not ended at the test's deadline (hung); stdout %q stderr %q", script, stdout.String(), stderr.String())
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("%s: %v", script, err)
	}
	return stdout.String(), err
}

// pipelineCommand runs name with args in a process group of its own,
// which is killed when ctx ends (testwait.Context: the test's deadline).
func pipelineCommand(ctx context.Context, t *testing.T, name string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// A process of the pipeline's that outlives it and holds its output
	// open is waited for until the deadline too.
	cmd.WaitDelay = testwait.Remaining(t)
	return cmd
}

// newGate makes a named pipe for a remote command to wait on (`read _ <
// FIFO`: the target runs on this machine) and returns its path and a
// function that lets the command go on, so that a test holds a command
// until an event of its choosing instead of giving it a few seconds.
func newGate(t *testing.T) (string, func()) {
	t.Helper()
	fifo := filepath.Join(t.TempDir(), "gate")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	return fifo, func() {
		t.Helper()
		// Opening a pipe for writing without blocking fails until its
		// reader has opened it.
		testwait.Until(t, "the remote command to wait on "+fifo, func() bool {
			f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0)
			if err != nil {
				return false
			}
			_, err = f.WriteString("go\n")
			f.Close()
			return err == nil
		})
	}
}

// linesUntil reads r line by line into out until a line satisfies stop,
// and reports whether one did (false at EOF).
func linesUntil(r *bufio.Reader, out *strings.Builder, stop func(line string) bool) bool {
	for {
		line, err := r.ReadString('\n')
		out.WriteString(line)
		if stop(line) {
			return true
		}
		if err != nil {
			return false
		}
	}
}

// newMarker returns a word unique to this run, to put in a remote
// command's arguments so that the test can find that process on the target
// (which runs on this machine); any such process left at the end of the
// test is killed.
func newMarker(t *testing.T) string {
	t.Helper()
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	m := "postern-marker-" + hex.EncodeToString(b)
	t.Cleanup(func() {
		for _, pid := range processesWith(t, m) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return m
}

// processesWith returns the processes whose command line contains marker,
// read from /proc.
func processesWith(t *testing.T, marker string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatalf("read /proc (the target's processes are looked up there): %v", err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue // gone meanwhile
		}
		if bytes.Contains(cmdline, []byte(marker)) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// waitRemoteGone waits until no process on the target carries marker.
func waitRemoteGone(t *testing.T, marker string) {
	t.Helper()
	testwait.Until(t, "the remote command with "+marker+" to end", func() bool {
		return len(processesWith(t, marker)) == 0
	})
}
