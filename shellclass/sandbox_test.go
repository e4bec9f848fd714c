package shellclass

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// A read result is a claim that the command changes nothing. The tests in
// bash_test.go check that claim against real bash: the command runs in a
// bubblewrap sandbox in which only a scratch directory is writable (it is
// /tmp, and holds HOME and the working directory), and any change to that
// directory is a read that is not one. The probes' payloads create /tmp/M
// when bash evaluates them as code.

// probeTimeout bounds one run: read commands that wait (sleep, top -d) or
// walk the whole file system are cut off, which is not a failure.
const probeTimeout = 3 * time.Second

// nobodyUID is the user the sandbox runs as when the tests run as root, so
// that a process limit applies (root is exempt from RLIMIT_NPROC) and a
// probe that turns out to fork without end cannot take the machine down.
const nobodyUID = "65534"

// sandbox runs shell commands under bubblewrap.
type sandbox struct {
	bwrap  string
	prefix []string // setpriv and prlimit when running as root
	shells map[Dialect]string
}

// newSandbox finds bwrap and the shells. Without them the calling test
// skips, unless POSTERN_E2E is set: then it fails, as every end-to-end test
// must run in CI.
func newSandbox(tb testing.TB) *sandbox {
	tb.Helper()
	missing := func(format string, args ...any) *sandbox {
		tb.Helper()
		if os.Getenv("POSTERN_E2E") != "" {
			tb.Fatalf("POSTERN_E2E is set but "+format, args...)
		}
		tb.Skipf(format+" (set POSTERN_E2E=1 to make this a failure)", args...)
		return nil
	}
	sb := &sandbox{shells: map[Dialect]string{}}
	var err error
	if sb.bwrap, err = exec.LookPath("bwrap"); err != nil {
		return missing("bwrap (Debian package bubblewrap) is not installed: %v", err)
	}
	for d, name := range map[Dialect]string{Bash: "bash", POSIX: "dash"} {
		p, err := exec.LookPath(name)
		if err != nil {
			return missing("%s is not installed: %v", name, err)
		}
		sb.shells[d] = p
	}
	if os.Geteuid() == 0 {
		setpriv, err1 := exec.LookPath("setpriv")
		prlimit, err2 := exec.LookPath("prlimit")
		if err := errors.Join(err1, err2); err != nil {
			return missing("setpriv and prlimit (util-linux) are needed to run the sandbox as nobody: %v", err)
		}
		sb.prefix = []string{setpriv, "--reuid=" + nobodyUID, "--regid=" + nobodyUID, "--clear-groups", "--inh-caps=-all", prlimit, "--nproc=512", "--core=0"}
	}
	// bwrap may be installed and still unable to create namespaces here.
	res, err := sb.run("echo ok", Bash, nil)
	if err != nil || !strings.Contains(res.stdout, "ok") {
		return missing("bwrap cannot run a shell here: %v (stderr %q)", err, res.stderr)
	}
	return sb
}

// runResult is what one run did.
type runResult struct {
	// changes lists what changed in the scratch directory, one line each.
	changes  []string
	timedOut bool
	stdout   string
	stderr   string
}

// scratchFiles are placed in the scratch directory before each run, so that
// a change to or removal of a file is seen, not only a new file.
var scratchFiles = map[string]string{
	"home/notes.txt":      "hello\nworld\n",
	"home/data.json":      `{"a": 1, "b": [1, 2]}` + "\n",
	"home/sub/inner.txt":  "inner\n",
	"home/.bash_history":  "ls\n",
	"keep.txt":            "keep\n",
	"home/a[1]":           "a file named like a subscript\n",
	"home/-v":             "a file named like an option\n",
	"home/script.sh":      "echo script\n",
	"home/.config/x.conf": "x=1\n",
}

// run runs cmd under the dialect's shell in a fresh sandbox, with env
// (NAME=value) added to a small clean environment.
func (sb *sandbox) run(cmd string, d Dialect, env []string) (runResult, error) {
	var res runResult
	dir, err := os.MkdirTemp("", "postern-sandbox-")
	if err != nil {
		return res, fmt.Errorf("sandbox: %w", err)
	}
	defer func() {
		_ = filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				_ = os.Chmod(p, 0o700) // a probe may leave a directory unreadable
			}
			return nil
		})
		_ = os.RemoveAll(dir)
	}()
	if err := seedScratch(dir); err != nil {
		return res, err
	}
	before, err := snapshot(dir)
	if err != nil {
		return res, err
	}
	args := append([]string{}, sb.prefix...)
	args = append(args, sb.bwrap,
		"--ro-bind", "/", "/",
		"--dev", "/dev",
		"--proc", "/proc",
		"--tmpfs", "/run", // no daemon sockets (docker, systemd, dbus)
		"--tmpfs", "/dev/shm", // TMPDIR: sort's spill files are not the command's writes
		"--bind", dir, "/tmp",
		"--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
		"--clearenv",
		"--setenv", "PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"--setenv", "HOME", "/tmp/home",
		"--setenv", "TMPDIR", "/dev/shm",
		"--setenv", "LANG", "C.UTF-8",
		"--setenv", "TERM", "dumb",
		"--chdir", "/tmp/home")
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		args = append(args, "--setenv", k, v)
	}
	shell := sb.shells[d]
	if d == Bash {
		args = append(args, shell, "--noprofile", "--norc", "-c", cmd)
	} else {
		args = append(args, shell, "-c", cmd)
	}
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	c := exec.CommandContext(ctx, args[0], args[1:]...)
	var stdout, stderr capped
	c.Stdout, c.Stderr = &stdout, &stderr
	c.WaitDelay = time.Second
	runErr := c.Run()
	res.stdout, res.stderr = stdout.String(), stderr.String()
	res.timedOut = ctx.Err() != nil
	var exit *exec.ExitError
	if runErr != nil && !errors.As(runErr, &exit) && !res.timedOut {
		return res, fmt.Errorf("sandbox: run: %w", runErr)
	}
	after, err := snapshot(dir)
	if err != nil {
		return res, err
	}
	res.changes = diffSnapshots(before, after)
	return res, nil
}

// seedScratch fills a new scratch directory and, when the sandbox runs as
// nobody, gives it to nobody.
func seedScratch(dir string) error {
	for name, body := range scratchFiles {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("sandbox: %w", err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			return fmt.Errorf("sandbox: %w", err)
		}
	}
	if os.Geteuid() != 0 {
		return nil
	}
	return filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, 65534, 65534)
	})
}

// snapshot records every entry under dir: type and mode, size, modification
// time and, for files, a hash of the contents.
func snapshot(dir string) (map[string]string, error) {
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		desc := fmt.Sprintf("%v %d %d", info.Mode(), info.Size(), info.ModTime().UnixNano())
		switch {
		case info.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc += fmt.Sprintf(" %x", sha256.Sum256(b))
		case info.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			desc += " -> " + target
		case info.IsDir() && info.Mode().Perm()&0o500 != 0o500:
			return fs.SkipDir // changed below already; it cannot be listed
		}
		rel, _ := filepath.Rel(dir, p)
		out[rel] = desc
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sandbox: snapshot: %w", err)
	}
	return out, nil
}

func diffSnapshots(before, after map[string]string) []string {
	var out []string
	for p, b := range before {
		switch a, ok := after[p]; {
		case !ok:
			out = append(out, "removed "+p)
		case a != b:
			out = append(out, "changed "+p)
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			out = append(out, "created "+p)
		}
	}
	sort.Strings(out)
	return out
}

// capped keeps the first 4 KiB written to it and drops the rest, so that a
// command that prints without end neither blocks nor fills memory.
type capped struct{ b bytes.Buffer }

func (c *capped) Write(p []byte) (int, error) {
	if room := 4096 - c.b.Len(); room > 0 {
		c.b.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

func (c *capped) String() string { return c.b.String() }
