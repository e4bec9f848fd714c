package shellclass

import "strings"

// The tables of git (tools_git.go), checked against git 2.39's sources
// (git.c handle_options, parse-options.c, revision.c handle_revision_opt,
// diff.c prep_parse_options, diff-merges.c, builtin/log.c) and
// `git CMD --git-completion-helper-all`.

// gitGlobals are git's options before the subcommand (git.c
// handle_options: whole words only). -c and --config-env are decided by
// the key they set; the others that are not read point git at another
// repository, configuration or program directory, or start a pager.
// --upload-pack, --receive-pack and --exec are refused by git before a
// subcommand but name programs: the table knows them so that the class
// fails high.
const gitGlobals = "-C= -P --no-pager --no-replace-objects --literal-pathspecs --glob-pathspecs --noglob-pathspecs --icase-pathspecs --no-optional-locks --no-lazy-fetch --no-advice --list-cmds= --html-path --man-path --info-path --version --help -h " +
	"W:-c= W:--config-env= W:--exec-path? W:--git-dir= W:--work-tree= W:--namespace= W:--super-prefix= W:--bare W:--attr-source= W:-p W:--paginate " +
	"P:--upload-pack= P:--receive-pack= P:--exec="

// gitDiffOpts are the diff options (diff.c prep_parse_options), parsed by
// parse-options with PARSE_OPT_KEEP_UNKNOWN_OPT: whole names only.
// --output writes a file; --ext-diff runs GIT_EXTERNAL_DIFF or a
// configured diff driver, --textconv a configured textconv program.
const gitDiffOpts = "-p -u --patch -s --no-patch -U? --unified? -W --function-context --raw --patch-with-raw --patch-with-stat --numstat --shortstat -X? --dirstat? --cumulative --dirstat-by-file? --check --summary --name-only --name-status --stat? --stat-width= --stat-name-width= --stat-graph-width= --stat-count= --compact-summary --binary --full-index --color? --ws-error-highlight= --abbrev? --src-prefix= --dst-prefix= --line-prefix= --no-prefix --default-prefix --inter-hunk-context= --output-indicator-new= --output-indicator-old= --output-indicator-context= " +
	"-B? --break-rewrites? -M? --find-renames? -D --irreversible-delete -C? --find-copies? --find-copies-harder --no-renames --rename-empty --follow --minimal -w --ignore-all-space -b --ignore-space-change --ignore-space-at-eol --ignore-cr-at-eol --ignore-blank-lines -I= --ignore-matching-lines= --indent-heuristic --patience --histogram --diff-algorithm= --anchored= --word-diff? --word-diff-regex= --color-words? --color-moved? --color-moved-ws= --relative? -a --text -R --exit-code --quiet --ignore-submodules? --submodule? --ita-invisible-in-index --ita-visible-in-index --pickaxe-all --pickaxe-regex --rotate-to= --skip-to= --find-object= --diff-filter= -S= -G= -O= -l= -z --no-ext-diff --no-textconv " +
	"W:--output= W:--ext-diff W:--textconv"

// gitRevOpts are the revision options (revision.c handle_revision_opt and
// the pseudo options, diff-merges.c) and git log's own (builtin/log.c):
// whole names only. --show-signature runs gpg (which creates ~/.gnupg);
// --remerge-diff writes a temporary object directory.
const gitRevOpts = "--all --branches? --tags? --remotes? --glob= --exclude= --exclude-hidden= --reflog --not --no-walk? --do-walk --bisect --indexed-objects --alternate-refs --single-worktree " +
	"--max-count= -n= -# --skip= --since= --after= --until= --before= --max-age= --min-age= --since-as-filter= --author= --committer= --grep= --grep-reflog= --all-match --invert-grep -i --regexp-ignore-case -E --extended-regexp -F --fixed-strings -P --perl-regexp --basic-regexp " +
	"--first-parent --exclude-first-parent-only --ancestry-path? -g --walk-reflogs --default= --merge --topo-order --simplify-merges --simplify-by-decoration --date-order --author-date-order --early-output? --parents --dense --sparse --in-commit-order --remove-empty --merges --no-merges --min-parents= --no-min-parents --max-parents= --no-max-parents --boundary --left-right --left-only --right-only --cherry --count --cherry-mark --cherry-pick --objects --objects-edge --objects-edge-aggressive --verify-objects --unpacked --no-kept-objects? " +
	"-r -t -v --pretty? --format= --expand-tabs? --no-expand-tabs --show-notes? --notes? --no-notes --standard-notes --no-standard-notes --show-linear-break? --oneline --graph --no-graph --encode-email-headers --no-encode-email-headers --root --no-commit-id --always --no-abbrev --abbrev-commit --no-abbrev-commit --full-diff --show-pulls --full-history --relative-date --date= --log-size --reverse --encoding= --ignore-missing --stdin --end-of-options --children " +
	"--cc -c -m --combined-all-paths --diff-merges= --no-diff-merges --dd --no-show-signature " +
	"--quiet --source --use-mailmap --mailmap --clear-decorations --decorate-refs= --decorate-refs-exclude= --decorate? --no-decorate -L= " +
	"W:--show-signature W:--remerge-diff"

// gitSub is one subcommand of git that can be read.
type gitSub struct {
	family optFamily
	opts   string
	// check decides what the table cannot: list modes, actions named by
	// operands, format placeholders that run programs.
	check func(p *parsed) (Class, string)
}

// gitReadSubs are the subcommands that can be read, each with its option
// table. A subcommand not here is write (or destructive, gitDestructive).
var gitReadSubs = map[string]gitSub{
	"log":         {exactFamily, gitRevOpts + " " + gitDiffOpts, gitFormatCheck},
	"whatchanged": {exactFamily, gitRevOpts + " " + gitDiffOpts, gitFormatCheck},
	"show":        {exactFamily, gitRevOpts + " " + gitDiffOpts, gitFormatCheck},
	"diff":        {exactFamily, gitRevOpts + " " + gitDiffOpts + " --no-index --cached --staged --merge-base --base --ours --theirs -0 -1 -2 -3", nil},
	"diff-tree":   {exactFamily, gitRevOpts + " " + gitDiffOpts + " --stdin -r -t --root --merge-base --no-commit-id --always", gitFormatCheck},
	"diff-index":  {exactFamily, gitDiffOpts + " --cached --merge-base -m", nil},
	"diff-files":  {exactFamily, gitDiffOpts + " -0 -1 -2 -3 --base --ours --theirs -c --cc -q", nil},
	"rev-list":    {exactFamily, gitRevOpts + " " + gitDiffOpts + " --header --timestamp --disk-usage? --bisect-vars --bisect-all --missing= --filter= --no-filter --filter-provided-objects --filter-print-omitted --no-object-names --object-names --progress= --exclude-promisor-objects", gitFormatCheck},
	"shortlog":    {exactFamily, without(gitRevOpts, "-n=", "--committer=") + " -c --committer -n --numbered -s --summary -e --email -w? --group=", gitFormatCheck},
	"blame":       {exactFamily, without(gitRevOpts, "-n=", "-c", "-t", "-L=", "--date=") + " --incremental -b --root --show-stats --progress --score-debug -f --show-name -n --show-number -p --porcelain --line-porcelain -c -t -l -s -e --show-email -w --ignore-rev= --ignore-revs-file= --color-lines --color-by-age --minimal -S= --contents= -C? -M? -L= --abbrev? --date=", nil},
	"status":      {gitFamily, "-v --verbose -s --short -b --branch --show-stash --ahead-behind --porcelain? --long -z --null -u? --untracked-files? --ignored? --ignore-submodules? --column? --no-renames -M? --find-renames? --renames", nil},
	"ls-files":    {gitFamily, "-z -t -v -f -c --cached -d --deleted -m --modified -o --others -i --ignored -s --stage -k --killed --directory --eol --empty-directory -u --unmerged --resolve-undo -x= --exclude= -X= --exclude-from= --exclude-per-directory= --exclude-standard --full-name --recurse-submodules --error-unmatch --with-tree= --abbrev? --debug --deduplicate --sparse --format=", nil},
	"ls-tree":     {gitFamily, "-d -r -t -z -l --long --name-only --name-status --object-only --full-name --full-tree --format= --abbrev?", nil},
	"cat-file":    {gitFamily, "-e -p -t -s --allow-unknown-type --use-mailmap --mailmap --batch? --batch-check? -z --batch-command? --batch-all-objects --buffer --follow-symlinks --unordered --path= W:--textconv W:--filters", nil},
	"describe":    {gitFamily, "--contains --debug --all --tags --long --first-parent --abbrev? --exact-match --candidates= --match= --exclude= --always --dirty? --broken?", nil},
	"grep":        {gitFamily, "--cached --no-index --untracked --exclude-standard --recurse-submodules -v --invert-match -i --ignore-case -w --word-regexp -a --text -I -r --recursive --max-depth= -E --extended-regexp -G --basic-regexp -F --fixed-strings -P --perl-regexp -n --line-number --column -h -H --full-name -l --files-with-matches --name-only -L --files-without-match -z --null -o --only-matching -c --count --color? --break --heading -C= --context= -B= --before-context= -A= --after-context= --threads= -# -p --show-function -W --function-context -f= -e= --and --or --not -q --quiet --all-match --ext-grep -m= --max-count= --index W:--textconv P:-O? P:--open-files-in-pager?", nil},
	"branch":      {gitFamily, "-v --verbose -q --quiet --color? -r --remotes --contains? --no-contains? --with? --without? --abbrev? -a --all -l --list --show-current --merged? --no-merged? --column? --sort= --points-at= -i --ignore-case --format= " + gitBranchActions, gitBranchCheck},
	"tag":         {gitFamily, "-l --list -n? --column? --contains? --no-contains? --with? --without? --merged? --no-merged? --sort= --points-at= --format= --color? -i --ignore-case " + gitTagActions, gitTagCheck},
	"remote":      {gitFamily, "-v --verbose", gitRemoteCheck},
	"config":      {gitFamily, "--global --system --local --worktree -f= --file= --blob= --get --get-all --get-regexp --get-urlmatch -l --list --fixed-value --get-color --get-colorbool -t= --type= --bool --int --bool-or-int --bool-or-str --path --expiry-date -z --null --name-only --includes --show-origin --show-scope --default= --all --regexp --value= --url= " + gitConfigActions, gitConfigCheck},
	"rev-parse": {exactFamily, "--git-dir --absolute-git-dir --git-common-dir --show-toplevel --show-prefix --show-cdup --show-superproject-working-tree --shared-index-path --is-inside-work-tree --is-inside-git-dir --is-bare-repository --is-shallow-repository --resolve-git-dir= --git-path= --path-format= --show-object-format? --show-ref-format --local-env-vars " +
		"--abbrev-ref? --short? --verify -q --quiet --symbolic --symbolic-full-name --all --branches? --tags? --remotes? --glob= --exclude= --exclude-hidden= --disambiguate= --not --since= --after= --until= --before= --default= --prefix= --revs-only --no-revs --flags --no-flags --sq --sq-quote --parseopt --stuck-long --keep-dashdash --stop-at-non-option --end-of-options", nil},
	"show-ref":       {gitFamily, "--tags --heads --verify --head -d --dereference -s --hash? --abbrev? -q --quiet --exclude-existing?", nil},
	"for-each-ref":   {gitFamily, "-s --shell -p --perl --python --tcl --count= --format= --color? --sort= --points-at= --merged? --no-merged? --contains? --no-contains? --ignore-case", gitFormatCheck},
	"name-rev":       {gitFamily, "--name-only --tags --refs= --exclude= --all --stdin --annotate-stdin --undefined --always --peel-tag", nil},
	"merge-base":     {gitFamily, "-a --all --octopus --independent --is-ancestor --fork-point", nil},
	"count-objects":  {gitFamily, "-v --verbose -H --human-readable", nil},
	"check-ignore":   {gitFamily, "-q --quiet -v --verbose --stdin -z -n --non-matching --no-index --index", nil},
	"check-attr":     {gitFamily, "-a --all --cached --stdin -z --source=", nil},
	"show-branch":    {gitFamily, "-a --all -r --remotes --color? --more? --list --no-name --current --sha1-name --merge-base --independent --topo-order --topics --sparse --date-order -g? --reflog? --name", nil},
	"version":        {gitFamily, "--build-options", nil},
	"var":            {gitFamily, "-l", nil},
	"upload-pack":    {gitFamily, "--stateless-rpc --strict --timeout= --advertise-refs --http-backend-info-refs", nil},
	"upload-archive": {gitFamily, "", nil},
}

// gitStashShowOpts and gitWorktreeListOpts are the options of git stash
// show and git worktree list.
const (
	gitStashShowOpts    = gitDiffOpts + " --include-untracked --only-untracked -u"
	gitWorktreeListOpts = "-v --verbose --porcelain -z --expire="
)

// gitBranchActions are git branch's options that create, move, copy,
// delete or change branches (builtin/branch.c).
const gitBranchActions = "W:-t? W:--track? W:--set-upstream W:-u= W:--set-upstream-to= W:--unset-upstream D:-d D:--delete D:-D W:-m W:--move W:-M W:-c W:--copy W:-C W:--create-reflog W:--edit-description W:-f W:--force W:--recurse-submodules"

// gitTagActions are git tag's options that create, delete or verify tags
// (verify runs gpg).
const gitTagActions = "D:-d D:--delete W:-v W:--verify W:-a W:--annotate W:-m= W:--message= W:-F= W:--file= W:-e W:--edit W:-s W:--sign W:--cleanup= W:-u= W:--local-user= W:-f W:--force W:--create-reflog"

// gitConfigActions are git config's options that change configuration or
// open an editor.
const gitConfigActions = "W:--replace-all W:--add W:--unset W:--unset-all W:--rename-section W:--remove-section W:-e W:--edit W:--comment="

// gitProgramKeys are configuration keys whose value is a program or shell
// command that git will run.
var gitProgramKeys = []string{
	"core.pager", "core.editor", "core.sshcommand", "core.fsmonitor", "core.hookspath",
	"core.askpass", "core.gitproxy", "core.alternaterefscommand", "credential.helper",
	"diff.external", "sequence.editor", "gpg.program", "interactive.difffilter",
	"uploadpack.packobjectshook", "sendemail.sendmailcmd", "sendemail.smtpserver",
	"diff.tool", "merge.tool", "web.browser", "man.viewer", "help.browser",
}

// gitProgramKeySuffixes match keys with a variable middle part:
// pager.<cmd>, diff.<driver>.textconv, filter.<driver>.clean ...
var gitProgramKeySuffixes = []string{".textconv", ".command", ".driver", ".clean", ".smudge", ".process", ".program", ".uploadpack", ".receivepack", ".proxy", ".helper", ".cmd", ".tool", ".path"}

// without returns an option table without the given tokens: a
// subcommand's own option of the same name comes first (git blame's -n is
// --show-number, not the revision option -n NUMBER).
func without(opts string, tokens ...string) string {
	drop := map[string]bool{}
	for _, t := range tokens {
		drop[t] = true
	}
	var keep []string
	for _, t := range strings.Fields(opts) {
		if !drop[t] {
			keep = append(keep, t)
		}
	}
	return strings.Join(keep, " ")
}
