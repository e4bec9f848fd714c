package policy

import (
	"fmt"
	"strings"
)

// Extent is the size of an operation's text as the people who decide it
// need to know it: a command can hide its end behind a screenful of
// harmless text (`true` and 60 newlines, then `touch …`), so every view of
// a request says how long it is, and how much of it lies beyond what a box
// shows at first.
type Extent struct {
	Lines int // lines of the text: newlines + 1 (0 for "")
	Bytes int // bytes of the text

	// MoreLines and MoreBytes are what lies beyond the first
	// PreviewLines lines of PreviewColumns columns, the part of the text
	// a view shows without scrolling (the approvals page's box is that
	// high). Zero when the whole text fits.
	MoreLines int
	MoreBytes int
}

// What a view shows without scrolling: PreviewLines lines of
// PreviewColumns columns, a long line taking as many lines as it wraps
// to. The approvals page's command box is PreviewLines lines high.
const (
	PreviewLines   = 12
	PreviewColumns = 80
)

// ExtentOf measures text (as the store keeps it: what runs, before
// Visible's escapes).
func ExtentOf(text string) Extent {
	e := Extent{Bytes: len(text)}
	if text == "" {
		return e
	}
	e.Lines = strings.Count(text, "\n") + 1
	shown, rows := 0, 0
	for i, line := range strings.SplitAfter(text, "\n") {
		n := len(strings.TrimSuffix(line, "\n"))
		wraps := max(1, (n+PreviewColumns-1)/PreviewColumns)
		if rows+wraps > PreviewLines {
			// The box has room rows left: this line shows in part (the
			// rest of it is in MoreBytes) or, with none, not at all.
			room := PreviewLines - rows
			e.MoreLines = e.Lines - i
			if room > 0 {
				shown += room * PreviewColumns
				e.MoreLines--
			}
			e.MoreBytes = len(text) - shown
			return e
		}
		rows += wraps
		shown += len(line)
	}
	return e
}

// Beyond says what lies past the preview in words, "" when nothing does:
// "48 more lines, 4,812 more bytes".
func (e Extent) Beyond() string {
	switch {
	case e.MoreBytes == 0:
		return ""
	case e.MoreLines == 0:
		return thousands(e.MoreBytes) + " more bytes"
	}
	return plural(e.MoreLines, "more line", "more lines") + ", " + thousands(e.MoreBytes) + " more bytes"
}

// String is the whole size in words: "61 lines, 6,012 bytes".
func (e Extent) String() string {
	return plural(e.Lines, "line", "lines") + ", " + thousands(e.Bytes) + " bytes"
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return thousands(n) + " " + many
}

// thousands writes n with a comma between groups of three digits.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
