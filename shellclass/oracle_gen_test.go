package shellclass

import (
	"math/rand"
	"sort"
	"strings"
)

// The oracle's commands are generated from the read entries' own tables:
// every option alone, with values and abbreviated; bundles; hostile
// letters appended to a bundle; operands that are canary files or equal
// the words subcommands use; each then wrapped in a redirection form on
// descriptors 0-9 or preceded by a change of the shell's state. Only the
// commands the classifier calls read are kept.

// genEntry is one read entry as the generator sees it.
type genEntry struct {
	name   string   // the entry, for oracleAllows and reports
	prefix []string // the words before the options: git log, apt-cache show
	spec   optSpec
	// operands are typical operands; values typical option values.
	operands []string
	progs    []string
}

// oracleCanary is the file the exploits of issue 22 rewrote.
const oracleCanary = oracleHome + "/.bashrc"

var (
	genValues   = []string{"1", "notes.txt", ".bashrc", oracleCanary, "get", "list", "x"}
	genOperands = []string{"notes.txt", ".bashrc", oracleCanary, "sub", "data.json", "get", "list", "show", "set", "add", "delete", "rm", "-", "--", "/dev/null", "."}
	genSubWords = []string{"get", "list", "set", "add", "delete", "remove", "rm", "show", "edit", "move", "copy", "unset", "flush", "stop"}
)

// genEntryOperands are operands that make sense to an entry, besides the
// files: sed scripts, jq programs, grep patterns.
var genEntryOperands = map[string][]string{
	"sed":  {"p", "'s/hello/x/g'", "'1d'", "-n '1p'", "'$!N'", "'y/a/b/'"},
	"jq":   {"'.'", "'.a'", "'keys'", "-r '.a'"},
	"grep": {"hello", "-r hello", "-e x"},
	"date": {"+%s", "'+%F %T'"},
}

// genEntries returns the read entries of read (readTable or a test's copy)
// and of the tools with handlers that have read forms.
func genEntries(read map[string]readEntry, handlers bool) []genEntry {
	var out []genEntry
	skip := map[string]bool{"sleep": true, "vmstat": true, "iostat": true, "ping": true, "dig": true, "host": true, "nslookup": true}
	names := make([]string, 0, len(read))
	for n := range read {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if skip[n] {
			continue // they wait for a network or an interval
		}
		e := read[n]
		ops := genOperands
		if extra, ok := genEntryOperands[n]; ok {
			ops = append(append([]string{}, extra...), genOperands...)
		}
		out = append(out, genEntry{name: n, prefix: []string{n}, spec: specOf(e.family, e.opts), operands: ops, progs: []string{n}})
	}
	if !handlers {
		return out
	}
	subs := make([]string, 0, len(gitReadSubs))
	for s := range gitReadSubs {
		subs = append(subs, s)
	}
	sort.Strings(subs)
	for _, s := range subs {
		g := gitReadSubs[s]
		out = append(out, genEntry{name: "git", prefix: []string{"git", s}, spec: specOf(g.family, g.opts),
			operands: append([]string{"HEAD", "main", "v1", "notes.txt", "core.pager", "user.name"}, genSubWords...), progs: []string{"git"}})
	}
	for _, verb := range sortedKeys(systemctlRead) {
		out = append(out, genEntry{name: "systemctl", prefix: []string{"systemctl", verb}, spec: spec(systemctlOpts), operands: []string{"ssh", "nginx.service"}, progs: []string{"systemctl"}})
	}
	for _, bin := range []string{"apt-cache", "apt"} {
		for _, c := range sortedKeys(aptReadCmds[bin]) {
			out = append(out, genEntry{name: bin, prefix: []string{bin, c}, spec: specOf(aptFamily, aptOpts), operands: []string{"bash", "coreutils", "no", "yes"}, progs: []string{bin}})
		}
	}
	for _, sub := range sortedKeys(dockerRead) {
		out = append(out, genEntry{name: "docker", prefix: append([]string{"docker"}, strings.Fields(sub)...), spec: specOf(pflagFamily, dockerRead[sub]), operands: []string{"web", "x", "get"}, progs: []string{"docker"}})
	}
	for _, verb := range sortedKeys(kubectlRead) {
		out = append(out, genEntry{name: "kubectl", prefix: []string{"kubectl", verb}, spec: specOf(pflagFamily, kubectlGlobals+" "+kubectlRead[verb]), operands: []string{"pods", "nodes", "get"}, progs: []string{"kubectl"}})
	}
	awkProgs := []string{"'{print}'", "'{print $1}'", "'BEGIN{print 1}'", `'{printf("%s\n", $0)}'`, "'NR==1'",
		`'BEGIN { while ((getline l < ".bashrc") > 0) print l }'`, `'{ print > "/dev/stdout" }'`, `'END { print NR }'`}
	var awkOps []string
	for _, prog := range awkProgs {
		awkOps = append(awkOps, prog+" notes.txt", prog, prog+" .bashrc")
	}
	out = append(out, genEntry{name: "awk", prefix: []string{"awk"}, spec: spec(awkOpts), operands: awkOps, progs: []string{"awk", "mawk", "gawk"}})
	out = append(out, genEntry{name: "rsync", prefix: []string{"rsync", "--server", "--sender"}, spec: specOf(exactFamily, rsyncSenderOpts),
		operands: []string{". notes.txt", ". sub", ". " + oracleHome, ". .bashrc"}, progs: []string{"rsync"}})
	for _, f := range []string{"find"} {
		var opts []string
		for p, n := range findPrimaries {
			if n == 0 {
				opts = append(opts, p)
			}
		}
		sort.Strings(opts)
		out = append(out, genEntry{name: f, prefix: []string{f, "."}, spec: parseSpec(exactFamily, ""), operands: opts, progs: []string{f}})
	}
	return out
}

// genBase returns the commands of one entry, before wrapping: every option
// alone, with a value and abbreviated, bundles, hostile bundles, operands.
func genBase(e genEntry, rng *rand.Rand) []string {
	pre := strings.Join(e.prefix, " ")
	pick := func(pool []string) string { return pool[rng.Intn(len(pool))] }
	var cmds []string
	add := func(words ...string) {
		cmds = append(cmds, pre+" "+strings.Join(words, " "))
	}
	add(pick(e.operands))
	cmds = append(cmds, pre)
	var shorts []optDef
	for _, b := range sortedShorts(e.spec) {
		d := e.spec.short[b]
		shorts = append(shorts, d)
		switch d.kind {
		case noArg:
			add(d.name, pick(e.operands))
		case reqArg:
			add(d.name, shellQuote(pick(genValues)), pick(e.operands))
			add(d.name+shellQuote(pick(genValues)), pick(e.operands))
		case optArg:
			add(d.name, pick(e.operands))
			add(d.name+shellQuote(pick(genValues)), pick(e.operands))
		}
	}
	for _, n := range e.spec.names {
		d := e.spec.long[n]
		switch d.kind {
		case noArg:
			add("--"+n, pick(e.operands))
		case reqArg:
			add("--"+n+"="+shellQuote(pick(genValues)), pick(e.operands))
			add("--"+n, shellQuote(pick(genValues)), pick(e.operands))
		case optArg:
			add("--"+n, pick(e.operands))
			add("--"+n+"="+shellQuote(pick(genValues)), pick(e.operands))
		}
		// Abbreviations: every prefix of two letters or more.
		for l := 2; l < len(n); l += 1 + rng.Intn(3) {
			v := ""
			if d.kind == reqArg {
				v = "=" + shellQuote(pick(genValues))
			}
			add("--"+n[:l]+v, pick(e.operands))
		}
		if e.spec.family == gitFamily || e.spec.family == aptFamily {
			add("--no-"+n, pick(e.operands))
		}
	}
	// Bundles of two short options, the second with an attached value.
	for i := 0; i < len(shorts) && i < 40; i++ {
		a, b := shorts[rng.Intn(len(shorts))], shorts[rng.Intn(len(shorts))]
		if a.kind != noArg {
			continue
		}
		w := "-" + a.name[1:] + b.name[1:]
		if b.kind != noArg {
			w += shellQuote(pick(genValues))
		}
		add(w, pick(e.operands))
	}
	// Hostile letters after a read short option: a bundle the parser must
	// read as the tool does (-qoX=Y).
	for _, d := range shorts {
		if d.kind != noArg || d.cls != Read {
			continue
		}
		for _, l := range "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789" {
			add("-"+d.name[1:]+string(l)+shellQuote(pick(genValues)), pick(e.operands))
		}
		break
	}
	// Operands that equal the words subcommands use, after the options.
	for _, w := range genSubWords {
		add(pick(e.operands), w)
		add(pick(e.operands), pick(e.operands), w)
	}
	return cmds
}

// genStates are changes of the shell's state before a command: arrays of
// each kind, bash's own arrays, a refused declare -A, hash -p, functions,
// aliases with expand_aliases, a descriptor opened on the canary.
var genStates = []string{
	"a=(1 2); ", "declare -a a=(1); ", "declare -A h=([k]=v); ", "h=(1); declare -A h; ",
	"declare -A DIRSTACK; ", "declare -A BASH_VERSINFO; ", "read -r k <<< 'a[$(>/tmp/PWN)]'; ",
	"declare -A h; read -r k <<< 'a[$(>/tmp/PWN)]'; h[$k]=1; ", "hash -p /bin/cat cat; ",
	"f() { :; }; ", "shopt -s expand_aliases; alias ll='ls -l'\n", "exec 3<.bashrc; ", "exec 1<.bashrc; ",
	"set -f; ", "IFS=:; ", "cd sub; ",
}

// genRedirs are the redirection forms on descriptors 0-9, with the canary
// as the file: each is appended to a command.
func genRedirs(rng *rand.Rand) string {
	n := rng.Intn(10)
	m := rng.Intn(10)
	switch rng.Intn(9) {
	case 0:
		return " " + digit(n) + "<.bashrc"
	case 1:
		return " " + digit(n) + "<&" + digit(m)
	case 2:
		return " " + digit(n) + "<>.bashrc"
	case 3:
		return " >/dev/stdout"
	case 4:
		return " " + digit(n) + "<.bashrc >/dev/fd/" + digit(n)
	case 5:
		return " 1<.bashrc >/dev/stdout"
	case 6:
		return " " + digit(n) + "<.bashrc " + digit(m) + "<&" + digit(n) + " >/dev/fd/" + digit(m)
	case 7:
		return " 2>/dev/stderr"
	}
	return " >/dev/null"
}

func digit(n int) string { return string(rune('0' + n)) }

// genCommands returns up to n commands the classifier (with the read
// table read) calls read, from a generator seeded with seed: entries in
// turn, each a random command of its own, wrapped one time in three in a
// redirection and one in three after a state change, so that every entry
// is covered whatever n is.
func genCommands(read map[string]readEntry, handlers bool, seed int64, n int) []oracleCmd {
	// Some tools cost far more than the rest on every run: apt and
	// apt-cache build their package cache in memory (about a second of
	// CPU where it is not kept on disk, as in Debian's container images),
	// kubectl and docker are large Go programs. They get a share of the
	// run that grows with it.
	caps := map[string]int{"apt": 1 + n/1000, "apt-cache": 1 + n/1000, "kubectl": 2 + n/200, "docker": 2 + n/200}
	taken := map[string]int{}
	rng := rand.New(rand.NewSource(seed))
	entries := genEntries(read, handlers)
	pools := make([][]string, len(entries))
	for i, e := range entries {
		pools[i] = genBase(e, rng)
		rng.Shuffle(len(pools[i]), func(a, b int) { pools[i][a], pools[i][b] = pools[i][b], pools[i][a] })
	}
	seen := map[string]bool{}
	var out []oracleCmd
	for round := 0; len(out) < n && round < 400; round++ {
		progress := false
		for i, e := range entries {
			if len(out) >= n || len(pools[i]) == 0 {
				continue
			}
			progress = true
			cmd := pools[i][0]
			pools[i] = pools[i][1:]
			switch rng.Intn(3) {
			case 0:
				cmd += genRedirs(rng)
			case 1:
				cmd = genStates[rng.Intn(len(genStates))] + cmd
			}
			if seen[cmd] {
				continue
			}
			seen[cmd] = true
			if limit, ok := caps[e.name]; ok && taken[e.name] >= limit {
				continue
			}
			c := &classifier{opts: Options{}, top: cmd, read: read}
			c.run()
			if c.result().Class != Read {
				continue
			}
			taken[e.name]++
			out = append(out, oracleCmd{cmd: cmd, entry: e.name, progs: e.progs})
		}
		if !progress {
			break
		}
	}
	return out
}

func sortedShorts(sp optSpec) []byte {
	out := make([]byte, 0, len(sp.short))
	for b := range sp.short {
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// shellQuote quotes a value for the generated command when it needs it.
func shellQuote(s string) string {
	if strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
