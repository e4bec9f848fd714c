package bastion

import (
	"strings"
	"testing"

	"github.com/postern/postern/policy"
	"github.com/postern/postern/readsandbox"
	"github.com/postern/postern/store"
)

// TestPlanReadRun: only reads are sandboxed, with the mechanism the probe
// found; auto without one runs the read and notes why, require refuses it,
// off runs it and notes the admin's reason, and a setting this build does
// not know refuses.
func TestPlanReadRun(t *testing.T) {
	conn := func(rs store.ReadSandbox, found store.SandboxFound) *store.Connection {
		return &store.Connection{Alias: "web", ReadSandbox: rs, ReadSandboxReason: "fuse hangs", SandboxFound: found,
			SandboxMessage: "bwrap: not installed"}
	}
	r := route{command: "cat /etc/hosts"}
	cases := []struct {
		name     string
		r        route
		class    policy.Class
		conn     *store.Connection
		sandbox  readsandbox.Mechanism
		refusal  string // a part of it, "" for none
		note     string // a part of it, "" for none
		metricAs string
	}{
		{"read, bwrap", r, policy.Read, conn(store.ReadSandboxAuto, store.SandboxBwrap), readsandbox.Bwrap, "", "", "bwrap"},
		{"read, unshare, required", r, policy.Read, conn(store.ReadSandboxRequire, store.SandboxUnshare), readsandbox.Unshare, "", "", "unshare"},
		{"write is not sandboxed", r, policy.Write, conn(store.ReadSandboxRequire, store.SandboxBwrap), "", "", "", "none"},
		{"destructive is not sandboxed", r, policy.Destructive, conn(store.ReadSandboxRequire, store.SandboxNone), "", "", "", "none"},
		{"a shell is not", route{shell: true}, policy.Read, conn(store.ReadSandboxRequire, store.SandboxNone), "", "", "", "none"},
		{"auto, none works", r, policy.Read, conn(store.ReadSandboxAuto, store.SandboxNone), "", "", "no sandbox works on the target (bwrap: not installed); it ran on the classifier's verdict alone", "none"},
		{"auto, never probed", r, policy.Read, conn(store.ReadSandboxAuto, store.SandboxUnprobed), "", "", "", "none"},
		{"require, none works", r, policy.Read, conn(store.ReadSandboxRequire, store.SandboxNone), "", "reads on web must run read-only (read sandbox: require), and no sandbox works on the target (bwrap: not installed)", "", "refused"},
		{"require, never probed", r, policy.Read, conn(store.ReadSandboxRequire, store.SandboxUnprobed), "", "postern conn check web", "", "refused"},
		{"off", r, policy.Read, conn(store.ReadSandboxOff, store.SandboxBwrap), "", "", "no read sandbox: off for this connection (fuse hangs)", "none"},
		{"unknown setting", r, policy.Read, conn("sometimes", store.SandboxBwrap), "", "unknown to this postern", "", "refused"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			run := planReadRun(tc.r, tc.class, tc.conn)
			if run.sandbox != tc.sandbox || !contains(run.refusal, tc.refusal) || !contains(run.note, tc.note) || run.sandboxLabel() != tc.metricAs {
				t.Errorf("got sandbox %q, refusal %q, note %q, label %q; want %q, %q, %q, %q",
					run.sandbox, run.refusal, run.note, run.sandboxLabel(), tc.sandbox, tc.refusal, tc.note, tc.metricAs)
			}
			want := tc.r.command
			if tc.sandbox != "" {
				want, _ = readsandbox.Wrap(tc.sandbox, tc.r.command)
			}
			if run.refusal == "" && run.command != want {
				t.Errorf("command %q; want %q", run.command, want)
			}
		})
	}
}

// contains is strings.Contains where want "" means got must be "" too.
func contains(got, want string) bool {
	if want == "" {
		return got == ""
	}
	return strings.Contains(got, want)
}
