package shellclass

import (
	"regexp"
	"strings"
)

type handler func(c *classifier, cl *cmdCall, args []value)

// handlerFor returns the classifier of a command that the generic tables
// cannot describe: wrappers, shells, interpreters, and tools whose options
// name programs or whose subcommands decide the class.
func handlerFor(base string) (handler, bool) {
	if w, ok := wrappers[base]; ok {
		return func(c *classifier, cl *cmdCall, args []value) { c.runWrapper(cl, base, w, args) }, true
	}
	if shells[base] {
		return (*classifier).shell, true
	}
	if isInterpreter(base) {
		return func(c *classifier, cl *cmdCall, args []value) { c.interpreter(cl, base, args) }, true
	}
	switch base {
	case "eval":
		return (*classifier).eval, true
	case "trap":
		return (*classifier).trap, true
	case "ssh":
		return (*classifier).ssh, true
	case "source", ".":
		return func(c *classifier, cl *cmdCall, args []value) {
			if len(args) > 1 && c.devices(cl, base, args[1:2]) {
				return
			}
			if len(args) > 1 && args[1].known && stdinPath(args[1].s) && cl.stdinKnown {
				c.nested(cl.sc, cl.node, cl.stdin, cl.depth) // `. /dev/stdin <<< 'code'`
				return
			}
			c.raiseCall(cl, Write, base+" runs a script file in this shell")
		}, true
	case "alias":
		return func(c *classifier, cl *cmdCall, args []value) {
			if len(args) > 1 && !(args[1].known && args[1].s == "-p") {
				c.raiseCall(cl, Write, "alias definition changes what later words run")
			}
		}, true
	case "awk", "gawk", "mawk", "nawk":
		return (*classifier).awk, true
	case "find":
		return (*classifier).find, true
	case "git":
		return (*classifier).git, true
	case "git-upload-pack", "git-upload-archive":
		return func(c *classifier, cl *cmdCall, args []value) {}, true // serves a fetch or archive: read
	case "git-receive-pack":
		return func(c *classifier, cl *cmdCall, args []value) {
			c.raiseCall(cl, Write, "git-receive-pack accepts a push")
		}, true
	case "rsync":
		return (*classifier).rsync, true
	case "scp":
		return (*classifier).scp, true
	case "docker", "podman":
		return (*classifier).docker, true
	case "kubectl":
		return (*classifier).kubectl, true
	case "systemctl":
		return (*classifier).systemctl, true
	case "service":
		return (*classifier).service, true
	case "ip":
		return (*classifier).ip, true
	case "apt", "apt-get", "apt-cache", "dpkg", "rpm", "pip", "pip3", "crontab":
		return (*classifier).packages, true
	case "tar":
		return (*classifier).tar, true
	case "man":
		return (*classifier).man, true
	case "less", "more", "most":
		return func(c *classifier, cl *cmdCall, args []value) {
			c.raiseCall(cl, Write, neverRead[base])
			c.pagerCommands(cl, base, args)
		}, true
	case "vi", "vim", "view", "ex", "nvim", "rvim", "rview", "vimdiff", "gvim", "evim", "vim.basic", "vim.tiny":
		return func(c *classifier, cl *cmdCall, args []value) {
			c.raiseCall(cl, Write, "editor is never read")
			c.editorCommands(cl, base, args)
		}, true
	case "gdb":
		return func(c *classifier, cl *cmdCall, args []value) {
			c.raiseCall(cl, Write, "gdb runs and changes programs")
			c.gdbCommands(cl, args)
		}, true
	case "at", "batch":
		return func(c *classifier, cl *cmdCall, args []value) { c.atJob(cl, base, args) }, true
	case "atrm":
		return func(c *classifier, cl *cmdCall, args []value) {
			c.raiseCall(cl, Destructive, "atrm deletes queued jobs")
		}, true
	case "parallel", "sem":
		return (*classifier).parallel, true
	case "sg":
		return (*classifier).sgCommand, true
	case "socat", "nc", "ncat", "netcat", "nc.openbsd", "nc.traditional":
		return func(c *classifier, cl *cmdCall, args []value) { c.netExec(cl, base, args) }, true
	case "sftp":
		return (*classifier).sftpPrograms, true
	case "psql", "mysql", "mariadb", "sqlite3":
		return (*classifier).sql, true
	case "redis-cli":
		return (*classifier).redis, true
	}
	if h, ok := builtinHandler(base); ok {
		return h, true
	}
	if why, ok := builtinsRead[base]; ok {
		return func(c *classifier, cl *cmdCall, args []value) {
			if why != "" {
				c.raiseCall(cl, Write, why)
			}
		}, true
	}
	if why, ok := neverRead[base]; ok {
		return func(c *classifier, cl *cmdCall, args []value) { c.raiseCall(cl, Write, why) }, true
	}
	return nil, false
}

func isInterpreter(base string) bool {
	for _, p := range interpreters {
		if base == p || strings.HasPrefix(base, p) && strings.Trim(base[len(p):], "0123456789.-") == "" {
			return true
		}
	}
	return false
}

// stdinPath reports whether a script path names standard input, so that a
// literal here-document or here-string is the script.
func stdinPath(p string) bool {
	switch p {
	case "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0":
		return true
	}
	return false
}

// shell classifies sh, bash and friends by the script they will run.
func (c *classifier) shell(cl *cmdCall, args []value) {
	base, _ := progName(args[0].s)
	if c.bashEnvStdin {
		// BASH_ENV=/dev/stdin: the shell first runs its input as startup
		// code.
		if cl.stdinKnown {
			c.nested(cl.sc, cl.node, cl.stdin, cl.depth)
		} else {
			c.raiseCall(cl, Destructive, "BASH_ENV or ENV names standard input or a file known only at run time: "+base+" runs it as code first")
		}
	}
	var script *value
	var file *value
	fromStdin := false
	cmdMode := false
	for i := 1; i < len(args); i++ {
		a := args[i]
		if !a.known {
			c.raiseCall(cl, Destructive, base+" argument known only at run time ("+a.why+")")
			return
		}
		switch {
		case a.s == "--" || a.s == "-":
			if i+1 < len(args) && !cmdMode {
				file = &args[i+1]
			} else if i+1 < len(args) {
				script = &args[i+1]
			}
			i = len(args)
		case strings.HasPrefix(a.s, "--"):
			switch strings.SplitN(a.s, "=", 2)[0] {
			case "--login", "--interactive":
				c.raiseCall(cl, Write, base+" "+a.s+" runs profile scripts")
			case "--rcfile", "--init-file":
				c.raiseCall(cl, Write, base+" "+a.s+" runs a startup file")
				if !strings.Contains(a.s, "=") {
					i++
				}
			}
		case strings.HasPrefix(a.s, "-") || strings.HasPrefix(a.s, "+"):
			if strings.ContainsRune(a.s[1:], 'c') {
				cmdMode = true
			}
			if strings.ContainsRune(a.s[1:], 'l') || strings.ContainsRune(a.s[1:], 'i') {
				c.raiseCall(cl, Write, base+" "+a.s+" starts a login or interactive shell, which runs profile scripts")
			}
			if strings.ContainsRune(a.s[1:], 's') {
				fromStdin = true
			}
			if strings.ContainsAny(a.s[1:], "oO") && i+1 < len(args) {
				i++ // -o OPTION
			}
		default:
			if cmdMode {
				script = &args[i]
			} else {
				file = &args[i]
			}
			i = len(args)
		}
	}
	switch {
	case cmdMode && script != nil:
		c.nested(cl.sc, cl.node, script.s, cl.depth)
	case cmdMode:
		c.raiseCall(cl, Write, base+" -c without a command string")
	case file != nil && c.devices(cl, base, []value{*file}):
	case file != nil && stdinPath(file.s) && cl.stdinKnown:
		c.nested(cl.sc, cl.node, cl.stdin, cl.depth) // `bash /dev/stdin <<< 'code'`
	case file != nil && !fromStdin:
		c.raiseCall(cl, Write, base+" runs script file "+file.s)
	case cl.stdinKnown:
		c.nested(cl.sc, cl.node, cl.stdin, cl.depth)
	default:
		c.raiseCall(cl, Write, base+" reads its script from standard input")
	}
}

// eval joins its arguments and runs them as shell code.
func (c *classifier) eval(cl *cmdCall, args []value) {
	ops := args[1:]
	if len(ops) > 0 && ops[0].known && ops[0].s == "--" {
		ops = ops[1:]
	}
	c.runJoined(cl, "eval", ops)
}

// trap runs its first operand as shell code when a signal arrives.
func (c *classifier) trap(cl *cmdCall, args []value) {
	ops := args[1:]
	for len(ops) > 0 && ops[0].known && (ops[0].s == "-p" || ops[0].s == "-l" || ops[0].s == "-P") {
		ops = ops[1:]
	}
	if len(ops) > 0 && ops[0].known && ops[0].s == "--" {
		ops = ops[1:]
	}
	if len(ops) < 2 {
		return // lists traps, or resets one
	}
	if !ops[0].known {
		c.raiseCall(cl, Destructive, "trap action known only at run time")
		return
	}
	if ops[0].s == "-" || ops[0].s == "" {
		return
	}
	c.nested(cl.sc, cl.node, ops[0].s, cl.depth)
}

// ssh runs its remaining operands, joined, on another host's shell.
func (c *classifier) ssh(cl *cmdCall, args []value) {
	c.raiseCall(cl, Write, "ssh connects onward to another host")
	p := getopt(spec(sshOpts), args[1:], true)
	if p.bad != "" {
		c.raiseCall(cl, Destructive, "unknown option "+p.bad+" for ssh: the remote command cannot be found")
		return
	}
	c.sshOptions(cl, p.values("-o"))
	if len(p.operands) < 2 {
		return
	}
	c.runJoined(cl, "ssh", p.operands[1:])
}

// sshOptions classifies the ssh_config options given with -o whose value
// is a command: ProxyCommand and KnownHostsCommand run locally through the
// shell, LocalCommand too (with PermitLocalCommand), RemoteCommand on the
// other host. The keyword and its value are separated by "=" or spaces
// and the keyword has no case (ssh_config(5)).
func (c *classifier) sshOptions(cl *cmdCall, opts []string) {
	for _, o := range opts {
		o = strings.TrimSpace(o)
		i := strings.IndexAny(o, "= \t")
		if i < 0 {
			continue
		}
		k := strings.ToLower(o[:i])
		v := strings.TrimLeft(o[i:], "= \t")
		switch k {
		case "proxycommand", "localcommand", "knownhostscommand", "remotecommand":
			c.raiseCall(cl, Write, "ssh -o "+o[:i]+" runs a command")
			if v != "" && strings.ToLower(v) != "none" {
				c.nested(cl.sc, cl.node, v, cl.depth)
			}
		}
	}
}

// awk is read only for programs that just print: no system(), no pipes, no
// output redirection, no program file.
func (c *classifier) awk(cl *cmdCall, args []value) {
	p := getopt(spec(awkOpts), args[1:], true)
	if p.bad != "" {
		c.raiseCall(cl, Write, "unknown option "+p.bad+" for awk")
		return
	}
	if p.has("-f", "--file", "-i", "--include", "-l", "--load", "-E") {
		c.raiseCall(cl, Write, "awk runs a program file the classifier cannot read")
		return
	}
	progs := p.values("-e", "--source")
	ops := p.operands
	if len(progs) == 0 {
		if len(ops) == 0 {
			c.raiseCall(cl, Write, "awk without a program")
			return
		}
		if !ops[0].known {
			c.raiseCall(cl, Write, "awk program known only at run time (interpreter code is opaque)")
			return
		}
		progs = []string{ops[0].s}
	}
	files := ops
	if len(p.values("-e", "--source")) == 0 {
		files = ops[1:]
	}
	for _, prog := range progs {
		if c.awkDevices(cl, prog) {
			return
		}
		if why, ok := awkProgramSafe(prog); !ok {
			c.raiseCall(cl, Write, "awk program "+why)
		}
	}
	c.devices(cl, "awk", files)
}

// awkString matches an awk string literal.
var awkString = regexp.MustCompile(`"((?:[^"\\]|\\.)*)"`)

// awkDevices raises an awk program with a string literal that names a
// device: `getline < "/dev/watchdog"` opens it, `print > "/dev/sda"`
// writes a disk.
func (c *classifier) awkDevices(cl *cmdCall, prog string) bool {
	for _, m := range awkString.FindAllStringSubmatch(prog, -1) {
		lit := value{s: m[1], known: true}
		if dev, ok := opensDeviceIn(lit, c.cwdMoves); ok {
			c.raiseCall(cl, Destructive, "awk program opens "+dev+": "+deviceWhy)
			return true
		}
		if isBlockDevice(lit.s) {
			c.raiseCall(cl, Destructive, "awk program may write block device "+lit.s)
			return true
		}
	}
	return false
}

var awkIndirectCall = regexp.MustCompile(`@[A-Za-z_][A-Za-z0-9_]*\s*\(`)

var awkPrintRedirect = regexp.MustCompile(`\bprintf?\b[^;{}\n]*[>|]`)

func awkProgramSafe(prog string) (string, bool) {
	switch {
	case strings.Contains(prog, "@include") || strings.Contains(prog, "@load"):
		// @include "inplace" (shipped with gawk) edits the input files in
		// place; @load loads a shared library.
		return "includes awk source or loads an extension the classifier cannot read", false
	case awkIndirectCall.MatchString(prog):
		// gawk calls a function named by a string, built-ins such as
		// system included: f = "sys" "tem"; @f("cmd").
		return "calls a function by name (@f(...)), which may be system", false
	case strings.Contains(prog, "/inet"):
		return "opens a network connection (/inet special files)", false
	case strings.Contains(prog, "system"):
		return "calls system()", false
	case strings.Contains(prog, "getline") && strings.Contains(prog, "|"):
		return "reads getline from a command", false
	case strings.Contains(prog, "|&"):
		return "talks to a coprocess", false
	case awkPrintRedirect.MatchString(prog):
		return "prints to a file or a command", false
	case strings.Contains(prog, "ENVIRON") && strings.Contains(prog, "="):
		return "changes the environment", false
	}
	return "", true
}

// find is read with its tests and printing actions; -delete is
// destructive, the -fprint family writes, and -exec and friends run a
// command classified as such, with {} as an argument known only at run time.
func (c *classifier) find(cl *cmdCall, args []value) {
	ops := args[1:]
	for _, a := range ops {
		if !a.known {
			c.raiseCall(cl, Destructive, "find with an argument known only at run time ("+a.why+") can reach -delete")
			return
		}
	}
	for i := 0; i < len(ops); i++ {
		s := ops[i].s
		if !strings.HasPrefix(s, "-") || s == "-" {
			continue // a starting point, or the value of the previous test
		}
		switch s {
		case "-delete":
			c.raiseCall(cl, Destructive, "find -delete removes what it matches")
		case "-exec", "-execdir", "-ok", "-okdir":
			j := i + 1
			for j < len(ops) && !(ops[j].known && (ops[j].s == ";" || ops[j].s == "+")) {
				j++
			}
			inner := make([]value, 0, j-i-1)
			for _, w := range ops[i+1 : j] {
				if w.known && strings.Contains(w.s, "{}") {
					w = value{why: "the file names find supplies"}
				}
				inner = append(inner, w)
			}
			if len(inner) == 0 {
				c.raiseCall(cl, Write, "find "+s+" without a command")
			} else {
				sub := *cl
				sub.depth++
				c.simple(&sub, inner)
			}
			i = j
		default:
			kind, ok := findPrimaries[s]
			if !ok {
				c.raiseCall(cl, Write, "find "+s+" is not a read-only test or action")
				continue
			}
			i += int(kind)
		}
	}
}
