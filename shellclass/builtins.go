package shellclass

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// builtinHandler returns the classifier of a bash builtin whose arguments
// bash evaluates as code somewhere: variable names (a subscript in a name
// runs), callbacks, word lists, options that turn on history expansion. The
// other builtins are plain entries of builtinsRead or the read table.
func builtinHandler(base string) (handler, bool) {
	switch base {
	case "read":
		return (*classifier).readBuiltin, true
	case "mapfile", "readarray":
		return (*classifier).mapfile, true
	case "printf":
		return (*classifier).printfBuiltin, true
	case "unset":
		return (*classifier).unset, true
	case "getopts":
		return (*classifier).getopts, true
	case "wait":
		return (*classifier).wait, true
	case "test", "[":
		return (*classifier).testBuiltin, true
	case "compgen":
		return (*classifier).compgen, true
	case "jobs":
		return (*classifier).jobs, true
	case "set":
		return (*classifier).set, true
	case "shopt":
		return (*classifier).shopt, true
	case "declare", "typeset", "local", "export", "readonly", "let":
		return (*classifier).declAsCommand, true
	}
	return nil, false
}

// storeInto checks names that a builtin stores a value in: bash evaluates
// the subscript of each (`read 'a[$(cmd)]'` runs cmd), so a name that is
// not inert, or not known, is destructive. Each store is a site for the
// integer and name reference attributes, and a store into a variable that
// changes what runs (PATH, PS4, PROMPT_COMMAND) is classified as such.
func (c *classifier) storeInto(cl *cmdCall, builtin string, names []value, what string) {
	for _, n := range names {
		if !n.known {
			c.raiseCall(cl, Destructive, builtin+" stores into a variable named only at run time, and bash evaluates a subscript in that name")
			continue
		}
		if !inertNameArg(n.s) {
			c.raiseCall(cl, Destructive, builtin+" evaluates the subscript of the name "+n.s+", which can run commands")
			continue
		}
		name := baseName(n.s)
		c.site(cl.sc, cl.node, name, false, what)
		c.assignedValueClass(cl, name, value{why: what})
		if why, ok := specialVarWhy(name); ok {
			c.raiseCall(cl, Write, why)
		}
	}
}

// inertNameArg reports whether a name argument is one bash looks up without
// evaluating anything: inert (inertName), or with no subscript at all (an
// invalid name such as `a b` is refused, not evaluated).
func inertNameArg(s string) bool {
	return !strings.Contains(s, "[") || inertName(s)
}

// readBuiltin: read stores a line of input in the names it is given (REPLY
// by default), or in the array named by -a. The values of -n, -N, -t and -u
// are checked as plain numbers (read.def), -d, -i and -p are text.
func (c *classifier) readBuiltin(cl *cmdCall, args []value) {
	p := getopt(spec(readOpts), args[1:], true)
	if p.bad != "" {
		c.raiseCall(cl, Write, "unknown option "+p.bad+" for read")
	}
	if p.has("-e") {
		// readline's shell-expand-line (M-C-e) runs the command
		// substitutions in the line being typed.
		c.raiseCall(cl, Write, "read -e edits input with readline, whose shell-expand-line runs command substitutions in what is typed")
	}
	names := append(p.optValues("-a"), p.operands...)
	if len(names) == 0 {
		names = []value{{s: "REPLY", known: true}}
	}
	c.storeInto(cl, "read", names, "read from input")
}

// mapfile stores lines of input in an array (MAPFILE by default) and runs
// its -C callback as shell code: `CALLBACK INDEX 'LINE'`.
func (c *classifier) mapfile(cl *cmdCall, args []value) {
	base, _ := progName(args[0].s)
	p := getopt(spec(mapfileOpts), args[1:], true)
	if p.bad != "" {
		c.raiseCall(cl, Write, "unknown option "+p.bad+" for "+base)
	}
	for _, cb := range p.optValues("-C") {
		if !cb.known {
			c.raiseCall(cl, Destructive, base+" -C runs a callback known only at run time")
			continue
		}
		c.nested(cl.sc, cl.node, cb.s+" 0 ''", cl.depth)
	}
	names := p.operands
	if len(names) == 0 {
		names = []value{{s: "MAPFILE", known: true}}
	}
	c.storeInto(cl, base, names, "read from input by "+base)
}

// printfBuiltin: bash's printf has no conversion that writes (%n does not
// exist) and evaluates none of its arguments (%d of a[$(cmd)] is an
// invalid number), but -v stores the output in a variable, whose subscript
// bash evaluates. A first argument known only at run time may be -v.
func (c *classifier) printfBuiltin(cl *cmdCall, args []value) {
	if len(args) > 1 && mayBeOption(args[1]) {
		// "$f" may be -v, with the name after it, or -vNAME itself.
		c.raiseCall(cl, Destructive, "printf's first argument is known only at run time and may be -vNAME[...], whose subscript bash evaluates")
		return
	}
	p := getopt(spec(readTable["printf"].opts), args[1:], true)
	if vs := p.optValues("-v"); len(vs) > 0 {
		c.storeInto(cl, "printf -v", vs, "printed into it by printf -v")
	}
	c.generic(cl, "printf", true, args)
}

// unset evaluates the subscript of each name (on an indexed array); with
// -f the operands are function names, looked up as they are.
func (c *classifier) unset(cl *cmdCall, args []value) {
	p := getopt(spec(unsetOpts), args[1:], true)
	if p.has("-f") {
		return
	}
	for _, n := range p.operands {
		if !n.known || !inertNameArg(n.s) {
			c.raiseCall(cl, Destructive, "unset evaluates the subscript of the name it unsets, which can run commands")
			return
		}
	}
}

// getopts stores the option letter in NAME and the option's argument in
// OPTARG.
func (c *classifier) getopts(cl *cmdCall, args []value) {
	if len(args) < 3 {
		return
	}
	c.storeInto(cl, "getopts", args[2:3], "stored by getopts")
	c.site(cl.sc, cl.node, "OPTARG", false, "taken from the arguments by getopts")
}

// wait -p NAME stores a process id (a number) in NAME, whose subscript bash
// evaluates; the other operands are ids or job specs, looked up as they are.
func (c *classifier) wait(cl *cmdCall, args []value) {
	for _, a := range args[1:] {
		if mayBeOption(a) {
			c.raiseCall(cl, Destructive, "wait with a word known only at run time that may be -pNAME[...], whose subscript bash evaluates")
			return
		}
	}
	p := getopt(spec(waitOpts), args[1:], true)
	for _, n := range p.optValues("-p") {
		if !n.known || !inertNameArg(n.s) {
			c.raiseCall(cl, Destructive, "wait -p evaluates the subscript of the name it stores into, which can run commands")
		}
	}
}

// testBuiltin: test and [ evaluate the subscript of the operand of -v. The
// operator in each position follows from the number of arguments (test.c:
// posixtest), so a literal operator fixes the meaning of its neighbours,
// while an unquoted expansion can add any number of words, -v among them.
func (c *classifier) testBuiltin(cl *cmdCall, args []value) {
	base, trusted := progName(args[0].s)
	ops := args[1:]
	if base == "[" && len(ops) > 0 && ops[len(ops)-1].known && ops[len(ops)-1].s == "]" {
		ops = ops[:len(ops)-1]
	}
	for _, o := range ops {
		if splittable(o) {
			c.raiseCall(cl, Destructive, base+" with an unquoted expansion, which may split into -v NAME[...], a subscript bash evaluates")
			return
		}
	}
	if testEvalsName(ops) {
		c.raiseCall(cl, Destructive, base+" -v evaluates the subscript of the name it tests, which can run commands")
		return
	}
	c.generic(cl, base, trusted, args)
}

// testEvalsName reports whether test, given ops (without the closing ]),
// may apply -v to an operand that is not an inert name.
func testEvalsName(ops []value) bool {
	switch len(ops) {
	case 0, 1:
		return false
	case 2:
		return mayBe(ops[0], "-v") && !inertTestName(ops[1])
	case 3:
		if ops[1].known && (testBinops[ops[1].s] || ops[1].s == "-a" || ops[1].s == "-o") {
			return false // a binary test, or two one-argument tests
		}
		return mayBe(ops[0], "!") && testEvalsName(ops[1:])
	case 4:
		if mayBe(ops[0], "!") && testEvalsName(ops[1:]) {
			return true
		}
		if mayBe(ops[0], "(") && mayBe(ops[3], ")") && testEvalsName(ops[1:3]) {
			return true
		}
		if ops[0].known && (ops[0].s == "!" || ops[0].s == "(" && ops[3].known && ops[3].s == ")") {
			return false
		}
	}
	// Five or more arguments (or four that fit no rule above) go to the
	// expression parser, where -v may stand before any operand.
	for i := 1; i < len(ops); i++ {
		if mayBe(ops[i-1], "-v") && !inertTestName(ops[i]) {
			return true
		}
	}
	return false
}

func inertTestName(v value) bool { return v.known && inertNameArg(v.s) }

// mayBe reports whether v can be the word s when the command runs: a
// known word must equal it; a word known only at run time can be it unless
// the literal text it starts with says otherwise.
func mayBe(v value, s string) bool {
	if v.known {
		return v.s == s
	}
	if v.word == nil {
		return true
	}
	return strings.HasPrefix(s, literalPrefix(v.word))
}

// mayBeOption reports whether a word known only at run time can start
// with "-", and so be an option (with an attached value) for a builtin's
// option parser. A number ($!, $#, ${#x}) cannot name anything.
func mayBeOption(v value) bool {
	if v.known {
		return false
	}
	if v.word == nil {
		return true
	}
	if numericWord(v.word) {
		return false
	}
	prefix := literalPrefix(v.word)
	return prefix == "" || strings.HasPrefix(prefix, "-")
}

// numericWord reports whether a word is a single expansion that is always a
// number: $#, $?, $$, $!, ${#x}, or an arithmetic expansion.
func numericWord(w *syntax.Word) bool {
	if len(w.Parts) != 1 {
		return false
	}
	part := w.Parts[0]
	if dq, ok := part.(*syntax.DblQuoted); ok && len(dq.Parts) == 1 {
		part = dq.Parts[0]
	}
	switch p := part.(type) {
	case *syntax.ParamExp:
		return numericSpecial(p)
	case *syntax.ArithmExp:
		return true
	}
	return false
}

// literalPrefix returns the text a word starts with before its first
// expansion or unquoted glob character, quotes removed.
func literalPrefix(w *syntax.Word) string {
	text, _ := quotedText(w, true)
	return text
}

// quotedText returns the text of w's parts after quote removal, up to the
// first part that expands (a parameter, a command substitution, ...) and,
// when globStops, up to the first literal with an unquoted glob character.
// whole reports that it reached the word's end.
func quotedText(w *syntax.Word, globStops bool) (text string, whole bool) {
	var b strings.Builder
	for _, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			s, glob := unquoteLit(p.Value)
			if glob && globStops {
				return b.String(), false
			}
			b.WriteString(s)
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
					return b.String(), false
				}
				b.WriteString(unquoteDouble(lit.Value))
			}
		default:
			return b.String(), false
		}
	}
	return b.String(), true
}

// splittable reports whether a word known only at run time can become any
// number of words, any of them an option: an unquoted expansion (split by
// IFS), a glob, a brace expansion, "$@" or a word supplied by xargs or find.
// Numbers ($#, $?, $$, $!, $((...))) cannot become an option such as -v.
func splittable(v value) bool {
	if v.known {
		return false
	}
	if v.word == nil {
		return true
	}
	if v.why == "glob pattern" || v.why == "brace expansion" {
		return true
	}
	for _, part := range v.word.Parts {
		switch p := part.(type) {
		case *syntax.ParamExp:
			if !numericSpecial(p) {
				return true
			}
		case *syntax.CmdSubst, *syntax.ExtGlob:
			return true
		case *syntax.DblQuoted:
			for _, q := range p.Parts {
				if pe, ok := q.(*syntax.ParamExp); ok && pe.Param != nil && (pe.Param.Value == "@" || keysIndex(pe.Index) && !pe.Length) {
					return true
				}
			}
		}
	}
	return false
}

// numericSpecial reports whether a parameter expansion is $#, $?, $$ or $!,
// which always expand to a number.
func numericSpecial(p *syntax.ParamExp) bool {
	if !simpleParam(p) {
		return p.Length && p.Param != nil && !p.Excl && p.Index == nil // ${#x}
	}
	switch p.Param.Value {
	case "#", "?", "$", "!":
		return true
	}
	return false
}

// compgen is not a read command (it is write, as any unknown command), but
// two of its options run code now: -C runs a command and -W expands its
// word list, command substitutions included. -F calls a function.
func (c *classifier) compgen(cl *cmdCall, args []value) {
	c.raiseCall(cl, Write, "compgen is not on the read allowlist")
	for _, a := range args[1:] {
		if mayBeOption(a) {
			c.raiseCall(cl, Destructive, "compgen with a word known only at run time that may be -W or -C, which run code")
			return
		}
	}
	p := getopt(spec(compgenOpts), args[1:], true)
	if p.bad != "" {
		c.raiseCall(cl, Destructive, "unknown option "+p.bad+" for compgen, which may run code")
		return
	}
	for _, w := range p.optValues("-W") {
		if !w.known {
			c.raiseCall(cl, Destructive, "compgen -W expands a word list known only at run time")
			continue
		}
		c.nested(cl.sc, cl.node, ": "+w.s, cl.depth)
	}
	for _, cmd := range p.optValues("-C") {
		if !cmd.known {
			c.raiseCall(cl, Destructive, "compgen -C runs a command known only at run time")
			continue
		}
		c.nested(cl.sc, cl.node, cmd.s, cl.depth)
	}
}

// jobs lists jobs, but `jobs -x COMMAND ARGS` runs COMMAND.
func (c *classifier) jobs(cl *cmdCall, args []value) {
	for i := 1; i < len(args); i++ {
		a := args[i]
		switch {
		case !a.known:
			c.raiseCall(cl, Destructive, "jobs with an option known only at run time may be jobs -x, which runs a command")
			return
		case a.s == "--" || !strings.HasPrefix(a.s, "-"):
			return
		case strings.ContainsRune(a.s, 'x'):
			inner := *cl
			inner.depth++
			c.simple(&inner, args[i+1:])
			return
		}
	}
}

// set changes shell options. Three matter here: history (-o history) and
// histexpand (-H) together make `!!` and `!word` rebuild earlier words
// into commands after the string was classified; keyword (-k) turns
// NAME=value arguments into assignments for the command they follow.
func (c *classifier) set(cl *cmdCall, args []value) {
	for i := 1; i < len(args); i++ {
		a := args[i]
		if !a.known {
			c.raiseCall(cl, Destructive, "set with an option known only at run time may turn on history expansion")
			return
		}
		if a.s == "--" || a.s == "-" || !(strings.HasPrefix(a.s, "-") || strings.HasPrefix(a.s, "+")) {
			return // positional parameters follow
		}
		on := a.s[0] == '-'
		letters := a.s[1:]
		if strings.ContainsRune(letters, 'o') {
			if i+1 >= len(args) {
				continue
			}
			i++
			if !args[i].known {
				c.raiseCall(cl, Destructive, "set -o with an option known only at run time may turn on history expansion")
				return
			}
			c.shellOption(cl, args[i].s, on)
		}
		if on && strings.ContainsRune(letters, 'H') {
			c.shellOption(cl, "histexpand", true)
		}
		if on && strings.ContainsRune(letters, 'k') {
			c.shellOption(cl, "keyword", true)
		}
	}
}

// shopt sets shopt options, and with -o the options of set.
func (c *classifier) shopt(cl *cmdCall, args []value) {
	setOpts, on := false, false
	for _, a := range args[1:] {
		if !a.known {
			c.raiseCall(cl, Destructive, "shopt with an argument known only at run time may turn on history expansion")
			return
		}
		if strings.HasPrefix(a.s, "-") {
			setOpts = setOpts || strings.ContainsRune(a.s, 'o')
			on = on || strings.ContainsRune(a.s, 's')
			continue
		}
		if setOpts && on {
			c.shellOption(cl, a.s, true)
		}
	}
}

// shellOption notes that a set -o option is turned on.
func (c *classifier) shellOption(cl *cmdCall, name string, on bool) {
	if !on {
		return
	}
	switch name {
	case "history":
		c.histList = cl
	case "histexpand":
		c.histExpand = cl
	case "keyword":
		c.raiseCall(cl, Write, "set -k turns NAME=value arguments of later commands into assignments (PATH, LD_PRELOAD)")
	}
	if c.histList != nil && c.histExpand != nil {
		c.raiseCall(cl, Destructive, "history and histexpand together make !! and !word rebuild earlier words into commands the classifier never sees")
	}
}

// declAsCommand classifies a declaration builtin or let reached as a plain
// command (`builtin declare ...`, `command local ...`): its arguments are
// read again as the clause bash would see.
func (c *classifier) declAsCommand(cl *cmdCall, args []value) {
	base, _ := progName(args[0].s)
	for _, a := range args[1:] {
		if !a.known && a.word == nil {
			c.raiseCall(cl, Destructive, base+" with an argument known only at run time can define anything")
			return
		}
	}
	c.nested(cl.sc, cl.node, base+" "+joinSource(cl, args[1:]), cl.depth)
}
