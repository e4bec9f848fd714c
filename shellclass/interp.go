package shellclass

import (
	"regexp"
	"strings"
)

// Interpreters run code the classifier cannot read: they are write. Their
// literal inline code (python -c, perl -e, ruby -e, node -e, php -r, lua
// -e, Rscript -e, and a literal script on standard input) is scanned, as a
// best effort that only ever raises, for calls that delete files or end
// processes (destructive) and for calls that run a shell command, whose
// literal command is classified as what it is (a command known only at
// run time is destructive: it may be rm). Code built at run time
// (getattr, eval of a string made from pieces) is not seen
// (docs/classification.md, What the classifier cannot see).

// interpCodeOpts are, per interpreter, the options whose value is code.
var interpCodeOpts = map[string][]string{
	"python": {"-c"}, "perl": {"-e", "-E"}, "ruby": {"-e"}, "node": {"-e", "--eval", "-p", "--print"},
	"nodejs": {"-e", "--eval", "-p", "--print"}, "php": {"-r"}, "lua": {"-e"}, "luajit": {"-e"},
	"Rscript": {"-e"}, "bun": {"-e", "--eval", "-p", "--print"}, "julia": {"-e", "-E", "--eval", "--print"},
	"osascript": {"-e"}, "expect": {"-c"}, "tclsh": {}, "wish": {}, "deno": {}, "pwsh": {"-c", "-Command", "-command"},
	"irb": {}, "groovy": {"-e"}, "jshell": {},
}

// interpFamily returns the entry of interpCodeOpts for an interpreter
// name with a version suffix (python3.11, perl5.36).
func interpFamily(base string) string {
	for name := range interpCodeOpts {
		if base == name || strings.HasPrefix(base, name) && strings.Trim(base[len(name):], "0123456789.-") == "" {
			return name
		}
	}
	return ""
}

var (
	// codeDeletes are calls that delete files or directories, truncate
	// them, or end processes, in the languages above.
	codeDeletes = regexp.MustCompile(`\b(?:os\.(?:remove|unlink|rmdir|removedirs|kill|killpg|truncate)|shutil\.rmtree|rmtree|remove_tree|unlink(?:Sync)?|rmdir(?:Sync)?|rmSync|rm_rf|rm_r|rm_f|FileUtils\.rm|File\.delete|Dir\.delete|Process\.kill|process\.kill|posix_kill|file\.remove|fs\.rm|fs\.promises\.rm|truncate(?:Sync)?|ftruncate|delete-file|delete-directory)\b|\.unlink\(|\.rmdir\(|\bkill\b\s*[-(0-9A-Z'"$]`)
	// codeShells are calls that run a shell command or a program.
	codeShells = regexp.MustCompile(`\b(?:os\.system|os\.popen|os\.exec[lv]p?e?|os\.spawn[lv]p?e?|os\.posix_spawnp?|subprocess\.(?:run|call|check_call|check_output|Popen|getoutput|getstatusoutput)|pty\.spawn|commands\.getoutput|system2?|systemlist|exec(?:Sync|File|FileSync)?|spawn(?:Sync)?|shell_exec|passthru|popen|proc_open|io\.popen|os\.execute|IO\.popen|Open3\.\w+|Kernel\.(?:system|exec|spawn)|shell-command|call-process|qx)\s*[\(\[{ '"/]`)
	// codeLiteral is the first string literal after a call.
	codeLiteral = regexp.MustCompile(`^\s*[\(\[{]?\s*(?:\[\s*)?(?:r|b|f|u)?(?:'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)")`)
	// codeList is a list of string literals: ["rm", "-rf", "x"].
	codeList = regexp.MustCompile(`^\s*\(?\s*\[((?:\s*(?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")\s*,?)+)\s*\]`)
	// codeBackticks are shell commands in backticks (perl, ruby, php).
	codeBackticks = regexp.MustCompile("`([^`]*)`")
	codeQuoted    = regexp.MustCompile(`'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)"`)
)

// interpreter classifies an interpreter: write, and its literal inline
// code as scanned by inlineCode.
func (c *classifier) interpreter(cl *cmdCall, base string, args []value) {
	c.raiseCall(cl, Write, base+" runs code the classifier cannot read (interpreter code is opaque)")
	fam := interpFamily(base)
	codeOpts := interpCodeOpts[fam]
	var code []value
	script := false
	for i := 1; i < len(args); i++ {
		a := args[i]
		if !a.known {
			if mayBeOption(a) || a.word == nil {
				c.raiseCall(cl, Destructive, base+" with an argument known only at run time, which may be code")
				return
			}
			break
		}
		matched := false
		for _, o := range codeOpts {
			switch {
			case a.s == o:
				if i+1 < len(args) {
					i++
					code = append(code, args[i])
				}
				matched = true
			case strings.HasPrefix(o, "--") && strings.HasPrefix(a.s, o+"="):
				code = append(code, value{s: a.s[len(o)+1:], known: true})
				matched = true
			case len(o) == 2 && len(a.s) > 2 && a.s[0] == '-' && a.s[1] != '-' && strings.Contains(a.s[1:], o[1:]):
				// A bundle ending with the code option (perl -ne CODE,
				// python -Sc CODE), or with the code attached (perl
				// -e'CODE').
				j := strings.Index(a.s, o[1:])
				if j+1 < len(a.s) {
					code = append(code, value{s: a.s[j+1:], known: true})
				} else if i+1 < len(args) {
					i++
					code = append(code, args[i])
				}
				matched = true
			}
			if matched {
				break
			}
		}
		if matched {
			continue
		}
		if a.s == "-" || !strings.HasPrefix(a.s, "-") {
			script = a.s != "-" && !stdinPath(a.s)
			break
		}
	}
	if len(code) == 0 && !script && cl.stdinKnown {
		code = append(code, value{s: cl.stdin, known: true})
	}
	for _, v := range code {
		if !v.known {
			c.raiseCall(cl, Destructive, base+" code known only at run time")
			continue
		}
		c.inlineCode(cl, base, v.s)
	}
}

// inlineCode scans code for deletions and shell commands.
func (c *classifier) inlineCode(cl *cmdCall, base, code string) {
	if m := codeDeletes.FindString(code); m != "" {
		c.raiseCall(cl, Destructive, base+" code deletes files or ends processes ("+strings.TrimSpace(m)+")")
		return
	}
	python := interpFamily(base) == "python"
	for _, loc := range codeShells.FindAllStringIndex(code, -1) {
		call := code[loc[0]:loc[1]]
		if python && (strings.HasPrefix(call, "exec") || strings.HasPrefix(call, "system")) && (loc[0] == 0 || code[loc[0]-1] != '.') {
			continue // Python's exec() runs Python code, not a command
		}
		rest := code[loc[1]-1:]
		if m := codeList.FindStringSubmatch(rest); m != nil {
			var words []string
			for _, q := range codeQuoted.FindAllStringSubmatch(m[1], -1) {
				words = append(words, syntaxQuote(unescapeCode(q[1]+q[2])))
			}
			c.nested(cl.sc, cl.node, strings.Join(words, " "), cl.depth)
			continue
		}
		if m := codeLiteral.FindStringSubmatch(rest); m != nil {
			c.nested(cl.sc, cl.node, unescapeCode(m[1]+m[2]), cl.depth)
			continue
		}
		c.raiseCall(cl, Destructive, base+" code runs a command known only at run time ("+strings.TrimSpace(call)+")")
	}
	if fam := interpFamily(base); fam == "perl" || fam == "ruby" || fam == "php" {
		for _, m := range codeBackticks.FindAllStringSubmatch(code, -1) {
			c.nested(cl.sc, cl.node, m[1], cl.depth)
		}
	}
}

// unescapeCode removes the backslash escapes of a string literal that
// matter to the command it holds (\" \' \\).
func unescapeCode(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
			switch s[i] {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			default:
				b.WriteByte(s[i])
			}
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
