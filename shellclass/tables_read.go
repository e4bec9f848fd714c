package shellclass

// readEntry is one command of the read allowlist. The options listed are the
// only ones accepted: anything else makes the command write ("unknown option").
type readEntry struct {
	// opts is the entry's option table (see parseSpec): the options on the
	// allowlist, and the tool's other options marked with what they do.
	opts string
	// family is the option parser the tool is built with; getopt_long if
	// zero.
	family optFamily
	// maxOps bounds the operands; anyOps for no bound.
	maxOps int
	// ceiling is the highest class the command can reach when an argument is
	// known only at run time (a glob can expand to a file named -delete).
	ceiling Class
	// require lists options of which one must be present (ping -c).
	require []string
	// pager lists the options that keep a tool that pages on a terminal
	// from paging (--no-pager); they are required only when the session
	// has a terminal (Options.Terminal).
	pager []string
	// posix stops option parsing at the first operand (no GNU permutation).
	posix bool
	// lenient treats unknown options as operands, as echo and test do.
	lenient bool
	// check applies a rule the option list cannot say; nil if none.
	check func(p *parsed, terminal bool) (Class, string)
}

const anyOps = -1

// readTable is the read allowlist (docs/classification.md, The read allowlist). It is read-only after
// package initialisation. Tools with subcommands (git, docker, systemctl,
// kubectl, ip, package managers) have handlers in tools.go instead.
var readTable = map[string]readEntry{
	"cat":       {opts: "-A -b -e -E -n -s -t -T -u -v --show-all --number-nonblank --show-ends --number --squeeze-blank --show-tabs --show-nonprinting --help --version", maxOps: anyOps},
	"ls":        {opts: "-a -A -b -B -c -C -d -f -F -g -G -h -H -i -k -l -L -m -n -N -o -p -q -Q -r -R -s -S -t -u -U -v -x -X -Z -1 -w= -I= -T= --all --almost-all --author --escape --block-size= --ignore-backups --color? --directory --dired --classify? --file-type --format= --full-time --group-directories-first --no-group --human-readable --si --dereference-command-line --dereference-command-line-symlink-to-dir --hide= --hyperlink? --indicator-style= --inode --ignore= --kibibytes --dereference --literal --numeric-uid-gid --hide-control-chars --show-control-chars --quote-name --quoting-style= --reverse --recursive --size --sort= --time= --time-style= --tabsize= --width= --context --zero --help --version -D", maxOps: anyOps},
	"head":      {opts: "-c= -n= -q -v -z -# --bytes= --lines= --quiet --silent --verbose --zero-terminated --help --version", maxOps: anyOps},
	"tail":      {opts: "-c= -n= -q -v -z -s= -# --bytes= --lines= --quiet --silent --verbose --zero-terminated --sleep-interval= F:-f F:-F F:--follow? F:--pid= F:--retry --max-unchanged-stats= --help --version", maxOps: anyOps, ceiling: Write},
	"wc":        {opts: "-c -m -l -L -w --bytes --chars --lines --max-line-length --words --total= N:--files0-from= --help --version", maxOps: anyOps},
	"stat":      {opts: "-L -f -t -c= --dereference --file-system --terse --format= --printf= --cached= --help --version", maxOps: anyOps},
	"file":      {opts: "-b -i -k -l -L -h -N -n -r -s -0 -E -e= -F= -P= --brief --mime --mime-type --mime-encoding --keep-going --list --dereference --no-dereference --no-pad --no-buffer --raw --special-files --print0 --exclude= --separator= --extension --apple --parameter= -v -c --checking-printout -d --debug --exclude-quiet= W:-C W:--compile N:-f= N:--files-from= N:-m= N:--magic-file= N:-S N:--no-sandbox W:-p W:--preserve-date W:-z W:--uncompress W:-Z W:--uncompress-noreport --help --version", maxOps: anyOps, ceiling: Write},
	"du":        {opts: "-0 -a -b -B= -c -d= -D -h -H -k -l -L -m -P -s -S -t= -x --null --all --apparent-size --block-size= --bytes --total --max-depth= --dereference-args --human-readable --inodes --count-links --dereference --no-dereference --separate-dirs --si --summarize --threshold= --time? --time-style= --one-file-system --exclude= N:-X= N:--exclude-from= N:--files0-from= --help --version", maxOps: anyOps},
	"df":        {opts: "-a -B= -h -H -i -k -l -P -t= -T -x= --all --block-size= --human-readable --si --inodes --local --no-sync --output? --portability --total --type= --print-type --exclude-type= -v W:--sync --help --version", maxOps: anyOps},
	"tree":      {opts: "-a -d -l -f -x -L= -P= -I= -p -s -h -u -g -D -F -q -N -Q -v -t -c -U -r -C -n -A -S -i --noreport --dirsfirst --du --prune --charset= --filelimit= --timefmt= --matchdirs --ignore-case --gitignore --sort= --device --fflinks --filesfirst --fromfile --gitfile= --hintro= --houtro= --info --infofile= --inodes --metafirst --nolinks --si -J -T= -X W:-H= W:-R W:-o= --help --version", maxOps: anyOps, ceiling: Write, family: exactFamily},
	"grep":      {opts: grepOpts, maxOps: anyOps},
	"egrep":     {opts: grepOpts, maxOps: anyOps},
	"fgrep":     {opts: grepOpts, maxOps: anyOps},
	"rg":        {opts: "-A= -B= -C= -c -e= -E= -f= -F -g= -i -j= -l -L -m= -M= -n -N -o -p -P -q -r= -s -S -t= -T= -u -U -v -w -x -0 --after-context= --before-context= --context= --count --count-matches --encoding= --regexp= --file= --fixed-strings --glob= --iglob= --ignore-case --smart-case --case-sensitive --files --files-with-matches --files-without-match --follow --hidden --json --line-number --no-line-number --no-heading --heading --no-filename --with-filename --no-ignore --no-messages --null --only-matching --pretty --quiet --replace= --sort= --sortr= --stats --type= --type-not= --type-list --unrestricted --multiline --invert-match --word-regexp --line-regexp --max-count= --max-depth= --max-filesize= --max-columns= --color= --colors= --column --trim --vimgrep --threads= --no-config --debug --auto-hybrid-regex --binary --block-buffered --byte-offset --context-separator= --crlf --dfa-size-limit= --engine= --field-context-separator= --field-match-separator= --glob-case-insensitive --ignore --ignore-dot --ignore-exclude --ignore-file= --ignore-file-case-insensitive --ignore-files --ignore-global --ignore-messages --ignore-parent --ignore-vcs --include-zero --line-buffered --max-columns-preview --messages --mmap --multiline-dotall --no-auto-hybrid-regex --no-binary --no-block-buffered --no-column --no-context-separator --no-crlf --no-encoding --no-fixed-strings --no-follow --no-glob-case-insensitive --no-hidden --no-ignore-dot --no-ignore-exclude --no-ignore-file-case-insensitive --no-ignore-files --no-ignore-global --no-ignore-messages --no-ignore-parent --no-ignore-vcs --no-json --no-line-buffered --no-max-columns-preview --no-mmap --no-multiline --no-multiline-dotall --no-one-file-system --no-pcre2 --no-pcre2-unicode --no-pre --no-require-git --no-search-zip --no-stats --no-text --no-trim --no-unicode --null-data --one-file-system --passthru --path-separator= --pcre2 --pcre2-unicode --pcre2-version --regex-size-limit= --require-git --text --trace --type-add= --type-clear= --unicode -H -I -V -a -b -h --help --version P:--pre= W:--pre-glob= W:-z W:--search-zip P:--hostname-bin=", maxOps: anyOps, ceiling: Destructive, family: exactFamily},
	"cut":       {opts: "-b= -c= -d= -f= -n -s -z --bytes= --characters= --delimiter= --fields= --complement --only-delimited --output-delimiter= --zero-terminated --help --version", maxOps: anyOps},
	"sort":      {opts: "-b -d -f -g -h -i -M -n -R -r -V -c -C -k= -m -s -t= -u -z --ignore-leading-blanks --dictionary-order --ignore-case --general-numeric-sort --ignore-nonprinting --month-sort --human-numeric-sort --numeric-sort --random-sort --reverse --version-sort --sort= --check? --key= --merge --stable --field-separator= --unique --zero-terminated --parallel= --debug --batch-size= N:-S= N:--buffer-size= P:--compress-program= N:--files0-from= W:-o= W:--output= N:--random-source= W:-T= W:--temporary-directory= --help --version", maxOps: anyOps, ceiling: Destructive},
	"uniq":      {opts: "-c -d -D -f= -i -s= -u -z -w= --count --repeated --all-repeated? --skip-fields= --group? --ignore-case --skip-chars= --unique --zero-terminated --check-chars= --help --version", maxOps: 1, ceiling: Write},
	"tr":        {opts: "-c -C -d -s -t --complement --delete --squeeze-repeats --truncate-set1 --help --version", maxOps: 2},
	"nl":        {opts: "-b= -d= -f= -h= -i= -l= -n= -p -s= -v= -w= --body-numbering= --section-delimiter= --footer-numbering= --header-numbering= --line-increment= --join-blank-lines= --number-format= --no-renumber --number-separator= --starting-line-number= --number-width= --help --version", maxOps: anyOps},
	"paste":     {opts: "-d= -s -z --delimiters= --serial --zero-terminated --help --version", maxOps: anyOps},
	"join":      {opts: "-a= -e= -i -j= -o= -t= -v= -1= -2= --check-order --nocheck-order --header --ignore-case --zero-terminated -z --help --version", maxOps: 2},
	"column":    {opts: "-c= -s= -t -x -n -o= -N= -R= -J -e -l= -L --columns= --separator= --table --fillrows --output-separator= --table-columns= --json -E= -H= -O= -T= -W= -d -h -i= -p= -r= -V --keep-empty-lines --output-width= --table-columns-limit= --table-header-repeat --table-hide= --table-name= --table-noextreme= --table-noheadings --table-order= --table-right= --table-truncate= --table-wrap= --tree= --tree-id= --tree-parent= --help --version", maxOps: anyOps},
	"fold":      {opts: "-b -s -w= --bytes --spaces --width= --help --version", maxOps: anyOps},
	"rev":       {maxOps: anyOps},
	"tac":       {opts: "-b -r -s= --before --regex --separator= --help --version", maxOps: anyOps},
	"od":        {opts: "-A= -j= -N= -t= -v -w? -a -b -c -d -f -i -l -o -s -x --address-radix= --endian= --skip-bytes= --read-bytes= --strings? --format= --output-duplicates --width? --traditional -S= --help --version", maxOps: anyOps},
	"hexdump":   {opts: "-b -c -C -d -o -x -e= -n= -s= -v -L? --canonical --color? --format= -f= --format-file= --length= --no-squeezing --one-byte-char --one-byte-octal --skip= --two-bytes-decimal --two-bytes-hex --two-bytes-octal -V -h --help --version", maxOps: anyOps},
	"xxd":       {opts: "-a -b -c= -C -e -g= -i -l= -n= -o= -p -s= -u -d -E -h -v -R= W:-r", maxOps: 1, ceiling: Write, family: wordFamily, posix: true},
	"strings":   {opts: "-a -d -f -n= -t= -e= -w -s= --all --data --print-file-name --bytes= --radix= --encoding= --include-all-whitespace --output-separator= -T= --target= -U= --unicode= -V -h -v -o --help --version", maxOps: anyOps},
	"base64":    {opts: "-d -i -w= --decode --ignore-garbage --wrap= --help --version", maxOps: 1, ceiling: Write},
	"md5sum":    {opts: checksumOpts, maxOps: anyOps},
	"sha1sum":   {opts: checksumOpts, maxOps: anyOps},
	"sha256sum": {opts: checksumOpts, maxOps: anyOps},
	"sha512sum": {opts: checksumOpts, maxOps: anyOps},
	"cksum":     {opts: "-a= -l= --algorithm= --length= --untagged --tag --base64 --raw --check --debug --ignore-missing --quiet --status --strict --warn --zero -c -w -z --help --version", maxOps: anyOps},
	"diff":      {opts: "-a -b -B -c -C= -d -e -E -i -I= -n -N -p -q -r -s -t -T -u -U= -w -W= -x= -X= -y -Z --brief --report-identical-files --context? --unified? --ed --normal --side-by-side --width= --left-column --suppress-common-lines --show-c-function --show-function-line= --label= --expand-tabs --initial-tab --ignore-case --ignore-tab-expansion --ignore-trailing-space --ignore-space-change --ignore-all-space --ignore-blank-lines --ignore-matching-lines= --text --strip-trailing-cr --recursive --new-file --unidirectional-new-file --exclude= --exclude-from= --starting-file= --from-file= --to-file= --minimal --speed-large-files --color? --no-dereference --suppress-blank-empty --tabsize= --horizon-lines= --old-group-format= --new-group-format= --changed-group-format= --unchanged-group-format= --old-line-format= --new-line-format= --unchanged-line-format= --line-format= --ifdef= -D= -F= -S= --ignore-file-name-case --no-ignore-file-name-case --palette= --rcs -v N:-l N:--paginate --help --version", maxOps: 2},
	"cmp":       {opts: "-b -i= -l -n= -s --print-bytes --ignore-initial= --verbose --bytes= --quiet --silent -v --help --version", maxOps: 4},
	"comm":      {opts: "-1 -2 -3 -z --check-order --nocheck-order --output-delimiter= --total --zero-terminated --help --version", maxOps: 2},
	"sed":       {opts: "-n -E -r -s -u -z -e= --quiet --silent --expression= --regexp-extended --separate --unbuffered --null-data --posix --debug --sandbox W:-f= W:--file= --follow-symlinks W:-i? W:--in-place? -l= --line-length= --help --version", maxOps: anyOps, ceiling: Destructive, check: sedCheck},
	"jq":        {opts: "-c -r -j -a -s -n -e -S -C -M -R --tab --indent= --arg= --argjson= --slurp --null-input --raw-output --join-output --ascii-output --compact-output --sort-keys --color-output --monochrome-output --raw-input --exit-status --seq --stream --stream-errors --raw-output0 --unbuffered -f= --from-file= --args --jsonargs N:--rawfile= N:--slurpfile=", maxOps: anyOps, family: exactFamily},
	"basename":  {opts: "-a -s= -z --multiple --suffix= --zero --help --version", maxOps: anyOps},
	"dirname":   {opts: "-z --zero --help --version", maxOps: anyOps},
	"realpath":  {opts: "-e -m -L -P -q -s -z --canonicalize-existing --canonicalize-missing --logical --physical --quiet --relative-to= --relative-base= --strip --no-symlinks --zero --help --version", maxOps: anyOps},
	"readlink":  {opts: "-f -e -m -n -q -s -v -z --canonicalize --canonicalize-existing --canonicalize-missing --no-newline --quiet --silent --verbose --zero --help --version", maxOps: anyOps},
	"echo":      {opts: "-n -e -E", maxOps: anyOps, posix: true, lenient: true},
	"printf":    {opts: "-v=", maxOps: anyOps, posix: true, check: printfCheck},
	"true":      {maxOps: anyOps, posix: true, lenient: true},
	"false":     {maxOps: anyOps, posix: true, lenient: true},
	"test":      {maxOps: anyOps, posix: true, lenient: true},
	"[":         {maxOps: anyOps, posix: true, lenient: true},
	"pwd":       {opts: "-L -P --logical --physical", maxOps: 0},
	"sleep":     {maxOps: anyOps},
	"seq":       {opts: "-f= -s= -w --format= --separator= --equal-width --help --version", maxOps: 3, posix: true, lenient: true},
	"expr":      {maxOps: anyOps, posix: true, lenient: true},
	"which":     {opts: "-a -s", maxOps: anyOps},
	"type":      {opts: "-a -f -p -P -t", maxOps: anyOps},
	"whoami":    {maxOps: 0},
	"id":        {opts: "-a -Z -g -G -n -r -u -z --context --group --groups --name --real --user --zero --help --version", maxOps: 1},
	"groups":    {maxOps: anyOps},
	"who":       {opts: "-a -b -d -H -l -m -p -q -r -s -t -T -u --all --boot --dead --heading --login --lookup --process --count --runlevel --short --time --mesg --users --ips -w --writable --message --help --version", maxOps: 2},
	"w":         {opts: "-h -i -o -s -u -f -n --no-header --ip-addr --old-style --short --from --no-truncat --no-current -V --help --version", maxOps: 1},
	"last":      {opts: "-a -d -F -i -R -w -x -n= -s= -t= -p= -f= --hostlast --dns --fulltimes --ip --nohostname --fullnames --system --limit= --since= --until= --present= --file= --time-format= -V -h --help --version", maxOps: anyOps},
	"uname":     {opts: "-a -s -n -r -v -m -p -i -o --all --kernel-name --nodename --kernel-release --kernel-version --machine --processor --hardware-platform --operating-system --help --version", maxOps: 0},
	"hostname":  {opts: "-f -s -d -i -I -A -a -y --fqdn --long --short --domain --ip-address --all-ip-addresses --all-fqdns --alias --nis --yp W:-b W:--boot W:-F= W:--file= --help --version", maxOps: 0},
	"date":      {opts: "-d= -f= -I? -R -u -r= --date= --file= --iso-8601? --rfc-email --rfc-3339= --reference= --utc --universal --debug W:-s= W:--set= --resolution --help --version", maxOps: 1, check: dateCheck, ceiling: Write},
	"uptime":    {opts: "-p -s --pretty --since -V -h --help --version", maxOps: 0},
	"free":      {opts: "-b -k -m -g -h -l -t -v -w -c= -s= --bytes --kilo --mega --giga --tera --peta --kibi --mebi --gibi --tebi --pebi --human --si --lohi --total --committed --wide --count= --seconds= -V --help --version", maxOps: 0, check: freeCheck},
	"vmstat":    {opts: "-a -f -m -n -s -d -D -p= -S= -t -w -y --active --forks --slabs --one-header --stats --disk --disk-sum --partition= --unit= --timestamp --wide --no-first -V -h --help --version", maxOps: 2, check: repeatCheck},
	"iostat":    {opts: "-c -d -h -k -m -N -s -t -x -y -z -p? -g= -H -j= -o= --human --dec= --pretty --compact -V -f=", maxOps: anyOps, check: repeatCheck},
	"nproc":     {opts: "--all --ignore= --help --version", maxOps: 0},
	"lscpu":     {opts: "-a -b -c -e? -p? -s= -x -y -B -C? -J --all --online --offline --bytes --caches? --extended? --json --parse? --sysroot= --hex --physical --output-all -V -h --help --version", maxOps: 0},
	"lsblk":     {opts: "-a -b -d -D -f -i -J -l -m -n -o= -O -p -P -r -s -S -t -T -x= -z -e= -I= -M -N -v --all --bytes --nodeps --discard --fs --ascii --json --list --perms --noheadings --output= --output-all --paths --pairs --raw --inverse --scsi --topology --tree --sort= --exclude= --include= --merge --nvme --virtio -E= --dedup= -A --noempty -y --shell --sysroot= -w= --width= --zoned -V -h --help --version", maxOps: anyOps},
	"lspci":     {opts: "-m -t -v -k -x -b -D -P -n -i= -p= -s= -d= -F= -G W:-A= W:-H= W:-M W:-O= W:-Q W:-q", maxOps: 0, check: lspciCheck},
	"lsusb":     {opts: "-v -t -s= -d= -D= --verbose --tree -V -h --help --version", maxOps: 0},
	"lsof":      {opts: "-a -b -c= -d= -g? -i? -l -n -N -P -p= -R -s? -t -u= -U -w -x? -V -F? -K? -S? -T? -E -O -Q -X -Z? -e= -o? -v W:-D=", maxOps: anyOps, check: lsofCheck},
	"ps":        {opts: "-A -a -C= -d -e -f -F -g= -G= -H -j -l -L -M -N -o= -p= -q= -s= -t= -T -u= -U= -w -x -y -Z --cols= --columns= --cumulative --deselect --forest --format= --group= --Group= --headers --no-headers --lines= --pid= --ppid= --quick-pid= --rows= --sid= --sort= --tty= --user= --User= --width=", maxOps: anyOps, check: psCheck},
	"pgrep":     {opts: "-a -c -d= -f -g= -G= -i -l -n -o -O= -P= -r= -s= -t= -u= -U= -v -w -x -A --count --delimiter= --full --pgroup= --group= --ignore-case --list-name --list-full --newest --oldest --older= --parent= --runstates= --session= --terminal= --euid= --uid= --inverse --lightweight --exact --pidfile= --logpidfile --ignore-ancestors --ns= --nslist= --env= --cgroup= -F= -L -V -h --help --version", maxOps: 1},
	"ss":        {opts: "-h -V -H -n -r -a -l -o -e -m -i -s -4 -6 -0 -t -u -d -w -x -S -M -Z -z -b -O -f= -A= --numeric --resolve --all --listening --options --extended --memory --info --summary --tcp --udp --dccp --raw --unix --sctp --vsock --tipc --family= --query= --socket= --no-header --oneline --context --contexts --bpf --ipv4 --ipv6 --packet -p --processes D:-K D:--kill --cgroup N:--filter= N:-F= --inet-sockopt --mptcp --threads -T --tipcinfo --tos --xdp W:-D= W:--diag= F:-E F:--events W:-N= W:--net= --help --version", maxOps: anyOps, ceiling: Destructive},
	"ping":      {opts: "-4 -6 -c= -i= -W= -w= -s= -t= -q -n -D -O -v -I= -A -B -L -M= -N= -Q= -R -S= -T= -U -V -a -b -d -e= -h -l= -m= -p= -F= W:-f", maxOps: 1, require: []string{"-c"}, ceiling: Write},
	"dig":       {opts: "-4 -6 -b= -c= -f= -p= -q= -t= -x= -y= -k= -h -m -r -u -v", maxOps: anyOps},
	"host":      {opts: "-a -c= -C -d -l -i -N= -r -R= -s -t= -T -U -v -V -w -W= -4 -6 -A -m= -p=", maxOps: 2},
	"nslookup":  {maxOps: 2, lenient: true},
	"getent":    {opts: "-s= -i --service= --no-idn -A --no-addrconfig --usage -V --help --version", maxOps: anyOps},
	"printenv":  {opts: "-0 --null --help --version", maxOps: anyOps},
	"locale":    {opts: "-a N:-m -c -k --all-locales N:--charmaps --category-name --keyword-name --verbose --usage -V -v --help --version", maxOps: anyOps},
	"arch":      {maxOps: 0},
	"dmesg":     {opts: "-d -e -f= -F= -H -k -l= -L? -P -r -S -t -T -u -x --ctime --decode --facility= --human --kernel --level= --color? --nopager --raw --syslog --notime --time-format= --userspace --show-delta --reltime --since= --until= D:-c D:-C D:--clear D:--read-clear W:-n= W:--console-level= W:-D W:--console-off W:-E W:--console-on F:-w F:--follow F:-W F:--follow-new -s= --buffer-size= --file= -p --force-prefix -J --json --noescape -V -h --help --version", maxOps: 0, check: dmesgCheck},
	"journalctl": {opts: "-a -b? -D= -e -g= -k -l -m -n= -o= -p= -q -r -S= -t= -u= -U= -x -M= --all --boot? --directory= --pager-end --grep= --case-sensitive? --dmesg --full --merge --lines= --output= --output-fields= --priority= --quiet --reverse --since= --until= --identifier= --unit= --user-unit= --user --system --catalog --utc --no-hostname --no-full --no-pager --list-boots --disk-usage --header --fields --field= --machine= --facility= --cursor= --after-cursor= --show-cursor --namespace= --invocation= -I -# W:--cursor-file= --dump-catalog F:-f F:--follow --file= W:--flush W:--force W:--image= W:--interval= --list-catalog --no-tail W:--relinquish-var --root= W:--rotate W:--setup-keys W:--smart-relinquish-var W:--sync W:--update-catalog D:--vacuum-files= D:--vacuum-size= D:--vacuum-time= --verify --verify-key= -F= -N -c= -h --help --version",
		maxOps: anyOps, pager: []string{"--no-pager"}},
}

// grepOpts excludes options that read files named by the pattern list only
// when those are safe: -f reads a pattern file, which is still a read.
const grepOpts = "-A= -B= -C= -a -b -c -D= -d= -E -e= -F -f= -G -h -H -i -I -L -l -m= -n -o -P -q -r -R -s -T -U -v -V -w -x -y -z -Z -# --after-context= --before-context= --context= --text --byte-offset --count --color? --colour? --devices= --directories= --extended-regexp --regexp= --fixed-strings --file= --basic-regexp --no-filename --with-filename --ignore-case --no-ignore-case --files-without-match --files-with-matches --max-count= --line-number --only-matching --quiet --silent --recursive --dereference-recursive --no-messages --initial-tab --binary --invert-match --word-regexp --line-regexp --null-data --null --include= --exclude= --exclude-dir= --exclude-from= --label= --line-buffered --perl-regexp --binary-files= --group-separator= --no-group-separator --help --version"

const checksumOpts = "-b -c -t -z -w --binary --check --tag --text --zero --ignore-missing --quiet --status --strict --warn --help --version"

// blockDevicePrefixes are the device paths a write to which destroys a disk.
var blockDevicePrefixes = []string{"/dev/sd", "/dev/hd", "/dev/nvme", "/dev/vd", "/dev/xvd", "/dev/mmcblk", "/dev/disk/", "/dev/mapper/", "/dev/md", "/dev/dm-", "/dev/loop", "/dev/sr", "/dev/zd", "/dev/rbd"}

// numberedBlockDevices are names of /dev that are disks (or tapes, SCSI
// and NVMe generic devices, which take commands) when a number follows:
// network block devices, compressed RAM disks, flash, RAM and persistent
// memory disks, bcache, DRBD, UBI, s390 DASD, ublk, tapes, floppies.
var numberedBlockDevices = []string{"nbd", "zram", "mtd", "mtdblock", "ram", "pmem", "bcache", "drbd", "rsxx", "ubi", "ubiblock", "dasd", "ublkb", "nullb", "sg", "st", "nst", "fd", "ng"}

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
	// Bash binds names to programs and aliases through these arrays.
	"BASH_CMDS": true, "BASH_ALIASES": true,
	// Program-valued and option-valued variables (progvars.go).
	"GIT_EXTERNAL_DIFF": true, "SUDO_EDITOR": true, "FCEDIT": true, "SYSTEMD_EDITOR": true,
	"PSQL_PAGER": true, "MYSQL_PAGER": true, "BAT_PAGER": true, "DELTA_PAGER": true,
	"RSYNC_RSH": true, "RSYNC_CONNECT_PROG": true, "CVS_RSH": true, "FZF_DEFAULT_COMMAND": true,
	"LESS": true, "MANOPT": true, "TAR_OPTIONS": true, "PARALLEL": true, "SYSTEMD_LESS": true,
	"GREP_OPTIONS": true, "RSYNC_OPTIONS": true,
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
