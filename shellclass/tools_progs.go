package shellclass

import (
	"regexp"
	"strings"
)

// Tools that are never read but whose arguments or input name commands
// they run: each is classified as at least write, and as the commands it
// runs (a pager's !cmd, an editor's :!cmd, at's job, parallel's command,
// socat's EXEC address). The parsing is a best effort that only raises:
// what it cannot read stays write.

// pagerCommands classifies less's (and more's) +cmd options, the less
// commands run at start: !cmd and #cmd run a shell command, |m cmd pipes
// to one.
func (c *classifier) pagerCommands(cl *cmdCall, base string, args []value) {
	for _, a := range args[1:] {
		if !a.known {
			if mayBe(a, "+") {
				c.raiseCall(cl, Destructive, base+" with a start command known only at run time")
			}
			continue
		}
		cmds, ok := strings.CutPrefix(a.s, "+")
		if !ok {
			continue
		}
		cmds = strings.TrimPrefix(cmds, "+")
		for i := 0; i < len(cmds); i++ {
			switch cmds[i] {
			case '!', '#':
				c.nested(cl.sc, cl.node, cmds[i+1:], cl.depth)
				return
			case '|':
				if i+2 <= len(cmds) {
					c.nested(cl.sc, cl.node, cmds[min(i+2, len(cmds)):], cl.depth)
				}
				return
			}
		}
	}
}

// exShell finds the shell commands in an ex command line: :!cmd (also
// after r, w, silent), and the string literals given to system() and
// systemlist(); :terminal cmd.
var (
	exBang     = regexp.MustCompile(`!([^=].*)$`)
	exSystem   = regexp.MustCompile(`system(?:list)?\s*\(\s*(?:'([^']*)'|"((?:[^"\\]|\\.)*)")`)
	exTerminal = regexp.MustCompile(`(?:^|[|:\s])ter(?:m|mi|min|mina|minal)?!?\s+(.+)$`)
)

// editorCommands classifies the ex commands vi, vim, ex, view and nvim run
// from -c CMD, +CMD and --cmd CMD.
func (c *classifier) editorCommands(cl *cmdCall, base string, args []value) {
	var cmds []value
	for i := 1; i < len(args); i++ {
		a := args[i]
		switch {
		case !a.known:
			if mayBe(a, "+") || mayBe(a, "-c") || mayBe(a, "--cmd") {
				c.raiseCall(cl, Destructive, base+" with an argument known only at run time, which may be an ex command")
				return
			}
		case a.s == "-c" || a.s == "--cmd":
			if i+1 < len(args) {
				i++
				cmds = append(cmds, args[i])
			}
		case strings.HasPrefix(a.s, "+") && len(a.s) > 1:
			cmds = append(cmds, value{s: a.s[1:], known: true})
		case a.s == "--":
			i = len(args)
		}
	}
	for _, cmd := range cmds {
		if !cmd.known {
			c.raiseCall(cl, Destructive, base+" runs an ex command known only at run time")
			continue
		}
		c.exShellCommands(cl, cmd.s)
	}
}

func (c *classifier) exShellCommands(cl *cmdCall, cmd string) {
	for _, m := range exSystem.FindAllStringSubmatch(cmd, -1) {
		c.nested(cl.sc, cl.node, m[1]+m[2], cl.depth)
	}
	if m := exTerminal.FindStringSubmatch(cmd); m != nil {
		c.nested(cl.sc, cl.node, m[1], cl.depth)
	}
	if m := exBang.FindStringSubmatch(cmd); m != nil && strings.TrimSpace(m[1]) != "" {
		c.nested(cl.sc, cl.node, m[1], cl.depth)
	}
}

// gdbCommands classifies gdb's -ex commands (shell CMD, !CMD) and the
// program it debugs (--args PROG ...), which gdb runs with `run`.
func (c *classifier) gdbCommands(cl *cmdCall, args []value) {
	for i := 1; i < len(args); i++ {
		a := args[i]
		if !a.known {
			continue
		}
		switch a.s {
		case "-ex", "--ex", "-eval-command", "--eval-command", "-iex", "--init-eval-command":
			if i+1 < len(args) {
				i++
				cmd := strings.TrimSpace(args[i].s)
				if rest, ok := strings.CutPrefix(cmd, "shell "); ok {
					c.nested(cl.sc, cl.node, rest, cl.depth)
				} else if rest, ok := strings.CutPrefix(cmd, "!"); ok {
					c.nested(cl.sc, cl.node, rest, cl.depth)
				} else if !args[i].known {
					c.raiseCall(cl, Destructive, "gdb command known only at run time")
				}
			}
		case "--args", "-args":
			if i+1 < len(args) {
				sub := *cl
				sub.depth++
				c.simple(&sub, args[i+1:])
			}
			return
		}
	}
}

// atJob classifies at and batch: the job is the standard input (a literal
// here-document or here-string is read) or the file of -f; at -r and -d
// delete jobs.
func (c *classifier) atJob(cl *cmdCall, base string, args []value) {
	p := getopt(spec(atOpts), args[1:], false)
	if p.has("-r", "-d") {
		c.raiseCall(cl, Destructive, base+" -r deletes queued jobs")
		return
	}
	c.raiseCall(cl, Write, base+" queues a job that runs later")
	if p.has("-l", "-c") || p.has("-f") {
		return
	}
	if cl.stdinKnown {
		c.nested(cl.sc, cl.node, cl.stdin, cl.depth)
	}
}

// parallelOpts are GNU parallel's options (parallel 20221122) before its
// command: enough to find the command; an option not here makes the
// command impossible to find, which is destructive.
const parallelOpts = "-0 --null -a= --arg-file= --arg-file-sep= --arg-sep= --bar --basefile= --bf= --bibtex --block= --cat --citation --colsep= -C= --compress --ctag --delay= --dry-run -d= --delimiter= -E= --eof? -e? --env= --eta --fifo --filter-hosts --group --group-by= --halt= --header= --help -h --hostgroups -I= -i? --replace? -j= --jobs= --joblog= --jl= --keep-order -k --line-buffer --lb --linebuffer --load= --max-args= -n= -N= --max-chars= -s= --max-lines= -L= -l? --max-procs= -P= --memfree= --memsuspend= --no-notice --no-run-if-empty -r --nonall --onall --open-tty -o --output-as-files --outputasfiles --files --pipe --spreadstdin --pipe-part --plain --plus --progress --quote -q --recstart= --recend= --regexp --results= --res= --resume --resume-failed --retries= --return= --round-robin --round --sem --semaphore --semaphorename= --id= --shebang --shebang-wrap --shellquote --shuf --skip-first-line --sshdelay= --sshlogin= -S= --sshloginfile= --slf= --tag --tagstring= --tee --timeout= --tmpdir= --tmux --trim= --ungroup -u --unsafe --verbose -v --version -V --will-cite --workdir= --wd= -X -x --xapply --link --xargs -m"

// parallel classifies GNU parallel: the words before ::: (or ::::) are a
// command template that parallel runs through the shell once per input;
// the inputs are data. Without a command, parallel runs its input lines
// as commands.
func (c *classifier) parallel(cl *cmdCall, args []value) {
	c.raiseCall(cl, Write, "parallel runs commands")
	p := getopt(spec(parallelOpts), args[1:], true)
	if p.bad != "" {
		c.raiseCall(cl, Destructive, "unknown option "+p.bad+" for parallel: the command it runs cannot be found")
		return
	}
	var cmd []value
	for _, o := range p.operands {
		if o.known && (o.s == ":::" || o.s == "::::" || o.s == ":::+" || o.s == "::::+") {
			break
		}
		cmd = append(cmd, o)
	}
	if len(cmd) == 0 {
		if cl.stdinKnown {
			c.nested(cl.sc, cl.node, cl.stdin, cl.depth)
		}
		return
	}
	c.runJoined(cl, "parallel", cmd)
}

// sgCommand classifies sg GROUP [-c] COMMAND: the command, joined, runs
// through /bin/sh -c.
func (c *classifier) sgCommand(cl *cmdCall, args []value) {
	c.raiseCall(cl, Write, "sg runs a command as another group")
	ops := args[1:]
	if len(ops) > 0 && ops[0].known && ops[0].s == "-" {
		ops = ops[1:]
	}
	if len(ops) < 2 {
		return // a shell
	}
	ops = ops[1:]
	if ops[0].known && ops[0].s == "-c" {
		ops = ops[1:]
	}
	c.runJoined(cl, "sg", ops)
}

// socatAddress classifies socat's and nc's program addresses: EXEC:cmd,
// SYSTEM:cmd (socat), -e PROG and -c CMD (nc, ncat), --exec, --sh-exec.
var socatExec = regexp.MustCompile(`(?i)^(?:exec|system):(.*?)(?:,[a-z-]+(?:=[^,]*)?)*$`)

func (c *classifier) netExec(cl *cmdCall, base string, args []value) {
	c.raiseCall(cl, Write, base+" opens network connections")
	for i := 1; i < len(args); i++ {
		a := args[i]
		if !a.known {
			continue
		}
		if base == "socat" {
			if m := socatExec.FindStringSubmatch(a.s); m != nil {
				c.nested(cl.sc, cl.node, m[1], cl.depth)
			}
			continue
		}
		name, val, hasVal := strings.Cut(a.s, "=")
		switch name {
		case "-e", "-c", "--exec", "--sh-exec", "--lua-exec":
			if !hasVal && i+1 < len(args) {
				i++
				val = args[i].s
				if !args[i].known {
					c.raiseCall(cl, Destructive, base+" "+name+" runs a program known only at run time")
					continue
				}
			}
			c.nested(cl.sc, cl.node, val, cl.depth)
		}
	}
}

// crontabJob classifies a crontab installed from a literal standard input
// (crontab - <<EOF): each entry's command runs later.
func (c *classifier) crontabJob(cl *cmdCall, args []value) {
	if !cl.stdinKnown {
		return
	}
	reads := len(args) == 1
	for _, a := range args[1:] {
		reads = reads || a.known && a.s == "-"
	}
	if !reads {
		return
	}
	for _, line := range strings.Split(cl.stdin, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		n := 5
		if strings.HasPrefix(f[0], "@") {
			n = 1
		} else if strings.Contains(f[0], "=") {
			continue // NAME=value
		}
		if len(f) > n {
			c.nested(cl.sc, cl.node, strings.Join(f[n:], " "), cl.depth)
		}
	}
}

// sftpPrograms classifies sftp's -S (the program that carries the
// connection) and -D (the sftp server to run), and its -o options.
func (c *classifier) sftpPrograms(cl *cmdCall, args []value) {
	c.raiseCall(cl, Write, "sftp transfers files")
	p := getopt(spec(sftpOpts), args[1:], false)
	for _, v := range p.optValues("-S", "-D") {
		if !v.known {
			c.raiseCall(cl, Destructive, "sftp -S/-D names a program known only at run time")
			continue
		}
		c.nested(cl.sc, cl.node, v.s, cl.depth)
	}
	c.sshOptions(cl, p.values("-o"))
}
