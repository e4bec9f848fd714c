package shellclass

import (
	"regexp"
	"strconv"
	"strings"
)

// rsync: the server side that `rsync alias@bastion:...` starts is read when
// it sends (--sender) with only the options rsync's own client sends for a
// pull (rsyncSenderOpts); it writes when it receives. --delete* and
// --remove-source-files destroy. On the client side rsync always writes.
func (c *classifier) rsync(cl *cmdCall, args []value) {
	if !allKnown(args) {
		c.raiseCall(cl, Destructive, "rsync with an argument known only at run time can reach --delete")
		return
	}
	server, sender := false, false
	var progs []value
	for i := 1; i < len(args); i++ {
		a := args[i]
		name, val, hasVal := strings.Cut(a.s, "=")
		next := func() value {
			if i+1 < len(args) {
				i++
				return args[i]
			}
			return value{known: true}
		}
		switch {
		case name == "--server":
			server = true
		case name == "--sender":
			sender = true
		case strings.HasPrefix(name, "--delete") || name == "--del" || name == "--remove-source-files" || name == "--remove-sent-files":
			c.raiseCall(cl, Destructive, "rsync "+name+" deletes files")
		case name == "--rsh" || name == "--rsync-path":
			if hasVal {
				progs = append(progs, value{s: val, known: true})
			} else {
				progs = append(progs, next())
			}
		case len(a.s) > 1 && a.s[0] == '-' && a.s[1] != '-' && !server:
			// A bundle: the first letter that takes a value takes the
			// rest of the word or the next word (popt).
			for j := 1; j < len(a.s); j++ {
				if strings.IndexByte("efBTM@", a.s[j]) < 0 {
					continue
				}
				v := value{s: a.s[j+1:], known: true}
				if j+1 == len(a.s) {
					v = next()
				}
				if a.s[j] == 'e' {
					progs = append(progs, v)
				}
				break
			}
		}
	}
	if !server {
		for _, prog := range progs {
			c.raiseCall(cl, Write, "rsync -e/--rsync-path names a program to run")
			if !prog.known {
				c.raiseCall(cl, Destructive, "rsync -e names a program known only at run time")
			} else if prog.s != "" {
				c.nested(cl.sc, cl.node, prog.s, cl.depth)
			}
		}
	}
	switch {
	case server && sender:
		c.rsyncSender(cl, args)
	case server:
		c.raiseCall(cl, Write, "rsync --server without --sender receives and writes files")
	default:
		c.raiseCall(cl, Write, "rsync copies files")
	}
}

// rsyncSender checks the options of `rsync --server --sender`: any option
// rsync's client does not send for a pull (--log-file writes a file,
// --write-batch and --only-write-batch too, --temp-dir, --config, --daemon,
// -M's remote options) makes it write. -s (protect-args) is refused too:
// with it the client sends the rest of the options over the connection,
// out of the classifier's sight.
func (c *classifier) rsyncSender(cl *cmdCall, args []value) {
	p := getopt(specOf(exactFamily, rsyncSenderOpts), args[1:], false)
	if c.devices(cl, "rsync", p.operands) {
		return
	}
	if p.has("--copy-devices") {
		// The sender reads device files as if they were regular files:
		// every one a recursion or the client's file list reaches.
		walks := p.has("--files-from")
		for i, o := range p.operands {
			if i > 0 || o.s != "." {
				walks = walks || c.mayHoldDevices(o)
			}
		}
		if walks {
			c.raiseCall(cl, Destructive, "rsync --copy-devices sends the contents of the device files its recursion or the client's file list reaches, opening each: "+deviceWhy)
			return
		}
	}
	switch {
	case p.bad == "-s":
		c.raiseCall(cl, Write, "rsync --server -s (protect-args) reads further options from the connection, which the classifier cannot see")
	case p.bad != "":
		c.raiseCall(cl, Write, "rsync --server --sender option "+p.bad+" is not one rsync's client sends for a pull")
	}
}

// scpOpts is scp's option table (OpenSSH 9.2 scp.c). -f and -t are the
// server's sending and receiving sides; -S names the program that
// carries the connection, -F an ssh configuration file.
const scpOpts = "-1 -2 -3 -4 -6 -A -B -C -T -O -d -f -p -q -R -r -s -t -v -D= -i= -J= -l= -o= -P= -c= -X= W:-F= P:-S="

// scp: `scp -f` is the sending side that legacy scp starts on the server
// (read), `scp -t` the receiving side (write); a client scp writes.
// `scp -r -f DIR` opens every file below DIR, devices included.
func (c *classifier) scp(cl *cmdCall, args []value) {
	p := getopt(spec(scpOpts), args[1:], false)
	if p.dynamic != "" {
		c.raiseCall(cl, Write, "scp with an argument known only at run time")
	}
	c.optionPrograms(cl, "scp", &p)
	c.sshOptions(cl, p.values("-o"))
	from, to := p.has("-f"), p.has("-t")
	if from && !to {
		if c.devices(cl, "scp -f", p.operands) {
			return
		}
		if p.has("-r") {
			for _, o := range p.operands {
				if c.mayHoldDevices(o) {
					c.raiseCall(cl, Destructive, "scp -r -f sends every file below "+o.s+", which may hold device files, and opens each: "+deviceWhy)
					return
				}
			}
		}
		if o, worse := p.worst(); worse {
			c.raiseCall(cl, Write, "scp "+o.word+" is not a read option")
		} else if p.bad != "" {
			c.raiseCall(cl, Write, "unknown option "+p.bad+" for scp")
		}
		return
	}
	if to {
		c.raiseCall(cl, Write, "scp -t receives and writes files")
		return
	}
	c.raiseCall(cl, Write, "scp copies files")
}

// tar is never read (it creates or extracts files). Its options are read
// with getopt_long, after its traditional form (tar xzf ARCHIVE: a first
// word of letters, whose values follow in order); the programs they name
// (-I, --to-command, --checkpoint-action=exec=, -F ...) are classified as
// those programs, and --remove-files, --delete and --recursive-unlink
// destroy.
func (c *classifier) tar(cl *cmdCall, args []value) {
	if !allKnown(args) {
		c.raiseCall(cl, Destructive, "tar with an argument known only at run time can reach --remove-files or -I")
		return
	}
	c.raiseCall(cl, Write, "tar extracts or creates files")
	sp := spec(tarOpts)
	words := args[1:]
	if len(words) > 0 && words[0].s != "" && !strings.HasPrefix(words[0].s, "-") && strings.Trim(words[0].s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") == "" {
		letters, rest := words[0].s, words[1:]
		var expanded []value
		for k := 0; k < len(letters); k++ {
			expanded = append(expanded, value{s: "-" + letters[k:k+1], known: true})
			if d, ok := sp.short[letters[k]]; ok && d.kind == reqArg && len(rest) > 0 {
				expanded = append(expanded, rest[0])
				rest = rest[1:]
			}
		}
		words = append(expanded, rest...)
	}
	p := getopt(sp, words, false)
	c.optionPrograms(cl, "tar", &p)
	for _, v := range p.values("--checkpoint-action") {
		if prog, ok := strings.CutPrefix(v, "exec="); ok {
			c.raiseCall(cl, Write, "tar --checkpoint-action=exec= runs a program")
			c.nested(cl.sc, cl.node, prog, cl.depth)
		}
	}
	if o, worse := p.worst(); worse && o.cls == Destructive {
		c.raiseCall(cl, Destructive, "tar "+o.word+" deletes files")
	}
}

// man is never read (it pages, and runs groff and a pager). The programs
// its options name (-P, --pager, -H/--html with a browser) are classified
// as those programs.
func (c *classifier) man(cl *cmdCall, args []value) {
	c.raiseCall(cl, Write, neverRead["man"])
	p := getopt(spec(manOpts), args[1:], false)
	if p.dynamic != "" {
		for _, a := range args[1:] {
			if mayBeOption(a) {
				c.raiseCall(cl, Destructive, "man with an option known only at run time, which may be -P PROGRAM")
				return
			}
		}
	}
	c.optionPrograms(cl, "man", &p)
}

// docker and podman: read forms, destructive forms, and the command that
// run or exec starts inside a container. Options are read as pflag reads
// them: the root's before the subcommand, the subcommand's anywhere after
// it.
func (c *classifier) docker(cl *cmdCall, args []value) {
	base, _ := progName(args[0].s)
	if !allKnown(args) {
		c.raiseCall(cl, Destructive, base+" with an argument known only at run time can reach rm or prune")
		return
	}
	g := getopt(specOf(pflagFamily, dockerGlobals), args[1:], true)
	if g.bad != "" {
		c.raiseCall(cl, Destructive, "unknown "+base+" option "+g.bad+": the subcommand cannot be found")
		return
	}
	ops := g.operands
	if len(ops) == 0 {
		return
	}
	sub := ops[0].s
	rest := ops[1:]
	if sub == "compose" {
		c.dockerCompose(cl, base, g, rest)
		return
	}
	if dockerManaged[sub] && len(rest) > 0 {
		sub = sub + " " + rest[0].s
		rest = rest[1:]
	}
	if why, ok := dockerDestructive(sub); ok {
		c.raiseCall(cl, Destructive, base+" "+sub+" "+why)
		return
	}
	switch sub {
	case "exec", "container exec":
		c.raiseCall(cl, Write, base+" exec is not a read form")
		c.containerCmd(cl, base+" exec", dockerExecOpts, rest, 1)
		return
	case "run", "container run":
		c.raiseCall(cl, Write, base+" run creates a container")
		c.containerCmd(cl, base+" run", dockerRunOpts, rest, 1)
		return
	}
	opts, ok := dockerRead[sub]
	if !ok {
		c.raiseCall(cl, Write, base+" "+sub+" is not a read form")
		return
	}
	if o, worse := g.worst(); worse {
		c.raiseCall(cl, Write, base+" "+o.word+" talks to another daemon or loads programs or storage from elsewhere")
		return
	}
	p := getopt(specOf(pflagFamily, opts), rest, false)
	c.dockerReadOpts(cl, base+" "+sub, &p)
	if strings.HasSuffix(sub, "stats") && !p.has("--no-stream") {
		c.raiseCall(cl, Write, base+" stats without --no-stream runs until interrupted")
	}
}

// dockerCompose classifies docker compose: its own options, then its
// subcommand.
func (c *classifier) dockerCompose(cl *cmdCall, base string, g parsed, args []value) {
	p := getopt(specOf(pflagFamily, dockerComposeGlobals), args, true)
	if p.bad != "" || len(p.operands) == 0 {
		c.raiseCall(cl, Destructive, "unknown "+base+" compose option "+p.bad+": the subcommand cannot be found")
		return
	}
	verb := p.operands[0].s
	if why, ok := dockerDestructive("compose " + verb); ok {
		c.raiseCall(cl, Destructive, base+" compose "+verb+" "+why)
		return
	}
	opts, ok := dockerComposeRead[verb]
	if !ok {
		c.raiseCall(cl, Write, base+" compose "+verb+" is not a read form")
		return
	}
	if o, worse := g.worst(); worse {
		c.raiseCall(cl, Write, base+" "+o.word+" talks to another daemon or loads programs or storage from elsewhere")
		return
	}
	sp := getopt(specOf(pflagFamily, opts), p.operands[1:], false)
	c.dockerReadOpts(cl, base+" compose "+verb, &sp)
}

// dockerReadOpts raises a read form whose options are not all read.
func (c *classifier) dockerReadOpts(cl *cmdCall, what string, p *parsed) {
	if o, worse := p.worst(); worse {
		if o.forever {
			c.raiseCall(cl, Write, what+" "+o.word+" runs until interrupted")
		} else {
			c.raiseCall(cl, o.cls, what+" "+o.word+" writes a file")
		}
		return
	}
	if p.bad != "" {
		c.raiseCall(cl, Write, "unknown option "+p.bad+" for "+what)
	}
}

// containerCmd classifies the command docker/kubectl exec or run starts.
func (c *classifier) containerCmd(cl *cmdCall, what, opts string, args []value, skip int) {
	p := getopt(specOf(pflagFamily, opts), args, true)
	if p.bad != "" {
		c.raiseCall(cl, Destructive, "unknown option "+p.bad+" for "+what+": the command it runs cannot be found")
		return
	}
	entry := p.values("--entrypoint")
	ops := p.operands
	if len(ops) < skip {
		return
	}
	inner := ops[skip:]
	if len(entry) > 0 {
		inner = append([]value{{s: entry[0], known: true}}, inner...)
	}
	if len(inner) == 0 {
		if strings.HasSuffix(what, "run") {
			return // the image's own command: write, already raised
		}
		c.raiseCall(cl, Write, what+" without a command")
		return
	}
	sub := *cl
	sub.depth++
	sub.stdinKnown = false // the container or pod reads its own stdin
	c.simple(&sub, inner)
}

func dockerDestructive(sub string) (string, bool) {
	verb := sub
	if i := strings.LastIndexByte(sub, ' '); i >= 0 {
		verb = sub[i+1:]
	}
	switch verb {
	case "rm", "rmi", "remove", "kill", "stop", "prune", "down", "restart", "leave", "reset":
		return "deletes containers, images or volumes, or ends running work", true
	}
	return "", false
}

// kubectl: read verbs, the forms that delete, evict, scale to zero or
// restart workloads, and the command exec runs in a pod. Options are
// read as pflag reads them: kubectl's global options before the verb, the
// verb's own and the global ones anywhere after it.
func (c *classifier) kubectl(cl *cmdCall, args []value) {
	if !allKnown(args) {
		c.raiseCall(cl, Destructive, "kubectl with an argument known only at run time can reach delete")
		return
	}
	g := getopt(specOf(pflagFamily, kubectlGlobals), args[1:], true)
	ops := g.operands
	if g.bad != "" {
		// An option of a verb before the verb: the verb cannot be found
		// for sure, so any word that names a destructive verb counts.
		for _, a := range args[1:] {
			if kubectlDestructiveVerb(a.s) {
				c.raiseCall(cl, Destructive, "kubectl "+a.s+" (after unknown option "+g.bad+") may delete or stop workloads")
				return
			}
		}
		c.raiseCall(cl, Write, "unknown kubectl option "+g.bad+" before the verb")
		return
	}
	if len(ops) == 0 {
		return
	}
	verb := ops[0].s
	rest := ops[1:]
	if why, ok := kubectlDestructive(verb, rest); ok {
		c.raiseCall(cl, Destructive, why)
		return
	}
	if verb == "exec" {
		c.kubectlExec(cl, args)
		return
	}
	opts, ok := kubectlRead[verb]
	if !ok || verb == "cluster-info" && len(rest) > 0 && rest[0].s == "dump" {
		c.raiseCall(cl, Write, "kubectl "+verb+" is not a read verb")
		return
	}
	if o, worse := g.worst(); worse {
		c.raiseCall(cl, Write, "kubectl "+o.word+" talks to another cluster or identity, or writes files")
		return
	}
	p := getopt(specOf(pflagFamily, kubectlGlobals+" "+opts), rest, false)
	if o, worse := p.worst(); worse {
		if o.forever {
			c.raiseCall(cl, Write, "kubectl "+o.word+" runs until interrupted")
		} else {
			c.raiseCall(cl, Write, "kubectl "+o.word+" talks to another cluster or identity, or writes files")
		}
		return
	}
	if p.bad != "" {
		c.raiseCall(cl, Write, "unknown kubectl option "+p.bad)
	}
}

// kubectlDestructiveVerb reports a verb that always deletes or evicts.
func kubectlDestructiveVerb(v string) bool { return v == "delete" || v == "drain" }

// kubectlDestructive reports the kubectl forms that delete resources, evict
// or stop workloads: delete, drain, scale to zero replicas, rollout
// restart, replace --force (deletes and creates again), apply --prune.
func kubectlDestructive(verb string, rest []value) (string, bool) {
	if kubectlDestructiveVerb(verb) {
		return "kubectl " + verb + " deletes cluster resources or evicts workloads", true
	}
	p := getopt(specOf(pflagFamily, kubectlChangeOpts), rest, false)
	switch verb {
	case "scale":
		for _, v := range p.values("--replicas") {
			if n, err := strconv.Atoi(strings.TrimSpace(v)); err != nil || n == 0 {
				return "kubectl scale --replicas=" + v + " stops every pod of the workload", true
			}
		}
	case "rollout":
		if len(p.operands) > 0 && p.operands[0].s == "restart" {
			return "kubectl rollout restart ends the running pods", true
		}
	case "replace":
		if p.has("--force") {
			return "kubectl replace --force deletes the resources before creating them again", true
		}
	case "apply":
		if p.has("--prune") {
			return "kubectl apply --prune deletes resources missing from the files", true
		}
	}
	return "", false
}

// kubectlExec classifies the command kubectl exec runs in a pod: the words
// after --, or (deprecated) after the pod name.
func (c *classifier) kubectlExec(cl *cmdCall, args []value) {
	c.raiseCall(cl, Write, "kubectl exec is not a read form")
	var inner []value
	for i, a := range args {
		if a.s == "--" {
			inner = args[i+1:]
			break
		}
	}
	if inner == nil {
		p := getopt(specOf(pflagFamily, kubectlExecOpts), args[1:], false)
		if len(p.operands) > 2 {
			inner = p.operands[2:]
		}
	}
	if len(inner) == 0 {
		c.raiseCall(cl, Write, "kubectl exec without a command")
		return
	}
	sub := *cl
	sub.depth++
	sub.stdinKnown = false // the container or pod reads its own stdin
	c.simple(&sub, inner)
}

// systemctl: read verbs, destructive verbs that stop work or delete unit
// files. On a terminal a read verb pages unless --no-pager is given.
func (c *classifier) systemctl(cl *cmdCall, args []value) {
	if !allKnown(args) {
		c.raiseCall(cl, Destructive, "systemctl with an argument known only at run time can reach stop")
		return
	}
	p := getopt(spec(systemctlOpts), args[1:], false)
	verb := "list-units"
	if len(p.operands) > 0 {
		verb = p.operands[0].s
	}
	if systemctlDestructive[verb] || (verb == "disable" || verb == "mask") && p.has("--now") {
		c.raiseCall(cl, Destructive, "systemctl "+verb+" ends running work or deletes unit files")
		return
	}
	o, notRead := p.worst()
	switch {
	case !systemctlRead[verb]:
		c.raiseCall(cl, Write, "systemctl "+verb+" changes the system")
	case notRead:
		c.raiseCall(cl, Write, "systemctl "+o.word+" is not a read option (another machine, a disk image, or a job option)")
	case p.bad != "":
		c.raiseCall(cl, Write, "unknown option "+p.bad+" for systemctl")
	case c.opts.Terminal && !p.has("--no-pager"):
		c.raiseCall(cl, Write, "systemctl "+verb+" without --no-pager starts a pager on a terminal, and a pager runs commands")
	}
}

// service NAME VERB: stop and restart end running work.
func (c *classifier) service(cl *cmdCall, args []value) {
	if !allKnown(args) {
		c.raiseCall(cl, Destructive, "service with an argument known only at run time can reach stop")
		return
	}
	if len(args) == 2 && args[1].s == "--status-all" {
		return
	}
	if len(args) < 3 {
		c.raiseCall(cl, Write, "service without a verb")
		return
	}
	switch args[2].s {
	case "stop", "restart", "force-reload", "condrestart", "try-restart", "force-stop", "zap":
		c.raiseCall(cl, Destructive, "service "+args[2].s+" ends running work")
	default:
		c.raiseCall(cl, Write, "service "+args[2].s+" changes the system")
	}
}

// ip: only the show/list forms of addr, link, route and neigh are read;
// flush removes everything it matches: destructive. ip netns exec and ip
// vrf exec run a command.
func (c *classifier) ip(cl *cmdCall, args []value) {
	if !allKnown(args) {
		// A word known only at run time may be flush, unless a
		// literal show or list verb stands before it (then it is a filter).
		for i, a := range args[1:] {
			if !a.known {
				c.raiseCall(cl, Destructive, "ip with an argument known only at run time can reach flush")
				return
			}
			if i > 0 && !strings.HasPrefix(a.s, "-") && (prefixOf(a.s, "show") || prefixOf(a.s, "list") || a.s == "ls") {
				break
			}
		}
		c.raiseCall(cl, Write, "ip with an argument known only at run time")
		return
	}
	for i, a := range args[1:] {
		switch {
		case i > 0 && len(a.s) >= 2 && prefixOf(a.s, "flush"):
			c.raiseCall(cl, Destructive, "ip ... "+a.s+" removes every address, route or neighbour it matches, cutting connections")
			return
		case a.s == "exec" && i > 0 && i+2 < len(args):
			c.raiseCall(cl, Write, "ip "+args[1].s+" exec runs a command")
			sub := *cl
			sub.depth++
			c.simple(&sub, args[i+3:])
			return
		}
	}
	i := 1
	for ; i < len(args) && strings.HasPrefix(args[i].s, "-"); i++ {
		switch strings.TrimLeft(args[i].s, "-") {
		case "4", "6", "0", "s", "stats", "statistics", "d", "details", "h", "human", "j", "json", "p", "pretty", "o", "oneline", "c", "color", "br", "brief", "r", "resolve", "a", "all":
		case "n", "netns", "f", "family":
			i++
		default:
			c.raiseCall(cl, Write, "ip option "+args[i].s+" is not a read option")
			return
		}
	}
	if i >= len(args) {
		c.raiseCall(cl, Write, "ip without an object")
		return
	}
	obj := args[i].s
	if !ipObject(obj) {
		c.raiseCall(cl, Write, "ip "+obj+" is not addr, link, route or neigh")
		return
	}
	if i+1 < len(args) {
		v := args[i+1].s
		if !(prefixOf(v, "show") || prefixOf(v, "list") || v == "lst" || v == "ls" || v == "get" && (prefixOf(obj, "route") || obj == "neigh" || prefixOf(obj, "neighbour") || prefixOf(obj, "neighbor"))) {
			if strings.HasPrefix(v, "-") || ipSelector[v] {
				return // ip addr dev eth0 is ip addr show dev eth0
			}
			c.raiseCall(cl, Write, "ip "+obj+" "+v+" is not a show or list form")
		}
	}
}

func ipObject(s string) bool {
	for _, o := range []string{"address", "link", "route", "neighbour", "neighbor"} {
		if prefixOf(s, o) {
			return true
		}
	}
	return s == "addr" || s == "neigh"
}

func prefixOf(s, full string) bool { return s != "" && strings.HasPrefix(full, s) }

// apt classifies apt, apt-get and apt-cache as APT's CommandLine parses
// them (aptFamily): the command is the first operand, options may stand
// anywhere, and the option table is the command's own. The table that
// APT picks is that of the first word anywhere that names a command
// (CommandLine::GetCommand), which can differ from the command it runs
// when an option's value is a command's name: then it is not read.
func (c *classifier) apt(cl *cmdCall, base string, args []value) {
	p := getopt(specOf(aptFamily, aptOpts), args[1:], false)
	c.aptConfig(cl, base, &p)
	cmd := ""
	if len(p.operands) > 0 {
		cmd = p.operands[0].s
	}
	switch cmd {
	case "remove", "purge", "autoremove", "auto-remove", "autopurge":
		c.raiseCall(cl, Destructive, base+" "+cmd+" removes packages")
		return
	case "install", "reinstall":
		for _, o := range p.operands[1:] {
			if strings.HasSuffix(o.s, "-") {
				c.raiseCall(cl, Destructive, base+" install "+o.s+" removes that package")
				return
			}
		}
	}
	reads := aptReadCmds[base]
	if !reads[cmd] {
		c.raiseCall(cl, Write, base+" "+cmd+" changes packages or is not a read command")
		return
	}
	if picked := aptPickedCommand(base, args[1:]); picked != cmd {
		c.raiseCall(cl, Write, base+" takes the options of "+picked+" but runs "+cmd)
		return
	}
	if o, worse := p.worst(); worse {
		c.raiseCall(cl, Write, base+" "+o.word+" is not a read option (it writes a cache file, or loads configuration that can name programs)")
		return
	}
	if p.bad != "" {
		c.raiseCall(cl, Write, "unknown option "+p.bad+" for "+base)
	}
}

// aptPickedCommand returns the command whose options APT uses: the first
// word that names one of the binary's commands and does not start with
// "-", or the word before or right after "--" (CommandLine::GetCommand).
func aptPickedCommand(base string, args []value) string {
	cmds := aptCommands[base]
	for i, a := range args {
		if a.s != "--" {
			continue
		}
		for _, b := range args[:i] {
			if cmds[b.s] {
				return b.s
			}
		}
		if i+1 < len(args) && cmds[args[i+1].s] {
			return args[i+1].s
		}
		return ""
	}
	for _, a := range args {
		if !strings.HasPrefix(a.s, "-") && cmds[a.s] {
			return a.s
		}
	}
	return ""
}

// aptConfig classifies what -o sets that APT runs: a Dir::Bin:: program
// (with the DPkg::Options it is given), the Pre-Invoke and Post-Invoke
// hooks, a proxy auto-detect program. -o and -c are write in any case.
func (c *classifier) aptConfig(cl *cmdCall, base string, p *parsed) {
	var progs []string
	var dpkgOpts []string
	for _, o := range p.opts {
		if o.name != "-o" && o.name != "--option" {
			continue
		}
		key, val, _ := strings.Cut(o.val, "=")
		k := strings.ToLower(key)
		switch {
		case strings.HasPrefix(k, "dpkg::options"):
			dpkgOpts = append(dpkgOpts, syntaxQuote(val))
		case strings.HasPrefix(k, "dir::bin::"):
			progs = append(progs, syntaxQuote(val))
		case strings.Contains(k, "invoke") || strings.Contains(k, "pre-install-pkgs") || strings.Contains(k, "proxy-auto-detect") || strings.Contains(k, "proxyautodetect"):
			c.raiseCall(cl, Write, base+" -o "+key+" names a command APT runs")
			c.nested(cl.sc, cl.node, val, cl.depth)
		}
	}
	for _, prog := range progs {
		c.raiseCall(cl, Write, base+" -o Dir::Bin:: names a program APT runs")
		c.nested(cl.sc, cl.node, strings.Join(append([]string{prog}, dpkgOpts...), " "), cl.depth)
	}
}

// packages: package managers' read forms and their removal forms.
func (c *classifier) packages(cl *cmdCall, args []value) {
	base, _ := progName(args[0].s)
	if !allKnown(args) {
		c.raiseCall(cl, Destructive, base+" with an argument known only at run time can reach a removal")
		return
	}
	var opts, ops []string
	for _, a := range args[1:] {
		if strings.HasPrefix(a.s, "-") {
			opts = append(opts, a.s)
		} else {
			ops = append(ops, a.s)
		}
	}
	first := ""
	if len(ops) > 0 {
		first = ops[0]
	}
	anyOpt := func(pred func(string) bool) bool {
		for _, o := range opts {
			if pred(o) {
				return true
			}
		}
		return false
	}
	switch base {
	case "apt", "apt-get", "apt-cache":
		c.apt(cl, base, args)
	case "dpkg":
		if anyOpt(func(o string) bool {
			return o == "-r" || o == "-P" || o == "--remove" || o == "--purge" || !strings.HasPrefix(o, "--") && strings.ContainsAny(o[1:], "rP")
		}) {
			c.raiseCall(cl, Destructive, "dpkg -r/-P removes packages")
			return
		}
		if len(opts) > 0 && anyOpt(func(o string) bool {
			return o == "-l" || o == "-L" || o == "-s" || o == "--list" || o == "--listfiles" || o == "--status"
		}) && !anyOpt(func(o string) bool {
			return !(o == "-l" || o == "-L" || o == "-s" || o == "--list" || o == "--listfiles" || o == "--status" || o == "--no-pager" || strings.HasPrefix(o, "--admindir="))
		}) {
			// dpkg -l pipes its list through a pager when standard output
			// is a terminal (checked with dpkg 1.21.22 under script(1): -L
			// and -s do not), and a pager runs commands.
			if c.opts.Terminal && anyOpt(func(o string) bool { return o == "-l" || o == "--list" }) && !anyOpt(func(o string) bool { return o == "--no-pager" }) {
				c.raiseCall(cl, Write, "dpkg -l without --no-pager starts a pager on a terminal, and a pager runs commands")
			}
			return
		}
		c.raiseCall(cl, Write, "dpkg changes packages")
	case "rpm":
		if anyOpt(func(o string) bool { return o == "-e" || o == "--erase" }) {
			c.raiseCall(cl, Destructive, "rpm -e removes packages")
			return
		}
		p := getopt(spec(rpmQueryOpts), args[1:], false)
		if p.has("-q", "--query") && p.bad == "" {
			return
		}
		if p.bad != "" && p.has("-q", "--query") {
			c.raiseCall(cl, Write, "rpm option "+p.bad+" is not on the query allowlist")
			return
		}
		c.raiseCall(cl, Write, "rpm changes packages")
	case "pip", "pip3":
		switch first {
		case "uninstall":
			c.raiseCall(cl, Destructive, base+" uninstall removes packages")
			return
		case "list", "show", "freeze":
			if p := getopt(spec(pipReadOpts), args[1:], false); p.bad != "" {
				c.raiseCall(cl, Write, "pip option "+p.bad+" is not on the read allowlist (--log writes a file, --python runs another interpreter)")
			}
			return
		}
		c.raiseCall(cl, Write, base+" "+first+" changes packages")
	case "crontab":
		if anyOpt(func(o string) bool { return !strings.HasPrefix(o, "--") && strings.ContainsRune(o, 'r') }) {
			c.raiseCall(cl, Destructive, "crontab -r deletes the crontab")
			return
		}
		c.raiseCall(cl, Write, "crontab installs or edits a crontab")
		c.crontabJob(cl, args)
	}
}

var sqlDestructive = regexp.MustCompile(`(?i)\b(drop|delete|truncate)\b`)

// sql: psql -c, mysql -e and sqlite3 with literal SQL that drops, deletes or
// truncates are destructive; every other use writes.
func (c *classifier) sql(cl *cmdCall, args []value) {
	base, _ := progName(args[0].s)
	var texts []string
	dynamic := false
	ops := 0
	for i := 1; i < len(args); i++ {
		a := args[i]
		if !a.known {
			dynamic = true
			continue
		}
		name, val, hasVal := strings.Cut(a.s, "=")
		switch {
		case name == "-c" || name == "--command" || name == "-e" || name == "--execute" || base == "sqlite3" && name == "-cmd":
			if !hasVal {
				if i+1 < len(args) {
					i++
					if !args[i].known {
						dynamic = true
						continue
					}
					val = args[i].s
				}
			}
			texts = append(texts, val)
		case strings.HasPrefix(a.s, "-c") && len(a.s) > 2 && base == "psql", strings.HasPrefix(a.s, "-e") && len(a.s) > 2 && base != "psql" && base != "sqlite3":
			texts = append(texts, a.s[2:])
		case !strings.HasPrefix(a.s, "-"):
			ops++
			if base == "sqlite3" && ops >= 2 {
				texts = append(texts, a.s)
			}
		}
	}
	if cl.stdinKnown {
		texts = append(texts, cl.stdin)
	}
	if dynamic {
		c.raiseCall(cl, Destructive, base+" with SQL known only at run time can drop or delete")
		return
	}
	for _, t := range texts {
		if m := sqlDestructive.FindString(t); m != "" {
			c.raiseCall(cl, Destructive, base+" runs SQL "+strings.ToUpper(m))
			return
		}
		if i := strings.Index(t, `\!`); i >= 0 {
			c.nested(cl.sc, cl.node, t[i+2:], cl.depth)
		}
	}
	c.raiseCall(cl, Write, base+" runs SQL")
}

// redis: DEL, UNLINK, FLUSHALL, FLUSHDB and SHUTDOWN destroy data or end the
// server; everything else writes (redis-cli is not on the read allowlist).
func (c *classifier) redis(cl *cmdCall, args []value) {
	valued := map[string]bool{"-h": true, "-p": true, "-a": true, "-n": true, "-u": true, "-s": true, "-r": true, "-i": true, "-d": true, "--user": true, "--pass": true, "--eval": true, "--pattern": true, "--cacert": true, "--cert": true, "--key": true, "--sni": true}
	for i := 1; i < len(args); i++ {
		a := args[i]
		if !a.known {
			c.raiseCall(cl, Destructive, "redis-cli with an argument known only at run time can reach FLUSHALL")
			return
		}
		if strings.HasPrefix(a.s, "-") {
			if valued[a.s] {
				i++
			}
			continue
		}
		switch strings.ToUpper(a.s) {
		case "DEL", "UNLINK", "FLUSHALL", "FLUSHDB", "SHUTDOWN":
			c.raiseCall(cl, Destructive, "redis-cli "+strings.ToUpper(a.s)+" deletes data or stops the server")
			return
		}
		break
	}
	c.raiseCall(cl, Write, "redis-cli can change data")
}
