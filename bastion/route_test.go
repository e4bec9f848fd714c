package bastion

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
)

// routeGrants are the grants FuzzRoute and TestResolve route with.
var routeGrants = []store.Grant{
	{Alias: "web", ConnectionID: "c1", Env: store.EnvDev, Rules: store.DefaultRules()},
	{Alias: "prod-db", ConnectionID: "c2", Env: store.EnvProduction, Rules: store.DefaultRules()},
	{Alias: "agent", ConnectionID: "c3", Env: store.EnvDev, Rules: store.DefaultRules()},
}

func TestResolve(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name               string
		user, cmd          string
		shell              bool
		wantOK             bool
		wantAlias, wantCmd string
		wantShell          bool
		wantCode           uint32
	}{
		{"first word", "x", "web uptime", false, true, "web", "uptime", false, 0},
		{"first word, tabs and newlines", "x", "\t\nweb\t ls -l\n", false, true, "web", "ls -l\n", false, 0},
		{"user name", "web", "web uptime", false, true, "web", "web uptime", false, 0},
		{"user name, no command is a shell", "web", "", false, true, "web", "", true, 0},
		{"user name, blank command is a shell", "web", " \t", false, true, "web", " \t", true, 0},
		{"first word only is a shell", "x", "web", false, true, "web", "", true, 0},
		{"help", "x", "help", false, false, "", "", false, 0},
		{"no command", "x", "", false, false, "", "", false, 0},
		{"shell without alias user lists", "x", "", true, false, "", "", false, 0},
		{"unknown alias", "x", "nosuch ls", false, false, "", "", false, ExitUsage},
		{"alias prefix is not the alias", "x", "webx ls", false, false, "", "", false, ExitUsage},
		{"case matters", "x", "WEB ls", false, false, "", "", false, ExitUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, msg, code, ok := resolve(tt.user, tt.cmd, tt.shell, routeGrants)
			if ok != tt.wantOK || code != tt.wantCode {
				t.Fatalf("resolve(%q, %q): ok %v code %d msg %q; want %v, %d", tt.user, tt.cmd, ok, code, msg, tt.wantOK, tt.wantCode)
			}
			if ok && (r.grant.Alias != tt.wantAlias || r.command != tt.wantCmd || r.shell != tt.wantShell) {
				t.Errorf("resolve(%q, %q) = alias %q command %q shell %v; want %q, %q, %v",
					tt.user, tt.cmd, r.grant.Alias, r.command, r.shell, tt.wantAlias, tt.wantCmd, tt.wantShell)
			}
		})
	}
}

// FuzzRoute routes SSH user names and commands (whose first word may name
// the alias): nothing panics; a route goes to a granted alias, named by the
// user or by the command's first word, with the rest of the command; a
// refusal names the alias in at most one short line without control bytes;
// the request key and the classifier's view of the route do not panic
// either.
func FuzzRoute(f *testing.F) {
	for _, seed := range []struct {
		user, cmd string
		shell     bool
	}{
		{"agent", "web uptime", false},
		{"web", "git-upload-pack '/srv/repo.git'", false},
		{"prod-db", "", true},
		{"agent", "help", false},
		{"x", "nosuch\x1b[2J rm -rf /", false},
		{"x", " \t\nweb\r\nls", false},
		{"", "", false},
	} {
		f.Add(seed.user, seed.cmd, seed.shell)
	}
	f.Fuzz(func(t *testing.T, user, cmd string, shell bool) {
		r, msg, code, ok := resolve(user, cmd, shell, routeGrants)
		_ = requestKey(user, cmd, shell)
		if !ok {
			if r != (route{}) {
				t.Errorf("refused with a route %+v", r)
			}
			switch code {
			case 0:
				if !strings.HasPrefix(msg, "postern: SSH bastion. Usage:") {
					t.Errorf("help text %q; want the usage", msg)
				}
			case ExitUsage:
				body := strings.TrimSuffix(msg, "\n")
				if strings.ContainsFunc(body, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
					t.Errorf("refusal %q holds control bytes", msg)
				}
				if len(body) > 1024 {
					t.Errorf("refusal is %d bytes long; want it bounded", len(body))
				}
			default:
				t.Errorf("code %d; want 0 or %d", code, ExitUsage)
			}
			return
		}
		found := false
		for _, g := range routeGrants {
			found = found || g == r.grant
		}
		if !found {
			t.Fatalf("routed to %+v, which is not a grant", r.grant)
		}
		if r.grant.Alias == user {
			if r.command != cmd {
				t.Errorf("user-name route: command %q; want the whole %q", r.command, cmd)
			}
			if want := shell || strings.TrimSpace(cmd) == ""; r.shell != want {
				t.Errorf("user-name route of %q (shell request %v): shell %v; want %v", cmd, shell, r.shell, want)
			}
		} else {
			if r.shell != (r.command == "") {
				t.Errorf("first-word route of %q: shell %v with command %q; want a shell exactly when nothing follows the alias", cmd, r.shell, r.command)
			}
			first := strings.TrimLeft(cmd, " \t\r\n")
			if !strings.HasPrefix(first, r.grant.Alias) || !strings.HasSuffix(cmd, r.command) {
				t.Errorf("first-word route of %q: alias %q command %q; want the first word and the rest", cmd, r.grant.Alias, r.command)
			}
			if rest := first[len(r.grant.Alias):]; rest != "" && !strings.ContainsAny(rest[:1], " \t\r\n") {
				t.Errorf("first-word route of %q: alias %q is only a prefix of the first word", cmd, r.grant.Alias)
			}
		}
		if r.shell && opText(r) != "(interactive shell)" {
			t.Errorf("a shell's operation text is %q", opText(r))
		}
		if !r.shell {
			// The class the server would decide with; the built-in rules
			// must answer for anything an agent can route.
			c, _ := (&Server{}).classify(r, nil)
			if _, err := policy.ParseClass(string(c)); err != nil {
				t.Errorf("class %q of %q: %v", c, r.command, err)
			}
		}
	})
}

func FuzzPrintable(f *testing.F) {
	f.Add("web")
	f.Add("\x1b]0;x\x07" + strings.Repeat("é", 150))
	f.Fuzz(func(t *testing.T, s string) {
		p := printable(s)
		if strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			t.Errorf("printable(%q) = %q holds control bytes", s, p)
		}
		if len(p) > 200*utf8.UTFMax {
			t.Errorf("printable(%q) is %d bytes; want it bounded", s, len(p))
		}
	})
}
