package shellclass

import "strings"

// wrapper describes a command that runs its argument as a command
// (docs/classification.md, Wrappers). The inner command is classified as if it
// stood alone, and the result is at least the wrapper's own class.
type wrapper struct {
	// opts are the wrapper's own options, which come before the command.
	opts string
	// own is the wrapper's own class and why, when it is above read.
	own    Class
	ownWhy string
	// skip is how many operands the wrapper takes before the command
	// (timeout DURATION, flock FILE, chroot DIR).
	skip int
	// writeOpts are options that make the wrapper itself write a file.
	writeOpts []string
	// shellOpts are options whose presence makes the wrapper run its
	// operands joined by spaces as a shell string (sudo -s, watch).
	shellOpts []string
	// stringOpts are options whose value is a shell string to run
	// (su -c, flock -c, runuser -c).
	stringOpts []string
	// assigns lets NAME=value operands precede the command (env).
	assigns bool
	// shellAlways runs the operands joined by spaces through sh -c, as
	// watch does without -x.
	shellAlways bool
	// execOpt turns shellAlways off (watch -x).
	execOpt string
	// noCmdClass is the class when no command follows; Read unless set.
	noCmdClass Class
	noCmdWhy   string
	// pidOpts are options that make the wrapper act on a running process
	// instead of running a command (chrt -p, taskset -p).
	pidOpts []string
	// envOpts are options whose value is NAME=VALUE for the command's
	// environment (systemd-run -E).
	envOpts []string
	// propOpts are options whose value is a unit property NAME=VALUE; an
	// Exec* property is a command (systemd-run -p ExecStartPre=...).
	propOpts []string
	// longOnly says every word before the command that starts with "-" is
	// one option, its value attached with "=" (firejail, valgrind).
	longOnly bool
	// optsAfterSkip reads options again after the skipped operands
	// (setarch ARCH -R PROGRAM).
	optsAfterSkip bool
}

// runWrapper classifies a wrapper and the command it runs.
func (c *classifier) runWrapper(cl *cmdCall, base string, w wrapper, args []value) {
	if base == "command" && len(args) > 1 && args[1].known && (args[1].s == "-v" || args[1].s == "-V") {
		return // command -v NAME only looks a name up
	}
	if w.own > Read {
		c.raiseCall(cl, w.own, w.ownWhy)
	} else if base != "env" && base != "time" {
		// Only env (and the time keyword) are read by themselves; every other
		// wrapper is at least write (docs/classification.md, Wrappers).
		c.raiseCall(cl, Write, base+" is not a read command by itself")
	}
	if base == "command" && len(args) > 1 && args[1].known && (args[1].s == "-v" || args[1].s == "-V") {
		return // command -v NAME only looks a name up
	}
	rest := args[1:]
	if (base == "su" || base == "runuser") && len(rest) > 0 && rest[0].known && (rest[0].s == "-" || rest[0].s == "-l") {
		rest = rest[1:] // su - USER: a login shell
	}
	p := getopt(spec(w.opts), rest, true)
	if w.longOnly {
		p = parsed{}
		for i, a := range rest {
			if !a.known || !strings.HasPrefix(a.s, "-") {
				p.operands = rest[i:]
				break
			}
			if a.s == "--" {
				p.operands = rest[i+1:]
				break
			}
		}
	}
	if p.bad != "" {
		c.raiseCall(cl, Destructive, "unknown option "+p.bad+" for "+base+": the command it runs cannot be found")
		return
	}
	c.optionPrograms(cl, base, &p)
	for _, o := range w.pidOpts {
		if p.has(o) {
			c.raiseCall(cl, Write, base+" "+o+" changes a running process")
			return
		}
	}
	for _, v := range p.optValues(w.envOpts...) {
		name, val, _ := strings.Cut(v.s, "=")
		if !v.known {
			c.raiseCall(cl, Destructive, base+" sets an environment variable known only at run time")
			continue
		}
		if why, ok := specialVarWhy(name); ok {
			c.raiseCall(cl, Write, why)
		}
		c.assignedValueClass(cl, name, value{s: val, known: true})
	}
	for _, v := range p.optValues(w.propOpts...) {
		name, val, _ := strings.Cut(v.s, "=")
		if !v.known {
			c.raiseCall(cl, Destructive, base+" sets a unit property known only at run time, which may be a command")
			continue
		}
		if strings.HasPrefix(name, "Exec") {
			c.raiseCall(cl, Write, base+" -p "+name+" runs a command")
			c.nested(cl.sc, cl.node, strings.TrimLeft(val, "@-:+!"), cl.depth)
		}
	}
	for _, o := range w.writeOpts {
		if p.has(o) {
			c.raiseCall(cl, Write, base+" "+o+" writes a file or changes another process")
		}
	}
	ops := p.operands
	if base == "su" || base == "runuser" {
		// su [-] USER [-c STRING]: options may follow the user name, so read
		// them again after it.
		if len(ops) > 0 && !p.has("-u", "--user") {
			p2 := getopt(spec(w.opts), ops[1:], true)
			if p2.bad != "" {
				c.raiseCall(cl, Destructive, "unknown option "+p2.bad+" for "+base+": the command it runs cannot be found")
				return
			}
			p.opts = append(p.opts, p2.opts...)
			if p2.dynamic != "" && p.dynamic == "" {
				p.dynamic = p2.dynamic
			}
			ops = p2.operands
		}
	}
	var scripts []string // values of options that are shell strings (su -c, env -S)
	for _, o := range w.stringOpts {
		scripts = append(scripts, p.values(o)...)
	}
	if len(scripts) > 0 {
		if p.dynamic != "" {
			c.raiseCall(cl, Destructive, base+" runs a string known only at run time ("+p.dynamic+")")
			return
		}
		for _, s := range scripts {
			if base == "env" {
				// env -S splits the string into words; what follows the
				// string is appended.
				s += " " + joinSource(cl, ops)
				ops = nil
			}
			c.nested(cl.sc, cl.node, s, cl.depth)
		}
		if base != "env" {
			return
		}
	}
	if w.skip > 0 {
		if len(ops) < w.skip {
			c.raiseCall(cl, w.noCmdClass, w.noCmdWhy)
			return
		}
		ops = ops[w.skip:]
		if w.optsAfterSkip {
			// setarch ARCH [options] [program]: options follow the operand.
			p2 := getopt(spec(w.opts), ops, true)
			if p2.bad != "" {
				c.raiseCall(cl, Destructive, "unknown option "+p2.bad+" for "+base+": the command it runs cannot be found")
				return
			}
			ops = p2.operands
		}
	}
	if w.assigns {
		// env(1) and sudo take every word with "=" before the command as
		// an assignment, whatever the name (BASH_FUNC_f%%=...).
		for len(ops) > 0 && ops[0].known && strings.Contains(ops[0].s, "=") && !strings.HasPrefix(ops[0].s, "=") {
			name, val, _ := strings.Cut(ops[0].s, "=")
			if why, ok := specialVarWhy(name); ok {
				c.raiseCall(cl, Write, why)
			}
			c.assignedValueClass(cl, name, value{s: val, known: true})
			ops = ops[1:]
		}
		if len(ops) > 0 && !ops[0].known && ops[0].word != nil && looksLikeAssignment(cl, ops[0]) {
			c.raiseCall(cl, Destructive, "env assignment known only at run time may set PATH or LD_PRELOAD")
			ops = ops[1:]
		}
	}
	if len(ops) == 0 {
		c.raiseCall(cl, w.noCmdClass, w.noCmdWhy)
		return
	}
	for _, o := range w.shellOpts {
		if p.has(o) {
			c.runJoined(cl, base, ops)
			return
		}
	}
	if w.shellAlways && !p.has(w.execOpt) {
		c.runJoined(cl, base, ops)
		return
	}
	if base == "xargs" {
		ops = c.xargsInner(p, ops)
	}
	inner := *cl
	inner.depth++
	if base == "xargs" {
		inner.stdinKnown = false // xargs consumes stdin
	}
	c.simple(&inner, ops)
}

// runJoined classifies operands that the wrapper joins with spaces and runs
// through a shell (sudo -s, watch).
func (c *classifier) runJoined(cl *cmdCall, base string, ops []value) {
	if !allKnown(ops) {
		c.raiseCall(cl, Destructive, base+" runs a shell string known only at run time")
		return
	}
	c.nested(cl.sc, cl.node, strings.Join(strs(ops), " "), cl.depth)
}

// xargsInner returns the command xargs runs, with the words it appends from
// its input as an argument known only at run time.
func (c *classifier) xargsInner(p parsed, ops []value) []value {
	supplied := value{known: false, why: "words xargs reads from its input"}
	repl := append(p.values("-I", "--replace"), p.values("-i")...)
	if len(repl) > 0 {
		marker := repl[0]
		if marker == "" {
			marker = "{}"
		}
		out := make([]value, len(ops))
		for i, o := range ops {
			out[i] = o
			if i > 0 && o.known && strings.Contains(o.s, marker) {
				out[i] = supplied
			}
		}
		return out
	}
	out := append([]value{}, ops...)
	return append(out, supplied)
}

func isAssignment(s string) bool {
	name, _, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		ch := name[i]
		if !(ch == '_' || ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || i > 0 && ch >= '0' && ch <= '9') {
			return false
		}
	}
	return true
}

// looksLikeAssignment reports whether a dynamic operand starts with a
// literal NAME= prefix.
func looksLikeAssignment(cl *cmdCall, v value) bool {
	src := cl.sc.src[v.word.Pos().Offset():v.word.End().Offset()]
	i := strings.IndexByte(src, '=')
	return i > 0 && isAssignment(src[:i+1])
}

// joinSource returns the source text of the operands, for re-parsing.
func joinSource(cl *cmdCall, ops []value) string {
	parts := make([]string, 0, len(ops))
	for _, o := range ops {
		if o.word != nil {
			parts = append(parts, cl.sc.src[o.word.Pos().Offset():o.word.End().Offset()])
		} else {
			parts = append(parts, syntaxQuote(o.s))
		}
	}
	return strings.Join(parts, " ")
}
