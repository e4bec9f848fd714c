package shellclass

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// varSetters are commands that can set shell variables in ways the walker
// does not follow; their presence turns off resolving `X=lit; $X`.
var varSetters = map[string]bool{
	"source": true, ".": true, "eval": true, "read": true, "readarray": true, "mapfile": true,
	"getopts": true, "printf": true, "declare": true, "typeset": true, "local": true,
	"export": true, "readonly": true, "let": true, "trap": true, "alias": true, "unset": true,
	"select": true, "coproc": true, "nameref": true, "enable": true,
}

// prepare walks the parsed top-level string once before classifying it, to
// learn the names it defines: functions, aliases and literal variables.
func (c *classifier) prepare(f *syntax.File) {
	c.bind = bindings{hashed: map[string][]value{}, aliases: map[string][]value{}}
	c.gitConfigKeys = map[string]value{}
	c.funcs = map[string]bool{}
	c.aliases = map[string]aliasDef{}
	c.strAssigned = map[string]bool{}
	c.loopVars = map[string]int{}
	assigns := map[string]int{}
	noResolve := false
	c.collect(f, func(name string) {
		assigns[name]++
		c.strAssigned[name] = true
	}, func(name string) {
		assigns[name]++
	}, func() { noResolve = true })
	c.integerInits(f)
	if noResolve {
		return
	}
	c.vars = map[string]varDef{}
	for _, st := range f.Stmts {
		call, ok := st.Cmd.(*syntax.CallExpr)
		if !ok || len(call.Args) > 0 || len(st.Redirs) > 0 || st.Background || st.Negated {
			continue
		}
		for _, a := range call.Assigns {
			if a.Name == nil || a.Value == nil || a.Index != nil || a.Array != nil || a.Append || assigns[a.Name.Value] != 1 {
				continue
			}
			if v := wordValue(a.Value, c.opts.Dialect); v.known {
				c.vars[a.Name.Value] = varDef{value: v.s, end: int(st.End().Offset())}
			}
		}
	}
}

// prepareNested adds what a nested string defines. A nested string runs in
// a child shell (sh -c) or re-enters this one (eval, which turns off
// variable resolution in prepare already).
func (c *classifier) prepareNested(f *syntax.File) {
	if c.funcs == nil {
		c.funcs = map[string]bool{}
		c.aliases = map[string]aliasDef{}
	}
	if c.bind.hashed == nil {
		c.bind = bindings{hashed: map[string][]value{}, aliases: map[string][]value{}}
		c.gitConfigKeys = map[string]value{}
	}
	if c.strAssigned == nil {
		c.strAssigned = map[string]bool{}
		c.loopVars = map[string]int{}
	}
	c.collectingNested = true
	c.collect(f, func(name string) { c.strAssigned[name] = true }, func(string) {}, func() {})
	c.collectingNested = false
}

// collect visits the tree for function and alias definitions, and reports
// every binding of a name (strBind for assignments, loops and ${X:=v};
// arithBind for arithmetic assignments) and commands that can set
// variables opaquely.
func (c *classifier) collect(f *syntax.File, strBind func(string), arithBind func(string), opaque func()) {
	str, arith := strBind, arithBind
	strBind = func(name string) { c.noteBinding(name); str(name) }
	arithBind = func(name string) { c.noteBinding(name); arith(name) }
	syntax.Walk(f, func(n syntax.Node) bool {
		switch x := n.(type) {
		case *syntax.FuncDecl:
			if x.Name != nil {
				c.funcs[x.Name.Value] = true
			}
			for _, nm := range x.Names {
				c.funcs[nm.Value] = true
			}
		case *syntax.Assign:
			c.collectArrayBinding(x)
			if x.Name != nil && x.Value != nil {
				c.noteEnv(x.Name.Value, wordValue(x.Value, c.opts.Dialect))
			}
			if x.Name != nil {
				strBind(x.Name.Value)
				if x.Array != nil || x.Index != nil {
					c.attrs.array[x.Name.Value] = true
					c.noteIndexed(x.Name.Value, x)
				}
			}
		case *syntax.WordIter:
			if x.Name != nil {
				strBind(x.Name.Value)
			}
		case *syntax.ParamExp:
			if x.Exp != nil && x.Param != nil && (x.Exp.Op == syntax.AssignUnset || x.Exp.Op == syntax.AssignUnsetOrNull) {
				strBind(x.Param.Value) // ${X:=v} assigns
			}
		case *syntax.BinaryArithm:
			if w, ok := x.X.(*syntax.Word); ok && x.Op >= syntax.Assgn && x.Op <= syntax.PowAssgn {
				arithBind(w.Lit())
			}
		case *syntax.UnaryArithm:
			if w, ok := x.X.(*syntax.Word); ok && (x.Op == syntax.Inc || x.Op == syntax.Dec) {
				arithBind(w.Lit())
			}
		case *syntax.DeclClause:
			c.noteAttributes(x.Variant.Value, declArgs(x, c.opts.Dialect))
			opaque()
		case *syntax.LetClause, *syntax.CoprocClause:
			opaque()
		case *syntax.CallExpr:
			for _, w := range x.Args {
				v := wordValue(w, c.opts.Dialect)
				if !v.known {
					continue
				}
				if varSetters[v.s] {
					opaque()
				}
				switch v.s {
				case "cd", "pushd", "popd":
					c.cwdMoves = true
				}
			}
			c.collectAlias(x)
			c.collectArrays(x)
			c.collectBindings(x)
			for _, w := range x.Args {
				// env NAME=v, export NAME=v given as words.
				if v := wordValue(w, c.opts.Dialect); v.known {
					if name, val, ok := strings.Cut(v.s, "="); ok {
						c.noteEnv(name, value{s: val, known: true})
					}
				} else if lit := literalPrefix(w); strings.Contains(lit, "=") {
					name, _, _ := strings.Cut(lit, "=")
					c.noteEnv(name, value{why: "expansion"})
				}
			}
		}
		return true
	})
}

// collectArrays records the names that read, mapfile and readarray may make
// arrays (every literal argument of theirs, to be safe) and the names unset
// may remove.
func (c *classifier) collectArrays(x *syntax.CallExpr) {
	if len(x.Args) < 2 {
		return
	}
	// unset may come after a wrapper (builtin unset h), and eval or source
	// may run one the walker has not read yet.
	unsetting := false
	for i, w := range x.Args {
		v := wordValue(w, c.opts.Dialect)
		switch {
		case unsetting && v.known:
			c.attrs.unset[baseName(v.s)] = true
		case unsetting:
			c.attrs.unsetAny = true
		case v.s == "unset":
			unsetting = true
		case v.s == "eval" || v.s == "source" || v.s == "." && i == 0:
			c.attrs.unsetAny = true
		}
	}
	switch wordValue(x.Args[0], c.opts.Dialect).s {
	case "read", "mapfile", "readarray":
		for _, w := range x.Args[1:] {
			if v := wordValue(w, c.opts.Dialect); v.known {
				c.attrs.array[baseName(v.s)] = true
				c.noteIndexed(baseName(v.s), x)
			}
		}
	}
}

// collectAlias records `alias name=value` definitions.
func (c *classifier) collectAlias(x *syntax.CallExpr) {
	if len(x.Args) < 2 || wordValue(x.Args[0], c.opts.Dialect).s != "alias" {
		return
	}
	for _, w := range x.Args[1:] {
		v := wordValue(w, c.opts.Dialect)
		if !v.known {
			// The name may be literal while the value is not.
			src := w.Lit()
			if name, _, ok := strings.Cut(src, "="); ok && name != "" {
				c.aliases[name] = aliasDef{}
			} else if lit, ok := w.Parts[0].(*syntax.Lit); ok {
				if name, _, ok := strings.Cut(lit.Value, "="); ok && name != "" {
					c.aliases[name] = aliasDef{}
				}
			}
			continue
		}
		if name, val, ok := strings.Cut(v.s, "="); ok && name != "" {
			c.aliases[name] = aliasDef{value: val, known: true}
		}
	}
}

// noteEnv records the assignments later checks need before the walk
// reaches them: GIT_CONFIG_KEY_n, and BASH_ENV or ENV naming standard
// input or a value known only at run time.
func (c *classifier) noteEnv(name string, v value) {
	switch {
	case strings.HasPrefix(name, "GIT_CONFIG_KEY_"):
		n := strings.TrimPrefix(name, "GIT_CONFIG_KEY_")
		if old, ok := c.gitConfigKeys[n]; !ok || old.known && !gitProgramKey(old.s) {
			c.gitConfigKeys[n] = v
		}
	case name == "BASH_ENV" || name == "ENV":
		if !v.known || stdinPath(v.s) {
			c.bashEnvStdin = true
		}
	}
}

// noteBinding records what a binding of name anywhere in the string means
// for the whole string, wherever it stands: any assignment to IFS changes
// how an unquoted `$X` in command position splits.
func (c *classifier) noteBinding(name string) {
	if name == "IFS" {
		c.ifsSet = true
	}
}

// integerInits records the names that a top-level statement declares with
// the integer attribute and a number (`declare -i n=0`), for numericVar,
// and those it declares associative (`declare -A h`), for assocAt.
func (c *classifier) integerInits(f *syntax.File) {
	for _, st := range f.Stmts {
		d, ok := st.Cmd.(*syntax.DeclClause)
		if !ok || st.Background || st.Negated {
			continue
		}
		args := declArgs(d, c.opts.Dialect)
		flags := declFlags(args)
		for _, a := range args {
			if a.flags != "" || a.dynamic || !isName(a.name) {
				continue
			}
			if strings.ContainsRune(flags, 'i') && a.hasValue && a.array == nil && inertValue(a.value) {
				c.attrs.intInit[a.name] = int(st.End().Offset())
			}
			if _, seen := c.attrs.assocInit[a.name]; strings.ContainsRune(flags, 'A') && !seen {
				c.attrs.assocInit[a.name] = span{int(st.Pos().Offset()), int(st.End().Offset())}
			}
		}
	}
}
