// Package e2e decides what a test does when a real part it needs (an
// OpenSSH program, PostgreSQL, HAProxy, Chromium, a Python module from
// Debian) is missing: a developer's `go test ./...` skips it and says what
// to install, and CI, which sets POSTERN_E2E=1 after installing everything,
// fails it, so that a test that must run never passes by skipping.
package e2e

import (
	"os"
	"os/exec"
	"testing"
)

// Enabled reports whether POSTERN_E2E=1: every test that needs a real
// part must run.
func Enabled() bool { return os.Getenv("POSTERN_E2E") == "1" }

// Missing ends the test because what is missing: it fails tb under
// POSTERN_E2E=1 and skips it otherwise, naming install (a Debian package,
// or how else to get it). It does not return.
func Missing(tb testing.TB, what, install string) {
	tb.Helper()
	if Enabled() {
		tb.Fatalf("%s not found and POSTERN_E2E=1; install %s", what, install)
	}
	tb.Skipf("%s not found; install %s to run this test (POSTERN_E2E=1 makes it fail instead)", what, install)
}

// Tool returns the path of program name on PATH, or ends the test through
// Missing, naming the Debian package pkg that has it.
func Tool(tb testing.TB, name, pkg string) string {
	tb.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(tb, name, pkg)
	}
	return p
}
