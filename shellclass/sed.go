package shellclass

import "strings"

// sedScriptSafe reports whether a sed script only prints: no e, w, W, r or
// R commands and no s/// with the e or w flag. Anything it does not
// recognise is unsafe.
func sedScriptSafe(s string) (string, bool) {
	i := 0
	n := len(s)
	skipSpace := func() {
		for i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == ';') {
			i++
		}
	}
	// delimited skips a delimited part starting after its opening delimiter
	// and returns false if it is unterminated.
	delimited := func(d byte) bool {
		for i < n {
			switch s[i] {
			case '\\':
				i += 2
				continue
			case d:
				i++
				return true
			case '\n':
				if d != '\n' {
					return false
				}
			}
			i++
		}
		return false
	}
	address := func() bool {
		switch {
		case i < n && (s[i] >= '0' && s[i] <= '9'):
			for i < n && (s[i] >= '0' && s[i] <= '9' || s[i] == '~') {
				i++
			}
		case i < n && s[i] == '$':
			i++
		case i < n && s[i] == '/':
			i++
			if !delimited('/') {
				return false
			}
			for i < n && (s[i] == 'I' || s[i] == 'M') {
				i++
			}
		case i+1 < n && s[i] == '\\':
			d := s[i+1]
			i += 2
			if !delimited(d) {
				return false
			}
		}
		return true
	}
	for {
		skipSpace()
		if i >= n {
			return "", true
		}
		if !address() {
			return "has an unterminated address", false
		}
		if i < n && s[i] == ',' {
			i++
			if i < n && (s[i] == '+' || s[i] == '~') {
				i++
			}
			if !address() {
				return "has an unterminated address", false
			}
		}
		for i < n && (s[i] == ' ' || s[i] == '!') {
			i++
		}
		if i >= n {
			return "ends after an address", false
		}
		cmd := s[i]
		i++
		switch cmd {
		case '{', '}', '=', 'p', 'P', 'n', 'N', 'd', 'D', 'h', 'H', 'g', 'G', 'x', 'z', 'F':
		case 'q', 'Q', 'l', 'L':
			for i < n && (s[i] == ' ' || s[i] >= '0' && s[i] <= '9') {
				i++
			}
		case '#', ':', 'b', 't', 'T', 'a', 'i', 'c':
			for i < n && s[i] != '\n' && !(cmd != '#' && cmd != 'a' && cmd != 'i' && cmd != 'c' && s[i] == ';') {
				i++
			}
		case 's':
			if i >= n {
				return "has an unterminated s command", false
			}
			d := s[i]
			i++
			// Two parts: the regular expression, then the replacement.
			for part := 0; part < 2; part++ {
				if !delimited(d) {
					return "has an unterminated s command", false
				}
			}
			for i < n && strings.IndexByte("gpiImM0123456789", s[i]) >= 0 {
				i++
			}
			if i < n && (s[i] == 'e' || s[i] == 'w' || s[i] == 'W') {
				return "uses the s///" + string(s[i]) + " flag, which runs or writes", false
			}
		case 'y':
			if i >= n {
				return "has an unterminated y command", false
			}
			d := s[i]
			i++
			for part := 0; part < 2; part++ {
				if !delimited(d) {
					return "has an unterminated y command", false
				}
			}
		case 'e', 'w', 'W', 'r', 'R':
			return "uses the " + string(cmd) + " command, which runs a command or reads or writes a file", false
		default:
			return "uses command " + string(cmd) + " the classifier does not know", false
		}
	}
}
