package manage

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/postern/postern/internal/e2e"
	"github.com/postern/postern/internal/testsshd"
	"github.com/postern/postern/recipes"
	"github.com/postern/postern/store"
)

// TestProbeRealTarget: conn add, update and check probe a real sshd target
// with the real prober: bubblewrap where it is installed; unshare where the
// login's PATH has no bwrap; none, with each mechanism's own words, where
// neither starts (as without user namespaces); an update to require and a
// check probe again.
func TestProbeRealTarget(t *testing.T) {
	e2e.Tool(t, "bwrap", "bubblewrap")
	for _, p := range []string{"unshare", "mount", "setpriv"} {
		e2e.Tool(t, p, "util-linux")
	}
	target := testsshd.Start(t, testsshd.Options{})
	m, _, _ := newTestManager(t)
	m.chk, m.prober = recipes.Checker{}, SSHProber{}
	ctx := context.Background()

	bin := func(real []string, fakes map[string]string) string {
		dir := t.TempDir()
		for _, name := range real {
			p, err := exec.LookPath(name)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(p, filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
		for name, script := range fakes {
			if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	noBwrap := bin([]string{"unshare", "mount", "setpriv", "rm", "true"}, nil)
	broken := bin(nil, map[string]string{
		"bwrap":   `echo "bwrap: No permissions to create new namespace" >&2; exit 1`,
		"unshare": `echo "unshare: unshare failed: Operation not permitted" >&2; exit 1`,
	})
	cases := []struct {
		alias string
		key   func() []byte
		found store.SandboxFound
		says  []string
	}{
		{"full", func() []byte { return target.UserKeyPEM }, store.SandboxBwrap, []string{"bwrap: works"}},
		{"nobwrap", func() []byte { k, _ := target.PathKey(t, noBwrap); return k }, store.SandboxUnshare,
			[]string{"bwrap: not installed", "unshare: works"}},
		{"broken", func() []byte { k, _ := target.PathKey(t, broken+":/usr/bin:/bin"); return k }, store.SandboxNone,
			[]string{"bwrap: did not start: bwrap: No permissions to create new namespace", "unshare: did not start: unshare: unshare failed: Operation not permitted"}},
	}
	for _, tc := range cases {
		res, err := m.AddConnection(ctx, alice, ConnectionSpec{Alias: tc.alias, Host: target.Host, Port: target.Port,
			User: target.User, PrivateKey: tc.key(), HostKeys: []string{target.KnownHostsLine}}, CheckOptions{})
		if err != nil {
			t.Fatalf("add %s: %v", tc.alias, err)
		}
		c := res.Conn
		if c.SandboxFound != tc.found || c.SandboxProbedAt.IsZero() {
			t.Errorf("%s: found %q at %v (%s); want %q", tc.alias, c.SandboxFound, c.SandboxProbedAt, c.SandboxMessage, tc.found)
		}
		for _, s := range tc.says {
			if !strings.Contains(c.SandboxMessage, s) {
				t.Errorf("%s: message %q; want it to say %q", tc.alias, c.SandboxMessage, s)
			}
		}
	}
	// Setting require probes again, and so does a check.
	require := store.ReadSandboxRequire
	res, err := m.UpdateConnection(ctx, alice, "broken", ConnectionEdit{ReadSandbox: &require}, CheckOptions{})
	if err != nil || res.Conn.ReadSandbox != require || res.Conn.SandboxFound != store.SandboxNone || !res.Probed {
		t.Fatalf("update to require: %+v, %v; want require, probed none", res.Conn, err)
	}
	if res, err = m.CheckConnection(ctx, "nobwrap", 0); err != nil || res.Conn.SandboxFound != store.SandboxUnshare || !res.Probed {
		t.Fatalf("check: %+v, %v; want unshare probed again", res.Conn, err)
	}
}
