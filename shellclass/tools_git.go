package shellclass

import "strings"

// gitProgramKey reports a configuration key whose value git runs as a
// program or shell code.
func gitProgramKey(key string) bool {
	key = strings.ToLower(key)
	for _, k := range gitProgramKeys {
		if key == k {
			return true
		}
	}
	if strings.HasPrefix(key, "pager.") || strings.HasPrefix(key, "alias.") {
		return true
	}
	for _, s := range gitProgramKeySuffixes {
		if strings.HasSuffix(key, s) {
			return true
		}
	}
	return false
}

// gitFormatCheck refuses the format placeholders that verify signatures
// (%G?, %GS ...), which run gpg.
func gitFormatCheck(p *parsed) (Class, string) {
	for _, o := range p.opts {
		switch o.name {
		case "--format", "--pretty":
			if strings.Contains(o.val, "%G") {
				return Write, "git format placeholder %G verifies signatures, which runs gpg"
			}
		}
	}
	return Read, ""
}

// gitListMode reports whether a git branch or git tag command lists:
// --list, no operand, or a filter option (builtin/branch.c and tag.c cmd_*:
// --contains, --merged, --points-at, and tag's -n, force list mode).
func gitListMode(p *parsed, extra ...string) bool {
	if p.has(append([]string{"-l", "--list", "--contains", "--no-contains", "--with", "--without", "--merged", "--no-merged", "--points-at"}, extra...)...) {
		return true
	}
	return len(p.operands) == 0
}

// gitBranchCheck: git branch lists (read) only in list mode; -v with a
// name creates a branch, and --show-current takes no operand.
func gitBranchCheck(p *parsed) (Class, string) {
	if p.has("--show-current") && len(p.operands) == 0 {
		return Read, ""
	}
	if !gitListMode(p) {
		return Write, "git branch NAME creates a branch"
	}
	return Read, ""
}

// gitTagCheck: git tag lists only in list mode; git tag NAME creates a tag.
func gitTagCheck(p *parsed) (Class, string) {
	if !gitListMode(p, "-n") {
		return Write, "git tag NAME creates a tag"
	}
	return Read, ""
}

// gitRemoteCheck: `git remote`, `git remote -v` and `git remote get-url`
// only print configuration; every other form changes it or contacts the
// remote (which runs ssh or a helper).
func gitRemoteCheck(p *parsed) (Class, string) {
	switch {
	case len(p.operands) == 0:
		return Read, ""
	case p.operands[0].s == "get-url":
		for _, o := range p.operands[1:] {
			if strings.HasPrefix(o.s, "-") && o.s != "--push" && o.s != "--all" {
				return Write, "unknown option " + o.s + " for git remote get-url"
			}
		}
		return Read, ""
	}
	return Write, "git remote " + p.operands[0].s + " changes remotes or contacts one"
}

// gitConfigReads are git config's options that read: the get and list
// actions of git 2.39, which need one of them to read.
var gitConfigReads = []string{"--get", "--get-all", "--get-regexp", "--get-urlmatch", "-l", "--list", "--get-color", "--get-colorbool"}

// gitConfigCheck: git config reads only with a get or list action
// (--get, --list ...), or with the subcommand get or list of newer gits,
// which must be the first operand. Any other form sets a key: in git 2.39
// `git config KEY VALUE get` sets KEY (get is a value pattern), and a set
// program key (core.fsmonitor) runs on the next git command.
func gitConfigCheck(p *parsed) (Class, string) {
	if p.has(gitConfigReads...) {
		return Read, ""
	}
	if len(p.operands) > 0 && (p.operands[0].s == "get" || p.operands[0].s == "list") {
		return Read, ""
	}
	return Write, "git config without --get or --list sets configuration"
}

// git classifies a git command: its global options, the configuration and
// programs they name, the destructive forms and the read subcommands, each
// read against its own option table.
func (c *classifier) git(cl *cmdCall, args []value) {
	if !allKnown(args) {
		c.raiseCall(cl, Destructive, "git with an argument known only at run time can reach any subcommand, and -c can name a program")
		return
	}
	g := getopt(specOf(exactFamily, gitGlobals), args[1:], true)
	notRead := ""
	if g.bad != "" {
		notRead = "unknown git option " + g.bad
	}
	for _, o := range g.opts {
		switch {
		case o.name == "-c":
			key, val, _ := strings.Cut(o.val, "=")
			c.gitConfigValue(cl, key, val, "git -c")
			if notRead == "" && !gitProgramKey(key) {
				notRead = "git -c " + key + " changes configuration"
			}
		case o.name == "--config-env":
			key, _, _ := strings.Cut(o.val, "=")
			if gitProgramKey(key) {
				c.raiseCall(cl, Destructive, "git --config-env takes program "+key+" from the environment")
			}
			notRead = "git --config-env changes configuration"
		case o.prog:
			c.raiseCall(cl, Write, "git "+o.name+" names a program to run")
			if o.val != "" {
				c.nested(cl.sc, cl.node, o.val, cl.depth)
			}
		case o.name == "--exec-path" && !o.hasVal:
			// prints the directory
		case o.cls > Read && notRead == "":
			notRead = "git " + o.word + " is not a read option (another repository, configuration or a pager)"
		}
	}
	if len(g.operands) == 0 {
		if notRead != "" {
			c.raiseCall(cl, Write, notRead)
		}
		return
	}
	sub := g.operands[0].s
	rest := g.operands[1:]
	c.gitSubPrograms(cl, sub, rest)
	if why, ok := gitDestructive(sub, rest); ok {
		c.raiseCall(cl, Destructive, why)
		return
	}
	if sub == "config" {
		c.gitConfigSet(cl, rest)
	}
	e, ok := gitReadSubs[sub]
	if sub == "stash" || sub == "reflog" || sub == "worktree" {
		e, rest, ok = gitSubVerb(sub, rest)
	}
	if !ok {
		c.raiseCall(cl, Write, "git "+sub+" is not a read subcommand")
		return
	}
	if notRead != "" {
		c.raiseCall(cl, Write, notRead)
		return
	}
	p := getopt(specOf(e.family, e.opts), rest, false)
	c.optionPrograms(cl, "git "+sub, &p)
	if o, worse := p.worst(); worse {
		c.raiseCall(cl, o.cls, "git "+sub+" "+o.word+" is not a read option (it writes, runs a program or changes refs)")
		return
	}
	if p.bad != "" {
		c.raiseCall(cl, Write, "unknown option "+p.bad+" for git "+sub)
		return
	}
	if e.check != nil {
		if cls, why := e.check(&p); cls > Read {
			c.raiseCall(cl, cls, why)
			return
		}
	}
	if c.opts.Terminal && !g.has("--no-pager", "-P") {
		// pager.<cmd> in the configuration can page any subcommand.
		c.raiseCall(cl, Write, "git "+sub+" without --no-pager may start a pager on a terminal, and a pager runs commands")
	}
}

// gitSubVerb reads the subcommands whose read forms are a verb: git stash
// list and show, git reflog (show), git worktree list.
func gitSubVerb(sub string, rest []value) (gitSub, []value, bool) {
	verb := ""
	if len(rest) > 0 && !strings.HasPrefix(rest[0].s, "-") {
		verb, rest = rest[0].s, rest[1:]
	}
	switch {
	case sub == "stash" && verb == "list", sub == "reflog" && (verb == "" || verb == "show"):
		return gitReadSubs["log"], rest, true
	case sub == "stash" && verb == "show":
		return gitSub{exactFamily, gitStashShowOpts, nil}, rest, true
	case sub == "worktree" && verb == "list":
		return gitSub{gitFamily, gitWorktreeListOpts, nil}, rest, true
	}
	return gitSub{}, nil, false
}

// gitConfigValue classifies a configuration value git will run: a program
// key's value is classified as the command it is.
func (c *classifier) gitConfigValue(cl *cmdCall, key, val, what string) {
	if !gitProgramKey(key) {
		return
	}
	c.raiseCall(cl, Write, what+" "+key+" names a program git will run")
	val = strings.TrimSpace(strings.TrimPrefix(val, "!"))
	if val != "" {
		c.nested(cl.sc, cl.node, val, cl.depth)
	}
}

// gitConfigSet classifies what `git config KEY VALUE` (and --add,
// --replace-all, set) stores under a program key: the program runs on a
// later git command.
func (c *classifier) gitConfigSet(cl *cmdCall, rest []value) {
	p := getopt(specOf(gitFamily, gitReadSubs["config"].opts), rest, false)
	ops := p.operands
	if len(ops) > 0 && (ops[0].s == "set" || ops[0].s == "add") {
		ops = ops[1:]
	}
	if len(ops) >= 2 && !p.has(gitConfigReads...) {
		c.gitConfigValue(cl, ops[0].s, ops[1].s, "git config")
	}
}

// gitSubPrograms classifies the options of any subcommand that name a
// program: clone/fetch/ls-remote/pull/archive -u and --upload-pack, push
// --receive-pack and --exec, difftool -x/--extcmd, rebase -x/--exec,
// bisect run, submodule foreach, filter-branch's filters.
func (c *classifier) gitSubPrograms(cl *cmdCall, sub string, rest []value) {
	run := func(what, prog string) {
		c.raiseCall(cl, Write, "git "+sub+" "+what+" names a program to run")
		if strings.TrimSpace(prog) != "" {
			c.nested(cl.sc, cl.node, prog, cl.depth)
		}
	}
	for i := 0; i < len(rest); i++ {
		a := rest[i].s
		if a == "--" {
			break
		}
		name, val, hasVal := strings.Cut(a, "=")
		next := func() string {
			if hasVal {
				return val
			}
			if i+1 < len(rest) {
				i++
				return rest[i].s
			}
			return ""
		}
		switch {
		case strings.HasPrefix(name, "--") && len(name) >= 5 && (strings.HasPrefix("--upload-pack", name) || strings.HasPrefix("--receive-pack", name)):
			run(name, next())
		case strings.HasPrefix(name, "--exec") && len(name) >= 4 && strings.HasPrefix("--exec", name) || name == "--extcmd" || strings.HasPrefix(name, "--extc") && strings.HasPrefix("--extcmd", name):
			run(name, next())
		case strings.HasSuffix(name, "-filter") && sub == "filter-branch":
			run(name, next())
		case len(a) >= 2 && a[0] == '-' && a[1] != '-' && (sub == "clone" || sub == "fetch" || sub == "ls-remote" || sub == "pull" || sub == "archive") && strings.ContainsRune(a[1:], 'u'):
			j := strings.IndexByte(a, 'u')
			if j+1 < len(a) {
				run("-u", a[j+1:])
			} else {
				run("-u", next())
			}
		case len(a) >= 2 && a[0] == '-' && a[1] != '-' && (sub == "difftool" || sub == "rebase") && strings.ContainsRune(a[1:], 'x'):
			j := strings.IndexByte(a, 'x')
			if j+1 < len(a) {
				run("-x", a[j+1:])
			} else {
				run("-x", next())
			}
		}
	}
	switch {
	case sub == "bisect" && len(rest) > 1 && rest[0].s == "run":
		c.raiseCall(cl, Write, "git bisect run runs a command")
		c.runJoined(cl, "git bisect run", rest[1:])
	case sub == "submodule" && len(rest) > 0:
		for i, a := range rest {
			if a.s == "foreach" {
				ops := rest[i+1:]
				for len(ops) > 0 && strings.HasPrefix(ops[0].s, "-") {
					ops = ops[1:]
				}
				c.raiseCall(cl, Write, "git submodule foreach runs a command")
				c.runJoined(cl, "git submodule foreach", ops)
				break
			}
		}
	}
}

// gitDestructive reports the git forms that delete data or history.
func gitDestructive(sub string, args []value) (string, bool) {
	// has matches GNU-style: an option or an unambiguous prefix of it
	// (`--ha` is `--hard`); an ambiguous prefix still counts, toward the
	// higher class.
	has := func(names ...string) bool {
		for _, a := range args {
			n, _, _ := strings.Cut(a.s, "=")
			for _, want := range names {
				if n == want || len(n) > 3 && strings.HasPrefix(n, "--") && strings.HasPrefix(want, n) {
					return true
				}
			}
		}
		return false
	}
	shortHas := func(letters string) bool {
		for _, a := range args {
			if strings.HasPrefix(a.s, "-") && !strings.HasPrefix(a.s, "--") && strings.ContainsAny(a.s[1:], letters) {
				return true
			}
		}
		return false
	}
	switch sub {
	case "clean":
		return "git clean deletes untracked files", true
	case "rm":
		return "git rm deletes files", true
	case "restore":
		return "git restore discards changes to files", true
	case "reset":
		if has("--hard", "--merge", "--keep") {
			return "git reset --hard discards changes", true
		}
	case "checkout", "switch":
		if has("--", "--force", "--discard-changes") || sub == "checkout" && shortHas("f") {
			return "git " + sub + " -- PATH or --force discards changes", true
		}
		if sub == "checkout" {
			for _, a := range args {
				if a.s == "." {
					return "git checkout . discards changes", true
				}
			}
		}
	case "branch":
		if has("--delete") || shortHas("dD") {
			return "git branch -d deletes a branch", true
		}
	case "tag":
		if has("--delete") || shortHas("d") {
			return "git tag -d deletes a tag", true
		}
	case "stash":
		if len(args) > 0 && (args[0].s == "drop" || args[0].s == "clear") {
			return "git stash " + args[0].s + " deletes stashed changes", true
		}
	case "push":
		if has("--force", "--force-with-lease", "--force-if-includes", "--delete", "--mirror", "--prune") || shortHas("fd") {
			return "git push with force, delete or prune can destroy remote history", true
		}
		for _, a := range args {
			if !strings.HasPrefix(a.s, "-") && (strings.HasPrefix(a.s, "+") || strings.HasPrefix(a.s, ":")) {
				return "git push refspec " + a.s + " forces or deletes a remote ref", true
			}
		}
	case "worktree":
		if len(args) > 0 && (args[0].s == "remove" || args[0].s == "prune") {
			return "git worktree " + args[0].s + " deletes a working tree", true
		}
	case "reflog":
		if len(args) > 0 && (args[0].s == "expire" || args[0].s == "delete") {
			return "git reflog " + args[0].s + " deletes history", true
		}
	case "update-ref":
		if has("-d", "--stdin") {
			return "git update-ref -d deletes a ref", true
		}
	case "filter-branch", "filter-repo":
		return "git " + sub + " rewrites all history", true
	case "gc", "prune":
		if sub == "prune" || has("--prune") {
			return "git " + sub + " deletes unreachable objects", true
		}
	}
	return "", false
}
