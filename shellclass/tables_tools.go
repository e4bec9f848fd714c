package shellclass

import "strings"

// The option tables of the tools with handlers of their own (tools.go,
// tools_ops.go): which options name programs, which subcommands are read,
// and the option allowlists of their read forms.

const sshOpts = "-4 -6 -A -a -C -f -G -g -K -k -M -N -n -q -s -T -t -V -v -X -x -Y -y -B= -b= -c= -D= -E= -e= -F= -I= -i= -J= -L= -l= -m= -O= -o= -P= -p= -Q= -R= -S= -W= -w="

// awkOpts are the awk options the parser knows. gawk's -d (--dump-variables),
// -p (--profile) and -o (--pretty-print) write awkvars.out or awkprof.out,
// and -D starts the debugger: they are left out, so they are unknown options.
const awkOpts = "-F= -v= -f= -e= -b -c -E= -g -h -i= -l= -L? -M -n -N -O -P -r -s -S -t -V --field-separator= --assign= --file= --source= --include= --load= --sandbox --posix --traditional --characters-as-bytes --use-lc-numeric --bignum --re-interval"

// findPrimaries lists find's read-only options, tests and actions with the
// number of values each takes. -fprint, -fprintf, -fls (write a file),
// -delete and -exec are absent on purpose.
var findPrimaries = map[string]uint8{
	"-name": 1, "-iname": 1, "-path": 1, "-ipath": 1, "-wholename": 1, "-iwholename": 1,
	"-regex": 1, "-iregex": 1, "-regextype": 1, "-type": 1, "-xtype": 1, "-size": 1,
	"-mtime": 1, "-mmin": 1, "-atime": 1, "-amin": 1, "-ctime": 1, "-cmin": 1, "-used": 1,
	"-newer": 1, "-anewer": 1, "-cnewer": 1, "-newermt": 1, "-newerct": 1, "-newerat": 1, "-newermm": 1,
	"-user": 1, "-group": 1, "-uid": 1, "-gid": 1, "-perm": 1, "-links": 1, "-inum": 1,
	"-samefile": 1, "-lname": 1, "-ilname": 1, "-fstype": 1, "-context": 1,
	"-maxdepth": 1, "-mindepth": 1, "-printf": 1,
	"-print": 0, "-print0": 0, "-ls": 0, "-prune": 0, "-quit": 0, "-not": 0, "-a": 0, "-o": 0,
	"-and": 0, "-or": 0, "-!": 0, "-depth": 0, "-follow": 0, "-xdev": 0, "-mount": 0,
	"-nouser": 0, "-nogroup": 0, "-empty": 0, "-readable": 0, "-writable": 0, "-executable": 0,
	"-true": 0, "-false": 0, "-daystart": 0, "-noleaf": 0, "-ignore_readdir_race": 0,
	"-noignore_readdir_race": 0, "-L": 0, "-H": 0, "-P": 0, "-d": 0, "-O0": 0, "-O1": 0, "-O2": 0, "-O3": 0,
}

// tarOpts is GNU tar 1.34's option table (tar --help): the programs its
// options name, and the options that delete.
const tarOpts = "-A --catenate --concatenate -c --create -d --diff --compare -r --append --test-label -t --list -u --update -x --extract --get --check-device -g= --listed-incremental= -G --incremental --hole-detection= --ignore-failed-read --level= --no-check-device --no-seek -n --seek --occurrence? --sparse-version= -S --sparse --add-file= -C= --directory= --exclude= --exclude-backups --exclude-caches --exclude-caches-all --exclude-caches-under= --exclude-ignore= --exclude-ignore-recursive= --exclude-tag= --exclude-tag-all= --exclude-tag-under= --exclude-vcs --exclude-vcs-ignores --no-null --no-recursion --no-unquote --no-verbatim-files-from --null --verbatim-files-from --recursion -T= --files-from= --unquote -X= --exclude-from= --anchored --ignore-case --no-anchored --no-ignore-case --no-wildcards --no-wildcards-match-slash --wildcards --wildcards-match-slash --keep-directory-symlink --keep-newer-files -k --keep-old-files --no-overwrite-dir --one-top-level? --overwrite --overwrite-dir --skip-old-files -U --unlink-first -W --verify --ignore-command-error --no-ignore-command-error -O --to-stdout --atime-preserve? --clamp-mtime --delay-directory-restore --group= --group-map= --mode= --mtime= -m --touch --no-delay-directory-restore --no-same-owner --no-same-permissions --numeric-owner --owner= --owner-map= -p --preserve-permissions --same-permissions --same-owner --sort= -s --preserve-order --same-order --acls --no-acls --no-selinux --no-xattrs --selinux --xattrs --xattrs-exclude= --xattrs-include= --force-local -f= --file= -L= --tape-length= -M --multi-volume --volno-file= -b= --blocking-factor= -B --read-full-records -i --ignore-zeros --record-size= -H= --format= --old-archive --portability --pax-option= --posix -V= --label= -a --auto-compress -j --bzip2 -J --xz --lzip --lzma --lzop --no-auto-compress --zstd -z --gzip --gunzip --ungzip -Z --compress --uncompress --backup? --hard-dereference -h --dereference -K= --starting-file= --newer-mtime= -N= --newer= --after-date= --one-file-system -P --absolute-names --suffix= --strip-components= --transform= --xform= --checkpoint? --checkpoint-action= --full-time --index-file= -l --check-links --no-quote-chars= --quote-chars= --quoting-style= -R --block-number --show-defaults --show-omitted-dirs --show-snapshot-field-ranges --show-transformed-names --show-stored-names --totals? --utc -v --verbose --warning= -w --interactive --confirmation -o --help --restrict --usage --version " +
	"P:-I= P:--use-compress-program= P:--to-command= P:-F= P:--info-script= P:--new-volume-script= P:--rsh-command= P:--rmt-command= D:--remove-files D:--delete D:--recursive-unlink"

// manOpts is man-db 2.11's option table (man -h): -P and --pager name the
// pager, -H and --html a browser.
const manOpts = "-C= --config-file= -d --debug -D --default --warnings? -f --whatis -k --apropos -K --global-apropos -l --local-file -w --where --path --location -W --where-cat --location-cat -c --catman -R= --recode= -L= --locale= -m= --systems= -M= --manpath= -S= -s= --sections= -e= --extension= -i --ignore-case -I --match-case --regex --wildcard --names-only -a --all -u --update --no-subpages -r= --prompt= -7 --ascii -E= --encoding= --no-hyphenation --nh --no-justification --nj -p= --preprocessor= -t --troff -T? --troff-device? -X? --gxditview? -Z --ditroff --help --usage -V --version P:-P= P:--pager= P:-H? P:--html?"

// dockerGlobals are the options of docker and podman before the
// subcommand (pflag; the root command does not take options after its
// subcommand). -H, -c and their podman kin talk to another daemon,
// --config loads credential helpers and CLI plugins from a directory;
// podman's storage, runtime and hook options run programs or create
// storage elsewhere, and --out writes a file.
const dockerGlobals = "-D --debug -l= --log-level= --tls --tlsverify --tlscacert= --tlscert= --tlskey= -v --version -h --help --syslog " +
	"W:-H= W:--host= W:-c= W:--context= W:--config= W:--remote W:-r W:--url= W:--connection= W:--identity= W:--ssh= W:--root= W:--runroot= W:--storage-driver= W:--storage-opt= W:--cgroup-manager= W:--events-backend= W:--hooks-dir= W:--runtime= W:--runtime-flag= W:--conmon= W:--network-cmd-path= W:--network-config-dir= W:--cni-config-dir= W:--tmpdir= W:--out= W:--module= W:--volumepath= W:--imagestore= W:--db-backend= W:--transient-store"

const dockerExecOpts = "-d -i -t -e= -u= -w= --detach --interactive --tty --privileged --env= --env-file= --user= --workdir= --detach-keys="

const dockerRunOpts = "-d -i -t -P -q -a= -e= -h= -l= -m= -p= -u= -v= -w= -c= --rm --detach --interactive --tty --privileged --init --read-only --publish-all --quiet --no-healthcheck --oom-kill-disable --sig-proxy --name= --env= --env-file= --hostname= --label= --label-file= --memory= --memory-swap= --memory-reservation= --memory-swappiness= --publish= --user= --volume= --volume-driver= --workdir= --entrypoint= --network= --net= --network-alias= --mount= --restart= --platform= --pull= --add-host= --dns= --dns-search= --dns-option= --domainname= --device= --device-cgroup-rule= --device-read-bps= --device-read-iops= --device-write-bps= --device-write-iops= --cap-add= --cap-drop= --security-opt= --log-driver= --log-opt= --tmpfs= --ulimit= --shm-size= --stop-signal= --stop-timeout= --cidfile= --gpus= --ipc= --pid= --uts= --runtime= --userns= --expose= --link= --link-local-ip= --volumes-from= --annotation= --attach= --cgroupns= --cgroup-parent= --cpus= --cpu-shares= --cpuset-cpus= --cpuset-mems= --cpu-count= --cpu-percent= --cpu-period= --cpu-quota= --cpu-rt-period= --cpu-rt-runtime= --blkio-weight= --blkio-weight-device= --group-add= --health-cmd= --health-interval= --health-retries= --health-timeout= --health-start-period= --health-start-interval= --init-path= --ip= --ip6= --isolation= --kernel-memory= --mac-address= --oom-score-adj= --pids-limit= --storage-opt= --sysctl= --tz= --arch= --os= --variant= --disable-content-trust --io-maxbandwidth= --io-maxiops= --use-api-socket"

// dockerManaged are management commands whose verb is the next word.
var dockerManaged = map[string]bool{"container": true, "image": true, "volume": true, "network": true, "system": true, "builder": true, "buildx": true, "plugin": true, "secret": true, "config": true, "node": true, "service": true, "stack": true, "context": true, "compose": true, "swarm": true, "pod": true, "machine": true, "manifest": true}

// The read forms of docker and podman with their option tables (pflag;
// `docker CMD --help` of docker 28). logs -f and stats without
// --no-stream run until interrupted.
const (
	dockerPsOpts     = "-a --all -f= --filter= --format= -n= --last= -l --latest --no-trunc -q --quiet -s --size --external --pod -p --sort= --ns"
	dockerImagesOpts = "-a --all --digests -f= --filter= --format= --no-trunc -q --quiet --tree --noheading -n --sort= --history"
	dockerLsOpts     = "-f= --filter= --format= -q --quiet --no-trunc --cluster --noheading -n"
	dockerInspect    = "-f= --format= -s --size --type= -l --latest"
	dockerLogs       = "--details F:-f F:--follow --since= -n= --tail= -t --timestamps --until= --names -l --latest --color"
	dockerHistory    = "--format= -H --human --no-trunc --platform= -q --quiet"
	dockerStats      = "-a --all --format= --no-stream --no-trunc -i --interval= --no-reset"
)

// dockerRead are the read forms of docker and podman with their tables.
var dockerRead = map[string]string{
	"ps": dockerPsOpts, "container ls": dockerPsOpts, "container ps": dockerPsOpts, "container list": dockerPsOpts,
	"images": dockerImagesOpts, "image ls": dockerImagesOpts, "image list": dockerImagesOpts,
	"inspect": dockerInspect, "container inspect": dockerInspect, "image inspect": dockerInspect, "volume inspect": dockerInspect, "network inspect": dockerInspect, "context inspect": dockerInspect,
	"logs": dockerLogs, "container logs": dockerLogs,
	"version": "-f= --format=", "info": "-f= --format=", "system info": "-f= --format=",
	"top": "", "container top": "", "port": "", "container port": "",
	"history": dockerHistory, "image history": dockerHistory,
	"stats": dockerStats, "container stats": dockerStats,
	"volume ls": dockerLsOpts, "volume list": dockerLsOpts, "network ls": dockerLsOpts, "network list": dockerLsOpts,
	"system df": "--format= -v --verbose", "context ls": "--format= -q --quiet", "context list": "--format= -q --quiet",
	"pod ps": dockerPsOpts, "pod ls": dockerPsOpts, "pod list": dockerPsOpts,
}

// dockerComposeGlobals are docker compose's options before its
// subcommand; dockerComposeRead its read subcommands. compose config -o
// writes a file.
const dockerComposeGlobals = "-f= --file= -p= --project-name= --project-directory= --profile= --env-file= --ansi= --progress= --parallel= --compatibility --dry-run --all-resources -h --help"

var dockerComposeRead = map[string]string{
	"ps":      "-a --all --filter= --format= --no-trunc --orphans -q --quiet --services --status=",
	"logs":    "F:-f F:--follow --index= --no-color --no-log-prefix --since= -n= --tail= -t --timestamps --until=",
	"ls":      "-a --all --filter= --format= -q --quiet",
	"images":  "--format= -q --quiet",
	"top":     "",
	"version": "-f= --format= --short",
	"config":  "--format= --hash= --images --no-consistency --no-interpolate --no-normalize --no-path-resolution --profiles -q --quiet --resolve-image-digests --services --volumes --environment --variables --lock-image-digests --no-env-resolution W:-o= W:--output=",
}

// kubectlGlobals are the options every kubectl command takes (`kubectl
// options`, kubectl 1.32). The ones that are not read point kubectl at
// another cluster, identity or kubeconfig (whose exec plugins run
// programs), or write files (--cache-dir, --profile-output).
const kubectlGlobals = "--cluster= --context= --user= -n= --namespace= --request-timeout= --match-server-version --disable-compression --warnings-as-errors -v= --v= --vmodule= --log-flush-frequency= --tls-server-name= -h --help " +
	"W:--kubeconfig= W:--token= W:-s= W:--server= W:--as= W:--as-group= W:--as-uid= W:--username= W:--password= W:--client-key= W:--client-certificate= W:--certificate-authority= W:--insecure-skip-tls-verify W:--cache-dir= W:--profile= W:--profile-output="

// kubectlRead are kubectl's read verbs with their own options (`kubectl
// VERB --help`). -w/--watch and logs -f follow until interrupted.
var kubectlRead = map[string]string{
	"get":           "-A --all-namespaces --allow-missing-template-keys --chunk-size= --field-selector= -f= --filename= --ignore-not-found -k= --kustomize= -L= --label-columns= --no-headers -o= --output= --output-watch-events --raw= -R --recursive -l= --selector= --server-print --show-kind --show-labels --show-managed-fields --sort-by= --subresource= --template= F:-w F:--watch F:--watch-only",
	"describe":      "-A --all-namespaces --chunk-size= -f= --filename= -k= --kustomize= -R --recursive -l= --selector= --show-events",
	"logs":          "--all-containers --all-pods -c= --container= F:-f F:--follow --ignore-errors --insecure-skip-tls-verify-backend --limit-bytes= --max-log-requests= --pod-running-timeout= --prefix -p --previous -l= --selector= --since= --since-time= --tail= --timestamps",
	"top":           "-A --all-namespaces --containers --field-selector= --no-headers -l= --selector= --sort-by= --sum --use-protocol-buffers --show-capacity",
	"explain":       "--api-version= -o= --output= --recursive",
	"version":       "--client -o= --output=",
	"api-resources": "--api-group= --cached --categories= --namespaced --no-headers -o= --output= --sort-by= --verbs=",
	"api-versions":  "",
	"cluster-info":  "",
}

// systemctlOpts is systemctl's option table (getopt_long). Options that
// only matter to verbs that change the system are not read: on a read verb
// they have no use, and the table stays an allowlist. -H and -M reach
// another machine (through ssh) or a container, --image mounts a disk
// image.
const systemctlOpts = "-h --help --version --system --user -t= --type= --state= --failed -p= --property= -P= -a --all -l --full -r --recursive --reverse --with-dependencies --show-types --value -q --quiet --no-pager --no-legend --legend= --plain --timestamp= -n= --lines= -o= --output= --root= --no-ask-password --no-reload --no-wall --no-block --dry-run -T --show-transaction --check-inhibitors= -i " +
	"W:-H= W:--host= W:-M= W:--machine= W:--image= W:--job-mode= W:--kill-whom= W:--kill-value= W:-s= W:--signal= W:--what= W:--now W:--wait W:--global W:--runtime W:-f W:--force W:--preset-mode= W:--firmware-setup W:--boot-loader-menu= W:--boot-loader-entry= W:--reboot-argument= W:--read-only W:--mkdir W:--marked W:--ignore-inhibitors W:--drop-in= W:--when="

// systemctlRead are the verbs that only ask the manager or read unit files.
var systemctlRead = map[string]bool{"status": true, "show": true, "list-units": true, "list-unit-files": true, "list-timers": true, "list-sockets": true, "list-dependencies": true, "list-jobs": true, "list-automounts": true, "list-paths": true, "list-machines": true, "is-active": true, "is-enabled": true, "is-failed": true, "is-system-running": true, "cat": true, "get-default": true, "show-environment": true, "help": true}

var systemctlDestructive = map[string]bool{"stop": true, "kill": true, "restart": true, "try-restart": true, "reload-or-restart": true, "try-reload-or-restart": true, "condrestart": true, "force-reload": true, "reboot": true, "poweroff": true, "halt": true, "isolate": true, "mask": true, "kexec": true, "soft-reboot": true, "emergency": true, "rescue": true, "suspend": true, "hibernate": true, "hybrid-sleep": true, "suspend-then-hibernate": true, "exit": true, "default": true, "clean": true, "freeze": true, "revert": true, "switch-root": true}

// ipSelector are words that start a filter after an implied show.
var ipSelector = map[string]bool{"dev": true, "up": true, "scope": true, "label": true, "to": true, "table": true, "type": true, "master": true, "proto": true, "vrf": true, "nomaster": true}

// rpmQueryOpts are the options of rpm -q that only select and print. --pipe,
// --eval, --define, --macros, --rcfile, --load and --dbpath-like options that
// change configuration are left out; unknown options make rpm write.
const rpmQueryOpts = "-q -a -f -g -p -i -l -c -d -s -R -v --query --all --file --group --package --info --list --configfiles --docfiles --state --requires --provides --conflicts --obsoletes --changelog --changes --scripts --triggers --triggerscripts --filesbypkg --last --dump --qf= --queryformat= --whatrequires --whatprovides --whatconflicts --whatobsoletes --whatrecommends --whatsuggests --whatsupplements --whatenhances --nodigest --nosignature --nofiles --noscripts --nodeps --quiet --verbose"

// pipReadOpts are the options pip list, show and freeze accept as read:
// output format and which distributions to list. pip's --log writes a
// file, --python runs another interpreter, --cache-dir and --src name
// places to write.
const pipReadOpts = "-v -q -l -o -u -e -f -a -r= --verbose --quiet --local --outdated --uptodate --editable --files --all --user --format= --not-required --exclude-editable --include-editable --exclude= --path= --pre --no-index --index-url= --extra-index-url= -i= --disable-pip-version-check --no-color --no-input --isolated --requirement= --no-python-version-warning"

// rsyncSenderOpts are the options that rsync's client puts on the server's
// command line for a pull (options.c: server_options() with am_sender
// unset), checked with rsync 3.5.0 by capturing what the client asked the
// remote shell to run. The short bundle ends with -e and the protocol
// compatibility string (-logDtpre.iLsfxCIvu), which the e= spec swallows.
const rsyncSenderOpts = "-v -q -b -u -n -l -d -L -k -W -H -o -g -D -t -U -N -p -A -X -r -c -C -I -R -x -S -z -e= -B= " +
	"--server --sender --iconv= --list-only --no-r --compress-level= --no-specials --specials --msgs2stderr --no-msgs2stderr " +
	"--timeout= --bwlimit= --backup-dir= --suffix= --checksum-choice= --new-compress --old-compress --compress-choice= " +
	"--skip-compress= --max-alloc= --ignore-missing-args --delete-missing-args --checksum-seed= --ignore-errors " +
	"--copy-unsafe-links --safe-links --numeric-ids --use-qsort --info= --debug= --append --inplace --no-W " +
	"--files-from= --from0 --no-relative --no-implied-dirs --remove-source-files --remove-sent-files --copy-devices --open-noatime"

// aptOpts is the option table of apt, apt-get and apt-cache
// (apt-private/private-cmndline.cc, apt 2.6): the options of their read
// commands, and the others they know. -p/--pkg-cache and -s/--src-cache
// make apt-cache write its cache to that file; -c loads a configuration
// file and -o sets any item, both of which can name programs APT runs
// (Dir::Bin::dpkg, DPkg::Pre-Invoke). apt-get's -s (simulate) is never
// read here: apt-get is not on the allowlist.
const aptOpts = "-h --help -v --version -q --quiet --silent -g --generate -t= --target-release= --default-release= " +
	"-i --important --installed --pre-depends --depends --recommends --suggests --replaces --breaks --conflicts --enhances --recurse --implicit " +
	"-n --names-only -f --full -a --all-versions --all-names --only-source --upgradeable --upgradable -u --manual-installed --verbose " +
	"W:-p= W:--pkg-cache= W:-s= W:--src-cache= W:-c= W:--config-file= W:-o= W:--option= N:--with-source= " +
	"W:-y W:--yes W:--assume-yes W:--assume-no W:-d W:--download-only W:-m W:--ignore-missing W:--fix-missing W:--fix-broken W:--purge W:--reinstall W:--no-install-recommends W:--install-recommends W:--install-suggests W:--allow-unauthenticated W:--allow-downgrades W:--allow-remove-essential W:--allow-change-held-packages W:--force-yes W:--simulate W:--just-print W:--dry-run W:--recon W:--no-act W:--print-uris W:--only-upgrade W:--autoremove W:--auto-remove W:--solver= W:--planner= W:-V W:--verbose-versions W:--show-progress W:--show-upgraded W:--trivial-only W:--mark-auto W:--remove W:--download W:--ignore-hold W:--upgrade W:--list-cleanup W:--fix-policy"

// aptCommands are the commands each APT binary knows, for the command whose
// options it takes (aptPickedCommand).
var aptCommands = map[string]map[string]bool{
	"apt-cache": setOf("gencaches showpkg showsrc stats dump dumpavail unmet search show depends rdepends pkgnames dotty xvcg policy madison showauto"),
	"apt":       setOf("list search show info install reinstall remove purge autoremove auto-remove autopurge update upgrade full-upgrade dist-upgrade edit-sources help policy depends rdepends showsrc source download changelog satisfy build-dep clean autoclean auto-clean moo indextargets markauto unmarkauto"),
	"apt-get":   setOf("update upgrade install reinstall remove purge autoremove auto-remove autopurge markauto unmarkauto dist-upgrade full-upgrade dselect-upgrade build-dep satisfy clean autoclean auto-clean check source download changelog indextargets moo help"),
}

// aptReadCmds are the commands that only read the package lists.
var aptReadCmds = map[string]map[string]bool{
	"apt-cache": setOf("show showpkg showsrc policy madison depends rdepends search pkgnames stats dump dumpavail unmet dotty xvcg"),
	"apt":       setOf("list search show info policy depends rdepends showsrc"),
}

func setOf(words string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(words) {
		m[w] = true
	}
	return m
}

// kubectlChangeOpts are the options of kubectl's verbs that change the
// cluster, enough to find what makes one destructive (kubectlDestructive).
const kubectlChangeOpts = kubectlGlobals + " --replicas= --current-replicas= --force --prune --grace-period= --timeout= --all --resource-version= -f= --filename= -l= --selector= -o= --output= -R --recursive -k= --kustomize= --dry-run? --record --server-side --field-manager= --force-conflicts --validate? --wait --cascade? --overwrite --save-config --show-managed-fields --template= --allow-missing-template-keys --selector= --subresource= --prune-allowlist= --prune-whitelist= --all-namespaces -A"

// kubectlExecOpts are kubectl exec's options.
const kubectlExecOpts = kubectlGlobals + " -c= --container= -i --stdin -t --tty -q --quiet -f= --filename= --pod-running-timeout="

// atOpts are at's and batch's options.
const atOpts = "-V -q= -f= -m -M -l -r -d -b -v -c -t= -u"

// sftpOpts are sftp's options (OpenSSH 9.2).
const sftpOpts = "-4 -6 -A -a -C -f -N -p -q -R= -r -v -B= -b= -c= -D= -F= -i= -J= -l= -o= -P= -S= -s= -X="
