package shellclass

import "strings"

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

func gitAnyArgs(args []value) (Class, string) {
	for _, a := range args {
		if !a.known || !strings.HasPrefix(a.s, "--") {
			continue
		}
		if a.s == "--" {
			break
		}
		if strings.Contains(a.s, "%G") && (strings.HasPrefix(a.s, "--format") || strings.HasPrefix(a.s, "--pretty")) {
			return Write, "git format placeholder %G verifies signatures, which runs gpg"
		}
		name, _, _ := strings.Cut(a.s[2:], "=")
		for _, f := range gitForbidden {
			if len(name) >= 2 && strings.HasPrefix(f, name) {
				return Write, "git option --" + name + " (--" + f + ") writes a file or runs a program"
			}
		}
	}
	return Read, ""
}

func gitGrep(args []value) (Class, string) {
	for _, a := range args {
		if a.known && (a.s == "-O" || strings.HasPrefix(a.s, "-O") || strings.HasPrefix(a.s, "--open-files")) {
			return Write, "git grep -O opens files in a pager"
		}
	}
	return gitAnyArgs(args)
}

func gitBranch(args []value) (Class, string) {
	listing := false
	for _, a := range args {
		switch a.s {
		case "-l", "--list", "-a", "--all", "-r", "--remotes", "--show-current", "-v", "-vv", "--verbose", "--merged", "--no-merged", "--contains", "--no-contains", "--points-at", "--format", "--sort", "--column", "--no-column", "--color", "--no-color", "-q", "--quiet", "--abbrev", "--no-abbrev", "-i", "--ignore-case", "--omit-empty":
			listing = true
		}
		if strings.HasPrefix(a.s, "--format=") || strings.HasPrefix(a.s, "--sort=") || strings.HasPrefix(a.s, "--contains=") || strings.HasPrefix(a.s, "--merged=") || strings.HasPrefix(a.s, "--points-at=") || strings.HasPrefix(a.s, "--color=") || strings.HasPrefix(a.s, "--abbrev=") || strings.HasPrefix(a.s, "--column=") {
			listing = true
		}
	}
	for _, a := range args {
		if !strings.HasPrefix(a.s, "-") && !listing {
			return Write, "git branch NAME creates or changes a branch"
		}
		if strings.HasPrefix(a.s, "-") && !strings.HasPrefix(a.s, "--") && strings.ContainsAny(a.s, "mMcCfu") {
			return Write, "git branch " + a.s + " changes branches"
		}
		if a.s == "--edit-description" || a.s == "--set-upstream-to" || strings.HasPrefix(a.s, "--set-upstream") || a.s == "--unset-upstream" || a.s == "--track" || a.s == "--move" || a.s == "--copy" || a.s == "--force" {
			return Write, "git branch " + a.s + " changes branches"
		}
	}
	return gitAnyArgs(args)
}

func gitTag(args []value) (Class, string) {
	if len(args) == 0 {
		return Read, ""
	}
	for _, a := range args {
		if a.s == "-l" || a.s == "--list" {
			return gitAnyArgs(args)
		}
	}
	return Write, "git tag creates a tag"
}

func gitRemote(args []value) (Class, string) {
	if len(args) == 0 || len(args) == 1 && (args[0].s == "-v" || args[0].s == "--verbose") {
		return Read, ""
	}
	return Write, "git remote " + args[0].s + " is not the listing form"
}

func gitConfig(args []value) (Class, string) {
	for _, a := range args {
		switch a.s {
		case "--get", "--get-all", "--get-regexp", "--get-urlmatch", "--list", "-l", "--get-color", "--get-colorbool":
			for _, b := range args {
				if b.s == "--edit" || b.s == "-e" || strings.HasPrefix(b.s, "--add") || strings.HasPrefix(b.s, "--unset") || strings.HasPrefix(b.s, "--replace") || strings.HasPrefix(b.s, "--rename") || strings.HasPrefix(b.s, "--remove") {
					return Write, "git config " + b.s + " changes configuration"
				}
			}
			return Read, ""
		}
		if a.s == "get" || a.s == "list" {
			return Read, ""
		}
	}
	return Write, "git config without --get or --list sets configuration"
}

// git classifies a git command: its global options, options that name
// programs, the destructive forms and the read subcommands.
func (c *classifier) git(cl *cmdCall, args []value) {
	for i, a := range args[1:] {
		// --upload-pack, --receive-pack and --exec name programs wherever
		// they stand; git refuses them as globals, but the class fails high.
		name, val, hasVal := strings.Cut(a.s, "=")
		if !strings.HasPrefix(name, "--") || len(name) < 5 {
			continue
		}
		for _, o := range []string{"--upload-pack", "--receive-pack", "--exec"} {
			if strings.HasPrefix(o, name) && name != "--exec-path" {
				c.raiseCall(cl, Write, "git "+o+" names a program to run")
				if !hasVal && i+2 < len(args) {
					val = args[i+2].s
				}
				if val != "" {
					c.nested(cl.sc, cl.node, val, cl.depth)
				}
			}
		}
	}
	p := getopt(spec(gitGlobals+gitProgramGlobals), args[1:], true)
	if p.dynamic != "" || !allKnown(args) {
		c.raiseCall(cl, Destructive, "git with an argument known only at run time can reach any subcommand, and -c can name a program")
		return
	}
	if p.bad != "" {
		c.raiseCall(cl, Write, "unknown git option "+p.bad)
	}
	notRead := ""
	for _, o := range p.opts {
		switch o.name {
		case "-c", "--config-env":
			key, val, _ := strings.Cut(o.val, "=")
			if gitProgramKey(key) {
				val = strings.TrimPrefix(val, "!")
				if o.name == "--config-env" {
					c.raiseCall(cl, Destructive, "git --config-env takes program "+key+" from the environment")
				} else {
					c.raiseCall(cl, Write, "git -c "+key+" names a program git will run")
					if strings.TrimSpace(val) != "" {
						c.nested(cl.sc, cl.node, val, cl.depth)
					}
				}
			} else {
				notRead = "git " + o.name + " changes configuration"
			}
		case "--exec-path":
			if o.hasVal {
				notRead = "git --exec-path runs git's subcommands from another directory"
			}
		case "--git-dir", "--work-tree", "--namespace", "--super-prefix", "--bare", "--attr-source":
			notRead = "git " + o.name + " is not a read form"
		case "-p", "--paginate":
			notRead = "git " + o.name + " starts a pager"
		}
	}
	if len(p.operands) == 0 {
		if notRead != "" {
			c.raiseCall(cl, Write, notRead)
		}
		return
	}
	sub := p.operands[0].s
	rest := p.operands[1:]
	for i, a := range rest {
		if a.s == "-u" && (sub == "clone" || sub == "fetch" || sub == "ls-remote" || sub == "pull" || sub == "archive") && i+1 < len(rest) {
			c.raiseCall(cl, Write, "git "+sub+" -u names a program to run")
			c.nested(cl.sc, cl.node, rest[i+1].s, cl.depth)
		}
	}
	if why, ok := gitDestructive(sub, rest); ok {
		c.raiseCall(cl, Destructive, why)
		return
	}
	check, ok := gitReadSubs[sub]
	if !ok {
		c.raiseCall(cl, Write, "git "+sub+" is not a read subcommand")
		return
	}
	if notRead != "" {
		c.raiseCall(cl, Write, notRead)
		return
	}
	if cls, why := check(rest); cls > Read {
		c.raiseCall(cl, cls, why)
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
