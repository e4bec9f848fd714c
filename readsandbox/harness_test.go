package readsandbox

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/postern/postern/internal/e2e"
	"github.com/postern/postern/internal/testwait"
)

// These tests run commands the way a target's sshd does, without sshd: the
// login shell with argv[0] its base name, "-c" and the command string, in
// the user's home with the environment sshd gives (HOME, USER, LOGNAME,
// SHELL, PATH). A command run directly and the same command given to Wrap
// must then behave the same, apart from the listed differences. The
// bastion's tests do the same through a real sshd and postern.

// nobodyID is the uid and gid of the tests' user other than root.
const nobodyID = 65534

// login is a target user's login: who, with which shell, where.
type login struct {
	shell string // the login shell's path
	uid   int    // 0 or nobodyID
	home  string // HOME and the working directory, as sshd sets them
	path  string // PATH; defaultPath if empty
	// prefix, when set, is run in place of the login shell, with the
	// shell's argv ("$0" its path, then "-c" and the command) after it.
	prefix []string
}

// defaultPath is a Debian login's PATH for root, which has /usr/sbin
// (mount's directory on older systems).
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// result is how a command ended.
type result struct {
	stdout, stderr string
	code           int
}

// needSandbox ends the test unless the tools of both mechanisms are here
// (bubblewrap, util-linux's unshare, mount and setpriv) and the test runs
// as root, which the tests of the other user need to become it.
func needSandbox(t *testing.T) {
	t.Helper()
	e2e.Tool(t, "bwrap", "bubblewrap")
	for _, p := range []string{"unshare", "mount", "setpriv"} {
		e2e.Tool(t, p, "util-linux")
	}
	if os.Geteuid() != 0 {
		e2e.Missing(t, "root (the tests run commands as root and as nobody)", "nothing: run the tests as root")
	}
}

// newLogin makes a home directory that uid owns and returns a login of
// shell for uid there.
func newLogin(t *testing.T, shell string, uid int) login {
	t.Helper()
	if _, err := os.Stat(shell); err != nil {
		e2e.Missing(t, shell, "bash and dash")
	}
	// Not t.TempDir: its parents are 0700, which nobody cannot enter.
	home, err := os.MkdirTemp("", "readsandbox-home-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	if err := os.Chmod(home, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(home, uid, uid); err != nil {
		t.Fatal(err)
	}
	return login{shell: shell, uid: uid, home: home}
}

// env is the environment sshd gives the login shell.
func (l login) env() []string {
	user := "root"
	if l.uid != 0 {
		user = "nobody"
	}
	path := l.path
	if path == "" {
		path = defaultPath
	}
	return []string{"HOME=" + l.home, "USER=" + user, "LOGNAME=" + user, "SHELL=" + l.shell, "PATH=" + path, "LC_ALL=C"}
}

// run runs command as sshd would for l, with stdin.
func (l login) run(t *testing.T, command, stdin string) result {
	t.Helper()
	cmd := exec.CommandContext(testwait.Context(t), l.shell, "-c", command)
	cmd.Args[0] = filepath.Base(l.shell)
	if len(l.prefix) > 0 {
		cmd = exec.CommandContext(testwait.Context(t), l.prefix[0], append(l.prefix[1:], l.shell, "-c", command)...)
	}
	cmd.Env, cmd.Dir = l.env(), l.home
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if l.uid != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(l.uid), Gid: uint32(l.uid)}}
	}
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			r.code = 128 + int(ws.Signal())
		}
	case err != nil:
		t.Fatalf("run %q: %v", command, err)
	}
	return r
}

// wrapped runs command in m's sandbox for l.
func (l login) wrapped(t *testing.T, m Mechanism, command, stdin string) result {
	t.Helper()
	w, err := Wrap(m, command)
	if err != nil {
		t.Fatal(err)
	}
	return l.run(t, w, stdin)
}
