package policy

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Text that people type for other people to read — a denial's reason,
// which the waiting agent prints on its terminal and the audit log keeps —
// is checked here, in the layer every door goes through (the CLI, the REST
// API, the page), so that the doors cannot disagree on what they accept.
// The doors only put the refusal in their own form.
//
// Text the agent supplies (POSTERN_REASON) is not refused, since the agent
// cannot be asked to retype it: it is kept escaped (agentReason), so that
// what an admin reads is what the agent sent.

// MaxDenyReason bounds a denial's reason, in bytes: it is shown to the
// agent on one line of its terminal and kept in the audit log.
const MaxDenyReason = 1000

// CheckAdminText refuses text an admin typed for others to read when it is
// longer than max bytes, is not UTF-8, or holds a character that does not
// show as itself: a newline or tab (the text is shown on one line: a
// second line would pass for a line of postern's own, such as a fake
// "postern: approved"), a control character (ESC starts terminal escape
// sequences), a bidirectional control U+202A–U+202E or U+2066–U+2069 (it
// reorders what is displayed after it), or any other character that
// VisibleLine escapes (zero-width characters, unusual spaces). An admin who
// typed such a character by accident retypes the text; the rule is the one
// Visible uses to escape, so that the same characters are refused here and
// escaped where text comes from an agent.
//
// field names the text in the refusal ("reason"). The refusal matches
// ErrInvalidText and is a *usererr.Error for the doors. Surrounding spaces
// are the caller's to trim.
func CheckAdminText(field, s string, max int) error {
	refuse := func(why string) error {
		return refusal(ErrInvalidText, fmt.Sprintf("%s: at most %d bytes on one line, without control characters; %s", field, max, why))
	}
	if len(s) > max {
		return refuse("it has " + strconv.Itoa(len(s)) + " bytes")
	}
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size <= 1 {
				return refuse("it is not UTF-8")
			}
		}
		if hidden(r, true) {
			return refuse("it has " + describeHidden(r))
		}
	}
	return nil
}

// describeHidden names r for the admin who typed it: a line break, a tab,
// or its code point as VisibleLine shows it.
func describeHidden(r rune) string {
	switch r {
	case '\n', '\r', 0x2028, 0x2029:
		return "a line break"
	case '\t':
		return "a tab"
	}
	return VisibleLine(string(r)) + ", a character that does not show as itself"
}
