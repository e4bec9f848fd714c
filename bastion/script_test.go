package bastion

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
)

// TestScriptOnStdin: a session with no command and no terminal runs the
// script on its stdin as the target does directly (its user's shell
// reading stdin: output, stderr and exit status alike, a command that
// reads the rest of the script included), decided as a whole and audited
// with the script; a destructive script is denied and nothing of it runs;
// a script past the bound is refused (issue 25: these exited 2).
func TestScriptOnStdin(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{rules: store.Rules{Read: store.RuleAllow, Write: store.RuleAllow, Destructive: store.RuleDeny}})
	direct := func(stdin string) sshResult {
		return h.runClient(stdin, "ssh", append(h.directOpts(), "-T", h.target.User+"@127.0.0.1")...)
	}
	scripts := []struct {
		name, script string
	}{
		{"output, stderr and exit status", "echo one\necho two >&2\nexit 3\n"},
		{"a command reads the rest of the script", "read x\necho \"got [$x]\"\nnosuch-command-here\n"},
		{"no newline at the end", "printf 'a b'"},
		{"empty", ""},
	}
	for _, tt := range scripts {
		want := direct(tt.script)
		for _, args := range [][]string{{"-T", "web@127.0.0.1"}, {"-T", "127.0.0.1", "web"}} {
			got := h.ssh(tt.script, args...)
			if got != want {
				t.Errorf("%s, ssh %v: got exit %d, stdout %q, stderr %q; want as directly: %d, %q, %q",
					tt.name, args, got.code, got.stdout, got.stderr, want.code, want.stdout, want.stderr)
			}
		}
	}
	rows, err := h.st.ListAudit(context.Background(), store.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, r := range rows {
		found = found || r.Operation == scripts[0].script && r.Decision == string(policy.Allowed)
	}
	if !found {
		t.Errorf("audit rows %+v; want one allowed row whose operation is the script %q", rows, scripts[0].script)
	}

	// A destructive script is denied as a whole: none of it runs.
	marker := filepath.Join(t.TempDir(), "ran")
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	got := h.ssh("touch "+marker+"\nrm -f "+victim+"\n", "-T", "web@127.0.0.1")
	if got.code != ExitRefused || !strings.Contains(got.stderr, "denied, nothing ran: destructive") {
		t.Errorf("destructive script: exit %d, stderr %q; want %d, denied", got.code, got.stderr, ExitRefused)
	}
	for _, f := range []string{marker} {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Errorf("denied script: %s exists (%v); want nothing of it run", f, err)
		}
	}
	if _, err := os.Stat(victim); err != nil {
		t.Errorf("denied script removed %s: %v", victim, err)
	}

	// Past the bound: refused with the reason.
	long := strings.Repeat("echo aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n", DefaultMaxScript/30)
	got = h.ssh(long, "-T", "web@127.0.0.1")
	if got.code != ExitRefused || !strings.Contains(got.stderr, "a script on stdin is limited to 64 KiB") {
		t.Errorf("long script: exit %d, stderr %.200q; want %d and the bound", got.code, got.stderr, ExitRefused)
	}
	// An exec of a blank command is usage, as directly it runs nothing.
	if got := h.ssh("ls\n", "web@127.0.0.1", " "); got.code != ExitUsage {
		t.Errorf("blank command: exit %d, stderr %q; want %d", got.code, got.stderr, ExitUsage)
	}
}

// TestReadScript: the script is read to its end within the bound; one past
// the bound is refused, one exactly at it is not; stdin left open is
// refused once the wait is over, and not before (fake time).
func TestReadScript(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		max     int
		want    string
		wantErr error
	}{
		{"short", "echo hi\n", 16, "echo hi\n", nil},
		{"at the bound", "12345678", 8, "12345678", nil},
		{"past the bound", "123456789", 8, "", errScriptTooLong},
		{"empty", "", 8, "", nil},
	}
	for _, tt := range tests {
		got, err := readScript(strings.NewReader(tt.in), tt.max, time.Minute)
		if got != tt.want || !errors.Is(err, tt.wantErr) {
			t.Errorf("%s: got %q, %v; want %q, %v", tt.name, got, err, tt.want, tt.wantErr)
		}
	}
	synctest.Test(t, func(t *testing.T) {
		pr, pw := io.Pipe()
		defer pw.Close() // ends the read readScript leaves behind
		const wait = 30 * time.Second
		start := time.Now()
		go pw.Write([]byte("echo never ends"))
		_, err := readScript(pr, 64, wait)
		if !errors.Is(err, errScriptWait) || time.Since(start) != wait {
			t.Errorf("stdin left open: got %v after %v; want the wait's refusal after %v", err, time.Since(start), wait)
		}
	})
}
