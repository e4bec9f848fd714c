package shellclass

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// What runs is classified as what runs: a variable whose value a tool runs
// as a program or shell code (GIT_PAGER, EDITOR, LESSOPEN ...) is
// classified as that command wherever it is assigned (NAME=v cmd, a bare
// assignment, which changes an exported variable, export, declare -x, env
// NAME=v, sudo NAME=v), whether or not a later tool reads it: assigning
// one is write in any case (specialVars), and its value may be rm. The
// same goes for the names bash binds to programs (hash -p, BASH_CMDS,
// BASH_ALIASES) and for exported functions (BASH_FUNC_name%%).

// progVars are the variables whose value is a command line a tool runs
// (through the shell or exec), by the manuals of the tools: git (PAGER,
// GIT_PAGER, GIT_EDITOR, GIT_SEQUENCE_EDITOR, GIT_EXTERNAL_DIFF, GIT_SSH,
// GIT_SSH_COMMAND, GIT_ASKPASS, GIT_PROXY_COMMAND), man (MANPAGER, PAGER),
// systemd (SYSTEMD_PAGER, SYSTEMD_EDITOR), less (LESSOPEN, LESSCLOSE,
// VISUAL, EDITOR), sudo (SUDO_EDITOR, SUDO_ASKPASS), ssh (SSH_ASKPASS),
// rsync (RSYNC_RSH, RSYNC_CONNECT_PROG), bash's fc (FCEDIT), psql and mysql
// pagers, BROWSER, CVS_RSH, FZF_DEFAULT_COMMAND.
var progVars = map[string]bool{
	"PAGER": true, "GIT_PAGER": true, "MANPAGER": true, "SYSTEMD_PAGER": true, "PSQL_PAGER": true,
	"MYSQL_PAGER": true, "BAT_PAGER": true, "DELTA_PAGER": true, "EDITOR": true, "VISUAL": true,
	"SUDO_EDITOR": true, "GIT_EDITOR": true, "GIT_SEQUENCE_EDITOR": true, "SYSTEMD_EDITOR": true,
	"FCEDIT": true, "BROWSER": true, "GIT_EXTERNAL_DIFF": true, "GIT_SSH": true, "GIT_SSH_COMMAND": true,
	"GIT_ASKPASS": true, "SSH_ASKPASS": true, "SUDO_ASKPASS": true, "GIT_PROXY_COMMAND": true,
	"RSYNC_RSH": true, "RSYNC_CONNECT_PROG": true, "CVS_RSH": true, "LESSOPEN": true, "LESSCLOSE": true,
	"FZF_DEFAULT_COMMAND": true,
}

// optionVars hold options that a tool reads as if they were on its command
// line: they are classified as that tool given those options (LESS='+!cmd'
// runs cmd, TAR_OPTIONS='--to-command=cmd', MANOPT='-P cmd').
var optionVars = map[string]string{
	"LESS": "less", "MANOPT": "man", "TAR_OPTIONS": "tar", "PARALLEL": "parallel",
	"SYSTEMD_LESS": "less", "GREP_OPTIONS": "grep", "RSYNC_OPTIONS": "rsync",
}

// progVarValue classifies the value of a program-valued variable.
func (c *classifier) progVarValue(cl *cmdCall, name string, v value) {
	if tool, ok := optionVars[name]; ok {
		if !v.known {
			c.raiseCall(cl, Destructive, name+" holds options of "+tool+" known only at run time, which can name a program")
			return
		}
		c.nested(cl.sc, cl.node, tool+" "+v.s, cl.depth)
		return
	}
	if !progVars[name] {
		return
	}
	if !v.known {
		c.raiseCall(cl, Destructive, name+" names a program known only at run time; it may be rm")
		return
	}
	s := v.s
	if name == "LESSOPEN" || name == "LESSCLOSE" {
		// |cmd %s, ||cmd %s, -cmd %s: the input preprocessor's command.
		s = strings.TrimLeft(s, "|-")
		s = strings.ReplaceAll(s, "%s", "file")
	}
	if strings.TrimSpace(s) == "" {
		return
	}
	c.raiseCall(cl, Write, name+" names a program a tool runs")
	c.nested(cl.sc, cl.node, s, cl.depth)
}

// gitConfigEnv classifies GIT_CONFIG_PARAMETERS ('key'='value' pairs, as
// git -c passes them to its children) and GIT_CONFIG_VALUE_n, whose key is
// GIT_CONFIG_KEY_n: a program key's value is the command git runs.
func (c *classifier) gitConfigEnv(cl *cmdCall, name string, v value) {
	switch {
	case name == "GIT_CONFIG_PARAMETERS":
		if !v.known {
			c.raiseCall(cl, Destructive, "GIT_CONFIG_PARAMETERS known only at run time may set a program git runs")
			return
		}
		for _, kv := range sqWords(v.s) {
			key, val, _ := strings.Cut(kv, "=")
			c.gitConfigValue(cl, key, val, "GIT_CONFIG_PARAMETERS")
		}
	case strings.HasPrefix(name, "GIT_CONFIG_VALUE_"):
		n := strings.TrimPrefix(name, "GIT_CONFIG_VALUE_")
		key, ok := c.gitConfigKeys[n]
		if ok && !key.known || ok && gitProgramKey(key.s) {
			if !v.known {
				c.raiseCall(cl, Destructive, name+" is the value of a program key, known only at run time")
				return
			}
			c.gitConfigValue(cl, "core.pager", v.s, name+" (for "+key.s+")")
		}
	case strings.HasPrefix(name, "GIT_CONFIG_KEY_") && !v.known:
		c.raiseCall(cl, Destructive, name+" names a configuration key known only at run time, which may be a program key")
	}
}

// sqWords splits git's sq-quoted list ('a'='b' 'c'='d'): each word is the
// text of its quoted parts joined.
func sqWords(s string) []string {
	var out []string
	var b strings.Builder
	in, started := false, false
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == '\'':
			in, started = !in, true
		case ch == '\\' && !in && i+1 < len(s):
			i++
			b.WriteByte(s[i])
		case ch == ' ' && !in:
			if started {
				out = append(out, b.String())
				b.Reset()
				started = false
			}
		default:
			b.WriteByte(ch)
			started = true
		}
	}
	if started {
		out = append(out, b.String())
	}
	return out
}

// exportedFunction classifies an environment entry BASH_FUNC_name%% (or
// the older BASH_FUNC_name()), which a child bash imports as the function
// name: its value `() { body; }` is classified as that function.
func (c *classifier) exportedFunction(cl *cmdCall, name string, v value) bool {
	fn, ok := strings.CutPrefix(name, "BASH_FUNC_")
	if !ok {
		return false
	}
	fn = strings.TrimSuffix(strings.TrimSuffix(fn, "%%"), "()")
	if !v.known {
		c.raiseCall(cl, Destructive, "exported function "+fn+" has a body known only at run time")
		return true
	}
	if !isName(fn) {
		fn = "f"
	}
	c.raiseCall(cl, Write, "exported function "+fn+" runs its body wherever a child bash calls "+fn)
	c.nested(cl.sc, cl.node, fn+" "+v.s, cl.depth)
	return true
}

// bindings are the names the string binds to programs: hash -p PATH NAME
// and BASH_CMDS[NAME]=PATH make NAME run PATH; BASH_ALIASES[NAME]=TEXT makes
// NAME an alias. anyName is set when a binding's name is known only at run
// time: then every command may be bound.
type bindings struct {
	hashed  map[string][]value
	aliases map[string][]value
	anyName string
}

// collectBindings records what x binds: hash -p, wherever the word hash
// stands (builtin hash, command hash), and assignments to BASH_CMDS and
// BASH_ALIASES.
func (c *classifier) collectBindings(x *syntax.CallExpr) {
	for i, w := range x.Args {
		if v := wordValue(w, c.opts.Dialect); !v.known || v.s != "hash" {
			continue
		}
		args := make([]value, 0, len(x.Args)-i-1)
		for _, a := range x.Args[i+1:] {
			args = append(args, wordValue(a, c.opts.Dialect))
		}
		p := getopt(spec(hashOpts), args, true)
		paths := p.optValues("-p")
		if len(paths) == 0 {
			continue
		}
		for _, n := range p.operands {
			if !n.known {
				c.bind.anyName = "hash -p with a name known only at run time"
				continue
			}
			c.bind.hashed[n.s] = append(c.bind.hashed[n.s], paths...)
		}
	}
}

// collectArrayBinding records an assignment to BASH_CMDS or BASH_ALIASES:
// NAME[key]=value or NAME=([key]=value ...).
func (c *classifier) collectArrayBinding(a *syntax.Assign) {
	if a.Name == nil || a.Name.Value != "BASH_CMDS" && a.Name.Value != "BASH_ALIASES" {
		return
	}
	target := c.bind.hashed
	if a.Name.Value == "BASH_ALIASES" {
		target = c.bind.aliases
	}
	add := func(idx syntax.ArithmExpr, val *syntax.Word) {
		key := value{}
		if w, ok := idx.(*syntax.Word); ok {
			key = wordValue(w, c.opts.Dialect)
		}
		if !key.known {
			c.bind.anyName = a.Name.Value + " with a key known only at run time"
			return
		}
		v := value{known: true}
		if val != nil {
			v = wordValue(val, c.opts.Dialect)
		}
		target[key.s] = append(target[key.s], v)
	}
	switch {
	case a.Index != nil:
		add(a.Index, a.Value)
	case a.Array != nil:
		for _, el := range a.Array.Elems {
			if el.Index == nil {
				c.bind.anyName = a.Name.Value + " assigned without keys"
				continue
			}
			add(el.Index, el.Value)
		}
	case a.Value != nil:
		c.bind.anyName = a.Name.Value + " assigned a value known only at run time"
	}
}

// boundCall classifies a command whose name the string binds to a program
// or alias text: as each program it may run. It reports whether name is
// bound.
func (c *classifier) boundCall(cl *cmdCall, name string, args []value) bool {
	if strings.Contains(name, "/") {
		return false
	}
	if c.bind.anyName != "" {
		c.raiseCall(cl, Destructive, c.bind.anyName+" can make "+name+" run any program")
		return true
	}
	paths, hashed := c.bind.hashed[name]
	texts, aliased := c.bind.aliases[name]
	for _, p := range paths {
		if !p.known {
			c.raiseCall(cl, Destructive, "hash binds "+name+" to a program known only at run time")
			continue
		}
		c.raiseCall(cl, Write, "hash binds "+name+" to "+p.s)
		sub := *cl
		sub.depth++
		c.simple(&sub, append([]value{{s: p.s, known: true}}, args[1:]...))
	}
	for _, t := range texts {
		c.expandAlias(cl, aliasDef{value: t.s, known: t.known}, name, args)
	}
	return hashed || aliased
}
