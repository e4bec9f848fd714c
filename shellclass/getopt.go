package shellclass

import (
	"sort"
	"strings"
)

// argKind says whether an option takes a value.
type argKind uint8

const (
	noArg  argKind = iota
	reqArg         // -n 5, -n5, --lines 5, --lines=5
	optArg         // --color, --color=auto (never a separate word)
)

// optSpec is the allowlist of one command's options, parsed from the compact
// form used in the tables: "-n= -c= -v --lines= --color? -#" where a
// trailing "=" takes a value, "?" takes an optional "=value", and "-#" lets
// a bare number such as `head -20` stand for a count.
type optSpec struct {
	short   map[byte]argKind
	long    map[string]argKind
	names   []string // long names, sorted, for GNU prefix matching
	numbers bool
}

// specs holds every option list of the tables, parsed once at package
// initialisation and read-only afterwards.
var specs = func() map[string]optSpec {
	m := map[string]optSpec{}
	all := []string{gitGlobals, gitGlobals + gitProgramGlobals, sshOpts, awkOpts, dockerGlobals, dockerExecOpts, dockerRunOpts, systemctlOpts}
	for _, e := range readTable {
		all = append(all, e.opts)
	}
	for _, w := range wrappers {
		all = append(all, w.opts)
	}
	for _, s := range all {
		m[s] = parseSpec(s)
	}
	return m
}()

// spec returns the parsed form of an option list from the tables.
func spec(s string) optSpec {
	if sp, ok := specs[s]; ok {
		return sp
	}
	return parseSpec(s)
}

func parseSpec(s string) optSpec {
	sp := optSpec{short: map[byte]argKind{}, long: map[string]argKind{}}
	for _, tok := range strings.Fields(s) {
		kind := noArg
		switch {
		case strings.HasSuffix(tok, "="):
			kind, tok = reqArg, strings.TrimSuffix(tok, "=")
		case strings.HasSuffix(tok, "?"):
			kind, tok = optArg, strings.TrimSuffix(tok, "?")
		}
		switch {
		case tok == "-#":
			sp.numbers = true
		case strings.HasPrefix(tok, "--"):
			sp.long[tok[2:]] = kind
			sp.names = append(sp.names, tok[2:])
		case len(tok) == 2 && tok[0] == '-':
			sp.short[tok[1]] = kind
		default:
			panic("shellclass: bad option spec token " + tok) // tables are checked by tests
		}
	}
	sort.Strings(sp.names)
	return sp
}

// matchLong resolves a long option name the way GNU getopt_long does: an
// exact name, or an unambiguous prefix of one.
func (sp optSpec) matchLong(name string) (string, argKind, bool) {
	if k, ok := sp.long[name]; ok {
		return name, k, true
	}
	i := sort.SearchStrings(sp.names, name)
	var found string
	for ; i < len(sp.names) && strings.HasPrefix(sp.names[i], name); i++ {
		if found != "" {
			return "", noArg, false // ambiguous
		}
		found = sp.names[i]
	}
	if found == "" {
		return "", noArg, false
	}
	return found, sp.long[found], true
}

// opt is one parsed option: its canonical name ("-n" or "--lines") and value.
type opt struct {
	name   string
	val    string
	hasVal bool
}

// parsed is the result of reading a command's arguments against its spec.
type parsed struct {
	opts     []opt
	operands []value
	// bad names the first option not on the allowlist; "" when all are.
	bad string
	// dynamic says why some argument is known only at run time; "" if none.
	// Such a word may be any option, so the caller lifts the command to its
	// highest reachable class.
	dynamic string
}

func (p *parsed) has(names ...string) bool {
	for _, o := range p.opts {
		for _, n := range names {
			if o.name == n {
				return true
			}
		}
	}
	return false
}

func (p *parsed) values(names ...string) []string {
	var out []string
	for _, o := range p.opts {
		for _, n := range names {
			if o.name == n {
				out = append(out, o.val)
			}
		}
	}
	return out
}

// getopt reads args against sp with GNU semantics: options may follow
// operands (argument permutation: an operand that looks like an option is
// one) unless posixStop, "--" ends options, short options bundle.
func getopt(sp optSpec, args []value, posixStop bool) parsed {
	var p parsed
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !a.known {
			if p.dynamic == "" {
				p.dynamic = a.why
			}
			p.operands = append(p.operands, a)
			continue
		}
		s := a.s
		switch {
		case s == "--":
			for _, rest := range args[i+1:] {
				if !rest.known && p.dynamic == "" {
					p.dynamic = rest.why
				}
			}
			p.operands = append(p.operands, args[i+1:]...)
			return p
		case strings.HasPrefix(s, "--"):
			name, val, hasVal := strings.Cut(s[2:], "=")
			full, kind, ok := sp.matchLong(name)
			if !ok {
				p.setBad("--" + name)
				continue
			}
			o := opt{name: "--" + full, val: val, hasVal: hasVal}
			switch kind {
			case noArg:
				if hasVal {
					p.setBad(s)
					continue
				}
			case reqArg:
				if !hasVal {
					if i+1 >= len(args) {
						p.setBad(s + " (missing value)")
						continue
					}
					i++
					o.val, o.hasVal = args[i].s, true
					if !args[i].known && p.dynamic == "" {
						p.dynamic = args[i].why
					}
				}
			}
			p.opts = append(p.opts, o)
		case len(s) > 1 && s[0] == '-':
			if sp.numbers && isFD(s[1:]) {
				p.opts = append(p.opts, opt{name: "-#", val: s[1:], hasVal: true})
				continue
			}
			for j := 1; j < len(s); j++ {
				kind, ok := sp.short[s[j]]
				if !ok {
					p.setBad("-" + s[j:j+1])
					break
				}
				o := opt{name: "-" + s[j:j+1]}
				if kind == reqArg {
					if j+1 < len(s) {
						o.val, o.hasVal = s[j+1:], true
					} else if i+1 < len(args) {
						i++
						o.val, o.hasVal = args[i].s, true
						if !args[i].known && p.dynamic == "" {
							p.dynamic = args[i].why
						}
					} else {
						p.setBad(s + " (missing value)")
					}
					p.opts = append(p.opts, o)
					break
				}
				p.opts = append(p.opts, o)
			}
		default:
			p.operands = append(p.operands, a)
			if posixStop {
				for _, rest := range args[i+1:] {
					if !rest.known && p.dynamic == "" {
						p.dynamic = rest.why
					}
				}
				p.operands = append(p.operands, args[i+1:]...)
				return p
			}
		}
	}
	return p
}

func (p *parsed) setBad(s string) {
	if p.bad == "" {
		p.bad = s
	}
}
