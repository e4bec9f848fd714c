package shellclass

import (
	"sort"
	"strconv"
	"strings"
)

// argKind says whether an option takes a value.
type argKind uint8

const (
	noArg  argKind = iota
	reqArg         // -n 5, -n5, --lines 5, --lines=5
	optArg         // --color, --color=auto (never a separate word)
)

// optFamily is the option parser a tool is built with. Bundling, attached
// values, abbreviations and negations follow the family's own rules
// (docs/classification.md, Option parsers), decided from one table per
// entry.
type optFamily uint8

const (
	// gnuFamily is glibc's getopt_long: short options bundle (-la), a
	// required value is the rest of the bundle or the next word, an
	// optional one only the rest of the bundle or =value; a long option
	// may be any unambiguous prefix of its name; options may follow
	// operands.
	gnuFamily optFamily = iota
	// gitFamily is git's parse-options: getopt_long's rules, and every
	// long option X also as --no-X (and abbreviations of that), an option
	// named no-X also as --X (parse-options.c, parse_long_opt).
	gitFamily
	// exactFamily bundles short options as getopt does but takes long
	// options only by their whole name: git's revision and diff options
	// (parsed with PARSE_OPT_KEEP_UNKNOWN_OPT, which turns abbreviations
	// off), ripgrep, rsync's server options.
	exactFamily
	// aptFamily is APT's CommandLine (apt-pkg/contrib/cmndline.cc): long
	// names compared without case and never abbreviated; --no-X, --yes-X
	// ... for a boolean X; short options bundle and the rest of the bundle
	// is a value (-qoDir::Bin::dpkg=/bin/sh is -q and -o); a boolean or
	// -q takes the next word if it is a truth value or a number.
	aptFamily
	// pflagFamily is spf13/pflag, which docker, podman and kubectl use
	// through cobra: --name, --name=v, --name v; a boolean takes
	// --name=true|false and never the next word; -x, -xv, -x=v, -x v and
	// bundles; no abbreviations; _ and - are the same in a name.
	pflagFamily
	// wordFamily is xxd's parser: one option per word, named by the word's
	// first letter after the dash (-ps is -p; --revert is -r); a value
	// option takes the rest of the word unless the rest spells the
	// option's name (-cols 8), else the next word; the first operand ends
	// the options.
	wordFamily
)

// wordSpellings are the long spellings xxd accepts after a value
// option's letter, which make it take the next word (xxd.c main).
var wordSpellings = map[byte][]string{'c': {"ols"}, 'g': {"roup"}, 'o': {"ffset"}, 's': {"kip", "eek"}, 'l': {"en"}, 'n': {"ame"}}

// optDef is one option of a table: its name, whether it takes a value,
// and what it does to the class.
type optDef struct {
	name string // "-n" or "--lines" as the table writes it
	kind argKind
	// cls is Read for an option on the allowlist, else the class it
	// raises the command to.
	cls Class
	// prog is set when the value is a program or shell code the tool
	// runs: the value is classified as that command.
	prog bool
	// forever is set for an option that makes the tool run until it is
	// interrupted (tail -f).
	forever bool
	// left is set for an option left off the allowlist although it only
	// reads (a list of files the classifier cannot see, two values the
	// table cannot say): not read when written, but no higher a class for
	// a word known only at run time.
	left bool
}

// optSpec is the table of one command's options, parsed from the compact
// form the tables use (see parseSpec).
type optSpec struct {
	family  optFamily
	short   map[byte]optDef
	long    map[string]optDef // names without "--", lower case for apt
	names   []string          // long names, sorted, for prefix matching
	numbers bool
	// ceiling is the highest class any option reaches: a program-valued
	// option counts as destructive (the program may be rm).
	ceiling Class
}

type specKey struct {
	family optFamily
	s      string
}

// specs holds the parsed form of every option table of the package
// (specTables), parsed once at package initialisation and read-only
// afterwards.
var specs = func() map[specKey]optSpec {
	m := map[specKey]optSpec{}
	for _, t := range specTables() {
		m[specKey{t.family, t.opts}] = parseSpec(t.family, t.opts)
	}
	return m
}()

// spec returns the parsed form of a getopt_long option table.
func spec(s string) optSpec { return specOf(gnuFamily, s) }

// specOf returns the parsed form of an option table of a family: parsed at
// initialisation, or now for a table built at run time.
func specOf(f optFamily, s string) optSpec {
	if sp, ok := specs[specKey{f, s}]; ok {
		return sp
	}
	return parseSpec(f, s)
}

// specTable is one option table, named for tests and reports.
type specTable struct {
	name   string
	family optFamily
	opts   string
}

// specTables lists every option table of the package with the family it
// is read with.
func specTables() []specTable {
	var out []specTable
	for name, e := range readTable {
		out = append(out, specTable{"read " + name, e.family, e.opts})
	}
	for name, w := range wrappers {
		out = append(out, specTable{"wrapper " + name, gnuFamily, w.opts})
	}
	for name, g := range gitReadSubs {
		out = append(out, specTable{"git " + name, g.family, g.opts})
	}
	for name, o := range dockerRead {
		out = append(out, specTable{"docker " + name, pflagFamily, o})
	}
	for name, o := range dockerComposeRead {
		out = append(out, specTable{"docker compose " + name, pflagFamily, o})
	}
	for name, o := range kubectlRead {
		out = append(out, specTable{"kubectl " + name, pflagFamily, kubectlGlobals + " " + o})
	}
	return append(out, []specTable{
		{"git globals", exactFamily, gitGlobals}, {"git stash show", exactFamily, gitStashShowOpts},
		{"git worktree list", gitFamily, gitWorktreeListOpts},
		{"docker globals", pflagFamily, dockerGlobals}, {"compose globals", pflagFamily, dockerComposeGlobals},
		{"docker exec", pflagFamily, dockerExecOpts}, {"docker run", pflagFamily, dockerRunOpts},
		{"kubectl globals", pflagFamily, kubectlGlobals}, {"kubectl changes", pflagFamily, kubectlChangeOpts},
		{"kubectl exec", pflagFamily, kubectlExecOpts}, {"apt", aptFamily, aptOpts},
		{"rsync sender", exactFamily, rsyncSenderOpts}, {"systemctl", gnuFamily, systemctlOpts},
		{"tar", gnuFamily, tarOpts}, {"man", gnuFamily, manOpts}, {"scp", gnuFamily, scpOpts},
		{"sftp", gnuFamily, sftpOpts}, {"at", gnuFamily, atOpts}, {"parallel", gnuFamily, parallelOpts},
		{"ssh", gnuFamily, sshOpts}, {"awk", gnuFamily, awkOpts}, {"rpm", gnuFamily, rpmQueryOpts},
		{"pip", gnuFamily, pipReadOpts}, {"read", gnuFamily, readOpts}, {"mapfile", gnuFamily, mapfileOpts},
		{"compgen", gnuFamily, compgenOpts}, {"unset", gnuFamily, unsetOpts}, {"wait", gnuFamily, waitOpts},
		{"hash", gnuFamily, hashOpts},
	}...)
}

// parseSpec reads a table: options separated by spaces, "-n" and "--name"
// take no value, a trailing "=" a required value, "?" an optional one;
// "-#" lets a bare number such as `head -20` stand for a count. An option
// with no mark is on the allowlist (read). A mark before it says what a
// known option that is not read does: "W:" writes or changes something,
// "D:" destroys or ends work, "P:" runs its value as a program or shell
// code, "F:" runs until interrupted, "N:" only reads but is left off the
// allowlist (it reads a list of files the classifier cannot see, or takes
// values the table cannot say). Any option not in the table is unknown,
// which makes the command write.
func parseSpec(f optFamily, s string) optSpec {
	sp := optSpec{family: f, short: map[byte]optDef{}, long: map[string]optDef{}}
	for _, tok := range strings.Fields(s) {
		d := optDef{}
		if i := strings.IndexByte(tok, ':'); i == 1 {
			switch tok[0] {
			case 'W':
				d.cls = Write
			case 'D':
				d.cls = Destructive
			case 'P':
				d.cls, d.prog = Write, true
			case 'F':
				d.cls, d.forever = Write, true
			case 'N':
				d.cls, d.left = Write, true
			default:
				panic("shellclass: bad option mark in " + tok) // tables are checked by tests
			}
			tok = tok[2:]
		}
		switch {
		case strings.HasSuffix(tok, "="):
			d.kind, tok = reqArg, strings.TrimSuffix(tok, "=")
		case strings.HasSuffix(tok, "?"):
			d.kind, tok = optArg, strings.TrimSuffix(tok, "?")
		}
		d.name = tok
		switch {
		case tok == "-#":
			sp.numbers = true
			continue
		case strings.HasPrefix(tok, "--") && len(tok) > 2:
			name := tok[2:]
			if f == aptFamily {
				name = strings.ToLower(name)
			}
			sp.long[name] = d
			sp.names = append(sp.names, name)
		case len(tok) == 2 && tok[0] == '-':
			sp.short[tok[1]] = d
		default:
			panic("shellclass: bad option spec token " + tok) // tables are checked by tests
		}
		if !d.left {
			sp.ceiling = max(sp.ceiling, d.cls)
		}
		if d.prog {
			sp.ceiling = Destructive
		}
	}
	sort.Strings(sp.names)
	return sp
}

// lookupLong resolves a long option name the way the family's parser
// does. ok is false for an unknown name; several candidates mean an
// abbreviation that the parser finds ambiguous (it refuses to run).
func (sp optSpec) lookupLong(name string) (cands []optDef, ok bool) {
	switch sp.family {
	case aptFamily:
		return sp.aptLong(strings.ToLower(name))
	case pflagFamily:
		if d, ok := sp.long[strings.ReplaceAll(name, "_", "-")]; ok {
			return []optDef{d}, true
		}
		return nil, false
	}
	if d, ok := sp.long[name]; ok {
		return []optDef{d}, true
	}
	if sp.family == gitFamily || sp.family == exactFamily {
		// An option named no-X is also --X; any X is also --no-X.
		if d, ok := sp.long["no-"+name]; ok {
			return []optDef{d}, true
		}
		if rest, neg := strings.CutPrefix(name, "no-"); neg {
			if d, ok := sp.long[rest]; ok {
				return []optDef{negated(d)}, true
			}
		}
	}
	if sp.family == exactFamily || name == "" {
		return nil, false
	}
	// An abbreviation: every name the word is a prefix of.
	seen := map[string]bool{}
	add := func(n string, d optDef) {
		if !seen[n] {
			seen[n] = true
			cands = append(cands, d)
		}
	}
	for i := sort.SearchStrings(sp.names, name); i < len(sp.names) && strings.HasPrefix(sp.names[i], name); i++ {
		add(sp.names[i], sp.long[sp.names[i]])
	}
	if sp.family == gitFamily {
		// parse-options: "n", "no", "no-" abbreviate the negation of
		// every option; "no-ab" abbreviates --no-abbrev; "ab" also
		// abbreviates the positive form of an option named no-abbrev.
		if strings.HasPrefix("no-", name) {
			for _, n := range sp.names {
				add("no-"+n, negated(sp.long[n]))
			}
		} else if rest, neg := strings.CutPrefix(name, "no-"); neg {
			for i := sort.SearchStrings(sp.names, rest); i < len(sp.names) && strings.HasPrefix(sp.names[i], rest); i++ {
				add("no-"+sp.names[i], negated(sp.long[sp.names[i]]))
			}
		}
		for i := sort.SearchStrings(sp.names, "no-"+name); i < len(sp.names) && strings.HasPrefix(sp.names[i], "no-"+name); i++ {
			add(sp.names[i], sp.long[sp.names[i]])
		}
	}
	return cands, len(cands) > 0
}

// negated is the --no- form of an option: it takes no value, and a
// program option's negation runs nothing.
func negated(d optDef) optDef {
	d.name = "--no-" + strings.TrimPrefix(d.name, "--")
	d.kind = noArg
	if d.prog {
		d.prog, d.cls = false, Read
	}
	d.forever = false
	return d
}

// aptLong resolves a long option as APT's CommandLine::Parse does: the
// whole name without case, else the part after the first dash for a
// boolean (--no-X, --yes-X ...), which may be a short option's letter.
func (sp optSpec) aptLong(name string) ([]optDef, bool) {
	if d, ok := sp.long[name]; ok {
		return []optDef{d}, true
	}
	_, rest, ok := strings.Cut(name, "-")
	if !ok {
		return nil, false
	}
	if d, ok := sp.long[rest]; ok && d.kind == noArg {
		return []optDef{d}, true
	}
	if len(rest) == 1 {
		if d, ok := sp.short[rest[0]]; ok && d.kind == noArg && !aptLevel(d) {
			return []optDef{d}, true
		}
	}
	return nil, false
}

// aptLevel reports APT's -q/--quiet, an integer level that takes a number
// as its value and counts up without one.
func aptLevel(d optDef) bool {
	switch d.name {
	case "-q", "--quiet", "--silent":
		return true
	}
	return false
}

// opt is one parsed option: the table's definition, and the value given.
type opt struct {
	optDef
	// word is the option as written, for reasons.
	word   string
	val    string
	hasVal bool
	// dynamic is set when the value is a word known only at run time.
	dynamic bool
}

// parsed is the result of reading a command's arguments against its table.
type parsed struct {
	opts     []opt
	operands []value
	// bad names the first option not in the table, or an abbreviation the
	// tool finds ambiguous; "" when every option is known.
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

// worst returns the first option of the highest class above read, if any.
func (p *parsed) worst() (opt, bool) {
	var w opt
	for _, o := range p.opts {
		if o.cls > w.cls {
			w = o
		}
	}
	return w, w.cls > Read
}

// getopt reads args against sp with the family's rules: options may follow
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
	case s.sp.family == wordFamily && len(a.s) > 1 && a.s[0] == '-':
		s.word(a.s)
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
// an abbreviation where the family allows one.
func (s *optScanner) long(arg string) {
	name, val, hasVal := strings.Cut(arg[2:], "=")
	cands, ok := s.sp.lookupLong(name)
	if !ok {
		s.p.setBad(arg)
		return
	}
	d := cands[0]
	if len(cands) > 1 {
		// An abbreviation of several options: the tool refuses it, unless
		// (getopt_long) they are all the same option. Fail toward the
		// highest class any of them has.
		for _, c := range cands[1:] {
			if c.kind != d.kind || c.cls != d.cls || c.prog != d.prog {
				top := optDef{name: arg, cls: Write}
				for _, c := range cands {
					top.cls = max(top.cls, c.cls)
					if c.prog {
						top.cls = Destructive
					}
				}
				if top.cls == Destructive {
					s.p.opts = append(s.p.opts, opt{optDef: top, word: arg})
				} else {
					s.p.setBad(arg + " (ambiguous)")
				}
				return
			}
		}
	}
	o := opt{optDef: d, word: arg, val: val, hasVal: hasVal}
	switch {
	case d.kind == noArg && hasVal:
		if s.sp.family == pflagFamily || s.sp.family == aptFamily {
			// --follow=false: a boolean with a truth value.
			if isFalse(val) {
				return
			}
			s.p.opts = append(s.p.opts, o)
			return
		}
		s.p.setBad(arg)
		return
	case d.kind == noArg && s.sp.family == aptFamily:
		s.aptBoolValue(o)
		return
	case d.kind == reqArg && !hasVal:
		if s.sp.family == aptFamily && s.i < len(s.args) && s.args[s.i].known && strings.HasPrefix(s.args[s.i].s, "-") {
			s.p.setBad(arg + " (missing value)")
			return
		}
		if o.val, o.hasVal, o.dynamic = s.takeValue(); !o.hasVal {
			s.p.setBad(arg + " (missing value)")
			return
		}
	}
	s.p.opts = append(s.p.opts, o)
}

// word reads one option word of the word family (xxd).
func (s *optScanner) word(arg string) {
	w := arg
	if strings.HasPrefix(w, "--") {
		w = w[1:]
	}
	d, ok := s.sp.short[w[1]]
	if !ok {
		s.p.setBad(arg)
		return
	}
	o := opt{optDef: d, word: arg}
	if d.kind == reqArg {
		rest := w[2:]
		next := rest == ""
		for _, sp := range wordSpellings[w[1]] {
			next = next || strings.HasPrefix(rest, sp)
		}
		if w[1] == 'c' && strings.HasPrefix(rest, "apitalize") {
			s.p.opts = append(s.p.opts, opt{optDef: s.sp.short['C'], word: arg})
			return
		}
		if !next {
			o.val, o.hasVal = rest, true
		} else if o.val, o.hasVal, o.dynamic = s.takeValue(); !o.hasVal {
			s.p.setBad(arg + " (missing value)")
			return
		}
	}
	s.p.opts = append(s.p.opts, o)
}

// aptBoolValue records an APT boolean or level option given as the last
// letter of a bundle or as a long option without =: CommandLine::HandleOpt
// takes the next word as its value when it is a truth value (or, for -q,
// a number) and does not start with "-".
func (s *optScanner) aptBoolValue(o opt) {
	if s.i < len(s.args) && s.args[s.i].known && !strings.HasPrefix(s.args[s.i].s, "-") {
		next := s.args[s.i].s
		if aptLevel(o.optDef) && isDecimal(next) || !aptLevel(o.optDef) && aptTruth(next) {
			s.i++
			o.val, o.hasVal = next, true
			if !aptLevel(o.optDef) && isFalse(next) {
				return
			}
		}
	}
	s.p.opts = append(s.p.opts, o)
}

// shorts reads a bundle of short options (`-la`, `-n5`, `-n 5`) or, where
// the table allows, a bare count (`-20`).
func (s *optScanner) shorts(arg string) {
	if s.sp.numbers && isFD(arg[1:]) {
		s.p.opts = append(s.p.opts, opt{optDef: optDef{name: "-#"}, word: arg, val: arg[1:], hasVal: true})
		return
	}
	for j := 1; j < len(arg); j++ {
		d, ok := s.sp.short[arg[j]]
		if !ok {
			if s.sp.numbers && arg[j] >= '0' && arg[j] <= '9' && (s.sp.family == gitFamily || s.sp.family == exactFamily) {
				// git's OPTION_NUMBER: digits anywhere in a bundle.
				k := j
				for k < len(arg) && arg[k] >= '0' && arg[k] <= '9' {
					k++
				}
				s.p.opts = append(s.p.opts, opt{optDef: optDef{name: "-#"}, word: arg, val: arg[j:k], hasVal: true})
				j = k - 1
				continue
			}
			s.p.setBad("-" + arg[j:j+1])
			return
		}
		o := opt{optDef: d, word: arg}
		rest := arg[j+1:]
		switch {
		case s.sp.family == pflagFamily && strings.HasPrefix(rest, "=") && len(rest) > 1:
			// -f=value, also -f=false for a boolean.
			o.val, o.hasVal = rest[1:], true
			if d.kind == noArg && isFalse(o.val) {
				return
			}
			s.p.opts = append(s.p.opts, o)
			return
		case d.kind == noArg && s.sp.family == aptFamily:
			if j+1 == len(arg) {
				s.aptBoolValue(o)
				return
			}
			if aptLevel(d) && isDecimal(rest) || strings.HasPrefix(rest, "=") || !aptLevel(d) && aptTruth(rest) {
				// The rest of the bundle is the option's value.
				o.val, o.hasVal = strings.TrimPrefix(rest, "="), true
				if !aptLevel(d) && !aptTruth(o.val) {
					s.p.setBad(arg)
					return
				}
				if !aptLevel(d) && isFalse(o.val) {
					return
				}
				s.p.opts = append(s.p.opts, o)
				return
			}
			s.p.opts = append(s.p.opts, o)
		case d.kind == optArg && rest != "":
			// An optional value is the rest of the bundle (-sTCP:LISTEN),
			// never the next word.
			o.val, o.hasVal = rest, true
			s.p.opts = append(s.p.opts, o)
			return
		case d.kind == reqArg:
			// The rest of the bundle is the value, or else the next word.
			if rest != "" {
				o.val, o.hasVal = rest, true
				if s.sp.family == aptFamily {
					o.val = strings.TrimPrefix(rest, "=")
				}
			} else if s.sp.family == aptFamily && s.i < len(s.args) && s.args[s.i].known && strings.HasPrefix(s.args[s.i].s, "-") {
				s.p.setBad(arg + " (missing value)")
				return
			} else if o.val, o.hasVal, o.dynamic = s.takeValue(); !o.hasVal {
				s.p.setBad(arg + " (missing value)")
				return
			}
			s.p.opts = append(s.p.opts, o)
			return
		default:
			s.p.opts = append(s.p.opts, o)
		}
	}
}

// isFalse reports a truth value that turns a boolean off: pflag's
// strconv.ParseBool false values and APT's StringToBool ones.
func isFalse(v string) bool {
	switch strings.ToLower(v) {
	case "0", "f", "false", "no", "off", "without", "disable":
		return true
	}
	n, err := strconv.ParseInt(v, 0, 64)
	return err == nil && n == 0 && !strings.ContainsAny(v, "_oObB+")
}

// aptTruth reports a word APT's StringToBool reads as a truth value.
func aptTruth(v string) bool {
	switch strings.ToLower(v) {
	case "no", "false", "without", "off", "disable", "yes", "true", "with", "on", "enable":
		return true
	}
	// strtol with base 0 over the whole word, 0 or 1 only.
	n, err := strconv.ParseInt(v, 0, 64)
	return err == nil && (n == 0 || n == 1) && !strings.ContainsAny(v, "_oObB+")
}

func isDecimal(s string) bool {
	s = strings.TrimPrefix(s, "-")
	return isFD(s)
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
