package shellclass

// destructiveRule says what makes a command destructive: always, one of its
// subcommands (the first operand), or one of its options.
type destructiveRule struct {
	why    string
	always bool
	subs   []string // first operand, e.g. "remove"
	flags  []string // options; a trailing "*" matches a prefix ("--vacuum-*")
	// shortFlags are letters that make it destructive in any bundle of
	// short options ("-ir" holds r).
	shortFlags string
}

// destructiveTable lists commands that remove or destroy data, or end
// running work (docs/classification.md, Classes). Commands with handlers of
// their own (git, docker, kubectl, systemctl, package managers, find, tar,
// rsync, SQL clients) keep their rules beside the handler.
var destructiveTable = map[string]destructiveRule{
	"rm":             {why: "rm deletes files", always: true},
	"rmdir":          {why: "rmdir deletes directories", always: true},
	"unlink":         {why: "unlink deletes a file", always: true},
	"shred":          {why: "shred destroys file contents", always: true},
	"dd":             {why: "dd can overwrite any file or device", always: true},
	"truncate":       {why: "truncate destroys file contents", always: true},
	"wipefs":         {why: "wipefs erases file system signatures", always: true},
	"mke2fs":         {why: "mke2fs creates a file system, destroying what was there", always: true},
	"mkswap":         {why: "mkswap overwrites a device", always: true},
	"fdisk":          {why: "fdisk rewrites partition tables", always: true},
	"sfdisk":         {why: "sfdisk rewrites partition tables", always: true},
	"cfdisk":         {why: "cfdisk rewrites partition tables", always: true},
	"gdisk":          {why: "gdisk rewrites partition tables", always: true},
	"sgdisk":         {why: "sgdisk rewrites partition tables", always: true},
	"parted":         {why: "parted rewrites partition tables", always: true},
	"blkdiscard":     {why: "blkdiscard discards every block of a device", always: true},
	"kill":           {why: "kill ends processes", always: true},
	"pkill":          {why: "pkill ends processes", always: true},
	"killall":        {why: "killall ends processes", always: true},
	"skill":          {why: "skill ends processes", always: true},
	"reboot":         {why: "reboot ends all running work", always: true},
	"shutdown":       {why: "shutdown ends all running work", always: true},
	"halt":           {why: "halt ends all running work", always: true},
	"poweroff":       {why: "poweroff ends all running work", always: true},
	"userdel":        {why: "userdel deletes a user", always: true},
	"groupdel":       {why: "groupdel deletes a group", always: true},
	"deluser":        {why: "deluser deletes a user", always: true},
	"delgroup":       {why: "delgroup deletes a group", always: true},
	"init":           {why: "init 0/6/1 halts, reboots or stops services", subs: []string{"0", "6", "1", "s", "S", "single"}},
	"telinit":        {why: "telinit 0/6/1 halts, reboots or stops services", subs: []string{"0", "6", "1", "s", "S", "single"}},
	"journalctl":     {why: "journalctl --vacuum deletes journal files", flags: []string{"--vacuum-*"}},
	"dmesg":          {why: "dmesg -c/-C clears the kernel ring buffer, deleting its messages", flags: []string{"--clear", "--read-clear"}, shortFlags: "cC"},
	"helm":           {why: "helm uninstall deletes a release", subs: []string{"uninstall", "delete", "del", "un"}},
	"yum":            {why: "yum remove removes packages", subs: []string{"remove", "erase", "autoremove"}},
	"dnf":            {why: "dnf remove removes packages", subs: []string{"remove", "erase", "autoremove"}},
	"microdnf":       {why: "microdnf remove removes packages", subs: []string{"remove"}},
	"apk":            {why: "apk del removes packages", subs: []string{"del"}},
	"pacman":         {why: "pacman -R removes packages", flags: []string{"--remove"}, shortFlags: "R"},
	"npm":            {why: "npm uninstall removes packages", subs: []string{"uninstall", "remove", "rm", "r", "un", "unlink", "prune"}},
	"yarn":           {why: "yarn remove removes packages", subs: []string{"remove"}},
	"pnpm":           {why: "pnpm remove removes packages", subs: []string{"remove", "rm", "uninstall", "un", "prune"}},
	"zypper":         {why: "zypper remove removes packages", subs: []string{"remove", "rm"}},
	"snap":           {why: "snap remove removes packages", subs: []string{"remove"}},
	"brew":           {why: "brew uninstall removes packages", subs: []string{"uninstall", "remove", "rm"}},
	"gem":            {why: "gem uninstall removes packages", subs: []string{"uninstall"}},
	"conda":          {why: "conda remove removes packages", subs: []string{"remove", "uninstall"}},
	"docker-compose": {why: "docker-compose down removes containers", subs: []string{"down", "rm", "kill", "stop", "restart"}},
	"podman-compose": {why: "podman-compose down removes containers", subs: []string{"down", "rm", "kill", "stop", "restart"}},
	"mv":             {why: "moving onto /dev/null destroys the source"},
	"zpool":          {why: "zpool destroy deletes a pool", subs: []string{"destroy", "labelclear"}},
	"zfs":            {why: "zfs destroy deletes data sets", subs: []string{"destroy", "rollback"}},
	"lvremove":       {why: "lvremove deletes logical volumes", always: true},
	"vgremove":       {why: "vgremove deletes volume groups", always: true},
	"pvremove":       {why: "pvremove wipes physical volumes", always: true},
}
