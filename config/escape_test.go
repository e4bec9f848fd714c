package config

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/postern/postern/recipes"
)

// hiddenRune returns the first character of s that a terminal would act
// on or hide instead of showing (C0 controls but newline, DEL, C1
// controls, bidi controls), and whether there is one.
func hiddenRune(s string) (rune, bool) {
	for _, r := range s {
		switch {
		case r == '\n':
		case r < 0x20, r == 0x7f, r >= 0x80 && r < 0xa0,
			r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x200e, r == 0x200f, r == 0x061c:
			return r, true
		}
	}
	return 0, false
}

// TestErrorsEscaped: what apply prints never carries a control or bidi
// character as itself: the file's keys (go-toml's "unknown key" quotes
// them), its names and paths, and what a target answers to a key check
// are shown as escapes. A key holding ESC[2J (clear the screen) and BEL
// is the case.
func TestErrorsEscaped(t *testing.T) {
	const clear = "\x1b[2J\x07"
	r := newRig(t)
	// The file's name, too, is shown escaped.
	path := r.write("conf\x1b[2J.toml", "[[agent]]\nname = \"bot\"\nkeys = [\"x\"]\n\"\\u001b[2J\\u0007applied OK\" = 1\n")
	_, err := Load(path)
	if err == nil {
		t.Fatal("Load of an unknown key: no error")
	}
	if want := "config: " + filepath.Join(r.dir, "conf<U+001B>[2J.toml") + ": line 4: unknown key agent.<U+001B>[2J<U+0007>applied OK"; err.Error() != want {
		t.Errorf("Load: %q; want %q", err, want)
	}

	tests := []struct{ name, file, want string }{
		{"a name in a grant", agentBot + `
[[grant]]
agent = "bot"
connection = "\u001b[2J\u0007"`,
			`grant bot on <U+001B>[2J<U+0007> (grant #1): no connection "\x1b[2J\a" in the file or the database`},
		{"a file name", `[[connection]]
alias = "web"
host = "10.0.0.5"
user = "deploy"
key_file = "\u202eyek.\u001b[2J"`,
			`connection "web" (connection #1): key_file: stat {dir}/<U+202E>yek.<U+001B>[2J: no such file or directory`},
		{"a raw control character", "[[agent]]\nname = \"b\x1b[2Jot\"\n", "line 2, column 10: basic strings cannot have control characters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := r.apply(tt.file, Options{DryRun: true})
			if err == nil {
				t.Fatal("no error")
			}
			if c, ok := hiddenRune(err.Error()); ok {
				t.Errorf("error %q holds %U as itself", err, c)
			}
			if want := r.expand(tt.want); !strings.Contains(err.Error(), want) {
				t.Errorf("error %q; want it to hold %q", err, want)
			}
		})
	}

	// A target's answer to the key check, printed after the change.
	r.chk.result = recipes.Result{Status: recipes.StatusRejected, Message: "refused" + clear + "\u202e\r applied OK"}
	out, _, err := r.apply(connWeb+"allow_unverified = true\n", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := hiddenRune(out); ok {
		t.Errorf("apply printed %U as itself:\n%q", c, out)
	}
	if want := "key check: rejected: refused<U+001B>[2J<U+0007><U+202E>"; !strings.Contains(out, want) {
		t.Errorf("apply printed:\n%s\nwant it to hold %q", out, want)
	}
}
