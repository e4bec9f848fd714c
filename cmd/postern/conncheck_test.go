package main

import (
	"encoding/json"
	"net"
	"strings"
	"testing"

	"github.com/postern/postern/internal/testsshd"
	"github.com/postern/postern/model"
)

// TestConnCheck runs conn check against a real sshd: an accepted key is
// recorded ok, a refused one rejected with the target's words, and an
// unreachable target unreachable; only ok exits 0.
func TestConnCheck(t *testing.T) {
	t.Parallel()
	sshd := newE2ETarget(t, testsshd.Options{})
	c := newCLI(t)
	good := sshd.keyFile
	bad := writeKeyFiles(t, "stranger", "")
	// A port that was just closed: nothing listens there.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().(*net.TCPAddr).Port
	l.Close()
	hostKey := strings.Fields(sshd.KnownHostsLine)
	pin := strings.Join(hostKey[1:], " ") // the bare key: the pin is the connection's, not the name's

	add := func(alias, keyFile string, port int) {
		c.ok("", "conn", "add", "--no-check", alias, "--host", sshd.Host, "--port", itoa(port), "--user", sshd.User,
			"--key-file", keyFile, "--host-key", pin, "--recipe", "linux")
	}
	add("good", good, sshd.Port)
	add("bad", bad.priv, sshd.Port)
	add("gone", good, closed)

	tests := []struct {
		alias, status, msg string
		code               int
	}{
		{"good", "ok", "accepted the key", 0},
		{"bad", "rejected", "unable to authenticate", 1},
		{"gone", "unreachable", "cannot reach", 1},
	}
	for _, tt := range tests {
		t.Run(tt.alias, func(t *testing.T) {
			r := c.runCheck("conn", "check", tt.alias, "-o", "json")
			var got model.ConnectionResult
			if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
				t.Fatalf("conn check %s: %v\nstdout: %s\nstderr: %s", tt.alias, err, r.stdout, r.stderr)
			}
			if r.code != tt.code || got.Check == nil || got.Check.Status != tt.status || !got.Stored ||
				!strings.Contains(got.Check.Message, tt.msg) || got.Connection == nil || got.Connection.KeyStatus != tt.status {
				t.Errorf("conn check %s: got exit %d, %+v; want exit %d, %s recorded, with %q",
					tt.alias, r.code, got, tt.code, tt.status, tt.msg)
			}
		})
	}

	var conns []model.Connection
	if err := json.Unmarshal([]byte(c.ok("", "conn", "list", "-o", "json")), &conns); err != nil {
		t.Fatal(err)
	}
	byAlias := map[string]model.Connection{}
	for _, cj := range conns {
		byAlias[cj.Alias] = cj
	}
	for alias, want := range map[string]string{"good": "ok", "bad": "rejected", "gone": "unreachable"} {
		got := byAlias[alias]
		if got.KeyStatus != want || got.KeyCheckedAt.IsZero() {
			t.Errorf("conn list %s: got status %q checked %v; want %q with the time of the check", alias, got.KeyStatus,
				got.KeyCheckedAt, want)
		}
	}
	if !strings.Contains(byAlias["bad"].KeyMessage, "unable to authenticate") {
		t.Errorf("conn list bad: key_message %q; want the target's refusal", byAlias["bad"].KeyMessage)
	}

	text := c.runCheck("conn", "check", "good")
	if text.code != 0 || !strings.HasPrefix(text.stdout, "good: ok: ") {
		t.Errorf("conn check good: got exit %d, %q; want 0 and good: ok", text.code, text.stdout)
	}
	if r := c.run("", "conn", "check", "nobody"); r.code != 2 {
		t.Errorf("conn check nobody: got exit %d; want 2 (unknown alias)", r.code)
	}
}

// TestConnAddChecksKey: conn add proves the key right away and records the
// result; an unknown recipe is refused before anything is written.
func TestConnAddChecksKey(t *testing.T) {
	t.Parallel()
	sshd := newE2ETarget(t, testsshd.Options{})
	c := newCLI(t)
	good := sshd.keyFile
	pin := bareKey(sshd.HostKey)
	out := c.okCheck("conn", "add", "web", "--host", sshd.Host, "--port", itoa(sshd.Port), "--user", sshd.User,
		"--key-file", good, "--host-key", pin)
	if !strings.Contains(out, "key check: ok") {
		t.Errorf("conn add output %q; want the key check's ok", out)
	}
	if list := c.ok("", "conn", "list"); !strings.Contains(list, "ok") {
		t.Errorf("conn list after add: %q; want the key status ok", list)
	}
	r := c.run("", "conn", "add", "--no-check", "other", "--host", sshd.Host, "--port", itoa(sshd.Port), "--user", sshd.User,
		"--key-file", good, "--host-key", pin, "--recipe", "no-such-recipe")
	if r.code != 2 || !strings.Contains(r.stderr, "unknown recipe") {
		t.Errorf("conn add --recipe no-such-recipe: exit %d stderr %q; want 2 and unknown recipe", r.code, r.stderr)
	}
	if list := c.ok("", "conn", "list"); strings.Contains(list, "other") {
		t.Errorf("conn list %q holds the refused connection", list)
	}
}
