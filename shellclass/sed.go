package shellclass

import (
	"regexp"
	"strings"
)

// sedScriptSafe reports whether a sed script only prints: no e, w, W, r or
// R commands and no s/// with the e or w flag. Anything it does not
// recognise is unsafe, with the reason.
func sedScriptSafe(script string) (string, bool) {
	sc := sedScanner{s: script}
	return sc.script()
}

// sedFiles returns the files a sed script's r, R, w and W commands (and
// s///w) name: the rest of their line.
func sedFiles(script string) []string {
	var out []string
	for _, line := range strings.Split(script, "\n") {
		for _, m := range sedFileCmd.FindAllStringSubmatch(line, -1) {
			out = append(out, strings.TrimSpace(m[1]))
		}
	}
	return out
}

// sedFileCmd finds a file named after r, R, w or W (a best effort: a
// letter inside a regex can match too, which only adds a path to check).
var sedFileCmd = regexp.MustCompile(`[rRwW]\s*(/\S.*)$`)

// sedScanner reads a sed script one command at a time; i is the offset of
// the next unread byte. It knows GNU sed's grammar only as far as it needs
// to find every command letter: an address or two, the command, and the
// command's own text, which is skipped.
type sedScanner struct {
	s string
	i int
}

func (sc *sedScanner) done() bool { return sc.i >= len(sc.s) }

// peek returns the next byte, or 0 at the end.
func (sc *sedScanner) peek() byte {
	if sc.done() {
		return 0
	}
	return sc.s[sc.i]
}

// skipWhile moves past bytes found in set.
func (sc *sedScanner) skipWhile(set string) {
	for !sc.done() && strings.IndexByte(set, sc.s[sc.i]) >= 0 {
		sc.i++
	}
}

func (sc *sedScanner) script() (string, bool) {
	for {
		sc.skipWhile(" \t\n;")
		if sc.done() {
			return "", true
		}
		if !sc.addresses() {
			return "has an unterminated address", false
		}
		sc.skipWhile(" !")
		if sc.done() {
			return "ends after an address", false
		}
		if why, ok := sc.command(); !ok {
			return why, false
		}
	}
}

// addresses reads no address, one, or a range `A,B` (`A,+N`, `A,~N`).
func (sc *sedScanner) addresses() bool {
	if !sc.address() {
		return false
	}
	if sc.peek() != ',' {
		return true
	}
	sc.i++
	if c := sc.peek(); c == '+' || c == '~' {
		sc.i++
	}
	return sc.address()
}

// address reads a line number (`3`, `0~4`), `$`, `/regex/` with its I and M
// flags, or `\cregexc`; it returns false only for an unterminated regex.
func (sc *sedScanner) address() bool {
	switch c := sc.peek(); {
	case c >= '0' && c <= '9':
		sc.skipWhile("0123456789~")
	case c == '$':
		sc.i++
	case c == '/':
		sc.i++
		if !sc.delimited('/') {
			return false
		}
		sc.skipWhile("IM")
	case c == '\\' && sc.i+1 < len(sc.s):
		d := sc.s[sc.i+1]
		sc.i += 2
		return sc.delimited(d)
	}
	return true
}

// delimited moves past a part that ends with delimiter d (the opening one
// already read), honouring backslash escapes. It returns false if the part
// does not end, or a line ends first.
func (sc *sedScanner) delimited(d byte) bool {
	for !sc.done() {
		switch sc.s[sc.i] {
		case '\\':
			sc.i += 2
			continue
		case d:
			sc.i++
			return true
		case '\n':
			if d != '\n' {
				return false
			}
		}
		sc.i++
	}
	return false
}

// command reads one command letter and what belongs to it.
func (sc *sedScanner) command() (string, bool) {
	cmd := sc.s[sc.i]
	sc.i++
	switch cmd {
	case '{', '}', '=', 'p', 'P', 'n', 'N', 'd', 'D', 'h', 'H', 'g', 'G', 'x', 'z', 'F':
	case 'q', 'Q', 'l', 'L':
		sc.skipWhile(" 0123456789") // an exit code or line length
	case '#', 'a', 'i', 'c':
		// A comment, or text to print: everything to the end of the line.
		sc.skipUntil("\n")
	case ':', 'b', 't', 'T':
		sc.skipUntil("\n;") // a label
	case 's':
		return sc.substitute()
	case 'y':
		if !sc.twoParts() {
			return "has an unterminated y command", false
		}
	case 'e', 'w', 'W', 'r', 'R':
		return "uses the " + string(cmd) + " command, which runs a command or reads or writes a file", false
	default:
		return "uses command " + string(cmd) + " the classifier does not know", false
	}
	return "", true
}

// substitute reads the rest of `s/regex/replacement/flags`; the e flag runs
// the pattern space as a command and w writes a file.
func (sc *sedScanner) substitute() (string, bool) {
	if !sc.twoParts() {
		return "has an unterminated s command", false
	}
	sc.skipWhile("gpiImM0123456789")
	if c := sc.peek(); c == 'e' || c == 'w' || c == 'W' {
		return "uses the s///" + string(c) + " flag, which runs or writes", false
	}
	return "", true
}

// twoParts reads the delimiter and the two delimited parts of s and y.
func (sc *sedScanner) twoParts() bool {
	if sc.done() {
		return false
	}
	d := sc.s[sc.i]
	sc.i++
	for range 2 {
		if !sc.delimited(d) {
			return false
		}
	}
	return true
}

// skipUntil moves up to (not past) the first byte found in set.
func (sc *sedScanner) skipUntil(set string) {
	for !sc.done() && strings.IndexByte(set, sc.s[sc.i]) < 0 {
		sc.i++
	}
}
