package shellclass

import (
	"strconv"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// value is a word after quote removal. A word is known only when every part
// is literal and nothing in it expands: no parameter, command or arithmetic
// expansion, no glob, no brace expansion (docs/classification.md, Parsing).
type value struct {
	s     string
	known bool
	why   string // what makes it dynamic, when !known
	word  *syntax.Word
}

// wordValue evaluates w the way bash's quote removal would, without running
// anything.
func wordValue(w *syntax.Word, d Dialect) value {
	v := value{known: true, word: w}
	var b strings.Builder
	for _, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			s, glob := unquoteLit(p.Value)
			b.WriteString(s)
			if glob {
				v.known, v.why = false, "glob pattern"
			}
			if v.known && d == Bash && hasBraceExpansion(p) {
				v.known, v.why = false, "brace expansion"
			}
		case *syntax.SglQuoted:
			if p.Dollar {
				b.WriteString(decodeANSIC(p.Value))
			} else {
				b.WriteString(p.Value)
			}
		case *syntax.DblQuoted:
			for _, dp := range p.Parts {
				lit, ok := dp.(*syntax.Lit)
				if !ok {
					v.known, v.why = false, dynamicWhy(dp)
					continue
				}
				b.WriteString(unquoteDouble(lit.Value))
			}
		default:
			v.known, v.why = false, dynamicWhy(part)
		}
	}
	v.s = b.String()
	return v
}

func dynamicWhy(p syntax.WordPart) string {
	switch p.(type) {
	case *syntax.ParamExp:
		return "parameter expansion"
	case *syntax.CmdSubst:
		return "command substitution"
	case *syntax.ArithmExp:
		return "arithmetic expansion"
	case *syntax.ProcSubst:
		return "process substitution"
	case *syntax.ExtGlob:
		return "extended glob"
	}
	return "expansion"
}

// unquoteLit removes backslash escapes from an unquoted literal and reports
// whether an unescaped glob character remains. A lone `[` with no closing
// `]` is not a glob for bash (that is how the `[` command stays literal).
func unquoteLit(raw string) (string, bool) {
	if !strings.ContainsAny(raw, "\\*?[") {
		return raw, false
	}
	var b strings.Builder
	glob := false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch c {
		case '\\':
			if i+1 < len(raw) {
				i++
				if raw[i] != '\n' {
					b.WriteByte(raw[i])
				}
			}
			continue
		case '*', '?':
			glob = true
		case '[':
			if strings.IndexByte(raw[i+1:], ']') >= 0 {
				glob = true
			}
		}
		b.WriteByte(c)
	}
	return b.String(), glob
}

// unquoteDouble removes the escapes bash honours inside double quotes.
func unquoteDouble(raw string) string {
	if !strings.Contains(raw, "\\") {
		return raw
	}
	var b strings.Builder
	for i := 0; i < len(raw); i++ {
		if raw[i] == '\\' && i+1 < len(raw) {
			switch raw[i+1] {
			case '$', '`', '"', '\\':
				b.WriteByte(raw[i+1])
				i++
				continue
			case '\n':
				i++
				continue
			}
		}
		b.WriteByte(raw[i])
	}
	return b.String()
}

// hasBraceExpansion reports whether bash would brace-expand the literal.
func hasBraceExpansion(l *syntax.Lit) bool {
	if !strings.Contains(l.Value, "{") || !strings.Contains(l.Value, ",") && !strings.Contains(l.Value, "..") {
		return false
	}
	tmp := &syntax.Word{Parts: []syntax.WordPart{&syntax.Lit{Value: l.Value}}}
	return syntax.SplitBraces(tmp)
}

// decodeANSIC decodes the body of a $'...' string as bash does.
func decodeANSIC(s string) string {
	if !strings.Contains(s, "\\") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch s[i] {
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'e', 'E':
			b.WriteByte(0x1b)
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte('\v')
		case '\\', '\'', '"', '?':
			b.WriteByte(s[i])
		case 'c':
			if i+1 < len(s) {
				i++
				b.WriteByte(s[i] & 0x1f)
			}
		case 'x', 'u', 'U':
			max := 2
			if s[i] == 'u' {
				max = 4
			} else if s[i] == 'U' {
				max = 8
			}
			j := i + 1
			for j < len(s) && j-(i+1) < max && isHex(s[j]) {
				j++
			}
			if j == i+1 {
				b.WriteByte('\\')
				b.WriteByte(s[i])
				continue
			}
			n, _ := strconv.ParseUint(s[i+1:j], 16, 32)
			if s[i] == 'x' {
				b.WriteByte(byte(n))
			} else {
				b.WriteRune(rune(n)) // an invalid code point becomes U+FFFD
			}
			i = j - 1
		case '0', '1', '2', '3', '4', '5', '6', '7':
			j := i
			for j < len(s) && j-i < 3 && s[j] >= '0' && s[j] <= '7' {
				j++
			}
			n, _ := strconv.ParseUint(s[i:j], 8, 16)
			b.WriteByte(byte(n))
			i = j - 1
		default:
			b.WriteByte('\\')
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// defaultIFS is the IFS bash starts with; bash never takes IFS from its
// environment.
const defaultIFS = " \t\n"

// ifsSplit splits the value of an unquoted expansion into fields as bash
// does: IFS white space (space, tab and newline, if in IFS) around a field
// is dropped and runs of it separate fields; every other IFS byte, with the
// IFS white space next to it, ends one field, so `a::b` with IFS=: is the
// three fields a, "" and b. An empty IFS does not split. ok is false for
// an IFS with bytes outside ASCII, which bash matches as characters of the
// locale.
func ifsSplit(s, ifs string) (fields []string, ok bool) {
	for i := 0; i < len(ifs); i++ {
		if ifs[i] >= 0x80 {
			return nil, false
		}
	}
	if ifs == "" {
		if s == "" {
			return nil, true
		}
		return []string{s}, true
	}
	in := func(i int) bool { return strings.IndexByte(ifs, s[i]) >= 0 }
	white := func(i int) bool { return (s[i] == ' ' || s[i] == '\t' || s[i] == '\n') && in(i) }
	i := 0
	for i < len(s) && white(i) {
		i++
	}
	for i < len(s) {
		start := i
		for i < len(s) && !in(i) {
			i++
		}
		fields = append(fields, s[start:i])
		// The delimiter: IFS white space, then at most one other IFS byte
		// and the white space after it.
		for i < len(s) && white(i) {
			i++
		}
		if i < len(s) && in(i) && !white(i) {
			i++
			for i < len(s) && white(i) {
				i++
			}
		}
	}
	return fields, true
}

// literalText returns a word's text after quote removal when nothing in it
// expands, and "" otherwise. Unlike wordValue it ignores globbing and brace
// expansion, which do not happen where it is used (inside [[ ]]).
func literalText(w *syntax.Word) string {
	if text, whole := quotedText(w, false); whole {
		return text
	}
	return ""
}
