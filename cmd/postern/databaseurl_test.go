package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/postern/postern/internal/testpg"
)

// TestDatabaseURLIsEnough: with --database, a command that needs no secret
// works where the data directory does not exist (an admin's laptop with
// only the URL); one that needs the master key says which file it lacks
// (issue 25: listing agents failed for want of ./postern-data).
func TestDatabaseURLIsEnough(t *testing.T) {
	t.Parallel()
	testpg.Require(t)
	c := newPGCLI(t)
	c.ok("", "agent", "add", "bot", "--key", writeKeyFiles(t, "bot", "").pub)
	laptop := &cli{t: t, data: filepath.Join(t.TempDir(), "nowhere"), database: c.database}
	if out := laptop.ok("", "agent", "list"); !strings.Contains(out, "bot") {
		t.Errorf("agent list with only the URL: %q; want bot listed", out)
	}
	laptop.ok("", "audit", "verify")
	r := laptop.run("", "conn", "add", "web", "--host", "127.0.0.1", "--user", "deploy", "--generate-key",
		"--host-key", hostLine(t, "127.0.0.1"), "--no-check")
	if want := filepath.Join(laptop.data, "master.key"); r.code == 0 || !strings.Contains(r.stderr, want) {
		t.Errorf("conn add with only the URL: exit %d, stderr %q; want a failure naming %s", r.code, r.stderr, want)
	}
	// Without --database the missing directory is still an error.
	sqlite := &cli{t: t, data: laptop.data}
	if r := sqlite.run("", "agent", "list"); r.code == 0 || !strings.Contains(r.stderr, "does not exist") {
		t.Errorf("agent list without a data directory or a URL: exit %d, stderr %q; want it to say the directory does not exist", r.code, r.stderr)
	}
}
