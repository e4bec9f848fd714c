package shellclass

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Bash evaluates text as code in places where a reader sees data: a
// variable name with a subscript (`a[$(cmd)]`) is evaluated wherever a
// builtin takes a name; a value assigned to a variable with the integer
// attribute is evaluated as arithmetic, subscripts included; a name
// reference evaluates the subscript of the name it holds; prompt strings
// run their command substitutions. This file holds what the classifier
// tracks for those: the attributes names get anywhere in the string, and
// the places that assign to a name (sites), which are checked against
// those attributes once the whole string, nested strings included, has
// been read. docs/classification.md lists every place checked against bash.

// varSite is one place that assigns a value to a variable: an assignment,
// a loop variable, or a builtin that stores input or output in a name.
type varSite struct {
	sc   *scope
	node syntax.Node
	name string
	// inert is set when the value is a number (or empty): a value no
	// attribute can turn into code.
	inert bool
	// what says where the value comes from, for the reason.
	what string
	// compound is set for a declaration's value that bash parses again as
	// a compound assignment if name is an array.
	compound bool
}

// attrs are the attributes the string gives to names, wherever it gives
// them; order does not matter (a loop can run a later declare first).
type attrs struct {
	integer map[string]bool // declare -i and the like
	nameref map[string]bool // declare -n
	array   map[string]bool // declare -a/-A, NAME=(...), NAME[i]=v, read -a, mapfile
	// unInteger holds names whose integer attribute is removed (+i), or
	// that are made readonly, somewhere: they may hold any string.
	unInteger map[string]bool
	// intInit maps a name declared with the integer attribute and a number,
	// in a statement of the top-level string, to the offset after that
	// statement: from there on the variable holds a number, because every
	// later assignment to it is a site that checkSites requires to be one.
	intInit map[string]int
	// assocInit maps a name a top-level statement declares -A to the
	// offsets of the first such statement (assocAt).
	assocInit map[string]span
	// indexed holds, per name, where the string may make it an indexed
	// array (NAME=(...), NAME[i]=v, declare -a, read -a, mapfile): the
	// offset in the top-level string, or -1 inside a nested string. Bash
	// refuses to turn an indexed array into an associative one, so a
	// declare -A after such a place may fail.
	indexed map[string][]int
	// unset holds the names an unset in the string may remove; unsetAny
	// is set when an unset names something known only at run time.
	unset    map[string]bool
	unsetAny bool
}

func newAttrs() attrs {
	a := attrs{integer: map[string]bool{}, nameref: map[string]bool{}, array: map[string]bool{},
		unInteger: map[string]bool{}, intInit: map[string]int{}, assocInit: map[string]span{}, unset: map[string]bool{},
		indexed: map[string][]int{}}
	for _, n := range bashIntegerVars {
		a.integer[n] = true
	}
	return a
}

// span is a statement's start and end offsets in the top-level string.
type span struct{ start, end int }

// baseName returns the variable a name argument refers to: `a[1]` is a,
// `x+` (from `x+=v`) is x.
func baseName(s string) string {
	if i := strings.IndexByte(s, '['); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSuffix(s, "+")
}

// inertName reports whether bash can take s as a variable name without
// evaluating anything: an identifier, or an identifier with a subscript of
// decimal digits, @ or *. Any other subscript is evaluated (as arithmetic
// for an indexed array, by expansion for an associative one) and
// `a[$(cmd)]` runs cmd; a subscript that is a name evaluates that
// variable's value.
func inertName(s string) bool {
	name, sub, hasSub := strings.Cut(s, "[")
	if !isName(name) {
		return false
	}
	if !hasSub {
		return true
	}
	sub, ok := strings.CutSuffix(sub, "]")
	return ok && (sub != "" && isFD(sub) || sub == "@" || sub == "*")
}

// inertValue reports whether a value is one that neither the integer
// attribute nor a name reference can turn into code: empty, or a number
// with an optional sign.
func inertValue(v value) bool {
	if !v.known {
		return false
	}
	s := strings.TrimLeft(v.s, "+-")
	return v.s == "" || isNumberLit(s)
}

// site records that node assigns the variable name (a name argument, with
// any subscript) a value; inert says the value is a number.
func (c *classifier) site(sc *scope, node syntax.Node, name string, inert bool, what string) {
	c.sites = append(c.sites, varSite{sc: sc, node: node, name: baseName(name), inert: inert, what: what})
}

// checkSites raises every site that assigns a non-numeric value to a name
// the string gives the integer attribute or makes a name reference. It
// runs once the whole string has been read, so that an attribute given in
// a later statement, a function or an eval string counts too.
func (c *classifier) checkSites() {
	for _, s := range c.sites {
		if s.compound {
			if c.attrs.array[s.name] {
				c.raise(s.sc, s.node, Destructive, s.name+" is an array: a declaration parses a value in parentheses again as a compound assignment, which expands what it holds")
			}
			continue
		}
		if s.inert {
			continue
		}
		switch {
		case c.attrs.integer[s.name]:
			c.raise(s.sc, s.node, Destructive, s.name+" has the integer attribute: bash evaluates the value "+s.what+" as arithmetic, and a subscript in it such as a[$(cmd)] runs cmd")
		case c.attrs.nameref[s.name]:
			c.raise(s.sc, s.node, Destructive, s.name+" is a name reference: the value "+s.what+" becomes the name it refers to, whose subscript bash evaluates when it is used")
		}
	}
}

// compoundSite records a declaration's value in parentheses for name, which
// bash parses again if name is an array anywhere in the string.
func (c *classifier) compoundSite(cl *cmdCall, name string) {
	c.sites = append(c.sites, varSite{sc: cl.sc, node: cl.node, name: baseName(name), compound: true})
}

// noteAttributes records the attributes a declaration clause gives, for
// checkSites. A declaration whose names are not all known is destructive
// where it is classified.
func (c *classifier) noteAttributes(variant string, args []declArg) {
	flags := declFlags(args)
	if variant == "readonly" {
		flags += "r"
	}
	removed := false
	for _, a := range args {
		removed = removed || strings.HasPrefix(a.flags, "+") && strings.ContainsRune(a.flags, 'i')
	}
	for _, a := range args {
		if a.flags != "" || a.dynamic {
			continue
		}
		name := baseName(a.name)
		if strings.ContainsAny(flags, "aA") || a.array != nil || strings.Contains(a.name, "[") {
			c.attrs.array[name] = true
		}
		if strings.ContainsRune(flags, 'a') || !strings.ContainsRune(flags, 'A') && (a.array != nil || strings.Contains(a.name, "[")) {
			c.noteIndexed(name, a.node)
		}
		// A readonly name keeps its value when a later declare fails, so
		// `declare -i n=0` does not prove it a number.
		if removed || strings.ContainsRune(flags, 'r') {
			c.attrs.unInteger[name] = true
		}
		if strings.ContainsRune(flags, 'i') {
			c.attrs.integer[name] = true
		}
		if strings.ContainsRune(flags, 'n') {
			c.attrs.nameref[name] = true
		}
	}
}

// noteIndexed records that node may make name an indexed array.
func (c *classifier) noteIndexed(name string, node syntax.Node) {
	off := -1
	if !c.collectingNested && node != nil {
		off = int(node.Pos().Offset())
	}
	c.attrs.indexed[name] = append(c.attrs.indexed[name], off)
}

// bashArrays are the arrays bash keeps itself. It refuses declare -A on
// most of them ("cannot convert indexed to associative array", checked
// with bash 5.2.15 for DIRSTACK, BASH_VERSINFO, GROUPS, BASH_ARGV,
// BASH_ARGC, FUNCNAME, BASH_LINENO, BASH_SOURCE) and assigns the others
// (PIPESTATUS, BASH_REMATCH) again by itself, as indexed arrays.
var bashArrays = map[string]bool{
	"DIRSTACK": true, "BASH_VERSINFO": true, "GROUPS": true, "BASH_ARGV": true, "BASH_ARGC": true,
	"FUNCNAME": true, "BASH_LINENO": true, "BASH_SOURCE": true, "PIPESTATUS": true, "BASH_REMATCH": true,
	"COMP_WORDS": true, "COPROC": true, "MAPFILE": true, "READLINE_ARGUMENT": true,
}

// declArg is one argument of declare, typeset, local, export or readonly.
type declArg struct {
	node syntax.Node
	// flags is an option word ("-ai", "+x"); "" for anything else.
	flags string
	// name is the name as written (`a[1]`, `x+` for `x+=v`).
	name string
	// hasValue, value and array hold what NAME=value or NAME=(...) assigns.
	hasValue bool
	value    value
	array    *syntax.ArrayExpr
	// quoted is set for NAME=value that came as one quoted or escaped
	// word, which bash splits and evaluates itself.
	quoted bool
	// dynamic is set for a word known only at run time.
	dynamic bool
	assign  *syntax.Assign
}

// declArgs reads a declaration clause's arguments the way the builtin will.
func declArgs(d *syntax.DeclClause, dialect Dialect) []declArg {
	out := make([]declArg, 0, len(d.Args))
	for _, a := range d.Args {
		da := declArg{node: a, assign: a}
		switch {
		case a.Naked && a.Name == nil && a.Value != nil:
			v := wordValue(a.Value, dialect)
			da.value = v
			switch {
			case !v.known:
				da.dynamic = true
			case strings.HasPrefix(v.s, "-") || strings.HasPrefix(v.s, "+"):
				da.flags = v.s
			default:
				da.quoted = true
				name, val, has := strings.Cut(v.s, "=")
				da.name, da.hasValue = name, has
				da.value = value{s: val, known: true}
			}
		case a.Name != nil:
			da.name = a.Name.Value
			if a.Append {
				da.name += "+"
			}
			if a.Value != nil {
				da.hasValue, da.value = true, wordValue(a.Value, dialect)
			} else if a.Array != nil {
				da.hasValue, da.array = true, a.Array
			} else if !a.Naked {
				da.hasValue, da.value = true, value{known: true} // x=
			}
		}
		out = append(out, da)
	}
	return out
}

// declFlags joins the letters of every option word that sets an attribute
// ("-ai -x" gives "aix"); words starting with + remove one and are left
// out, which keeps the set of attributes as large as it can be.
func declFlags(args []declArg) string {
	var b strings.Builder
	for _, a := range args {
		if strings.HasPrefix(a.flags, "-") {
			b.WriteString(a.flags[1:])
		}
	}
	return b.String()
}

// assignedValueClass classifies assigning v to name, beyond the write that
// specialVarWhy gives special names: prompt strings that can run commands,
// PROMPT_COMMAND's code, and SHELLOPTS that turn on history expansion. It
// returns Read when the value adds nothing.
func (c *classifier) assignedValueClass(cl *cmdCall, name string, v value) {
	c.progVarValue(cl, name, v)
	c.gitConfigEnv(cl, name, v)
	if c.exportedFunction(cl, name, v) {
		return
	}
	switch {
	case name == "PROMPT_COMMAND":
		if !v.known {
			c.raiseCall(cl, Destructive, "PROMPT_COMMAND is run as code and its value is known only at run time")
			return
		}
		c.nested(cl.sc, cl.node, v.s, cl.depth)
	case promptVars[name]:
		if !v.known || !promptSafe(v.s) {
			c.raiseCall(cl, Destructive, name+" is expanded as a prompt string, which runs the command substitutions in its value (and a \\nnn escape decodes to $ first)")
		}
	case name == "SHELLOPTS" || name == "BASHOPTS":
		if !v.known || strings.Contains(v.s, "hist") {
			c.raiseCall(cl, Destructive, name+" can turn on history expansion in a child shell, which builds commands from earlier lines")
		}
	}
}

// promptSafe reports whether prompt expansion of s runs nothing: no
// backquote, no \nnn escape (decode_prompt_string turns \044 into an
// unquoted $ before expansion; its other escapes come out quoted), and every
// $ starts a plain $NAME, ${NAME} or special parameter, whose value is
// inserted as text. `+ ${BASH_SOURCE}:${LINENO}: ` is safe; `$(cmd)`,
// `$((x))`, `${x:-...}` and `${x@P}` are not.
func promptSafe(s string) bool {
	if strings.Contains(s, "`") {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			if i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '7' {
				return false
			}
			i++ // the escaped byte
		case '$':
			n := paramRefLen(s[i+1:])
			if n < 0 {
				return false
			}
			i += n
		}
	}
	return true
}

// paramRefLen returns the length of the plain parameter reference that
// follows a $ (NAME, {NAME}, a digit or a special character), 0 for a $ at
// the end, or -1 for anything else.
func paramRefLen(s string) int {
	if s == "" {
		return 0
	}
	if strings.IndexByte("#?$!@*-0123456789", s[0]) >= 0 {
		return 1
	}
	if s[0] == '{' {
		end := strings.IndexByte(s, '}')
		if end < 0 || !(isName(s[1:end]) || len(s[1:end]) == 1 && strings.IndexByte("#?$!@*-0123456789", s[1]) >= 0) {
			return -1
		}
		return end + 1
	}
	n := 0
	for n < len(s) && (s[n] == '_' || s[n] >= 'a' && s[n] <= 'z' || s[n] >= 'A' && s[n] <= 'Z' || n > 0 && s[n] >= '0' && s[n] <= '9') {
		n++
	}
	if n == 0 {
		return -1
	}
	return n
}
