package bastion

import (
	"strings"
	"testing"
	"time"

	"github.com/postern/postern/internal/testpg"
	"github.com/postern/postern/internal/testwait"
)

// TestOutageSaysSo: with its PostgreSQL down, postern answers an agent
// with the outage banner and closes the connection, so that OpenSSH's
// client exits 255 on a lost connection, not on "Permission denied
// (publickey)", which would send its operator after a key that is fine
// (issue 25).
func TestOutageSaysSo(t *testing.T) {
	t.Parallel()
	testpg.Require(t)
	srv, err := testpg.Start(testwait.Context(t), testpg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop() })
	// A database of its own, not dropped at the end: the server is gone.
	url, err := srv.CreateDatabase(testwait.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, harnessOpts{rules: writeAsk, database: url})

	if got := h.ssh("", "127.0.0.1", "web", "true"); got.code != 0 {
		t.Fatalf("with the database up: exit %d, stderr %q; want 0", got.code, got.stderr)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	// An agent's ssh at its default log level, which shows banners (the
	// harness's LogLevel=ERROR hides them).
	opts := h.clientOpts("-p")
	for i, o := range opts {
		if o == "LogLevel=ERROR" {
			opts[i] = "LogLevel=INFO"
		}
	}
	start := time.Now()
	got := h.runClient("", "ssh", append(opts, "127.0.0.1", "web", "true")...)
	t.Logf("refused in %v", time.Since(start))
	if got.code != 255 || !strings.Contains(got.stderr, strings.TrimSpace(OutageBanner)) {
		t.Errorf("with the database down: exit %d, stderr %q; want 255 and %q", got.code, got.stderr, strings.TrimSpace(OutageBanner))
	}
	if strings.Contains(got.stderr, "Permission denied") {
		t.Errorf("with the database down: stderr %q; want no authentication failure", got.stderr)
	}
}
