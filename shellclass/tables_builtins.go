package shellclass

// The tables of the shells, interpreters and bash builtins: which builtins are
// read as they are, which names bash itself treats specially, and the option
// lists of the builtins with handlers (builtins.go).

// shells run a string given with -c, a script file, or their standard input.
var shells = map[string]bool{"sh": true, "bash": true, "dash": true, "zsh": true, "ksh": true, "ash": true, "mksh": true, "rbash": true, "yash": true, "fish": true, "tcsh": true, "csh": true}

// interpreters run code the classifier cannot read; a name counts with a
// version suffix too (python3, python3.11, perl5.36).
var interpreters = []string{"python", "perl", "ruby", "node", "nodejs", "php", "lua", "luajit", "tclsh", "wish", "Rscript", "deno", "bun", "pwsh", "irb", "julia", "java", "jshell", "groovy", "osascript", "expect"}

// builtinsRead are shell builtins that change nothing outside the shell
// itself; a non-empty reason makes them write.
var builtinsRead = map[string]string{
	":": "", "cd": "", "pushd": "", "popd": "", "dirs": "", "set": "", "shopt": "",
	"wait": "", "umask": "", "ulimit": "", "exit": "", "return": "", "break": "",
	"continue": "", "shift": "", "unset": "", "getopts": "", "read": "", "unalias": "",
	"mapfile": "", "readarray": "", "let": "", "local": "", "export": "", "readonly": "",
	"declare": "", "typeset": "", "jobs": "", "times": "", "caller": "", "help": "",
	"logout": "", "suspend": "", "disown": "", "history": "history can rewrite the history file",
	"hash": "hash -p maps a name to another program (a later use of the name is classified as that program)", "enable": "enable -f loads code into the shell",
	"bind": "bind changes key bindings", "complete": "complete can run commands on completion",
	"fc": "fc runs commands from the history",
}

// neverRead are commands that are never read (docs/classification.md), with why.
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

// bashIntegerVars are the variables bash itself gives the integer attribute
// (variables.c): assigning one evaluates the value as arithmetic
// (`RANDOM='a[$(cmd)]'` runs cmd).
var bashIntegerVars = []string{"RANDOM", "SRANDOM", "OPTIND", "HISTCMD", "BASHPID", "MAILCHECK", "PPID", "UID", "EUID"}

// bashAssignedVars are variables bash assigns by itself while it runs, from
// data the agent can choose (the last argument of a command, a path, a
// regex match, input): an integer attribute or name reference on one of
// them turns that data into code with no assignment in sight.
var bashAssignedVars = map[string]bool{
	"_": true, "PWD": true, "OLDPWD": true, "DIRSTACK": true, "BASH_REMATCH": true,
	"PIPESTATUS": true, "BASH_ARGV": true, "BASH_ARGC": true, "BASH_LINENO": true,
	"BASH_SOURCE": true, "FUNCNAME": true, "BASH_COMMAND": true, "COLUMNS": true,
	"LINES": true, "COPROC": true, "REPLY": true, "MAPFILE": true, "OPTARG": true,
	"BASH_EXECUTION_STRING": true, "SHLVL": true, "HISTFILE": true,
}

// promptVars are expanded as prompt strings: backslash escapes are decoded
// (`\044` is `$`), then parameters, arithmetic and command substitutions
// run. PS4 is expanded for every command under `set -x`; PS0-PS2 and the
// MAILPATH messages in interactive shells. (PS3 is printed as it is.)
var promptVars = map[string]bool{"PS0": true, "PS1": true, "PS2": true, "PS4": true, "MAILPATH": true}

const readOpts = "-a= -d= -i= -n= -N= -p= -t= -u= -e -r -s"

const mapfileOpts = "-d= -n= -O= -s= -t -u= -C= -c="

const compgenOpts = "-a -b -c -d -e -f -g -j -k -s -u -v -o= -A= -G= -W= -F= -C= -X= -P= -S= -V= -D -E -I"

// testBinops are test's binary operators (test.c: binop).
var testBinops = map[string]bool{
	"=": true, "==": true, "!=": true, "<": true, ">": true, "-nt": true, "-ot": true, "-ef": true,
	"-eq": true, "-ne": true, "-lt": true, "-le": true, "-gt": true, "-ge": true,
}

const unsetOpts = "-f -v -n"

const waitOpts = "-f -n -p="

const hashOpts = "-d -l -r -t -p="
