package policy

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestVisible(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain ASCII unchanged", "ls -la /etc", "ls -la /etc"},
		{"letters of other scripts unchanged", "cat /tmp/naïve-日本.txt", "cat /tmp/naïve-日本.txt"},
		{"right-to-left override", "cp /tmp/ok.txt /tmp/\u202ecte/nimda.txt\u202c", "cp /tmp/ok.txt /tmp/<U+202E>cte/nimda.txt<U+202C>"},
		{"isolates", "a\u2066b\u2069", "a<U+2066>b<U+2069>"},
		{"marks", "a\u200eb\u200fc\u061c", "a<U+200E>b<U+200F>c<U+061C>"},
		{"zero-width", "r\u200bm \u200c\u200d\u2060\ufeff", "r<U+200B>m <U+200C><U+200D><U+2060><U+FEFF>"},
		{"carriage return hides a prefix", "ls\rrm -rf /", "ls<U+000D>rm -rf /"},
		{"escape and DEL", "a\x1b[2Jb\x7f", "a<U+001B>[2Jb<U+007F>"},
		{"C1 control", "a\u0085b", "a<U+0085>b"},
		{"no-break space is not a space to the shell", "ls\u00a0-la", "ls<U+00A0>-la"},
		{"line separator", "a\u2028b", "a<U+2028>b"},
		{"tag characters", "a\U000E0041b", "a<U+E0041>b"},
		{"variation selector", "a\ufe0fb", "a<U+FE0F>b"},
		{"hangul filler", "a\u3164b", "a<U+3164>b"},
		{"soft hyphen", "r\u00adm", "r<U+00AD>m"},
		{"private use", "a\ue000b", "a<U+E000>b"},
		{"invalid UTF-8", "a\xffb\xc3", "a<0xFF>b<0xC3>"},
		{"newline and tab kept", "ls\n\tpwd", "ls\n\tpwd"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Visible(tc.in); got != tc.want {
				t.Errorf("Visible(%q) = %q; want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestVisibleLine(t *testing.T) {
	if got, want := VisibleLine("ls\n\tpwd\u202e"), "ls<U+000A><U+0009>pwd<U+202E>"; got != want {
		t.Errorf("VisibleLine = %q; want %q", got, want)
	}
}

// FuzzVisible checks that the result is valid UTF-8 and holds no code point
// that Visible would escape: whatever the input, the admin sees only
// characters that show as themselves.
func FuzzVisible(f *testing.F) {
	for _, s := range []string{"ls", "a\u202eb", "\xff\xfe", "\u200b\u00a0\n\t\r"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := VisibleLine(s)
		if !utf8.ValidString(got) {
			t.Fatalf("VisibleLine(%q) = %q: not valid UTF-8", s, got)
		}
		for _, r := range got {
			if hidden(r, true) {
				t.Fatalf("VisibleLine(%q) = %q keeps hidden %U", s, got, r)
			}
		}
		if !strings.Contains(s, "<") && !strings.ContainsFunc(s, func(r rune) bool { return r == utf8.RuneError || hidden(r, true) }) && got != s {
			t.Fatalf("VisibleLine(%q) = %q changed a clean string", s, got)
		}
	})
}
