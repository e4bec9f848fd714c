package shellclass

import (
	"path"
	"strconv"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// cmdCall is one simple command being classified, possibly the inner command
// of a wrapper (sudo, env, xargs ...), which shares the outer node's span.
type cmdCall struct {
	sc   *scope
	node syntax.Node
	// stdin is the literal text a here-document or here-string feeds the
	// command; stdinKnown is false when there is none or it expands.
	stdin      string
	stdinKnown bool
	depth      int
}

func (c *classifier) raiseCall(cl *cmdCall, cls Class, why string) {
	c.raise(cl.sc, cl.node, cls, why)
}

// call classifies a simple command: its assignments, its words'
// substitutions, then the command itself.
func (c *classifier) call(sc *scope, x *syntax.CallExpr, redirs []*syntax.Redirect, depth int) {
	splitsOnly := len(x.Args) > 0 && splitsInput(wordValue(x.Args[0], c.opts.Dialect))
	for _, a := range x.Assigns {
		// `IFS= read -r line`: IFS set for read alone only says how the
		// input line is split.
		c.assignCtx(sc, a, depth, assignCtx{what: "assigned to it", readIFS: splitsOnly && a.Name != nil && a.Name.Value == "IFS"})
	}
	if len(x.Args) == 0 {
		return
	}
	for _, w := range x.Args {
		c.word(sc, w, depth+1)
	}
	args := make([]value, len(x.Args))
	for i, w := range x.Args {
		args[i] = wordValue(w, c.opts.Dialect)
	}
	cl := &cmdCall{sc: sc, node: x, depth: depth}
	c.stdinOf(cl, redirs)
	if !args[0].known {
		resolved, name, ok := c.resolveName(args[0])
		if !ok {
			c.raise(sc, x.Args[0], Destructive, "dynamic command name ("+args[0].why+"): it cannot be proved not to be rm")
			return
		}
		c.raise(sc, x.Args[0], Write, "variable "+name+" is assigned and then run as a command")
		args = append(resolved, args[1:]...)
	}
	c.simple(cl, args)
}

// stdinOf records what a here-document or here-string feeds the command, so
// that `bash <<'EOF'` is classified by the script it reads.
func (c *classifier) stdinOf(cl *cmdCall, redirs []*syntax.Redirect) {
	for _, r := range redirs {
		if r.N != nil && r.N.Value != "0" {
			continue
		}
		switch r.Op {
		case syntax.Hdoc, syntax.DashHdoc:
			if r.Hdoc == nil {
				cl.stdin, cl.stdinKnown = "", true
				continue
			}
			v := wordValue(r.Hdoc, c.opts.Dialect)
			// A here-document body is not subject to globbing or brace
			// expansion; only its expansions make it dynamic.
			cl.stdin, cl.stdinKnown = v.s, !hasExpansion(r.Hdoc)
		case syntax.WordHdoc:
			v := wordValue(r.Word, c.opts.Dialect)
			cl.stdin, cl.stdinKnown = v.s+"\n", !hasExpansion(r.Word)
		case syntax.RdrIn, syntax.RdrInOut, syntax.DplIn:
			cl.stdin, cl.stdinKnown = "", false
		}
	}
}

func hasExpansion(w *syntax.Word) bool {
	for _, p := range w.Parts {
		switch x := p.(type) {
		case *syntax.Lit, *syntax.SglQuoted:
		case *syntax.DblQuoted:
			for _, q := range x.Parts {
				if _, ok := q.(*syntax.Lit); !ok {
					return true
				}
			}
		default:
			return true
		}
	}
	return false
}

// resolveName resolves a command name that is one variable assigned a single
// literal value elsewhere in the string (`X=rm; $X -rf /`). Unquoted, the
// value is split into words the way bash would with the default IFS.
func (c *classifier) resolveName(v value) ([]value, string, bool) {
	if c.vars == nil || v.word == nil || len(v.word.Parts) != 1 {
		return nil, "", false
	}
	part := v.word.Parts[0]
	quoted := false
	if dq, ok := part.(*syntax.DblQuoted); ok && len(dq.Parts) == 1 {
		part, quoted = dq.Parts[0], true
	}
	pe, ok := part.(*syntax.ParamExp)
	if !ok || !simpleParam(pe) {
		return nil, "", false
	}
	val, ok := c.lookupVar(pe.Param.Value, v.word)
	if !ok {
		return nil, "", false
	}
	if quoted {
		return []value{{s: val, known: true}}, pe.Param.Value, true
	}
	// Unquoted, the value is split into fields by IFS: the default one, or
	// the literal value IFS was assigned once, before this word, at the top
	// level. Any other binding of IFS leaves the split unknown.
	ifs := defaultIFS
	if c.ifsSet {
		if ifs, ok = c.lookupVar("IFS", v.word); !ok {
			return nil, "", false
		}
	}
	fields, ok := ifsSplit(val, ifs)
	if !ok || len(fields) == 0 || strings.ContainsAny(val, "*?[") {
		return nil, "", false
	}
	out := make([]value, len(fields))
	for i, f := range fields {
		out[i] = value{s: f, known: true}
	}
	return out, pe.Param.Value, true
}

// progName returns the name a command word is matched by, and whether it
// may count as an allowlisted read: a bare name, or a path in a system
// directory. Any path counts by its base name for destructive matching.
func progName(word string) (base string, trusted bool) {
	if !strings.Contains(word, "/") {
		return word, true
	}
	clean := path.Clean(word)
	base = path.Base(clean)
	return base, strings.HasPrefix(word, "/") && systemDirs[path.Dir(clean)]
}

// simple classifies argv, a simple command whose name is known. Wrappers
// come back here with their inner command.
func (c *classifier) simple(cl *cmdCall, args []value) {
	if len(args) == 0 {
		return
	}
	if cl.depth > c.opts.maxDepth() {
		c.tooDeep(cl.sc, cl.node)
		return
	}
	name := args[0]
	if !name.known {
		c.raiseCall(cl, Destructive, "dynamic command name ("+name.why+"): it cannot be proved not to be rm")
		return
	}
	base, trusted := progName(name.s)
	if base == "" || base == "." && name.s != "." {
		c.raiseCall(cl, Write, "empty or odd command name")
		return
	}
	if !strings.Contains(name.s, "/") {
		// A function or alias may be defined after this call in the text and
		// still not apply to it, so a name that shadows a command is also
		// classified as that command. A function's body is classified where
		// it is defined.
		if c.funcs[base] && !knownCommand(base) {
			return
		}
		if a, ok := c.aliases[base]; ok {
			c.expandAlias(cl, a, base, args)
			if !knownCommand(base) {
				return
			}
		}
		if c.boundCall(cl, base, args) && !knownCommand(base) {
			return
		}
	}
	if !trusted {
		c.raiseCall(cl, Write, "program "+name.s+" is outside the system directories and may be anything")
	}
	if c.opts.Hook != nil && allKnown(args) {
		if why, ok := c.opts.Hook.Raise(strs(args)); ok {
			c.raiseCall(cl, Write, why)
		}
	}
	if h, ok := handlerFor(base); ok {
		h(c, cl, args)
		return
	}
	if strings.HasPrefix(base, "mkfs") {
		c.raiseCall(cl, Destructive, base+" creates a file system, destroying what was there")
		return
	}
	c.generic(cl, base, trusted, args)
}

// generic classifies a command with no handler of its own: the destructive
// table, then the read allowlist; anything else is write.
func (c *classifier) generic(cl *cmdCall, base string, trusted bool, args []value) {
	if why, ok := destructiveMatch(base, args[1:]); ok {
		c.raiseCall(cl, Destructive, why)
		return
	}
	e, ok := c.read[base]
	if !ok {
		c.raiseCall(cl, Write, base+" is not on the read allowlist")
		c.blockDeviceArgs(cl, base, args[1:])
		return
	}
	if !trusted {
		return // already write: a look-alike of a read command
	}
	c.readEntry(cl, base, e, args[1:])
}

// readEntry checks args against one read allowlist entry.
func (c *classifier) readEntry(cl *cmdCall, base string, e readEntry, args []value) {
	opens := !namesOnly[base] && (base != "file" || hasShortOpt(args, 's'))
	if opens && c.devices(cl, base, args) {
		return
	}
	p := getopt(specOf(e.family, e.opts), args, e.posix)
	c.optionPrograms(cl, base, &p)
	if opens && c.recursiveDevices(cl, base, &p) {
		return
	}
	cls, why := checkRead(base, e, &p, c.opts.Terminal)
	c.raiseCall(cl, cls, why)
}

// recursiveDevices raises a read entry that walks a tree and opens the
// device files it meets there: grep -r with -D read (GNU grep skips
// devices found by -r otherwise; diff -r reports device files without
// opening them, checked with diffutils 3.8). It does so when a tree it walks
// may hold devices (mayHoldDevices), or for grep -r without a path, the
// working directory may be /dev. A tree that holds /proc/kmsg is raised
// whatever -D says: /proc/kmsg is a regular file, which grep -r, rg and
// diff -r open and read like any other (a reader takes the kernel's
// messages from the logger, and blocks).
func (c *classifier) recursiveDevices(cl *cmdCall, base string, p *parsed) bool {
	var trees []value
	readsDevices := false
	switch base {
	case "grep", "egrep", "fgrep", "rg":
		if base != "rg" && !p.has("-r", "-R", "--recursive", "--dereference-recursive") || base == "rg" && p.has("--files", "--type-list") {
			return false // rg --files lists names without opening them
		}
		for _, v := range p.values("-D", "--devices") {
			readsDevices = readsDevices || v == "read" || strings.HasPrefix("read", v) && v != ""
		}
		trees = p.operands
		if !p.has("-e", "--regexp", "-f", "--file") && len(trees) > 0 {
			trees = trees[1:] // the pattern
		}
		if len(trees) == 0 {
			trees = []value{{s: ".", known: true}}
		}
	case "diff":
		if !p.has("-r", "--recursive") {
			return false
		}
		trees = p.operands
	default:
		return false
	}
	for _, t := range trees {
		if readsDevices && c.mayHoldDevices(t) {
			c.raiseCall(cl, Destructive, base+" walks "+t.s+", which may hold device files, and opens them: "+deviceWhy)
			return true
		}
		if c.mayHoldKmsg(t) {
			c.raiseCall(cl, Destructive, base+" walks "+t.s+", which may hold /proc/kmsg, a regular file it opens and reads: "+deviceWhy)
			return true
		}
	}
	return false
}

// optionPrograms classifies the value of every option that names a program
// or shell code the tool runs (sort --compress-program, rg --pre) as that
// command: a program known only at run time may be rm.
func (c *classifier) optionPrograms(cl *cmdCall, base string, p *parsed) {
	for _, o := range p.opts {
		if !o.prog || !o.hasVal {
			continue
		}
		c.raiseCall(cl, Write, base+" "+o.name+" runs a program")
		if o.dynamic {
			c.raiseCall(cl, Destructive, base+" "+o.name+" runs a program known only at run time")
			continue
		}
		c.nested(cl.sc, cl.node, o.val, cl.depth)
	}
}

// hasShortOpt reports whether a literal argument is a bundle of short
// options holding letter.
func hasShortOpt(args []value, letter byte) bool {
	for _, a := range args {
		if a.known && len(a.s) > 1 && a.s[0] == '-' && a.s[1] != '-' && strings.IndexByte(a.s, letter) > 0 {
			return true
		}
	}
	return false
}

// checkRead decides the class of a read entry's parsed arguments: the
// highest class any argument known only at run time can reach, an unknown
// option, an option that is not read, too many operands, a missing
// required option, a pager on a terminal, and the entry's own check.
func checkRead(base string, e readEntry, p *parsed, terminal bool) (Class, string) {
	if e.lenient {
		// echo, test and friends print or test what they do not know.
		p.bad = ""
	}
	if p.dynamic != "" {
		if top := max(e.ceiling, specOf(e.family, e.opts).ceiling); top > Read {
			return top, base + " with an argument known only at run time (" + p.dynamic + ") can reach " + top.String()
		}
	}
	if o, ok := p.worst(); ok {
		switch {
		case o.prog:
			return Write, base + " " + o.name + " runs a program"
		case o.forever:
			return Write, base + " " + o.word + " runs until interrupted"
		case o.cls == Destructive:
			return Destructive, base + " " + o.word + " destroys data or ends running work"
		case o.left:
			return Write, base + " " + o.word + " is left off the read allowlist (it reads what the classifier cannot check)"
		}
		return o.cls, base + " " + o.word + " is not a read option (" + o.name + " writes or changes the system)"
	}
	if p.bad != "" {
		return Write, "unknown option " + p.bad + " for " + base
	}
	if e.maxOps != anyOps && len(p.operands) > e.maxOps {
		return Write, base + " with more than " + strconv.Itoa(e.maxOps) + " operands may write a file"
	}
	if len(e.require) > 0 && !p.has(e.require...) {
		return Write, base + " without " + strings.Join(e.require, " or ") + " may run unbounded"
	}
	if terminal && len(e.pager) > 0 && !p.has(e.pager...) {
		return Write, base + " without " + strings.Join(e.pager, " or ") + " starts a pager on a terminal, and a pager runs commands"
	}
	if e.check != nil {
		if cls, why := e.check(p, terminal); cls > Read {
			return cls, why
		}
	}
	return Read, ""
}

// expandAlias classifies a command whose name is an alias defined earlier in
// the string as if bash expanded it.
func (c *classifier) expandAlias(cl *cmdCall, a aliasDef, name string, args []value) {
	if !a.known {
		c.raiseCall(cl, Destructive, "alias "+name+" has a value known only at run time")
		return
	}
	var b strings.Builder
	b.WriteString(a.value)
	for _, w := range args[1:] {
		b.WriteByte(' ')
		if w.word != nil {
			b.WriteString(cl.sc.src[w.word.Pos().Offset():w.word.End().Offset()])
		} else {
			b.WriteString(syntaxQuote(w.s))
		}
	}
	c.nested(cl.sc, cl.node, b.String(), cl.depth)
}

// knownCommand reports whether the tables know name as a command.
func knownCommand(name string) bool {
	if _, ok := readTable[name]; ok {
		return true
	}
	if _, ok := destructiveTable[name]; ok {
		return true
	}
	_, ok := handlerFor(name)
	return ok || strings.HasPrefix(name, "mkfs")
}

func allKnown(args []value) bool {
	for _, a := range args {
		if !a.known {
			return false
		}
	}
	return true
}

func strs(args []value) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = a.s
	}
	return out
}

// syntaxQuote quotes s for re-parsing as one shell word.
func syntaxQuote(s string) string {
	q, err := syntax.Quote(s, syntax.LangBash)
	if err != nil {
		return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
	}
	return q
}

// splitsInput reports whether a command name is a builtin for which IFS
// only says how input is split into fields.
func splitsInput(v value) bool {
	return v.known && (v.s == "read" || v.s == "mapfile" || v.s == "readarray")
}
