package config

import (
	"strings"
	"testing"

	"github.com/postern/postern/store"
)

// TestReadSandboxField: a connection's read_sandbox parses from TOML and
// back, is auto when left out, and off needs a reason that the others do
// not take.
func TestReadSandboxField(t *testing.T) {
	f, err := Parse([]byte(`
[[connection]]
alias = "db"
host = "db.example.com"
user = "deploy"
read_sandbox = "off"
read_sandbox_reason = "its fuse mounts hang bwrap"
`))
	if err != nil {
		t.Fatal(err)
	}
	c := f.Connections[0]
	if c.ReadSandbox != "off" || c.ReadSandboxReason != "its fuse mounts hang bwrap" {
		t.Fatalf("parsed %q, %q", c.ReadSandbox, c.ReadSandboxReason)
	}
	out, err := Marshal(f)
	if err != nil || !strings.Contains(string(out), `read_sandbox = 'off'`) && !strings.Contains(string(out), `read_sandbox = "off"`) {
		t.Errorf("Marshal: %s, %v; want read_sandbox off written back", out, err)
	}
	cases := []struct {
		setting, reason string
		want            store.ReadSandbox
		err             string
	}{
		{"", "", store.ReadSandboxAuto, ""},
		{"require", "", store.ReadSandboxRequire, ""},
		{"off", " breaks it ", store.ReadSandboxOff, ""},
		{"off", "", "", "needs read_sandbox_reason"},
		{"auto", "why", "", "goes with read_sandbox off only"},
		{"sometimes", "", "", "want auto, require or off"},
	}
	for _, tc := range cases {
		rs, reason, err := readSandboxOf(Connection{ReadSandbox: tc.setting, ReadSandboxReason: tc.reason})
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q, %q: %v; want an error saying %q", tc.setting, tc.reason, err, tc.err)
			}
			continue
		}
		if err != nil || rs != tc.want || reason != strings.TrimSpace(tc.reason) {
			t.Errorf("%q, %q: %q, %q, %v; want %q", tc.setting, tc.reason, rs, reason, err, tc.want)
		}
	}
}
