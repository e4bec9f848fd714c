package manage

import (
	"context"
	"errors"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/postern/postern/recipes"
	"github.com/postern/postern/store"
)

// fakeProber answers probes without dialing, and counts them.
type fakeProber struct {
	result store.SandboxProbe
	calls  int
	last   recipes.Target
}

func (f *fakeProber) Probe(_ context.Context, t recipes.Target, _ ssh.Signer) store.SandboxProbe {
	f.calls++
	f.last = t
	return f.result
}

// newProbingManager is newTestManager with a fake prober.
func newProbingManager(t *testing.T) (*Manager, *store.Store, *fakeChecker, *fakeProber) {
	t.Helper()
	m, st, chk := newTestManager(t)
	pr := &fakeProber{result: store.SandboxProbe{Found: store.SandboxBwrap, Message: "bwrap: works"}}
	m.prober = pr
	return m, st, chk, pr
}

// TestAddProbes: an add probes the target once its key check passes and
// records what it found with the setting; a check that did not pass, or no
// check, probes nothing; a target without a shell (its recipe says) has
// none, without dialing; off needs a reason.
func TestAddProbes(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name    string
		status  recipes.Status
		opts    CheckOptions
		recipe  string
		rs      store.ReadSandbox
		reason  string
		probes  int
		found   store.SandboxFound
		wantErr string
	}{
		{"check ok", recipes.StatusOK, CheckOptions{}, "", "", "", 1, store.SandboxBwrap, ""},
		{"required", recipes.StatusOK, CheckOptions{}, "", store.ReadSandboxRequire, "", 1, store.SandboxBwrap, ""},
		{"check unreachable, allowed", recipes.StatusUnreachable, CheckOptions{AllowUnverified: true}, "", "", "", 0, store.SandboxUnprobed, ""},
		{"no check", recipes.StatusOK, CheckOptions{NoCheck: true}, "", "", "", 0, store.SandboxUnprobed, ""},
		{"no shell", recipes.StatusOK, CheckOptions{}, "cisco-ios", "", "", 0, store.SandboxNone, ""},
		{"off with a reason", recipes.StatusOK, CheckOptions{}, "", store.ReadSandboxOff, "fuse hangs", 1, store.SandboxBwrap, ""},
		{"off without a reason", recipes.StatusOK, CheckOptions{}, "", store.ReadSandboxOff, "", 0, "", "say why"},
		{"a reason without off", recipes.StatusOK, CheckOptions{}, "", store.ReadSandboxAuto, "x", 0, "", "goes with read sandbox off"},
		{"unknown setting", recipes.StatusOK, CheckOptions{}, "", "maybe", "", 0, "", "want auto, require or off"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, st, chk, pr := newProbingManager(t)
			chk.result = recipes.Result{Status: tc.status}
			key, _ := newKey(t)
			res, err := m.AddConnection(ctx, alice, ConnectionSpec{Alias: "web", Host: "10.0.0.5", User: "deploy", Recipe: tc.recipe,
				HostKeys: []string{hostKeyLine(t)}, PrivateKey: key, ReadSandbox: tc.rs, ReadSandboxReason: tc.reason}, tc.opts)
			if tc.wantErr != "" {
				if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), tc.wantErr) || chk.calls != 0 {
					t.Fatalf("got %v after %d checks; want an invalid error saying %q before any check", err, chk.calls, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if pr.calls != tc.probes || res.Conn.SandboxFound != tc.found || res.Probed != (tc.found != store.SandboxUnprobed) {
				t.Errorf("%d probes, found %q, probed %v; want %d and %q", pr.calls, res.Conn.SandboxFound, res.Probed, tc.probes, tc.found)
			}
			if pr.calls > 0 && (pr.last.Addr != "10.0.0.5:22" || pr.last.User != "deploy" || pr.last.HostKeys == nil) {
				t.Errorf("probed %+v; want the candidate's address, user and pinned host keys", pr.last)
			}
			wantSetting := tc.rs
			if wantSetting == "" {
				wantSetting = store.ReadSandboxAuto
			}
			if res.Conn.ReadSandbox != wantSetting || res.Conn.ReadSandboxReason != tc.reason {
				t.Errorf("setting %q (%q); want %q (%q)", res.Conn.ReadSandbox, res.Conn.ReadSandboxReason, wantSetting, tc.reason)
			}
			row := adminOps(t, st)[0]
			if !strings.Contains(row.Operation, "read sandbox "+string(wantSetting)) {
				t.Errorf("audit row %q; want the setting named", row.Operation)
			}
			if res.Probed && !strings.Contains(row.Reason+row.Operation, "read sandbox probe: "+string(tc.found)) {
				t.Errorf("audit row %q / %q; want the probe's outcome", row.Operation, row.Reason)
			}
			if got := res.Model(); res.Probed != (got.Probe != nil) || got.Connection.ReadSandbox.Found != string(tc.found) {
				t.Errorf("model: probe %+v, read sandbox %+v; want the probe and the connection's outcome", got.Probe, got.Connection.ReadSandbox)
			}
		})
	}
}

// TestUpdateAndCheckProbe: a change of the setting to auto or require
// probes (off does not), a change of the target probes it again or, with
// no check, forgets the old probe, and a check records a new probe, but a
// probe that could not run keeps what was recorded.
func TestUpdateAndCheckProbe(t *testing.T) {
	ctx := context.Background()
	m, _, _, pr := newProbingManager(t)
	key, _ := newKey(t)
	if _, err := m.AddConnection(ctx, alice, ConnectionSpec{Alias: "web", Host: "h", User: "u", PrivateKey: key,
		HostKeys: []string{hostKeyLine(t)}}, CheckOptions{}); err != nil {
		t.Fatal(err)
	}
	set := func(rs store.ReadSandbox, reason string, opts CheckOptions) ConnectionResult {
		t.Helper()
		res, err := m.UpdateConnection(ctx, alice, "web", ConnectionEdit{ReadSandbox: &rs, ReadSandboxReason: reason}, opts)
		if err != nil {
			t.Fatalf("set %s: %v", rs, err)
		}
		return res
	}
	pr.result = store.SandboxProbe{Found: store.SandboxUnshare, Message: "bwrap: not installed; unshare: works"}
	if res := set(store.ReadSandboxRequire, "", CheckOptions{}); pr.calls != 2 || res.Conn.SandboxFound != store.SandboxUnshare ||
		res.Conn.ReadSandbox != store.ReadSandboxRequire {
		t.Errorf("to require: %d probes, %+v; want a probe recorded", pr.calls, res.Conn)
	}
	if res := set(store.ReadSandboxOff, "breaks the app", CheckOptions{}); pr.calls != 2 || res.Probed || res.Conn.ReadSandboxReason != "breaks the app" {
		t.Errorf("to off: %d probes, probed %v; want no probe, the reason kept", pr.calls, res.Probed)
	}
	pr.result = store.SandboxProbe{Found: store.SandboxUnprobed, Message: "not probed: cannot reach h:22"}
	if res := set(store.ReadSandboxAuto, "", CheckOptions{}); pr.calls != 3 || res.Conn.SandboxFound != store.SandboxUnshare || !res.Probed {
		t.Errorf("to auto with a probe that cannot run: %d probes, %+v; want it tried and unshare kept", pr.calls, res.Conn)
	}
	if res := set(store.ReadSandboxRequire, "", CheckOptions{NoCheck: true}); pr.calls != 3 || res.Probed {
		t.Errorf("to require without a check: %d probes; want none", pr.calls)
	}
	if _, err := m.UpdateConnection(ctx, alice, "web", ConnectionEdit{ReadSandboxReason: "alone"}, CheckOptions{}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("a reason alone: %v; want invalid", err)
	}

	host := "h2"
	res, err := m.UpdateConnection(ctx, alice, "web", ConnectionEdit{Host: &host}, CheckOptions{NoCheck: true})
	if err != nil || res.Conn.SandboxFound != store.SandboxUnprobed {
		t.Fatalf("new host, no check: %+v, %v; want the old probe forgotten", res.Conn, err)
	}
	pr.result = store.SandboxProbe{Found: store.SandboxBwrap, Message: "bwrap: works"}
	host = "h3"
	if res, err = m.UpdateConnection(ctx, alice, "web", ConnectionEdit{Host: &host}, CheckOptions{}); err != nil ||
		res.Conn.SandboxFound != store.SandboxBwrap || pr.last.Addr != "h3:22" {
		t.Fatalf("new host, checked: %+v, %v, probed %s; want bwrap from h3", res.Conn, err, pr.last.Addr)
	}

	pr.result = store.SandboxProbe{Found: store.SandboxNone, Message: "bwrap: not installed; unshare: did not start"}
	if res, err = m.CheckConnection(ctx, "web", 0); err != nil || res.Conn.SandboxFound != store.SandboxNone || !res.Probed {
		t.Fatalf("check: %+v, %v; want none recorded", res.Conn, err)
	}
	pr.result = store.SandboxProbe{Found: store.SandboxUnprobed, Message: "not probed: no session"}
	if res, err = m.CheckConnection(ctx, "web", 0); err != nil || res.Conn.SandboxFound != store.SandboxNone {
		t.Fatalf("check with a probe that cannot run: %+v, %v; want none kept", res.Conn, err)
	}
}
