package readsandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestProbe runs the probe as a target's login shell would, with the
// programs of each case on PATH, and reads what it found: bwrap first (and
// then unshare is not tried), unshare where bwrap is missing, none (with
// each one's reason) where neither works, and never a mechanism in which a
// write went through.
func TestProbe(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	// bin is a PATH directory with the named programs, and fakes.
	bin := func(t *testing.T, real []string, fakes map[string]string) string {
		dir := t.TempDir()
		os.Chmod(dir, 0o755)
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
	basics := []string{"rm", "id", "setpriv", "mount"}
	cases := []struct {
		name   string
		uid    int
		path   func(t *testing.T) string // defaultPath if nil
		found  Mechanism
		whyHas map[Mechanism]string // a part of each failed mechanism's reason
	}{
		{"everything installed, root", 0, nil, Bwrap, nil},
		{"everything installed, another user", nobodyID, nil, Bwrap, nil},
		{"no bubblewrap", 0, func(t *testing.T) string { return bin(t, append(basics, "unshare"), nil) }, Unshare,
			map[Mechanism]string{Bwrap: "not installed"}},
		{"neither works", 0, func(t *testing.T) string {
			return bin(t, basics, map[string]string{"unshare": `echo "unshare: unshare failed: Operation not permitted" >&2; exit 1`})
		}, "", map[Mechanism]string{Bwrap: "not installed", Unshare: "did not start: unshare: unshare failed: Operation not permitted"}},
		{"a bwrap that does not hold", 0, func(t *testing.T) string {
			// Runs the command outside any sandbox, and says it ran.
			return bin(t, append(basics, "unshare"), map[string]string{"bwrap": `while [ "$1" != -- ]; do shift; done; shift; "$@"; r=$?; echo "{ \"exit-code\": $r }" >&3; exit $r`})
		}, Unshare, map[Mechanism]string{Bwrap: "a write inside the sandbox went through"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := newLogin(t, "/bin/bash", tc.uid)
			if tc.path != nil {
				l.path = tc.path(t)
			}
			probe, err := Probe("t0ken")
			if err != nil {
				t.Fatal(err)
			}
			out := l.run(t, probe, "")
			res := ParseProbe(out.stdout + out.stderr)
			if res.Found != tc.found {
				t.Errorf("Found = %q; want %q (%s)\noutput: %s%s", res.Found, tc.found, res.Summary(), out.stdout, out.stderr)
			}
			if n := len(res.Tried); tc.found == Bwrap && n != 1 || tc.found != Bwrap && n != len(Mechanisms()) {
				t.Errorf("tried %d mechanisms (%s); want only bwrap when it works, every one otherwise", n, res.Summary())
			}
			for _, a := range res.Tried {
				want, failed := tc.whyHas[a.Mechanism]
				if a.OK == failed || !strings.Contains(a.Why, want) {
					t.Errorf("%s: OK %v, why %q; want OK %v and a reason with %q", a.Mechanism, a.OK, a.Why, !failed, want)
				}
			}
			for _, f := range []string{"/tmp/.postern-probe-t0ken", filepath.Join(l.home, ".postern-probe-t0ken")} {
				if _, err := os.Stat(f); err == nil {
					t.Errorf("%s is left behind", f)
				}
			}
		})
	}
}

// TestParseProbe reads outputs the probe did not write itself: cut short,
// empty, from a shell that did not run it.
func TestParseProbe(t *testing.T) {
	cases := []struct {
		name, out string
		found     Mechanism
		why       string // in the summary
	}{
		{"both work", "#postern-probe bwrap\n#postern-probe-status 0\n#postern-probe unshare\n#postern-probe-status 0\n#postern-probe-done\n", Bwrap, "bwrap: works; unshare: works"},
		{"cut short", "#postern-probe bwrap\n#postern-probe-status 0\n", "", "the probe did not finish"},
		{"empty", "", "", "the probe did not run"},
		{"another shell", "fish: Unknown command: '{'\n", "", "fish: Unknown command"},
		{"a write outside after status 0", "#postern-probe bwrap\n#postern-probe-status 0\n#postern-probe-wrote\n#postern-probe unshare\n#postern-probe-status 0\n#postern-probe-done\n", Unshare, "bwrap: a write inside the sandbox went through"},
		{"another status", "#postern-probe bwrap\nsegfault\n#postern-probe-status 139\n#postern-probe-done\n", "", "bwrap: the probe exited with status 139: segfault"},
		{"CRLF", "#postern-probe bwrap\r\n#postern-probe-status 0\r\n#postern-probe-done\r\n", Bwrap, "bwrap: works"},
		{"unknown mechanism name", "#postern-probe evil\n#postern-probe-status 0\n#postern-probe-done\n", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := ParseProbe(tc.out)
			if res.Found != tc.found || !strings.Contains(res.Summary(), tc.why) {
				t.Errorf("ParseProbe = %q, %q; want %q and a summary with %q", res.Found, res.Summary(), tc.found, tc.why)
			}
		})
	}
	if _, err := Probe("a b"); err == nil {
		t.Errorf("Probe(%q): no error; want one for a token that is not letters and digits", "a b")
	}
}

// FuzzParseProbe: the target writes what ParseProbe reads. Any output
// parses without panic, and a mechanism found is one of Mechanisms and one
// the output said worked.
func FuzzParseProbe(f *testing.F) {
	f.Add("#postern-probe bwrap\n#postern-probe-status 0\n#postern-probe-done\n")
	f.Add("#postern-probe unshare\nx\n#postern-probe-status 126\n#postern-probe-wrote\n#postern-probe-done")
	f.Fuzz(func(t *testing.T, out string) {
		res := ParseProbe(out)
		if res.Found == "" {
			return
		}
		ok := false
		for _, m := range Mechanisms() {
			ok = ok || m == res.Found
		}
		if !ok || !strings.Contains(out, "#postern-probe-status 0") {
			t.Errorf("ParseProbe(%q) found %q", out, res.Found)
		}
	})
}
