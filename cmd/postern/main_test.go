package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/postern/postern/internal/testpg"
	"github.com/postern/postern/internal/testwait"
)

// posternBin is the postern that the tests run as a process of its own:
// serve and demo, the clients' printed command lines, and the commands
// whose subject is the process (its environment, its exit on a signal). It
// is this test binary under the name postern: run with runAsPostern set in
// its environment, TestMain runs postern's command line instead of the
// tests, so that no build of its own is needed. The other CLI tests run the
// same command line in this process (runCLI).
var posternBin string

// runAsPostern is the environment variable that makes the test binary be
// postern (see posternBin).
const runAsPostern = "POSTERN_TEST_RUN_AS_POSTERN"

// defaultParallel is how many tests run at once when go test is not given
// -parallel (whose default is GOMAXPROCS). The tests run postern, sshd,
// OpenSSH clients and Chromium as processes and mostly wait on them.
const defaultParallel = "4"

// posternEnv are the variables that point postern at a data directory or
// database; no test inherits them from the machine.
var posternEnv = []string{envData, envMasterKeyFile, envDatabaseURL, envAdmin}

func TestMain(m *testing.M) {
	if os.Getenv(runAsPostern) == "1" {
		os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		flag.Set("test.parallel", defaultParallel)
	}
	// The commands runCLI runs in this process read the environment as a
	// postern process would read cliEnv's.
	for _, name := range posternEnv {
		os.Unsetenv(name)
	}
	dir, err := os.MkdirTemp("", "postern-cli-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if posternBin, err = linkSelf(dir); err != nil {
		fmt.Fprintln(os.Stderr, "postern binary:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	if err := testBrowser.stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	if err := testPG.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// linkSelf gives this test binary the name postern in dir, a hard link (a
// copy across file systems), and returns its path. The name matters: the
// demo prints the command it was started as for the admin to run again, and
// takes a binary in Go's build cache for one of `go run`.
func linkSelf(dir string) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "postern")
	if os.Link(self, bin) == nil {
		return bin, nil
	}
	src, err := os.Open(self)
	if err != nil {
		return "", err
	}
	defer src.Close()
	dst, err := os.OpenFile(bin, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return "", err
	}
	return bin, dst.Close()
}

// testPG is the PostgreSQL server of the tests that need one, started by
// the first of them and stopped by TestMain.
var testPG testpg.Shared

// result is one run of postern.
type result struct {
	stdout, stderr string
	code           int
}

// cliEnv is the environment postern runs with as a process: the test's,
// minus any POSTERN_* setting that would point it at a real data directory,
// with runAsPostern, and extra.
func cliEnv(extra ...string) []string {
	var env []string
	for _, e := range os.Environ() {
		name, _, _ := strings.Cut(e, "=")
		if !slices.Contains(posternEnv, name) && name != runAsPostern {
			env = append(env, e)
		}
	}
	return append(append(env, runAsPostern+"=1"), extra...)
}

// runCLI runs postern's command line with args and stdin in this process,
// as main does in a process of its own: the same output streams and exit
// status, without the cost of a process per command. A panic fails the
// test (a process would have died).
func runCLI(t *testing.T, stdin string, args ...string) (r result) {
	t.Helper()
	var out, errb bytes.Buffer
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("postern %s panicked: %v\n%s", strings.Join(args, " "), p, debug.Stack())
		}
	}()
	code := run(args, strings.NewReader(stdin), &out, &errb)
	return result{stdout: out.String(), stderr: errb.String(), code: code}
}

// runProcess runs postern as a process of its own with args and stdin, and
// the given extra environment: for what the process itself does, such as
// reading the environment.
func runProcess(t *testing.T, stdin string, env []string, args ...string) result {
	t.Helper()
	cmd := exec.CommandContext(testwait.Context(t), posternBin, args...)
	cmd.Env = cliEnv(env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("run postern %v: %v", args, err)
	}
	return r
}

// cli is a data directory and a way to run postern against it.
type cli struct {
	t        *testing.T
	data     string
	database string // --database URL; "" for SQLite in data
}

// newCLI makes a fresh data directory with postern init.
func newCLI(t *testing.T) *cli {
	t.Helper()
	c := &cli{t: t, data: filepath.Join(t.TempDir(), "data")}
	c.ok("", "init")
	return c
}

// newPGCLI makes a fresh data directory over a new PostgreSQL database
// with postern init.
func newPGCLI(t *testing.T) *cli {
	t.Helper()
	c := &cli{t: t, data: filepath.Join(t.TempDir(), "data"), database: testPG.NewDatabase(t)}
	c.ok("", "init")
	return c
}

// run runs postern with --data (and --database) appended.
func (c *cli) run(stdin string, args ...string) result {
	c.t.Helper()
	args = append(args, "--data", c.data)
	if c.database != "" {
		args = append(args, "--database", c.database)
	}
	return runCLI(c.t, stdin, args...)
}

// ok runs postern and fails the test unless it exits 0.
func (c *cli) ok(stdin string, args ...string) string {
	c.t.Helper()
	r := c.run(stdin, args...)
	if r.code != 0 {
		c.t.Fatalf("postern %s: got exit %d; want 0\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// snapshot is everything the lists show, in JSON; a failed command must
// leave it unchanged.
func (c *cli) snapshot() string {
	c.t.Helper()
	return c.ok("", "agent", "list", "-o", "json") + c.ok("", "conn", "list", "-o", "json") + c.ok("", "grant", "list", "-o", "json")
}
