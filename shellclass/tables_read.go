package shellclass

// readEntry is one command of the read allowlist. The options listed are the
// only ones accepted: anything else makes the command write ("unknown option").
type readEntry struct {
	// opts lists accepted options: "-n=" takes a value, "--color?" an
	// optional =value, "-#" allows `-20` counts (see parseSpec).
	opts string
	// maxOps bounds the operands; anyOps for no bound.
	maxOps int
	// ceiling is the highest class the command can reach when an argument is
	// known only at run time (a glob can expand to a file named -delete).
	ceiling Class
	// require lists options of which one must be present, such as
	// --no-pager for tools that otherwise start a pager.
	require []string
	// posix stops option parsing at the first operand (no GNU permutation).
	posix bool
	// lenient treats unknown options as operands, as echo and test do.
	lenient bool
	// check applies a rule the option list cannot say; nil if none.
	check func(p *parsed) (Class, string)
}

const anyOps = -1

// readTable is the read allowlist (docs/classification.md, The read allowlist). It is read-only after
// package initialisation. Tools with subcommands (git, docker, systemctl,
// kubectl, ip, package managers) have handlers in tools.go instead.
var readTable = map[string]readEntry{
	"cat":       {opts: "-A -b -e -E -n -s -t -T -u -v --show-all --number-nonblank --show-ends --number --squeeze-blank --show-tabs --show-nonprinting", maxOps: anyOps},
	"ls":        {opts: "-a -A -b -B -c -C -d -f -F -g -G -h -H -i -k -l -L -m -n -N -o -p -q -Q -r -R -s -S -t -u -U -v -x -X -Z -1 -w= -I= -T= --all --almost-all --author --escape --block-size= --ignore-backups --color? --directory --dired --classify? --file-type --format= --full-time --group-directories-first --no-group --human-readable --si --dereference-command-line --dereference-command-line-symlink-to-dir --hide= --hyperlink? --indicator-style= --inode --ignore= --kibibytes --dereference --literal --numeric-uid-gid --hide-control-chars --show-control-chars --quote-name --quoting-style= --reverse --recursive --size --sort= --time= --time-style= --tabsize= --width= --context --zero --help --version", maxOps: anyOps},
	"head":      {opts: "-c= -n= -q -v -z -# --bytes= --lines= --quiet --silent --verbose --zero-terminated", maxOps: anyOps},
	"tail":      {opts: "-c= -n= -q -v -z -s= -# --bytes= --lines= --quiet --silent --verbose --zero-terminated --sleep-interval=", maxOps: anyOps, ceiling: Write},
	"wc":        {opts: "-c -m -l -L -w --bytes --chars --lines --max-line-length --words --total=", maxOps: anyOps},
	"stat":      {opts: "-L -f -t -c= --dereference --file-system --terse --format= --printf= --cached=", maxOps: anyOps},
	"file":      {opts: "-b -i -k -l -L -h -N -n -r -s -0 -E -e= -F= -P= --brief --mime --mime-type --mime-encoding --keep-going --list --dereference --no-dereference --no-pad --no-buffer --raw --special-files --print0 --exclude= --separator= --extension --apple --parameter=", maxOps: anyOps, ceiling: Write},
	"du":        {opts: "-0 -a -b -B= -c -d= -D -h -H -k -l -L -m -P -s -S -t= -x --null --all --apparent-size --block-size= --bytes --total --max-depth= --dereference-args --human-readable --inodes --count-links --dereference --no-dereference --separate-dirs --si --summarize --threshold= --time? --time-style= --one-file-system --exclude=", maxOps: anyOps},
	"df":        {opts: "-a -B= -h -H -i -k -l -P -t= -T -x= --all --block-size= --human-readable --si --inodes --local --no-sync --output? --portability --total --type= --print-type --exclude-type=", maxOps: anyOps},
	"tree":      {opts: "-a -d -l -f -x -L= -P= -I= -p -s -h -u -g -D -F -q -N -Q -v -t -c -U -r -C -n -A -S -i --noreport --dirsfirst --du --prune --charset= --filelimit= --timefmt= --matchdirs --ignore-case --gitignore --sort=", maxOps: anyOps, ceiling: Write},
	"grep":      {opts: grepOpts, maxOps: anyOps},
	"egrep":     {opts: grepOpts, maxOps: anyOps},
	"fgrep":     {opts: grepOpts, maxOps: anyOps},
	"rg":        {opts: "-A= -B= -C= -c -e= -E= -f= -F -g= -i -j= -l -L -m= -M= -n -N -o -p -P -q -r= -s -S -t= -T= -u -U -v -w -x -0 --after-context= --before-context= --context= --count --count-matches --encoding= --regexp= --file= --fixed-strings --glob= --iglob= --ignore-case --smart-case --case-sensitive --files --files-with-matches --files-without-match --follow --hidden --json --line-number --no-line-number --no-heading --heading --no-filename --with-filename --no-ignore --no-messages --null --only-matching --pretty --quiet --replace= --sort= --sortr= --stats --type= --type-not= --type-list --unrestricted --multiline --invert-match --word-regexp --line-regexp --max-count= --max-depth= --max-filesize= --max-columns= --color= --colors= --column --trim --vimgrep --threads= --no-config --debug", maxOps: anyOps, ceiling: Destructive},
	"cut":       {opts: "-b= -c= -d= -f= -n -s -z --bytes= --characters= --delimiter= --fields= --complement --only-delimited --output-delimiter= --zero-terminated", maxOps: anyOps},
	"sort":      {opts: "-b -d -f -g -h -i -M -n -R -r -V -c -C -k= -m -s -t= -u -z --ignore-leading-blanks --dictionary-order --ignore-case --general-numeric-sort --ignore-nonprinting --month-sort --human-numeric-sort --numeric-sort --random-sort --reverse --version-sort --sort= --check? --key= --merge --stable --field-separator= --unique --zero-terminated --parallel= --debug", maxOps: anyOps, ceiling: Destructive},
	"uniq":      {opts: "-c -d -D -f= -i -s= -u -z -w= --count --repeated --all-repeated? --skip-fields= --group? --ignore-case --skip-chars= --unique --zero-terminated --check-chars=", maxOps: 1, ceiling: Write},
	"tr":        {opts: "-c -C -d -s -t --complement --delete --squeeze-repeats --truncate-set1", maxOps: 2},
	"nl":        {opts: "-b= -d= -f= -h= -i= -l= -n= -p -s= -v= -w= --body-numbering= --section-delimiter= --footer-numbering= --header-numbering= --line-increment= --join-blank-lines= --number-format= --no-renumber --number-separator= --starting-line-number= --number-width=", maxOps: anyOps},
	"paste":     {opts: "-d= -s -z --delimiters= --serial --zero-terminated", maxOps: anyOps},
	"join":      {opts: "-a= -e= -i -j= -o= -t= -v= -1= -2= --check-order --nocheck-order --header --ignore-case --zero-terminated", maxOps: 2},
	"column":    {opts: "-c= -s= -t -x -n -o= -N= -R= -J -e -l= -L --columns= --separator= --table --fillrows --output-separator= --table-columns= --json", maxOps: anyOps},
	"fold":      {opts: "-b -s -w= --bytes --spaces --width=", maxOps: anyOps},
	"rev":       {maxOps: anyOps},
	"tac":       {opts: "-b -r -s= --before --regex --separator=", maxOps: anyOps},
	"od":        {opts: "-A= -j= -N= -t= -v -w? -a -b -c -d -f -i -l -o -s -x --address-radix= --endian= --skip-bytes= --read-bytes= --strings? --format= --output-duplicates --width? --traditional", maxOps: anyOps},
	"hexdump":   {opts: "-b -c -C -d -o -x -e= -n= -s= -v -L?", maxOps: anyOps},
	"xxd":       {opts: "-a -b -c= -C -e -g= -i -l= -n= -o= -p -s= -u -d", maxOps: 1, ceiling: Write},
	"strings":   {opts: "-a -d -f -n= -t= -e= -w -s= --all --data --print-file-name --bytes= --radix= --encoding= --include-all-whitespace --output-separator=", maxOps: anyOps},
	"base64":    {opts: "-d -i -w= --decode --ignore-garbage --wrap=", maxOps: 1, ceiling: Write},
	"md5sum":    {opts: checksumOpts, maxOps: anyOps},
	"sha1sum":   {opts: checksumOpts, maxOps: anyOps},
	"sha256sum": {opts: checksumOpts, maxOps: anyOps},
	"sha512sum": {opts: checksumOpts, maxOps: anyOps},
	"cksum":     {opts: "-a= -l= --algorithm= --length= --untagged --tag --base64 --raw --check --debug", maxOps: anyOps},
	"diff":      {opts: "-a -b -B -c -C= -d -e -E -i -I= -n -N -p -q -r -s -t -T -u -U= -w -W= -x= -X= -y -Z --brief --report-identical-files --context? --unified? --ed --normal --side-by-side --width= --left-column --suppress-common-lines --show-c-function --show-function-line= --label= --expand-tabs --initial-tab --ignore-case --ignore-tab-expansion --ignore-trailing-space --ignore-space-change --ignore-all-space --ignore-blank-lines --ignore-matching-lines= --text --strip-trailing-cr --recursive --new-file --unidirectional-new-file --exclude= --exclude-from= --starting-file= --from-file= --to-file= --minimal --speed-large-files --color? --no-dereference --suppress-blank-empty --tabsize= --horizon-lines=", maxOps: 2},
	"cmp":       {opts: "-b -i= -l -n= -s --print-bytes --ignore-initial= --verbose --bytes= --quiet --silent", maxOps: 4},
	"comm":      {opts: "-1 -2 -3 -z --check-order --nocheck-order --output-delimiter= --total --zero-terminated", maxOps: 2},
	"sed":       {opts: "-n -E -r -s -u -z -e= --quiet --silent --expression= --regexp-extended --separate --unbuffered --null-data --posix --debug --sandbox", maxOps: anyOps, ceiling: Destructive, check: sedCheck},
	"jq":        {opts: "-c -r -j -a -s -n -e -S -C -M -R --tab --indent= --arg= --argjson= --slurp --null-input --raw-output --join-output --ascii-output --compact-output --sort-keys --color-output --monochrome-output --raw-input --exit-status --seq --stream --stream-errors --raw-output0 --unbuffered -f= --from-file= --args --jsonargs", maxOps: anyOps},
	"basename":  {opts: "-a -s= -z --multiple --suffix= --zero", maxOps: anyOps},
	"dirname":   {opts: "-z --zero", maxOps: anyOps},
	"realpath":  {opts: "-e -m -L -P -q -s -z --canonicalize-existing --canonicalize-missing --logical --physical --quiet --relative-to= --relative-base= --strip --no-symlinks --zero", maxOps: anyOps},
	"readlink":  {opts: "-f -e -m -n -q -s -v -z --canonicalize --canonicalize-existing --canonicalize-missing --no-newline --quiet --silent --verbose --zero", maxOps: anyOps},
	"echo":      {opts: "-n -e -E", maxOps: anyOps, posix: true, lenient: true},
	"printf":    {opts: "-v=", maxOps: anyOps, posix: true, check: printfCheck},
	"true":      {maxOps: anyOps, posix: true, lenient: true},
	"false":     {maxOps: anyOps, posix: true, lenient: true},
	"test":      {maxOps: anyOps, posix: true, lenient: true},
	"[":         {maxOps: anyOps, posix: true, lenient: true},
	"pwd":       {opts: "-L -P --logical --physical", maxOps: 0},
	"sleep":     {maxOps: anyOps},
	"seq":       {opts: "-f= -s= -w --format= --separator= --equal-width", maxOps: 3, posix: true, lenient: true},
	"expr":      {maxOps: anyOps, posix: true, lenient: true},
	"which":     {opts: "-a -s", maxOps: anyOps},
	"type":      {opts: "-a -f -p -P -t", maxOps: anyOps},
	"whoami":    {maxOps: 0},
	"id":        {opts: "-a -Z -g -G -n -r -u -z --context --group --groups --name --real --user --zero", maxOps: 1},
	"groups":    {maxOps: anyOps},
	"who":       {opts: "-a -b -d -H -l -m -p -q -r -s -t -T -u --all --boot --dead --heading --login --lookup --process --count --runlevel --short --time --mesg --users", maxOps: 2},
	"w":         {opts: "-h -i -o -s -u -f -n --no-header --ip-addr --old-style --short --from --no-truncat", maxOps: 1},
	"last":      {opts: "-a -d -F -i -R -w -x -n= -s= -t= -p= -f= --hostlast --dns --fulltimes --ip --nohostname --fullnames --system --limit= --since= --until= --present= --file= --time-format=", maxOps: anyOps},
	"uname":     {opts: "-a -s -n -r -v -m -p -i -o --all --kernel-name --nodename --kernel-release --kernel-version --machine --processor --hardware-platform --operating-system", maxOps: 0},
	"hostname":  {opts: "-f -s -d -i -I -A -a -y --fqdn --long --short --domain --ip-address --all-ip-addresses --all-fqdns --alias --nis --yp", maxOps: 0},
	"date":      {opts: "-d= -f= -I? -R -u -r= --date= --file= --iso-8601? --rfc-email --rfc-3339= --reference= --utc --universal --debug", maxOps: 1, check: dateCheck, ceiling: Write},
	"uptime":    {opts: "-p -s --pretty --since", maxOps: 0},
	"free":      {opts: "-b -k -m -g -h -l -t -v -w -c= -s= --bytes --kilo --mega --giga --tera --peta --kibi --mebi --gibi --tebi --pebi --human --si --lohi --total --committed --wide --count= --seconds=", maxOps: 0, check: freeCheck},
	"vmstat":    {opts: "-a -f -m -n -s -d -D -p= -S= -t -w -y --active --forks --slabs --one-header --stats --disk --disk-sum --partition= --unit= --timestamp --wide --no-first", maxOps: 2, check: repeatCheck},
	"iostat":    {opts: "-c -d -h -k -m -N -s -t -x -y -z -p? -g= -H -j= -o= --human --dec= --pretty --compact", maxOps: anyOps, check: repeatCheck},
	"nproc":     {opts: "--all --ignore=", maxOps: 0},
	"lscpu":     {opts: "-a -b -c -e? -p? -s= -x -y -B -C? -J --all --online --offline --bytes --caches? --extended? --json --parse? --sysroot= --hex --physical --output-all", maxOps: 0},
	"lsblk":     {opts: "-a -b -d -D -f -i -J -l -m -n -o= -O -p -P -r -s -S -t -T -x= -z -e= -I= -M -N -v --all --bytes --nodeps --discard --fs --ascii --json --list --perms --noheadings --output= --output-all --paths --pairs --raw --inverse --scsi --topology --tree --sort= --exclude= --include= --merge --nvme --virtio", maxOps: anyOps},
	"lspci":     {opts: "-m -t -v -k -x -b -D -P -n -i= -p= -s= -d=", maxOps: 0, check: lspciCheck},
	"lsusb":     {opts: "-v -t -s= -d= -D= --verbose --tree", maxOps: 0},
	"lsof":      {opts: "-a -b -c= -d= -g? -i? -l -n -N -P -p= -R -s? -t -u= -U -w -x? -V -F? -K? -S? -T?", maxOps: anyOps, check: lsofCheck},
	"ps":        {opts: "-A -a -C= -d -e -f -F -g= -G= -H -j -l -L -M -N -o= -p= -q= -s= -t= -T -u= -U= -w -x -y -Z --cols= --columns= --cumulative --deselect --forest --format= --group= --Group= --headers --no-headers --lines= --pid= --ppid= --quick-pid= --rows= --sid= --sort= --tty= --user= --User= --width=", maxOps: anyOps, check: psCheck},
	"pgrep":     {opts: "-a -c -d= -f -g= -G= -i -l -n -o -O= -P= -r= -s= -t= -u= -U= -v -w -x -A --count --delimiter= --full --pgroup= --group= --ignore-case --list-name --list-full --newest --oldest --older= --parent= --runstates= --session= --terminal= --euid= --uid= --inverse --lightweight --exact --pidfile= --logpidfile --ignore-ancestors --ns= --nslist= --env= --cgroup=", maxOps: 1},
	"ss":        {opts: "-h -V -H -n -r -a -l -o -e -m -i -s -4 -6 -0 -t -u -d -w -x -S -M -Z -z -b -O -f= -A= --numeric --resolve --all --listening --options --extended --memory --info --summary --tcp --udp --dccp --raw --unix --sctp --vsock --tipc --family= --query= --socket= --no-header --oneline --context --contexts --bpf --ipv4 --ipv6 --packet -p --processes -K --kill", maxOps: anyOps, ceiling: Destructive, check: ssCheck},
	"ping":      {opts: "-4 -6 -c= -i= -W= -w= -s= -t= -q -n -D -O -v -I=", maxOps: 1, require: []string{"-c"}, ceiling: Write},
	"dig":       {opts: "-4 -6 -b= -c= -f= -p= -q= -t= -x= -y= -k=", maxOps: anyOps},
	"host":      {opts: "-a -c= -C -d -l -i -N= -r -R= -s -t= -T -U -v -V -w -W= -4 -6", maxOps: 2},
	"nslookup":  {maxOps: 2, lenient: true},
	"getent":    {opts: "-s= -i --service= --no-idn", maxOps: anyOps},
	"printenv":  {opts: "-0 --null", maxOps: anyOps},
	"locale":    {opts: "-a -m -c -k --all-locales --charmaps --category-name --keyword-name --verbose", maxOps: anyOps},
	"arch":      {maxOps: 0},
	"dmesg":     {opts: "-d -e -f= -F= -H -k -l= -L? -P -r -S -t -T -u -x --ctime --decode --facility= --human --kernel --level= --color? --nopager --raw --syslog --notime --time-format= --userspace --show-delta --reltime --since= --until=", maxOps: 0, check: dmesgCheck},
	"journalctl": {opts: "-a -b? -D= -e -f -g= -k -l -m -n= -o= -p= -q -r -S= -t= -u= -U= -x -M= --all --boot? --directory= --pager-end --grep= --case-sensitive? --dmesg --full --merge --lines= --output= --output-fields= --priority= --quiet --reverse --since= --until= --identifier= --unit= --user-unit= --user --system --catalog --utc --no-hostname --no-full --no-pager --list-boots --disk-usage --header --fields --field= --machine= --facility= --cursor= --after-cursor= --show-cursor --namespace= --invocation= -I -#",
		maxOps: anyOps, require: []string{"--no-pager"}, check: journalctlCheck},
}

// grepOpts excludes options that read files named by the pattern list only
// when those are safe: -f reads a pattern file, which is still a read.
const grepOpts = "-A= -B= -C= -a -b -c -D= -d= -E -e= -F -f= -G -h -H -i -I -L -l -m= -n -o -P -q -r -R -s -T -U -v -V -w -x -y -z -Z -# --after-context= --before-context= --context= --text --byte-offset --count --color? --colour? --devices= --directories= --extended-regexp --regexp= --fixed-strings --file= --basic-regexp --no-filename --with-filename --ignore-case --no-ignore-case --files-without-match --files-with-matches --max-count= --line-number --only-matching --quiet --silent --recursive --dereference-recursive --no-messages --initial-tab --binary --invert-match --word-regexp --line-regexp --null-data --null --include= --exclude= --exclude-dir= --exclude-from= --label= --line-buffered --perl-regexp --binary-files="

const checksumOpts = "-b -c -t -z -w --binary --check --tag --text --zero --ignore-missing --quiet --status --strict --warn"

// blockDevicePrefixes are the device paths a write to which destroys a disk.
var blockDevicePrefixes = []string{"/dev/sd", "/dev/hd", "/dev/nvme", "/dev/vd", "/dev/xvd", "/dev/mmcblk", "/dev/disk/", "/dev/mapper/", "/dev/md", "/dev/dm-", "/dev/loop", "/dev/sr", "/dev/zd", "/dev/rbd"}

// specialVars are variables whose assignment changes which program or code
// runs later, beyond the LD_*, GIT_* and BASH_FUNC_* prefixes.
var specialVars = map[string]bool{
	"PATH": true, "BASH_ENV": true, "ENV": true, "IFS": true, "PS4": true, "PS1": true,
	"PROMPT_COMMAND": true, "SHELLOPTS": true, "BASHOPTS": true, "LESSOPEN": true,
	"LESSCLOSE": true, "PAGER": true, "EDITOR": true, "VISUAL": true, "CDPATH": true,
	"GLOBIGNORE": true, "HOME": true, "SHELL": true, "PYTHONPATH": true, "PYTHONSTARTUP": true,
	"PERL5LIB": true, "PERL5OPT": true, "RUBYOPT": true, "NODE_OPTIONS": true,
	"MANPAGER": true, "SYSTEMD_PAGER": true, "BROWSER": true, "TMPDIR": true,
	"SSH_ASKPASS": true, "SUDO_ASKPASS": true, "HISTFILE": true, "INPUTRC": true,
	"TERMINFO": true, "LOCPATH": true, "GCONV_PATH": true, "MALLOC_CHECK_": true,
	// Configuration that read entries load and that can run programs:
	// rg's flags file (--pre), docker's CLI plugins and credential
	// helpers, kubeconfig exec plugins, APT hooks, gawk's include paths.
	"RIPGREP_CONFIG_PATH": true, "DOCKER_CONFIG": true, "DOCKER_HOST": true,
	"DOCKER_CONTEXT": true, "CONTAINER_HOST": true, "CONTAINERS_CONF": true,
	"KUBECONFIG": true, "APT_CONFIG": true, "AWKPATH": true, "AWKLIBPATH": true,
	"SYSTEMD_PAGERSECURE": true, "LESSSECURE": true, "PIP_CONFIG_FILE": true,
	"XDG_CONFIG_HOME": true, "GNUPGHOME": true, "SSH_AUTH_SOCK": true,
}

// systemDirs are the directories from which a path-named program counts as
// the read command of the same name (`/bin/cat`), because only root writes
// there.
var systemDirs = map[string]bool{"/bin": true, "/usr/bin": true, "/sbin": true, "/usr/sbin": true, "/usr/local/bin": false}

// namesOnly are read entries that look at file names and metadata, never
// at the contents of a device (file opens a device only with -s).
var namesOnly = map[string]bool{
	"ls": true, "stat": true, "du": true, "df": true, "tree": true, "realpath": true, "readlink": true,
	"basename": true, "dirname": true, "echo": true, "printf": true, "test": true, "[": true, "pwd": true,
	"which": true, "type": true, "lsof": true,
}

// sideEffectDevices are device files that act when opened or read:
// opening a watchdog arms it, and unless it is closed with the magic
// character (cat does not write one) the machine reboots; /dev/port,
// /dev/mem and /dev/kmem read device registers, which can hang hardware.
// Opening /dev/snapshot for reading starts preparing a hibernation image;
// reading /proc/kmsg takes the kernel's messages away from the system
// logger.
var sideEffectDevices = []string{"/dev/watchdog", "/dev/port", "/dev/mem", "/dev/kmem", "/dev/snapshot", "/proc/kmsg"}
