package main

import (
	"strings"
	"testing"
)

// TestAsNamesTheAdmin: a configuration command run with --as NAME, or with
// POSTERN_ADMIN=NAME in its environment, is audited as that registered
// admin, not as the OS account; a name that is not a registered admin is a
// usage error and changes nothing; without either, the audit row names the
// OS account as cli:NAME.
func TestAsNamesTheAdmin(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.ok("", "admin", "add", "alice", "--password-file", writePasswordFile(t, "a long admin password"))
	key := func(name string) string { return writeKeyFiles(t, name, "").pub }

	c.ok("", "agent", "add", "by-flag", "--key", key("by-flag"), "--as", "alice")
	env := []string{envData + "=" + c.data, envAdmin + "=alice"}
	if r := runProcess(t, "", env, "agent", "add", "by-env", "--key", key("by-env")); r.code != 0 {
		t.Fatalf("agent add with %s=alice: exit %d; want 0 (stderr %q)", envAdmin, r.code, r.stderr)
	}
	c.ok("", "agent", "add", "by-os", "--key", key("by-os"))
	before := c.snapshot()
	r := c.run("", "agent", "add", "by-nobody", "--key", key("by-nobody"), "--as", "mallory")
	if r.code != 2 || !strings.Contains(r.stderr, `no admin is named "mallory"`) {
		t.Errorf("agent add --as mallory: exit %d, stderr %q; want 2 and that mallory is no admin", r.code, r.stderr)
	}
	if after := c.snapshot(); after != before {
		t.Errorf("agent add --as mallory changed the configuration:\nbefore %s\nafter  %s", before, after)
	}

	want := map[string]string{"agent add by-flag": "alice", "agent add by-env": "alice", "agent add by-os": "cli:"}
	for _, row := range adminRows(c.auditRows()) {
		for op, who := range want {
			if !strings.HasPrefix(row.Operation, op) {
				continue
			}
			delete(want, op)
			if len(row.Deciders) != 1 || !strings.HasPrefix(row.Deciders[0], who) || (who == "alice" && row.Deciders[0] != who) {
				t.Errorf("%s: audited as %v; want %s", op, row.Deciders, who)
			}
		}
		if strings.Contains(row.Operation, "by-nobody") {
			t.Errorf("the refused agent add has an audit row: %+v", row)
		}
	}
	for op := range want {
		t.Errorf("no audit row for %s", op)
	}
}
