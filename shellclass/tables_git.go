package shellclass

// gitGlobals are git's options before the subcommand. -c, --config-env,
// --exec-path, --git-dir, --work-tree, -p and --paginate are accepted by the
// parser but keep the command from being read (docs/classification.md, git).
const gitGlobals = "-C= -c= -p -P --paginate --no-pager --exec-path? --git-dir= --work-tree= --namespace= --super-prefix= --config-env= --bare --no-replace-objects --literal-pathspecs --glob-pathspecs --noglob-pathspecs --icase-pathspecs --no-optional-locks --no-lazy-fetch --no-advice --attr-source= --list-cmds= --html-path --man-path --info-path --version --help"

// gitProgramGlobals are options git refuses before a subcommand but which
// name programs; the parser accepts them so the class can fail high.
const gitProgramGlobals = " --upload-pack= --receive-pack= --exec="

// gitProgramKeys are configuration keys whose value is a program or shell
// command that git will run.
var gitProgramKeys = []string{
	"core.pager", "core.editor", "core.sshcommand", "core.fsmonitor", "core.hookspath",
	"core.askpass", "core.gitproxy", "core.alternaterefscommand", "credential.helper",
	"diff.external", "sequence.editor", "gpg.program", "interactive.difffilter",
	"uploadpack.packobjectshook", "sendemail.sendmailcmd", "sendemail.smtpserver",
}

// gitProgramKeySuffixes match keys with a variable middle part:
// pager.<cmd>, diff.<driver>.textconv, filter.<driver>.clean ...
var gitProgramKeySuffixes = []string{".textconv", ".command", ".driver", ".clean", ".smudge", ".process", ".program", ".uploadpack", ".receivepack", ".proxy", ".helper", ".cmd", ".tool"}

// gitForbidden are options that make an otherwise read subcommand write a
// file, run a program or page; an unambiguous prefix of one counts.
// --show-signature and --filters are here too: the first runs gpg (which
// creates ~/.gnupg), the second the clean and smudge filter programs of the
// repository's configuration.
var gitForbidden = []string{"output", "ext-diff", "textconv", "exec", "upload-pack", "receive-pack", "open-files-in-pager", "paginate", "config-env", "git-dir", "work-tree", "show-signature", "filters"}

// gitReadSubs are the subcommands that can be read, each with its own
// further check on its arguments.
var gitReadSubs = map[string]func(args []value) (Class, string){
	"log": gitAnyArgs, "show": gitAnyArgs, "diff": gitAnyArgs, "status": gitAnyArgs,
	"rev-parse": gitAnyArgs, "ls-files": gitAnyArgs, "ls-tree": gitAnyArgs, "cat-file": gitAnyArgs,
	"describe": gitAnyArgs, "blame": gitAnyArgs, "shortlog": gitAnyArgs, "grep": gitGrep,
	"branch": gitBranch, "tag": gitTag, "remote": gitRemote, "config": gitConfig,
	"upload-pack": gitAnyArgs, "upload-archive": gitAnyArgs,
}
