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
	all := []string{gitGlobals, gitGlobals + gitProgramGlobals, sshOpts, awkOpts, dockerGlobals, dockerExecOpts, dockerRunOpts, systemctlOpts,
		readOpts, mapfileOpts, compgenOpts, rpmQueryOpts, pipReadOpts, rsyncSenderOpts, "-f -v -n", "-f -n -p="}
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
	// dynamic is set when the value is a word known only at run time.
	dynamic bool
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

// optValues returns the values of the named options as values, known or
// not.
func (p *parsed) optValues(names ...string) []value {
	var out []value
	for _, o := range p.opts {
		for _, n := range names {
			if o.name == n {
				out = append(out, value{s: o.val, known: !o.dynamic, why: "option value known only at run time"})
			}
		}
	}
	return out
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
	s := optScanner{sp: sp, args: args, posixStop: posixStop}
	for s.i < len(s.args) && s.next() {
	}
	return s.p
}

// optScanner walks one command's arguments, left to right, collecting what
// getopt reports. i is the index of the argument being read.
type optScanner struct {
	sp        optSpec
	args      []value
	posixStop bool
	i         int
	p         parsed
}

// next reads the argument at i and moves past it (and past a separate
// option value). It returns false when every argument left is an operand.
func (s *optScanner) next() bool {
	a := s.args[s.i]
	s.i++
	switch {
	case !a.known:
		// A word known only at run time may be any option; the caller lifts
		// the command to its ceiling. It is kept as an operand.
		s.p.noteDynamic(a)
		s.p.operands = append(s.p.operands, a)
	case a.s == "--":
		s.operandsFrom(s.i)
		return false
	case strings.HasPrefix(a.s, "--"):
		s.long(a.s)
	case len(a.s) > 1 && a.s[0] == '-':
		s.shorts(a.s)
	default:
		s.p.operands = append(s.p.operands, a)
		if s.posixStop {
			s.operandsFrom(s.i)
			return false
		}
	}
	return true
}

// long reads `--name`, `--name=value` or `--name value`, where name may be
// an unambiguous prefix.
func (s *optScanner) long(arg string) {
	name, val, hasVal := strings.Cut(arg[2:], "=")
	full, kind, ok := s.sp.matchLong(name)
	if !ok {
		s.p.setBad("--" + name)
		return
	}
	o := opt{name: "--" + full, val: val, hasVal: hasVal}
	switch {
	case kind == noArg && hasVal:
		s.p.setBad(arg)
		return
	case kind == reqArg && !hasVal:
		if o.val, o.hasVal, o.dynamic = s.takeValue(); !o.hasVal {
			s.p.setBad(arg + " (missing value)")
			return
		}
	}
	s.p.opts = append(s.p.opts, o)
}

// shorts reads a bundle of short options (`-la`, `-n5`, `-n 5`) or, where
// the spec allows, a bare count (`-20`).
func (s *optScanner) shorts(arg string) {
	if s.sp.numbers && isFD(arg[1:]) {
		s.p.opts = append(s.p.opts, opt{name: "-#", val: arg[1:], hasVal: true})
		return
	}
	for j := 1; j < len(arg); j++ {
		kind, ok := s.sp.short[arg[j]]
		if !ok {
			s.p.setBad("-" + arg[j:j+1])
			return
		}
		o := opt{name: "-" + arg[j:j+1]}
		if kind == optArg && j+1 < len(arg) {
			// An optional value is the rest of the bundle (-sTCP:LISTEN),
			// never the next word.
			o.val, o.hasVal = arg[j+1:], true
			s.p.opts = append(s.p.opts, o)
			return
		}
		if kind == reqArg {
			// The rest of the bundle is the value, or else the next word.
			if j+1 < len(arg) {
				o.val, o.hasVal = arg[j+1:], true
			} else if o.val, o.hasVal, o.dynamic = s.takeValue(); !o.hasVal {
				s.p.setBad(arg + " (missing value)")
			}
			s.p.opts = append(s.p.opts, o)
			return
		}
		s.p.opts = append(s.p.opts, o)
	}
}

// takeValue consumes the next argument as an option's value; dynamic is
// set when that word is known only at run time.
func (s *optScanner) takeValue() (val string, ok, dynamic bool) {
	if s.i >= len(s.args) {
		return "", false, false
	}
	v := s.args[s.i]
	s.i++
	s.p.noteDynamic(v)
	return v.s, true, !v.known
}

// operandsFrom keeps every argument from index i on as an operand.
func (s *optScanner) operandsFrom(i int) {
	for _, rest := range s.args[i:] {
		s.p.noteDynamic(rest)
	}
	s.p.operands = append(s.p.operands, s.args[i:]...)
	s.i = len(s.args)
}

// noteDynamic records why v is known only at run time, if it is and no
// earlier argument was.
func (p *parsed) noteDynamic(v value) {
	if !v.known && p.dynamic == "" {
		p.dynamic = v.why
	}
}

func (p *parsed) setBad(s string) {
	if p.bad == "" {
		p.bad = s
	}
}
