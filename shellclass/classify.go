package shellclass

import (
	"fmt"
	"sort"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Classify returns the class of cmd, the string an agent asks the target's
// shell to run, and the parts that set it. It never panics and never errs:
// input it cannot read is destructive, with the reason.
func Classify(cmd string, opts Options) (res Result) {
	defer func() {
		// A bug here must not take the bastion down, and must never let a
		// command through as read: fail closed, with the reason.
		if r := recover(); r != nil {
			res = Result{Class: Destructive, Reasons: []Reason{{Span: cmd, Class: Destructive, Why: whyPanic}}, Unreviewable: true}
		}
	}()
	c := &classifier{opts: opts, top: cmd, read: readTable}
	c.run()
	return c.result()
}

// whyPanic is the reason given when the classifier itself failed; the fuzz
// target treats it as a bug.
const whyPanic = "classifier failed on this input; refusing to guess"

// classifier holds the state of one Classify call. It is not shared.
type classifier struct {
	opts Options
	top  string
	// read is the read allowlist: readTable, or a test's copy.
	read map[string]readEntry

	class   Class
	reasons []Reason

	// funcs holds every function name defined anywhere in the string; a call
	// of one is classified by its body, which the walk visits where it is
	// defined.
	funcs map[string]bool
	// aliases maps alias names to their literal value; "" with ok means the
	// value is dynamic.
	aliases map[string]aliasDef
	// vars maps a variable assigned exactly once in the whole string, by a
	// bare top-level assignment of a literal, to that value, for resolving
	// `X=rm; $X` and `x=5; $((x+1))`. A use counts only after the
	// assignment and only in the top-level string (a child shell does not
	// see an unexported variable). Nil when anything in the string can set
	// variables behind the walker's back.
	vars map[string]varDef
	// attrs are the integer and name reference attributes the string gives,
	// and sites the places that assign to names; checkSites compares them
	// once everything is read.
	attrs attrs
	sites []varSite
	// strAssigned holds names bound other than by arithmetic.
	strAssigned map[string]bool
	// loopVars counts the enclosing C-style for loops whose init assigns the
	// name a number, which makes it a number in the loop.
	loopVars map[string]int
	// ifsSet is set when IFS is bound anywhere in the string, nested strings
	// included: splitting a resolved `$X` by the default IFS is then
	// unsafe.
	ifsSet bool
	// inFunc counts the function bodies being walked.
	inFunc int
	// histList and histExpand are the commands that turned on the history
	// list and history expansion, if any.
	histList, histExpand *cmdCall
	// inNested is set while a nested string is classified: positions there
	// are not comparable with top-level assignments.
	inNested bool
	// collectingNested is set while prepareNested reads a nested string.
	collectingNested bool
	// cwdMoves is set when the string changes directory (cd, pushd,
	// popd): a relative path may then start anywhere, /dev included.
	cwdMoves bool
	// bind holds the names the string binds to programs (progvars.go).
	bind bindings
	// gitConfigKeys maps n to what GIT_CONFIG_KEY_n is assigned.
	gitConfigKeys map[string]value
	// bashEnvStdin is set when BASH_ENV or ENV is assigned standard input
	// or a value known only at run time: a shell started later reads its
	// standard input as startup code.
	bashEnvStdin bool
	// parsed counts the bytes parsed so far, nested strings included; past
	// parseBudget the walk stops (an eval chain re-parses its tail).
	parsed int
	// kept counts the reasons kept per class: a 64 KiB string of unknown
	// commands needs a few examples, not thirty thousand.
	kept [3]int
	// fdBindings and reopens are the redirections of the whole string, for
	// checkReopens (fds.go).
	fdBindings []fdBinding
	reopens    []fdReopen
	// single is the one simple command of a string that is nothing else, for
	// a recipe's exact read commands.
	single []string
	// unreviewable: a limit stopped the classifier (Result.Unreviewable).
	unreviewable bool
}

type varDef struct {
	value string
	end   int // offset just past the assignment statement
}

type aliasDef struct {
	value string
	known bool
}

// scope is one parsed string: the top-level command or a nested one (an
// eval or sh -c string, an alias body).
type scope struct {
	src   string
	top   bool
	outer int // offset in the top-level string of the word that carried src
	depth int
}

func (c *classifier) run() {
	c.attrs = newAttrs()
	defer c.checkReopens()
	defer c.checkSites()
	if strings.IndexByte(c.top, 0) >= 0 {
		c.raiseAt(c.top, 0, Destructive, "command contains a NUL byte")
		c.unreviewable = true
		return
	}
	if len(c.top) > c.opts.maxLength() {
		c.raiseAt("", 0, Destructive, fmt.Sprintf("command is %d bytes, longer than the limit of %d", len(c.top), c.opts.maxLength()))
		c.unreviewable = true
		return
	}
	if c.opts.Dialect == None {
		c.noShell()
		return
	}
	sc := &scope{src: c.top, top: true}
	f, ok := c.parse(sc)
	if !ok {
		return
	}
	c.prepare(f)
	c.single = singleCommand(f, c.opts.Dialect)
	c.stmts(sc, f.Stmts, 0)
}

func (c *classifier) parser() *syntax.Parser {
	lang := syntax.LangBash
	if c.opts.Dialect == POSIX {
		lang = syntax.LangPOSIX
	}
	return syntax.NewParser(syntax.Variant(lang), syntax.KeepComments(false))
}

// parseBudget bounds the bytes parsed for one command, nested strings
// included, at four times the length limit.
func (c *classifier) parseBudget() int { return 4 * c.opts.maxLength() }

// maxReasonsPerClass bounds the reasons kept for each class.
const maxReasonsPerClass = 32

func (c *classifier) parse(sc *scope) (f *syntax.File, ok bool) {
	c.parsed += len(sc.src)
	if c.parsed > c.parseBudget() {
		c.raiseAt(sc.src, sc.outer, Destructive, "nested strings re-parse more than the work limit allows")
		c.unreviewable = true
		return nil, false
	}
	defer func() {
		// The parser is third-party code fed untrusted bytes; a panic in it
		// must not take the bastion down, and must not pass as read.
		if r := recover(); r != nil {
			c.raiseAt(sc.src, sc.outer, Destructive, "could not parse: parser failed")
			f, ok = nil, false
		}
	}()
	text, stand, ok := hideCR(sc.src)
	if !ok {
		c.raiseAt(sc.src, sc.outer, Destructive, "command holds a carriage return and every other control byte; refusing to guess how bash splits it")
		return nil, false
	}
	f, err := c.parser().Parse(strings.NewReader(text), "")
	if err != nil {
		msg := err.Error()
		c.raiseAt(sc.src, sc.outer, Destructive, "could not parse ("+msg+"); bash may accept what the parser rejects")
		return nil, false
	}
	if stand != 0 {
		restoreCR(f, stand)
	}
	return f, true
}

// crStandIns are control bytes that both bash and mvdan.cc/sh keep inside a
// word as ordinary bytes.
const crStandIns = "\x01\x02\x03\x04\x05\x06\x07\x08\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f"

// hideCR prepares src for the parser. mvdan.cc/sh's lexer treats a carriage
// return as a blank between words and drops one before a newline; bash
// treats it as an ordinary byte of the word (`ls<CR>rm` is one word, one
// unknown program). So every CR is replaced by a control byte that src does
// not contain and that the parser keeps inside words, as bash keeps the CR;
// restoreCR puts the CRs back into the tree. The replacement is byte for
// byte, so offsets into src stay right. stand is 0 when src has no CR; ok is
// false when no stand-in byte is free.
func hideCR(src string) (text string, stand byte, ok bool) {
	if strings.IndexByte(src, '\r') < 0 {
		return src, 0, true
	}
	for i := 0; i < len(crStandIns); i++ {
		if b := crStandIns[i]; strings.IndexByte(src, b) < 0 {
			return strings.ReplaceAll(src, "\r", string(b)), b, true
		}
	}
	return "", 0, false
}

// restoreCR turns the stand-in byte back into CR in every literal of f.
func restoreCR(f *syntax.File, stand byte) {
	put := func(s string) string { return strings.ReplaceAll(s, string(stand), "\r") }
	syntax.Walk(f, func(n syntax.Node) bool {
		switch x := n.(type) {
		case *syntax.Lit:
			x.Value = put(x.Value)
		case *syntax.SglQuoted:
			x.Value = put(x.Value)
		case *syntax.DeclClause:
			if x.Variant != nil {
				x.Variant.Value = put(x.Variant.Value)
			}
		}
		return true
	})
}

// nested parses and classifies a string the target will run as shell code:
// eval and sh -c strings, trap and watch strings, alias bodies.
func (c *classifier) nested(parent *scope, node syntax.Node, src string, depth int) {
	off := parent.outer
	if parent.top && node != nil {
		off = int(node.Pos().Offset())
	}
	if depth+1 > c.opts.maxDepth() {
		c.raiseAt(src, off, Destructive, "nesting deeper than the limit")
		c.unreviewable = true
		return
	}
	sc := &scope{src: src, outer: off, depth: depth + 1}
	f, ok := c.parse(sc)
	if !ok {
		return
	}
	c.prepareNested(f)
	saved := c.inNested
	c.inNested = true
	c.stmts(sc, f.Stmts, depth+1)
	c.inNested = saved
}

// raise records that node, in sc, raised the class to cls.
func (c *classifier) raise(sc *scope, node syntax.Node, cls Class, why string) {
	span, off := sc.src, sc.outer
	if node != nil {
		start, end := int(node.Pos().Offset()), int(node.End().Offset())
		if start >= 0 && end <= len(sc.src) && start <= end {
			span = sc.src[start:end]
			if sc.top {
				off = start
			}
		}
	}
	c.raiseAt(span, off, cls, why)
}

// tooDeep records that node, in sc, is nested deeper than the limit: the
// string is destructive and, not read whole, unreviewable.
func (c *classifier) tooDeep(sc *scope, node syntax.Node) {
	c.raise(sc, node, Destructive, "nesting deeper than the limit")
	c.unreviewable = true
}

func (c *classifier) raiseAt(span string, off int, cls Class, why string) {
	if cls == Read {
		return
	}
	if cls > c.class {
		c.class = cls
	}
	if c.kept[cls] >= maxReasonsPerClass {
		return
	}
	c.kept[cls]++
	why = escapeControls(why)
	const maxSpan = 200
	if len(span) > maxSpan {
		span = span[:maxSpan] + "…"
	}
	c.reasons = append(c.reasons, Reason{Span: span, Offset: off, Class: cls, Why: why})
}

// escapeControls shows control bytes in a reason as \xNN: the reason names
// words that may hold them (`ls<CR>rm`), and is read on a terminal and a web
// page, where a raw CR or ESC would hide what precedes it.
func escapeControls(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) < 0 {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if ch := s[i]; ch < 0x20 || ch == 0x7f {
			fmt.Fprintf(&b, "\\x%02x", ch)
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func (c *classifier) result() Result {
	r := Result{Class: c.class, Reasons: []Reason{}, Unreviewable: c.unreviewable}
	if c.class == Write && c.opts.Hook != nil && c.single != nil && c.opts.Hook.ExactRead(c.single) {
		r.Class = Read // the recipe's exact read, and nothing else in the string
		return r
	}
	seen := map[Reason]bool{}
	for _, rs := range c.reasons {
		if rs.Class == c.class && !seen[rs] {
			seen[rs] = true
			r.Reasons = append(r.Reasons, rs)
		}
	}
	sort.SliceStable(r.Reasons, func(i, j int) bool { return r.Reasons[i].Offset < r.Reasons[j].Offset })
	return r
}

// noShell classifies a command for a target without a shell: it is write
// (the built-in rules know nothing of it) unless it is one of the recipe's
// exact read commands, compared word by word. Control characters never
// make an exact read.
func (c *classifier) noShell() {
	c.raiseAt(c.top, 0, Write, "the target has no shell: only the recipe's exact read commands are read")
	if strings.IndexFunc(c.top, func(r rune) bool { return r < 0x20 && r != ' ' || r == 0x7f }) < 0 {
		c.single = strings.Fields(c.top)
	}
}

// singleCommand returns the words of f when f is exactly one simple command
// with literal words and nothing else: no redirection, assignment, list or
// substitution.
func singleCommand(f *syntax.File, d Dialect) []string {
	if len(f.Stmts) != 1 {
		return nil
	}
	st := f.Stmts[0]
	call, ok := st.Cmd.(*syntax.CallExpr)
	if !ok || st.Negated || st.Background || len(st.Redirs) > 0 || len(call.Assigns) > 0 || len(call.Args) == 0 {
		return nil
	}
	argv := make([]string, 0, len(call.Args))
	for _, w := range call.Args {
		v := wordValue(w, d)
		if !v.known {
			return nil
		}
		argv = append(argv, v.s)
	}
	return argv
}

// stmts walks a statement list. Every statement counts, whatever joins it to
// the next (; && || & | newline): the class is the highest anywhere.
func (c *classifier) stmts(sc *scope, list []*syntax.Stmt, depth int) {
	for _, st := range list {
		c.stmt(sc, st, depth)
	}
}

func (c *classifier) stmt(sc *scope, st *syntax.Stmt, depth int) {
	if st == nil {
		return
	}
	if depth > c.opts.maxDepth() {
		c.tooDeep(sc, st)
		c.unreviewable = true
		return
	}
	for _, r := range st.Redirs {
		c.redirect(sc, r, depth)
	}
	if st.Cmd != nil {
		c.command(sc, st, depth)
	}
}

func (c *classifier) command(sc *scope, st *syntax.Stmt, depth int) {
	switch x := st.Cmd.(type) {
	case *syntax.CallExpr:
		c.call(sc, x, st.Redirs, depth)
	case *syntax.BinaryCmd:
		// A list or pipeline is a chain, not nesting: a long pipeline of
		// reads is still read.
		c.stmt(sc, x.X, depth)
		c.stmt(sc, x.Y, depth)
	case *syntax.Block:
		c.stmts(sc, x.Stmts, depth+1)
	case *syntax.Subshell:
		c.stmts(sc, x.Stmts, depth+1)
	case *syntax.IfClause:
		for ic := x; ic != nil; ic = ic.Else {
			c.stmts(sc, ic.Cond, depth+1)
			c.stmts(sc, ic.Then, depth+1)
		}
	case *syntax.WhileClause:
		c.stmts(sc, x.Cond, depth+1)
		c.stmts(sc, x.Do, depth+1)
	case *syntax.ForClause:
		switch l := x.Loop.(type) {
		case *syntax.WordIter:
			for _, w := range l.Items {
				c.word(sc, w, depth+1)
			}
			c.loopSites(sc, x, l)
		case *syntax.CStyleLoop:
			c.arith(sc, l.Init, depth+1)
			if name := c.numericInit(l.Init); name != "" {
				c.loopVars[name]++
				defer func() { c.loopVars[name]-- }()
			}
			c.arith(sc, l.Cond, depth+1)
			c.arith(sc, l.Post, depth+1)
		}
		c.stmts(sc, x.Do, depth+1)
	case *syntax.CaseClause:
		c.word(sc, x.Word, depth+1)
		for _, it := range x.Items {
			for _, p := range it.Patterns {
				c.word(sc, p, depth+1)
			}
			c.stmts(sc, it.Stmts, depth+1)
		}
	case *syntax.FuncDecl:
		// The body is classified where it is defined, whether or not it is
		// called: that covers a function that shadows a command name.
		c.inFunc++
		c.stmt(sc, x.Body, depth+1)
		c.inFunc--
	case *syntax.ArithmCmd:
		c.arith(sc, x.X, depth+1)
	case *syntax.LetClause:
		c.raise(sc, x, Write, "let is not on the read allowlist")
		for _, e := range x.Exprs {
			c.arith(sc, e, depth+1)
		}
	case *syntax.TestClause:
		c.test(sc, x.X, depth+1)
	case *syntax.DeclClause:
		c.decl(sc, x, depth)
	case *syntax.TimeClause:
		c.stmt(sc, x.Stmt, depth+1)
	case *syntax.CoprocClause:
		c.raise(sc, x, Write, "coproc starts a background process")
		c.stmt(sc, x.Stmt, depth+1)
	default:
		c.raise(sc, st, Destructive, "shell construct the classifier does not know")
	}
}

// redirect classifies one redirection (docs/classification.md, Redirections).
func (c *classifier) redirect(sc *scope, r *syntax.Redirect, depth int) {
	if r.Word != nil {
		c.word(sc, r.Word, depth+1)
	}
	if r.Hdoc != nil {
		c.word(sc, r.Hdoc, depth+1)
	}
	if c.bindFDs(sc, r) {
		return // output to /dev/stdout and the like: checkReopens decides
	}
	switch r.Op {
	case syntax.Hdoc, syntax.DashHdoc, syntax.WordHdoc:
		return
	case syntax.RdrIn, syntax.DplIn:
		// Reading changes nothing, but docs/classification.md makes any dynamic
		// redirect target destructive: it cannot be checked at all.
		if procSubstOnly(r.Word) {
			return // a pipe from a command, classified as it is
		}
		v := wordValue(r.Word, c.opts.Dialect)
		if !v.known {
			c.raise(sc, r, Destructive, "redirect from a target known only at run time ("+v.why+")")
		} else if dev, ok := opensDevice(v); ok {
			c.raise(sc, r, Destructive, "redirect opens "+dev+": "+deviceWhy)
		}
		return
	case syntax.DplOut:
		if v := wordValue(r.Word, c.opts.Dialect); v.known && (isFD(v.s) || v.s == "-") {
			return
		}
	}
	if procSubstOnly(r.Word) {
		return // a pipe to a command, classified as it is
	}
	v := wordValue(r.Word, c.opts.Dialect)
	if !v.known {
		c.raise(sc, r, Destructive, "redirect to a target known only at run time ("+v.why+"); it may be a block device")
		return
	}
	if dev, ok := opensDevice(v); ok {
		c.raise(sc, r, Destructive, "redirect opens "+dev+": "+deviceWhy)
		return
	}
	if neutralSink(v.s) {
		return
	}
	if isBlockDevice(v.s) {
		c.raise(sc, r, Destructive, "redirect writes block device "+v.s)
		return
	}
	c.raise(sc, r, Write, "redirect writes "+v.s)
}

func isFD(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// neutralSink reports an output target that writes nothing: /dev/null, and
// the controlling terminal (the agent's own, if it has one). /dev/stdout
// and the like are decided by checkReopens.
func neutralSink(p string) bool {
	switch p {
	case "/dev/null", "/dev/tty":
		return true
	}
	return false
}

// word walks the parts of w for what can run: command and process
// substitutions, arithmetic, and the words inside parameter expansions.
func (c *classifier) word(sc *scope, w *syntax.Word, depth int) {
	if w == nil {
		return
	}
	for _, p := range w.Parts {
		c.wordPart(sc, p, depth)
	}
}

func (c *classifier) wordPart(sc *scope, p syntax.WordPart, depth int) {
	if depth > c.opts.maxDepth() {
		c.tooDeep(sc, p)
		c.unreviewable = true
		return
	}
	switch x := p.(type) {
	case *syntax.DblQuoted:
		for _, q := range x.Parts {
			c.wordPart(sc, q, depth+1)
		}
	case *syntax.CmdSubst:
		c.stmts(sc, x.Stmts, depth+1)
	case *syntax.ProcSubst:
		c.stmts(sc, x.Stmts, depth+1)
	case *syntax.ArithmExp:
		c.arith(sc, x.X, depth+1)
	case *syntax.ParamExp:
		c.paramExp(sc, x, depth+1)
	}
}

func (c *classifier) paramExp(sc *scope, x *syntax.ParamExp, depth int) {
	if x.Index != nil {
		c.subscript(sc, x.Param, x.Index, depth)
	}
	if x.Slice != nil {
		c.arith(sc, x.Slice.Offset, depth)
		c.arith(sc, x.Slice.Length, depth)
	}
	if x.Repl != nil {
		c.word(sc, x.Repl.Orig, depth)
		c.word(sc, x.Repl.With, depth)
	}
	if x.Exp != nil {
		c.word(sc, x.Exp.Word, depth)
	}
	if x.NestedParam != nil {
		c.wordPart(sc, x.NestedParam, depth)
	}
	if x.Param == nil {
		return
	}
	name := x.Param.Value
	if x.Exp != nil {
		switch x.Exp.Op {
		case syntax.AssignUnset, syntax.AssignUnsetOrNull:
			v := value{known: true}
			if x.Exp.Word != nil {
				v = wordValue(x.Exp.Word, c.opts.Dialect)
			}
			c.site(sc, x, name, inertValue(v), "by ${"+name+":=...}")
			c.assignedValueClass(&cmdCall{sc: sc, node: x, depth: depth}, name, v)
		case syntax.OtherParamOps:
			// ${x@P} expands the value as a prompt string: its command
			// substitutions run. The other transformations (@Q @E @A @K @k
			// @a @U @u @L) only quote, decode or change case.
			if x.Exp.Word != nil && x.Exp.Word.Lit() == "P" && !c.inertPromptValue(x) {
				c.raise(sc, x, Destructive, "${"+name+"@P} expands the value as a prompt string, which runs the command substitutions in it")
			}
		}
	}
	if x.Excl && x.Names == 0 && !keysIndex(x.Index) && !c.inertIndirect(x) {
		// ${!name} is an indirect reference: the name it holds may carry
		// an array subscript, which bash evaluates (${!a[@]}, the keys, and
		// ${!prefix*}, the names, refer to nothing).
		c.raise(sc, x, Destructive, "indirect expansion ${!"+name+"} evaluates the subscript of the name the variable holds, which can run commands")
	}
}

// subscript walks the subscript of name: arithmetic for an indexed array,
// a key (a word whose substitutions run, nothing evaluated) for a variable
// that is surely associative there (assocAt).
func (c *classifier) subscript(sc *scope, name *syntax.Lit, idx syntax.ArithmExpr, depth int) {
	if w, ok := idx.(*syntax.Word); ok && name != nil && c.assocAt(name.Value, idx) {
		c.word(sc, w, depth)
		return
	}
	c.arith(sc, idx, depth)
}

// assocAt reports whether name is surely an associative array at node: a
// top-level statement before it declared it -A, and that declaration
// cannot have failed: the name is not one of bash's own arrays, nothing
// that runs before it (or in a nested string) can make it an indexed
// array, and it is not readonly anywhere (bash refuses declare -A then,
// and a subscript of the indexed array is arithmetic). Nothing in the
// string can unset it, and node is in the top-level string outside any
// function (where local could make a new, indexed, variable of the same
// name).
func (c *classifier) assocAt(name string, node syntax.Node) bool {
	if (name == "BASH_CMDS" || name == "BASH_ALIASES") && !c.attrs.unset[name] && !c.attrs.unsetAny && c.inFunc == 0 {
		return true // bash's own associative arrays
	}
	d, ok := c.attrs.assocInit[name]
	if !ok || c.inNested || c.inFunc > 0 || int(node.Pos().Offset()) < d.end || c.attrs.unset[name] || c.attrs.unsetAny {
		return false
	}
	if bashArrays[name] || c.attrs.unInteger[name] || c.attrs.nameref[name] {
		return false
	}
	for _, off := range c.attrs.indexed[name] {
		if off < d.start {
			return false
		}
	}
	return true
}

// keysIndex reports whether an index is [@] or [*].
func keysIndex(e syntax.ArithmExpr) bool {
	w, ok := e.(*syntax.Word)
	if !ok {
		return false
	}
	s := w.Lit()
	return s == "@" || s == "*"
}

// knownParam returns the literal value of a plain `$x` or `${x...}` whose
// variable was assigned a literal before it, at the top level.
func (c *classifier) knownParam(x *syntax.ParamExp) (string, bool) {
	if x.Param == nil || x.Index != nil || x.NestedParam != nil {
		return "", false
	}
	return c.lookupVar(x.Param.Value, x)
}

// inertPromptValue reports whether ${x@P} expands a known value in which
// prompt expansion runs nothing (promptSafe).
func (c *classifier) inertPromptValue(x *syntax.ParamExp) bool {
	v, ok := c.knownParam(x)
	return ok && !x.Excl && promptSafe(v)
}

// inertIndirect reports whether ${!x} refers through a known value that is
// a name bash can look up without evaluating anything.
func (c *classifier) inertIndirect(x *syntax.ParamExp) bool {
	v, ok := c.knownParam(x)
	return ok && inertName(v)
}

// arith walks an arithmetic context. Bash evaluates a variable's value there
// as arithmetic again, and `a[$(cmd)]` in that value runs cmd: any variable
// that is not known to hold a number makes the command destructive.
func (c *classifier) arith(sc *scope, e syntax.ArithmExpr, depth int) {
	if e == nil {
		return
	}
	if depth > c.opts.maxDepth() {
		c.tooDeep(sc, e)
		c.unreviewable = true
		return
	}
	switch x := e.(type) {
	case *syntax.BinaryArithm:
		// A plain `name = expr` does not evaluate name's old value; every
		// compound assignment does.
		if w, ok := x.X.(*syntax.Word); !(ok && x.Op == syntax.Assgn && isName(w.Lit())) {
			c.arith(sc, x.X, depth+1)
		}
		c.arith(sc, x.Y, depth+1)
	case *syntax.UnaryArithm:
		c.arith(sc, x.X, depth+1)
	case *syntax.ParenArithm:
		c.arith(sc, x.X, depth+1)
	case *syntax.FlagsArithm:
		c.arith(sc, x.X, depth+1)
	case *syntax.Word:
		c.word(sc, x, depth+1)
		if !c.numericArith(x) {
			c.raise(sc, x, Destructive, "variable in an arithmetic context: its value is evaluated and can run commands")
		}
	}
}

// numericArith reports whether a word in an arithmetic context is a number,
// a special parameter that is always a number, or a variable assigned a
// literal number in this string.
func (c *classifier) numericArith(w *syntax.Word) bool {
	if len(w.Parts) != 1 {
		return false
	}
	switch p := w.Parts[0].(type) {
	case *syntax.Lit:
		return isNumberLit(p.Value) || p.Value == "@" || p.Value == "*" || c.numericVar(p.Value, w)
	case *syntax.ParamExp:
		if p.Length && !p.Excl && p.Exp == nil && p.Repl == nil && p.Slice == nil {
			return true // ${#x}, ${#a[@]}: a length is a number (the index is walked)
		}
		if p.Param == nil || !simpleParam(p) {
			return false
		}
		switch p.Param.Value {
		case "#", "?", "$", "!", "RANDOM", "SECONDS", "LINENO", "BASHPID", "PPID", "UID", "EUID":
			return true
		}
		return c.numericVar(p.Param.Value, w)
	}
	return false
}

// numericVar reports whether name, used at node, surely holds a number.
func (c *classifier) numericVar(name string, at syntax.Node) bool {
	if c.loopVars[name] > 0 && !c.strAssigned[name] {
		return true
	}
	if end, ok := c.attrs.intInit[name]; ok && at != nil && !c.inNested && int(at.Pos().Offset()) >= end && !c.attrs.unInteger[name] {
		return true
	}
	v, ok := c.lookupVar(name, at)
	return ok && isNumberLit(v)
}

// lookupVar returns the literal value of name at node, if known there.
func (c *classifier) lookupVar(name string, at syntax.Node) (string, bool) {
	d, ok := c.vars[name]
	if !ok || at == nil || c.inNested || int(at.Pos().Offset()) < d.end {
		return "", false
	}
	return d.value, true
}

// numericInit returns the name a C-style for loop's init assigns a literal
// number, or "".
func (c *classifier) numericInit(e syntax.ArithmExpr) string {
	b, ok := e.(*syntax.BinaryArithm)
	if !ok || b.Op != syntax.Assgn {
		return ""
	}
	lhs, ok1 := b.X.(*syntax.Word)
	rhs, ok2 := b.Y.(*syntax.Word)
	if !ok1 || !ok2 || !isName(lhs.Lit()) || !isNumberLit(rhs.Lit()) {
		return ""
	}
	return lhs.Lit()
}

func isName(s string) bool { return s != "" && isAssignment(s+"=") }

// isNumberLit accepts bash integer constants: decimal, 0x hex, octal and
// base#digits.
func isNumberLit(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if !(ch >= '0' && ch <= '9' || ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch == '#' || ch == '_' || ch == '@') {
			return false
		}
	}
	return s[0] >= '0' && s[0] <= '9'
}

func simpleParam(p *syntax.ParamExp) bool {
	return p.Param != nil && !p.Excl && !p.Length && p.Index == nil && p.Slice == nil &&
		p.Repl == nil && p.Exp == nil && p.Names == 0 && p.NestedParam == nil
}

// test walks a [[ ]] expression. The numeric comparisons evaluate both sides
// as arithmetic.
func (c *classifier) test(sc *scope, e syntax.TestExpr, depth int) {
	if e == nil {
		return
	}
	if depth > c.opts.maxDepth() {
		c.tooDeep(sc, e)
		c.unreviewable = true
		return
	}
	switch x := e.(type) {
	case *syntax.BinaryTest:
		switch x.Op {
		case syntax.TsEql, syntax.TsNeq, syntax.TsLeq, syntax.TsGeq, syntax.TsLss, syntax.TsGtr:
			for _, side := range []syntax.TestExpr{x.X, x.Y} {
				if w, ok := side.(*syntax.Word); ok {
					c.word(sc, w, depth+1)
					if !c.numericArith(w) {
						c.raise(sc, w, Destructive, "[[ numeric comparison evaluates its operand as arithmetic, which can run commands")
					}
					continue
				}
				c.test(sc, side, depth+1)
			}
			return
		}
		c.test(sc, x.X, depth+1)
		c.test(sc, x.Y, depth+1)
	case *syntax.UnaryTest:
		if x.Op == syntax.TsVarSet {
			// [[ -v NAME ]] evaluates the subscript of NAME; after
			// expansion, NAME may be anything.
			if w, ok := x.X.(*syntax.Word); !ok || !inertName(literalText(w)) {
				c.raise(sc, x, Destructive, "[[ -v ]] evaluates the subscript of the name it tests, which can run commands")
			}
		}
		c.test(sc, x.X, depth+1)
	case *syntax.ParenTest:
		c.test(sc, x.X, depth+1)
	case *syntax.Word:
		c.word(sc, x, depth+1)
	}
}

// decl handles declare, local, export, readonly and typeset: what each
// argument assigns, and the names bash evaluates in them.
func (c *classifier) decl(sc *scope, d *syntax.DeclClause, depth int) {
	variant := d.Variant.Value
	args := declArgs(d, c.opts.Dialect)
	flags := declFlags(args)
	ctx := assignCtx{
		what:      "given to " + variant,
		assoc:     strings.ContainsRune(flags, 'A'),
		refTarget: strings.ContainsRune(flags, 'n'),
		array:     strings.ContainsAny(flags, "aA"),
	}
	for _, a := range args {
		cl := &cmdCall{sc: sc, node: a.node, depth: depth}
		switch {
		case a.dynamic:
			c.raiseCall(cl, Destructive, variant+" with an argument known only at run time can define anything, and bash evaluates a subscript in a name")
			c.word(sc, a.assign.Value, depth+1)
			continue
		case a.flags != "":
			if strings.HasPrefix(a.flags, "-") && strings.ContainsAny(a.flags, "fn") {
				c.raiseCall(cl, Write, variant+" "+a.flags+" changes functions or name references")
			}
			continue
		case a.quoted:
			if !inertName(strings.TrimSuffix(a.name, "+")) {
				c.raiseCall(cl, Destructive, variant+" evaluates the subscript of the name "+a.name+", which can run commands")
			}
			if a.hasValue {
				c.assignValue(cl, baseName(a.name), a.value, ctx)
			}
		default:
			c.assignCtx(sc, a.assign, depth, ctx)
		}
		name := baseName(a.name)
		if strings.ContainsAny(flags, "in") && bashAssignedVars[name] {
			c.raiseCall(cl, Destructive, variant+" -"+flags+" on "+name+", which bash assigns by itself from data the command chooses: that data becomes code")
		}
		if ctx.refTarget && a.hasValue && a.array == nil && !(a.value.known && (inertName(a.value.s) || a.value.s == "")) {
			c.raiseCall(cl, Destructive, variant+" -n "+name+" refers to a name bash evaluates when it is used (a subscript in it runs commands)")
		}
	}
}

// assignCtx says how an assignment is read.
type assignCtx struct {
	// what says where the value is assigned, for reasons.
	what string
	// assoc is set when the array is associative (declare -A in the same
	// clause): its subscripts are keys, expanded once, not arithmetic.
	assoc bool
	// refTarget is set for declare -n: the value is the name referred to,
	// checked by decl, not a value stored through the reference.
	refTarget bool
	// array is set when the clause gives the array attribute (-a, -A): a
	// value in parentheses is parsed again as a compound assignment.
	array bool
	// readIFS is set for IFS assigned for one read, mapfile or readarray
	// command, where it changes nothing else.
	readIFS bool
}

// assignCtx classifies one assignment (docs/classification.md,
// Assignments).
func (c *classifier) assignCtx(sc *scope, a *syntax.Assign, depth int, ctx assignCtx) {
	if a.Index != nil {
		c.subscript(sc, a.Name, a.Index, depth+1)
	}
	if a.Value != nil {
		c.word(sc, a.Value, depth+1)
	}
	if a.Array != nil {
		for _, el := range a.Array.Elems {
			if w, ok := el.Index.(*syntax.Word); ok && ctx.assoc {
				c.word(sc, w, depth+1) // a key: its substitutions run, nothing is evaluated
			} else if el.Index != nil {
				c.subscript(sc, a.Name, el.Index, depth+1)
			}
			c.word(sc, el.Value, depth+1)
		}
	}
	if a.Name == nil || a.Naked {
		return
	}
	name := a.Name.Value
	cl := &cmdCall{sc: sc, node: a, depth: depth}
	if a.Array != nil {
		for _, el := range a.Array.Elems {
			v := value{known: true}
			if el.Value != nil {
				v = wordValue(el.Value, c.opts.Dialect)
			}
			c.assignValue(cl, name, v, assignCtx{what: "in its array assignment", refTarget: ctx.refTarget})
		}
		return
	}
	v := value{known: true}
	if a.Value != nil {
		v = wordValue(a.Value, c.opts.Dialect)
	}
	c.assignValue(cl, name, v, ctx)
}

// assignValue classifies storing v in the variable name: the site for the
// integer and name reference attributes, a value that a declaration with
// the array attribute parses again, and the special variables.
func (c *classifier) assignValue(cl *cmdCall, name string, v value, ctx assignCtx) {
	if !ctx.refTarget {
		c.site(cl.sc, cl.node, name, inertValue(v), ctx.what)
	}
	if reparsedCompound(v) {
		if ctx.array {
			c.raiseCall(cl, Destructive, "a declaration with the array attribute parses a value in parentheses again as a compound array assignment, which expands what it holds")
		} else {
			c.compoundSite(cl, name)
		}
	}
	c.assignedValueClass(cl, name, v)
	if why, ok := specialVarWhy(name); ok && !ctx.readIFS {
		c.raiseCall(cl, Write, why)
	}
}

// reparsedCompound reports whether a value given to a declaration builtin
// may be "(...)" holding something bash expands when it parses it again as
// a compound array assignment: a $, backquote, subscript, process
// substitution or escape; or is known only at run time and may start with
// "(".
func reparsedCompound(v value) bool {
	if !v.known {
		return v.word == nil || mayBe(v, "(")
	}
	return strings.HasPrefix(v.s, "(") && strings.ContainsAny(v.s, "$`[<>\\")
}

// loopSites records what a for or select loop assigns to its variable: each
// word of the list, and for select the input line it stores in REPLY.
func (c *classifier) loopSites(sc *scope, x *syntax.ForClause, l *syntax.WordIter) {
	if l.Name == nil {
		return
	}
	if len(l.Items) == 0 && !l.InPos.IsValid() {
		c.site(sc, x, l.Name.Value, false, "from the positional parameters")
	}
	for _, w := range l.Items {
		c.site(sc, w, l.Name.Value, inertValue(wordValue(w, c.opts.Dialect)), "by the loop")
	}
	if x.Select {
		c.site(sc, x, "REPLY", false, "read from input by select")
	}
	if why, ok := specialVarWhy(l.Name.Value); ok {
		c.raise(sc, x, Write, why)
	}
	cl := &cmdCall{sc: sc, node: x}
	for _, w := range l.Items {
		c.assignedValueClass(cl, l.Name.Value, wordValue(w, c.opts.Dialect))
	}
}

// specialVarWhy reports whether assigning name changes what or how later
// commands run.
func specialVarWhy(name string) (string, bool) {
	if strings.HasPrefix(name, "LD_") || strings.HasPrefix(name, "GIT_") || strings.HasPrefix(name, "BASH_FUNC_") {
		return "assignment to " + name + " changes how programs run", true
	}
	if specialVars[name] {
		return "assignment to " + name + " changes which program or code runs", true
	}
	return "", false
}
