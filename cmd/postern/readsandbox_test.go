package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/postern/postern/internal/e2e"
	"github.com/postern/postern/internal/testsshd"
	"github.com/postern/postern/metrics"
	"github.com/postern/postern/model"
	"github.com/postern/postern/store"
)

// TestConnReadSandbox: conn add probes a real target for the read sandbox
// and says what reads run in; conn list shows it, and warns on stderr about
// a production connection whose reads rely on the classifier alone; conn
// update sets require (probing again) or off (with the reason it needs);
// conn check probes again; -o json carries it all.
func TestConnReadSandbox(t *testing.T) {
	t.Parallel()
	e2e.Tool(t, "bwrap", "bubblewrap")
	sshd := testsshd.Start(t, testsshd.Options{})
	c := newCLI(t)
	key := filepath.Join(t.TempDir(), "id")
	if err := os.WriteFile(key, sshd.UserKeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	pin := strings.Join(strings.Fields(sshd.KnownHostsLine)[1:], " ")
	add := func(args ...string) result {
		return c.run("", append([]string{"conn", "add", "--host", sshd.Host, "--port", itoa(sshd.Port), "--user", sshd.User,
			"--key-file", key, "--host-key", pin}, args...)...)
	}
	if r := add("web"); r.code != 0 || !strings.Contains(r.stdout, "read sandbox probe: bwrap") || !strings.Contains(r.stdout, "reads run: bwrap\n") {
		t.Fatalf("conn add web: exit %d, stdout %q, stderr %q; want the probe's bwrap", r.code, r.stdout, r.stderr)
	}
	r := add("prod", "--env", "production", "--no-check")
	if r.code != 0 || !strings.Contains(r.stdout, "reads run: classifier\n") ||
		!strings.Contains(r.stderr, "postern: warning: reads on production connection prod rely on the classifier alone: the target was not probed") {
		t.Errorf("conn add prod --no-check: exit %d, stdout %q, stderr %q; want reads on the classifier and a warning", r.code, r.stdout, r.stderr)
	}
	list := c.run("", "conn", "list")
	if !strings.Contains(list.stdout, "READS") || !strings.Contains(list.stderr, "reads on production connection prod rely on the classifier alone") ||
		strings.Contains(list.stderr, "connection web") {
		t.Errorf("conn list: stdout %q, stderr %q; want the READS column and a warning for prod only", list.stdout, list.stderr)
	}

	if r := c.run("", "conn", "update", "prod", "--read-sandbox", "off"); r.code != 2 || !strings.Contains(r.stderr, "say why the read sandbox is off") {
		t.Errorf("update off without a reason: exit %d, stderr %q; want 2 and the reason asked for", r.code, r.stderr)
	}
	if r := c.run("", "conn", "update", "prod", "--read-sandbox", "sometimes"); r.code != 2 {
		t.Errorf("update to an unknown setting: exit %d; want 2", r.code)
	}
	// Turning the sandbox off on production loosens it: it waits for a
	// second admin, and then lists with the reason in its warning.
	if r := c.run("", "conn", "update", "prod", "--read-sandbox", "off", "--read-sandbox-reason", "its fuse mounts hang bwrap"); r.code != 0 ||
		!strings.Contains(r.stdout, "read sandbox auto -> off (its fuse mounts hang bwrap) waits for a second admin") {
		t.Errorf("update off: exit %d, stdout %q, stderr %q; want it to wait for a second admin", r.code, r.stdout, r.stderr)
	}
	if ids := c.approveChanges(); len(ids) != 1 {
		t.Errorf("changes waiting after update off: %v; want the one", ids)
	}
	if list := c.run("", "conn", "list"); !strings.Contains(list.stderr, "the read sandbox is off (its fuse mounts hang bwrap)") {
		t.Errorf("conn list after update off: stderr %q; want the warning with the reason", list.stderr)
	}
	if r := c.run("", "conn", "update", "web", "--read-sandbox", "require"); r.code != 0 || !strings.Contains(r.stdout, "read sandbox probe: bwrap") ||
		!strings.Contains(r.stdout, "reads run: bwrap (require)") {
		t.Errorf("update require: exit %d, stdout %q, stderr %q; want probed again, bwrap, require", r.code, r.stdout, r.stderr)
	}
	if r := c.run("", "conn", "check", "web"); r.code != 0 || !strings.Contains(r.stdout, "read sandbox probe: bwrap") {
		t.Errorf("conn check: exit %d, stdout %q; want the probe", r.code, r.stdout)
	}

	var conns []model.Connection
	if err := json.Unmarshal([]byte(c.ok("", "conn", "list", "-o", "json")), &conns); err != nil {
		t.Fatal(err)
	}
	got := map[string]model.ReadSandbox{}
	for _, cj := range conns {
		got[cj.Alias] = cj.ReadSandbox
	}
	if w := got["web"]; w.Setting != "require" || w.Found != "bwrap" || w.Reads != "bwrap" || w.ProbedAt.IsZero() || w.Warning != "" {
		t.Errorf("web's read_sandbox: %+v; want require, bwrap, probed, no warning", w)
	}
	if p := got["prod"]; p.Setting != "off" || p.Reason != "its fuse mounts hang bwrap" || p.Reads != model.ReadsClassifier || p.Warning == "" {
		t.Errorf("prod's read_sandbox: %+v; want off with its reason, on the classifier, a warning", p)
	}
}

// TestWatchReadSandboxes: serve's gauge counts the stored connections by
// environment, setting and probe outcome at each scrape.
func TestWatchReadSandboxes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mk := make([]byte, store.MasterKeySize)
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), store.DatabaseFile), store.Options{MasterKey: mk})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	key, host := writeKeyFiles(t, "conn", ""), writeKeyFiles(t, "host", "")
	keyPEM, pin := key.privPEM, host.pubLine
	for _, nc := range []store.NewConnection{
		{Alias: "a", Env: store.EnvProduction, Probe: &store.SandboxProbe{Found: store.SandboxNone, Message: "bwrap: not installed"}},
		{Alias: "b", Env: store.EnvProduction, ReadSandbox: store.ReadSandboxRequire, Probe: &store.SandboxProbe{Found: store.SandboxBwrap}},
		{Alias: "c", Env: store.EnvDev},
	} {
		nc.Host, nc.User, nc.PrivateKey, nc.HostKeys = "h", "u", keyPEM, []string{pin}
		if _, err := st.CreateConnection(ctx, store.Unaudited(), nc); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	if err := watchReadSandboxes(m, st); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP postern_connections_read_sandbox Connections by environment, read sandbox setting (auto, require, off) and what the last probe of the target found (bwrap, unshare, none, unprobed).
# TYPE postern_connections_read_sandbox gauge
postern_connections_read_sandbox{env="dev",found="unprobed",setting="auto"} 1
postern_connections_read_sandbox{env="production",found="bwrap",setting="require"} 1
postern_connections_read_sandbox{env="production",found="none",setting="auto"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "postern_connections_read_sandbox"); err != nil {
		t.Error(err)
	}
}
