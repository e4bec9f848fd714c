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
		return func(c *classifier, cl *cmdCall, args []value) {
			c.raiseCall(cl, Write, base+" runs code the classifier cannot read (interpreter code is opaque)")
		}, true
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
	case "tar", "rg", "sort", "man":
		return (*classifier).programOptions, true
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

// shells run a string given with -c, a script file, or their standard input.
var shells = map[string]bool{"sh": true, "bash": true, "dash": true, "zsh": true, "ksh": true, "ash": true, "mksh": true, "rbash": true, "yash": true, "fish": true, "tcsh": true, "csh": true}

func isInterpreter(base string) bool {
	for _, p := range []string{"python", "perl", "ruby", "node", "nodejs", "php", "lua", "luajit", "tclsh", "wish", "Rscript", "deno", "bun", "pwsh", "irb", "julia", "java", "jshell", "groovy", "osascript", "expect"} {
		if base == p || strings.HasPrefix(base, p) && strings.Trim(base[len(p):], "0123456789.-") == "" {
			return true
		}
	}
	return false
}

// builtinsRead are shell builtins that change nothing outside the shell
// itself; a non-empty reason makes them write.
var builtinsRead = map[string]string{
	":": "", "cd": "", "pushd": "", "popd": "", "dirs": "", "set": "", "shopt": "",
	"wait": "", "umask": "", "ulimit": "", "exit": "", "return": "", "break": "",
	"continue": "", "shift": "", "unset": "", "getopts": "", "read": "", "unalias": "",
	"mapfile": "", "readarray": "", "let": "", "local": "", "export": "", "readonly": "",
	"declare": "", "typeset": "", "jobs": "", "times": "", "caller": "", "help": "",
	"logout": "", "suspend": "", "disown": "", "history": "history can rewrite the history file",
	"hash": "hash -p maps a name to another program", "enable": "enable -f loads code into the shell",
	"bind": "bind changes key bindings", "complete": "complete can run commands on completion",
	"fc": "fc runs commands from the history",
}

// neverRead are commands classification.md names as never read, with why.
var neverRead = map[string]string{
	"less": "pager is never read", "more": "pager is never read", "most": "pager is never read",
	"man": "pager is never read", "vi": "editor is never read", "vim": "editor is never read",
	"nano": "editor is never read", "emacs": "editor is never read", "ed": "editor is never read",
	"curl": "curl can send and save data", "wget": "wget saves files",
	// top -b -n 1 was read in the first allowlist; under bash in the
	// sandbox procps-ng 4's top created ~/.config/procps (for its rc file)
	// on every first run.
	"top": "top creates ~/.config/procps for its settings file, and without -b -n N it is interactive or runs forever",
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
	for _, o := range p.values("-o") {
		k, v, _ := strings.Cut(o, "=")
		k = strings.ToLower(strings.TrimSpace(k))
		if k == "proxycommand" || k == "localcommand" || k == "knownhostscommand" {
			c.nested(cl.sc, cl.node, strings.TrimSpace(v), cl.depth)
		}
	}
	if len(p.operands) < 2 {
		return
	}
	c.runJoined(cl, "ssh", p.operands[1:])
}

const sshOpts = "-4 -6 -A -a -C -f -G -g -K -k -M -N -n -q -s -T -t -V -v -X -x -Y -y -B= -b= -c= -D= -E= -e= -F= -I= -i= -J= -L= -l= -m= -O= -o= -P= -p= -Q= -R= -S= -W= -w="

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
	for _, prog := range progs {
		if why, ok := awkProgramSafe(prog); !ok {
			c.raiseCall(cl, Write, "awk program "+why)
		}
	}
}

// awkOpts are the awk options the parser knows. gawk's -d (--dump-variables),
// -p (--profile) and -o (--pretty-print) write awkvars.out or awkprof.out,
// and -D starts the debugger: they are left out, so they are unknown options.
const awkOpts = "-F= -v= -f= -e= -b -c -E= -g -h -i= -l= -L? -M -n -N -O -P -r -s -S -t -V --field-separator= --assign= --file= --source= --include= --load= --sandbox --posix --traditional --characters-as-bytes --use-lc-numeric --bignum --re-interval"

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

// findPrimaries lists find's read-only options, tests and actions with the
// number of values each takes. -fprint, -fprintf, -fls (write a file),
// -delete and -exec are absent on purpose.
var findPrimaries = map[string]uint8{
	"-name": 1, "-iname": 1, "-path": 1, "-ipath": 1, "-wholename": 1, "-iwholename": 1,
	"-regex": 1, "-iregex": 1, "-regextype": 1, "-type": 1, "-xtype": 1, "-size": 1,
	"-mtime": 1, "-mmin": 1, "-atime": 1, "-amin": 1, "-ctime": 1, "-cmin": 1, "-used": 1,
	"-newer": 1, "-anewer": 1, "-cnewer": 1, "-newermt": 1, "-newerct": 1, "-newerat": 1, "-newermm": 1,
	"-user": 1, "-group": 1, "-uid": 1, "-gid": 1, "-perm": 1, "-links": 1, "-inum": 1,
	"-samefile": 1, "-lname": 1, "-ilname": 1, "-fstype": 1, "-context": 1,
	"-maxdepth": 1, "-mindepth": 1, "-printf": 1,
	"-print": 0, "-print0": 0, "-ls": 0, "-prune": 0, "-quit": 0, "-not": 0, "-a": 0, "-o": 0,
	"-and": 0, "-or": 0, "-!": 0, "-depth": 0, "-follow": 0, "-xdev": 0, "-mount": 0,
	"-nouser": 0, "-nogroup": 0, "-empty": 0, "-readable": 0, "-writable": 0, "-executable": 0,
	"-true": 0, "-false": 0, "-daystart": 0, "-noleaf": 0, "-ignore_readdir_race": 0,
	"-noignore_readdir_race": 0, "-L": 0, "-H": 0, "-P": 0, "-d": 0, "-O0": 0, "-O1": 0, "-O2": 0, "-O3": 0,
}
