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
	"testing"
	"time"
)

// pkgSFTPSuiteTimeout bounds one run of pkg/sftp's integration suite (a
// little over a minute on the 2-core machine of bench/RESULTS.md).
const pkgSFTPSuiteTimeout = 10 * time.Minute

// TestPkgSFTPIntegrationSuite runs pkg/sftp's own client integration suite
// (its tests run with -integration -sftp BINARY, BINARY being an sftp
// server speaking on stdin and stdout) twice: with a wrapper that reaches
// the target's sftp subsystem directly over ssh, and with one that reaches
// it through postern (`ssh -s web@bastion sftp`). Every test that passes
// directly must pass through postern.
//
// The suite is the module's own test files, copied from the module cache
// into a directory named sftp (its package name) and run as a module of its
// own: `go test` may fetch its test-only dependencies (testify).
func TestPkgSFTPIntegrationSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("pkg/sftp's integration suite takes a minute or two; skipped in -short mode")
	}
	requireTool(t, "ssh", "openssh-client")
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/pkg/sftp").Output()
	if err != nil {
		t.Fatalf("go list -m github.com/pkg/sftp: %v", err)
	}
	modDir := strings.TrimSpace(string(out))
	suite := filepath.Join(t.TempDir(), "sftp")
	if err := os.CopyFS(suite, os.DirFS(modDir)); err != nil {
		t.Fatalf("copy %s: %v", modDir, err)
	}
	// The module cache is read-only; the copy must not be, or its tests
	// (and TempDir's cleanup) cannot write next to it.
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

	h := newHarness(t, harnessOpts{rules: allowAll})
	results := map[string]map[string]string{}
	for _, e := range h.endpoints(t) {
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
		results[e.name] = runPkgSFTPSuite(t, suite, wrapper)
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

// runPkgSFTPSuite runs the suite in dir against server and returns each
// top-level test's result: pass, fail or skip.
func runPkgSFTPSuite(t *testing.T, dir, server string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), pkgSFTPSuiteTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "test", "-count=1", "-json", "-timeout", pkgSFTPSuiteTimeout.String(),
		".", "-integration", "-sftp", server)
	cmd.Dir = dir
	// The copy is a module of its own, outside any workspace.
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
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
		t.Fatalf("pkg/sftp suite against %s ran nothing: %v\nstderr:\n%s\nstdout (end):\n%s", server, err, stderr.String(), tail(out, 3000))
	}
	return results
}

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
