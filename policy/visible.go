package policy

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Visible returns s with every code point that does not show as itself made
// visible as an escape such as <U+202E>, so that what an admin reads before
// approving is the bytes that will run. It is used wherever an operation is
// shown to a person: the approvals page, the CLI, notifications and the
// audit view.
//
// Escaped: control characters (C0 other than newline and tab, DEL, C1);
// format characters (Unicode category Cf: the bidirectional controls
// U+202A–U+202E and U+2066–U+2069, marks such as U+200E/U+200F/U+061C,
// zero-width characters U+200B–U+200D and U+2060, U+FEFF, soft hyphen, tag
// characters); separators other than the ASCII space (U+00A0 and the other
// Zs spaces look like a space but are part of a shell word, U+2028/U+2029
// break lines); other invisible fillers (Hangul fillers, variation
// selectors, U+034F, U+180E); private-use and unassigned code points; and
// bytes that are not UTF-8, as <0xFF>. An escape is the only way such a
// character can change what is displayed: with U+202E, `cp ok /tmp/‮cte/nimda‬`
// displays as `cp ok /tmp/admin/etc`.
//
// Newline and tab are kept: a multi-line command is shown on several lines,
// which is what the shell sees too. Use VisibleLine where the text must stay
// on one line.
func Visible(s string) string { return visible(s, false) }

// VisibleLine is Visible that also escapes newline and tab, for one-line
// places such as a CLI table or a log field.
func VisibleLine(s string) string { return visible(s, true) }

func visible(s string, oneLine bool) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || hidden(r, oneLine) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, "<0x%02X>", s[i])
		case hidden(r, oneLine):
			fmt.Fprintf(&b, "<U+%04X>", r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// hidden reports whether r does not show as itself.
func hidden(r rune, oneLine bool) bool {
	switch {
	case r == '\n' || r == '\t':
		return oneLine
	case r == ' ':
		return false
	case r < 0x20 || r >= 0x7f && r < 0xa0:
		return true
	case r < 0x7f:
		return false
	}
	if unicode.In(r, unicode.Cc, unicode.Cf, unicode.Co, unicode.Zs, unicode.Zl, unicode.Zp, unicode.Variation_Selector) {
		return true
	}
	switch r {
	case 0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x180E, 0x3164, 0xFFA0, 0xFFFC:
		return true
	}
	return !unicode.Is(unicode.L, r) && !unicode.Is(unicode.M, r) && !unicode.Is(unicode.N, r) &&
		!unicode.Is(unicode.P, r) && !unicode.Is(unicode.S, r) // unassigned
}
