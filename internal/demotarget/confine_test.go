package demotarget

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/postern/postern/internal/e2e"
	"github.com/postern/postern/internal/testwait"
)

// TestConfined: with Confine, a command writes in the scratch directory
// and nowhere else, and does not see the host's other files: not
// /etc/shadow, not a file beside the scratch directory (issue 25: the demo
// agent read /etc/shadow).
func TestConfined(t *testing.T) {
	e2e.Tool(t, "bwrap", "bubblewrap")
	key := newSigner(t)
	parent := t.TempDir()
	secret := filepath.Join(parent, "secret")
	if err := os.WriteFile(secret, []byte("not for the demo agent"), 0o600); err != nil {
		t.Fatal(err)
	}
	tg, err := Start(Config{Dir: filepath.Join(parent, "root"), AuthorizedKey: key.PublicKey(), OutputDrain: testwait.Remaining(t), Confine: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tg.Close() })
	if ok, why := tg.Confined(); !ok {
		t.Fatalf("Confined() = false, %q; want true where bwrap runs", why)
	}
	f := &fixture{target: tg, key: key}
	c := f.dial(t)
	tests := []struct {
		name, cmd  string
		wantStatus int
		wantOut    string
	}{
		{"writes in the scratch directory", "echo hi > note && cat note", 0, "hi\n"},
		{"no /etc/shadow", "cat /etc/shadow", 1, ""},
		{"no file beside the scratch directory", "cat " + secret, 1, ""},
		{"the programs are read-only", "touch /usr/bin/postern-demo-x", 1, ""},
		{"programs run", "ls / | grep -c usr", 0, "1\n"},
	}
	for _, tt := range tests {
		o := run(t, c, tt.cmd, nil)
		if o.status != tt.wantStatus || string(o.stdout) != tt.wantOut {
			t.Errorf("%s: %q: got status %d, stdout %q, stderr %q; want %d, %q", tt.name, tt.cmd, o.status, o.stdout, o.stderr, tt.wantStatus, tt.wantOut)
		}
	}
	if b, err := os.ReadFile(filepath.Join(tg.Dir(), "note")); err != nil || string(b) != "hi\n" {
		t.Errorf("note in the scratch directory: %q, %v; want hi", b, err)
	}
	if _, err := os.Stat("/usr/bin/postern-demo-x"); err == nil {
		t.Error("/usr/bin/postern-demo-x exists; want the confined command unable to write there")
	}
}

// TestNotConfinedSaysWhy: without Confine the target says why commands run
// unconfined.
func TestNotConfinedSaysWhy(t *testing.T) {
	f := start(t)
	if ok, why := f.target.Confined(); ok || !strings.Contains(why, "not asked") {
		t.Errorf("Confined() = %v, %q; want false and why", ok, why)
	}
}
