package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeAuditSinkFlag: serve refuses a malformed --audit-sink, and two
// sinks under one name, as a usage error naming the flag, before it
// starts.
func TestServeAuditSinkFlag(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--audit-sink", "udp://127.0.0.1:514"}, "unknown kind"},
		{[]string{"--audit-sink", "jsonl://relative"}, "ABSOLUTE"},
		{[]string{"--audit-sink", "https://user:pw@collector/x"}, "no user or password"},
		{[]string{"--audit-sink", "a=syslog+tcp://127.0.0.1:514", "--audit-sink", "a=jsonl:///tmp/x"}, "two sinks"},
	} {
		r := c.run("", append([]string{"serve", "--ssh-listen", "127.0.0.1:0"}, tc.args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, "--audit-sink") || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("serve %v: got exit %d, %q; want 2 naming --audit-sink and %q", tc.args, r.code, r.stderr, tc.want)
		}
		if strings.Contains(r.stderr, ":pw@") {
			t.Errorf("serve %v: the error %q repeats the password", tc.args, r.stderr)
		}
	}
	// The config file's audit_sinks are read as the flag's values.
	conf := filepath.Join(t.TempDir(), "postern.toml")
	if err := os.WriteFile(conf, []byte("[serve]\naudit_sinks = [\"syslog+tcp://127.0.0.1:514\", \"udp://127.0.0.1:514\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := c.run("", "serve", "--ssh-listen", "127.0.0.1:0", "--config", conf)
	if r.code != 2 || !strings.Contains(r.stderr, "--audit-sink") || !strings.Contains(r.stderr, "udp://127.0.0.1:514") {
		t.Errorf("serve --config with audit_sinks: got exit %d, %q; want 2 naming the file's udp sink", r.code, r.stderr)
	}
}
