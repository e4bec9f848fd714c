package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/postern/postern/internal/testpg"
)

// posternBin is the postern binary built once by TestMain; the CLI tests run
// it as a subprocess so that they see exactly what an admin sees: stdout,
// stderr and the exit status.
var posternBin string

// defaultParallel is how many tests run at once when go test is not given
// -parallel (whose default is GOMAXPROCS). The tests run postern, sshd,
// OpenSSH clients and Chromium as processes and mostly wait on them.
const defaultParallel = "4"

func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		flag.Set("test.parallel", defaultParallel)
	}
	dir, err := os.MkdirTemp("", "postern-cli-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	posternBin = filepath.Join(dir, "postern")
	build := exec.Command("go", "build", "-o", posternBin, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build postern:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	if err := testPG.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

// testPG is the PostgreSQL server of the tests that need one, started by
// the first of them and stopped by TestMain.
var testPG testpg.Shared

// result is one run of the binary.
type result struct {
	stdout, stderr string
	code           int
}

// cliEnv is the environment the binary runs with: the test's, minus any
// POSTERN_* setting that would point it at a real data directory.
func cliEnv(extra ...string) []string {
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "POSTERN_DATA=") && !strings.HasPrefix(e, "POSTERN_MASTER_KEY_FILE=") &&
			!strings.HasPrefix(e, "POSTERN_DATABASE_URL=") {
			env = append(env, e)
		}
	}
	return append(env, extra...)
}

// runCLI runs postern with args and stdin, and the given extra environment.
func runCLI(t *testing.T, stdin string, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(posternBin, args...)
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
	return runCLI(c.t, stdin, nil, args...)
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
