package bastion

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/postern/postern/internal/testwait"
)

// TestPkgSFTPIntegrationSuite runs pkg/sftp's own client integration suite
// (its tests run with -integration -sftp BINARY, BINARY being an sftp
// server speaking on stdin and stdout) twice: with a wrapper that reaches
// the target's sftp subsystem directly over ssh, and with one that reaches
// it through postern (`ssh -s web@bastion sftp`). Every test that passes
// directly must pass through postern.
//
// The suite is the module's own test files, compiled within this module
// (`go test -c github.com/pkg/sftp`): its test-only dependency, testify, is
// a requirement of this module's go.mod (sftp_pkgsftp_deps_test.go), so a
// module cache that `go mod download` filled has all it needs and nothing
// is fetched at run time.
func TestPkgSFTPIntegrationSuite(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("pkg/sftp's integration suite compiles a test binary; skipped in -short mode")
	}
	requireTool(t, "ssh", "openssh-client")
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/pkg/sftp").Output()
	if err != nil {
		t.Fatalf("go list -m github.com/pkg/sftp: %v", err)
	}
	modDir := strings.TrimSpace(string(out))

	// The suite is compiled once, then run against both endpoints at once:
	// each run spends its time waiting on its server, not on the CPU.
	bin := buildPkgSFTPSuite(t)
	h := newHarness(t, harnessOpts{rules: allowAll})
	ctx := testwait.Context(t)
	var wg sync.WaitGroup
	results := map[string]map[string]string{}
	errs := map[string]error{}
	var mu sync.Mutex // guards results and errs
	sockets := socketDir(t)
	for _, e := range h.endpoints(t) {
		// The suite starts a server for each of its 170 tests. Each
		// endpoint's sessions share one ControlMaster connection, as a
		// client that reuses its connection would: the suite is about what
		// each SFTP session does, and a new SSH connection per test would
		// cost two handshakes through postern (each a key exchange) for
		// nothing it checks.
		e = e.muxed(t, sockets)
		// The suite starts the server as BINARY -e [-R] -l LEVEL; the
		// wrapper ignores those (read-only mode is the server's, and
		// neither path below has it) and opens the sftp subsystem.
		wrapper := filepath.Join(t.TempDir(), "sftp-"+e.name)
		args := append([]string{"exec", "ssh"}, e.opts("-p")...)
		args = append(args, "-s", e.user+"@127.0.0.1", "sftp")
		script := "#!/bin/sh\n" + shellJoin(args) + "\n"
		if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		// Each run works in its own copy: the suite's tests write next to
		// their sources.
		dir := copySuite(t, modDir)
		// And in its own temporary directory: tests such as
		// TestClientReadDir list os.TempDir() twice, locally and over
		// SFTP, and compare; the machine's /tmp changes in between under
		// the other tests that run in parallel.
		tmp := t.TempDir()
		wg.Go(func() {
			r, err := runPkgSFTPSuite(ctx, dir, bin, wrapper, tmp)
			mu.Lock()
			defer mu.Unlock()
			results[e.name], errs[e.name] = r, err
		})
	}
	wg.Wait()
	for name, err := range errs {
		if err != nil {
			t.Fatalf("pkg/sftp suite %s: %v", name, err)
		}
	}
	direct, via := results["direct"], results["postern"]
	passed := 0
	var lost []string
	for name, r := range direct {
		if r != "pass" {
			continue
		}
		passed++
		if via[name] != "pass" {
			lost = append(lost, name+" ("+via[name]+")")
		}
	}
	slices.Sort(lost)
	count := func(r map[string]string) string {
		n := map[string]int{}
		var failed []string
		for name, res := range r {
			n[res]++
			if res == "fail" {
				failed = append(failed, name)
			}
		}
		slices.Sort(failed)
		return fmt.Sprintf("%d pass, %d fail %v, %d skip", n["pass"], n["fail"], failed, n["skip"])
	}
	t.Logf("pkg/sftp suite: directly %s; through postern %s", count(direct), count(via))
	if passed < 50 {
		t.Errorf("only %d tests pass directly; want the suite to run (results %v)", passed, direct)
	}
	if len(lost) > 0 {
		t.Errorf("pass directly but not through postern:\n  %s", strings.Join(lost, "\n  "))
	}
}

// copySuite copies the module in modDir into a new directory named sftp
// (its package name) and returns it. The module cache is read-only; the
// copy must not be, or the suite's tests (and TempDir's cleanup) cannot
// write next to it.
func copySuite(t *testing.T, modDir string) string {
	t.Helper()
	suite := filepath.Join(t.TempDir(), "sftp")
	if err := os.CopyFS(suite, os.DirFS(modDir)); err != nil {
		t.Fatalf("copy %s: %v", modDir, err)
	}
	filepath.WalkDir(suite, func(p string, d fs.DirEntry, err error) error {
		if err == nil {
			mode := os.FileMode(0o644)
			if d.IsDir() {
				mode = 0o755
			}
			os.Chmod(p, mode)
		}
		return err
	})
	return suite
}

// buildPkgSFTPSuite compiles pkg/sftp's tests, as this module requires
// them, into a test binary and returns its path.
func buildPkgSFTPSuite(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "sftp.test")
	cmd := exec.CommandContext(testwait.Context(t), "go", "test", "-c", "-o", bin, "github.com/pkg/sftp")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("compile pkg/sftp's suite: %v\n%s", err, tail(out, 3000))
	}
	return bin
}

// runPkgSFTPSuite runs the suite's binary bin (in dir, where its testdata
// is, with TMPDIR set to tmp) against server and returns each top-level
// test's result: pass, fail or skip. go tool test2json turns its output
// into events. It runs until ctx ends (testwait.Context: the test's
// deadline) at most; the suite has no timeout of its own.
func runPkgSFTPSuite(ctx context.Context, dir, bin, server, tmp string) (map[string]string, error) {
	cmd := exec.CommandContext(ctx, "go", "tool", "test2json", bin, "-test.v=test2json", "-test.count=1",
		"-test.timeout", "0", "-test.skip", pkgSFTPOwnServerTests, "-integration", "-sftp", server)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	results := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev struct{ Action, Test string }
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Test == "" || strings.Contains(ev.Test, "/") {
			continue
		}
		switch ev.Action {
		case "pass", "fail", "skip":
			results[ev.Test] = ev.Action
		}
	}
	if len(results) == 0 {
		return nil, fmt.Errorf("against %s ran nothing: %v\nstderr:\n%s\nstdout (end):\n%s", server, err, stderr.String(), tail(out, 3000))
	}
	return results, nil
}

// pkgSFTPOwnServerTests are the suite's tests of pkg/sftp's own server:
// each runs OpenSSH's sftp client (10 MiB transfers among them) against
// that server in the test process and never reaches the -sftp server, so
// they tell nothing about postern and cost about a third of the suite's
// time. TestServerCompareSubsystems, which compares that server with the
// -sftp one, stays.
const pkgSFTPOwnServerTests = "^TestServer(MkdirRmdir|Link|Symlink|Put|Resume|Get|PutRecursive|GetRecursive)$"

// shellJoin quotes words for sh.
func shellJoin(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
