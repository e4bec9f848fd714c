package shellclass

// destructiveRule says what makes a command destructive: always, one of its
// subcommands (the first operand), or one of its options.
type destructiveRule struct {
	why    string
	always bool
	subs   []string // first operand, e.g. "remove"
	// anySubs are words that are destructive as any operand, for tools
	// whose verb follows an object (btrfs subvolume delete, nmcli
	// connection down).
	anySubs []string
	flags   []string // options; a trailing "*" matches a prefix ("--vacuum-*")
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
	// Tools that end work or delete, found in the manuals of what an ops
	// agent runs (issue 22).
	"fuser":            {why: "fuser -k kills the processes using the file", flags: []string{"--kill"}, shortFlags: "k"},
	"modprobe":         {why: "modprobe -r removes kernel modules, ending what their devices serve", flags: []string{"--remove", "--remove-dependencies", "--remove-holders"}, shortFlags: "r"},
	"rmmod":            {why: "rmmod removes a kernel module, ending what its devices serve", always: true},
	"loginctl":         {why: "loginctl terminate-*/kill-* ends sessions and their processes", subs: []string{"terminate-session", "terminate-user", "terminate-seat", "kill-session", "kill-user", "flush-devices"}},
	"machinectl":       {why: "machinectl terminate/kill/poweroff/reboot/remove ends or deletes a container or VM", subs: []string{"terminate", "kill", "poweroff", "reboot", "remove", "clean", "stop"}},
	"iptables":         {why: "iptables -F/-X/-D deletes firewall rules or chains", flags: []string{"--flush", "--delete-chain", "--delete"}, shortFlags: "FXD"},
	"ip6tables":        {why: "ip6tables -F/-X/-D deletes firewall rules or chains", flags: []string{"--flush", "--delete-chain", "--delete"}, shortFlags: "FXD"},
	"iptables-restore": {why: "iptables-restore replaces every rule (flushing the tables unless -n)", always: true},
	"nft":              {why: "nft flush/delete/destroy removes firewall rules", subs: []string{"flush", "delete", "destroy"}},
	"ufw":              {why: "ufw reset/delete/disable removes firewall rules", subs: []string{"reset", "delete", "disable"}},
	"conntrack":        {why: "conntrack -D/-F deletes tracked connections, breaking them", flags: []string{"--delete", "--flush"}, shortFlags: "DF"},
	"ipset":            {why: "ipset destroy/flush/del deletes sets", subs: []string{"destroy", "flush", "del", "x", "-X", "-F", "-D"}},
	"swapoff":          {why: "swapoff moves swap into memory, which can make the kernel kill processes", always: true},
	"losetup":          {why: "losetup -d detaches loop devices", flags: []string{"--detach", "--detach-all"}, shortFlags: "dD"},
	"dmsetup":          {why: "dmsetup remove deletes device-mapper devices", subs: []string{"remove", "remove_all", "wipe_table", "clear"}},
	"mdadm":            {why: "mdadm --stop/--remove/--fail/--zero-superblock stops or destroys an array", flags: []string{"--stop", "--remove", "--fail", "--zero-superblock", "--set-faulty"}},
	"lvreduce":         {why: "lvreduce shrinks a logical volume, destroying what was beyond", always: true},
	"vgreduce":         {why: "vgreduce removes physical volumes from a group", always: true},
	"cryptsetup":       {why: "cryptsetup erase/luksKillSlot/luksRemoveKey destroys keys", subs: []string{"erase", "luksErase", "luksKillSlot", "luksRemoveKey"}},
	"virsh":            {why: "virsh destroy/undefine/shutdown/reset ends or deletes a VM", subs: []string{"destroy", "undefine", "shutdown", "reboot", "reset", "vol-delete", "pool-delete", "snapshot-delete"}},
	"lxc":              {why: "lxc delete/stop ends or deletes a container", subs: []string{"delete", "rm", "stop", "restart"}},
	"incus":            {why: "incus delete/stop ends or deletes a container", subs: []string{"delete", "rm", "stop", "restart"}},
	"crictl":           {why: "crictl rm/stop ends or deletes containers and pods", subs: []string{"rm", "rmi", "rmp", "stop", "stopp"}},
	"terraform":        {why: "terraform destroy deletes the infrastructure", subs: []string{"destroy"}, flags: []string{"-destroy"}},
	"tofu":             {why: "tofu destroy deletes the infrastructure", subs: []string{"destroy"}, flags: []string{"-destroy"}},
	"pulumi":           {why: "pulumi destroy deletes the stack's resources", subs: []string{"destroy", "down"}},
	"systemd-tmpfiles": {why: "systemd-tmpfiles --remove/--clean deletes files", flags: []string{"--remove", "--clean", "--purge"}},
	"pg_ctl":           {why: "pg_ctl stop/kill ends the database server", subs: []string{"stop", "kill", "restart"}},
	"pg_ctlcluster":    {why: "pg_ctlcluster stop ends the database server", subs: []string{"stop", "restart"}},
	"mysqladmin":       {why: "mysqladmin drop/shutdown/kill drops a database or ends the server", subs: []string{"drop", "shutdown", "kill"}},
	"dropdb":           {why: "dropdb deletes a database", always: true},
	"dropuser":         {why: "dropuser deletes a database role", always: true},
	"killall5":         {why: "killall5 signals every process", always: true},
	"xkill":            {why: "xkill kills a client", always: true},
	"wipe":             {why: "wipe destroys file contents", always: true},
	"srm":              {why: "srm destroys file contents", always: true},
	"sg_format":        {why: "sg_format formats a disk", always: true},
	"nvme":             {why: "nvme format/sanitize/delete-ns destroys data", subs: []string{"format", "sanitize", "delete-ns", "write-zeroes"}},
	"hdparm":           {why: "hdparm's erase and trim options destroy data", flags: []string{"--security-erase", "--security-erase-enhanced", "--trim-sector-ranges", "--trim-sector-ranges-stdin", "--make-bad-sector", "--fwdownload*", "--dco-restore"}},
	"fallocate":        {why: "fallocate --punch-hole/--collapse-range/--zero-range destroys data in the file", flags: []string{"--punch-hole", "--collapse-range", "--dig-holes", "--zero-range", "--insert-range"}, shortFlags: "pcdzi"},
	"tmpreaper":        {why: "tmpreaper deletes old files", always: true},
	"tmpwatch":         {why: "tmpwatch deletes old files", always: true},
	"flatpak":          {why: "flatpak uninstall removes applications", subs: []string{"uninstall", "remove"}},
	"btrfs":            {why: "btrfs subvolume/device delete destroys data", anySubs: []string{"delete", "remove", "del"}},
	"ifdown":           {why: "ifdown takes a network interface down, cutting its connections", always: true},
	"nmcli":            {why: "nmcli ... delete/down/disconnect/off cuts network connections", anySubs: []string{"delete", "down", "disconnect", "off"}},
	// tmux accepts any unambiguous prefix of a command's name, and the
	// aliases killp and killw.
	"tmux":          {why: "tmux kill-server/kill-session/kill-window/kill-pane ends the sessions and the programs running in them", anySubs: []string{"kill-p", "kill-pa", "kill-pan", "kill-pane", "kill-ser", "kill-serv", "kill-serve", "kill-server", "kill-ses", "kill-sess", "kill-sessi", "kill-sessio", "kill-session", "kill-w", "kill-wi", "kill-win", "kill-wind", "kill-windo", "kill-window", "killp", "killw"}},
	"screen":        {why: "screen -X quit/kill ends the session or window and the programs running in it", anySubs: []string{"quit", "kill"}},
	"supervisorctl": {why: "supervisorctl stop/restart/remove/shutdown ends supervised programs", subs: []string{"stop", "restart", "remove", "shutdown"}},
	"pm2":           {why: "pm2 stop/delete/kill/restart ends managed processes", subs: []string{"stop", "delete", "del", "kill", "restart"}},
	"etcdctl":       {why: "etcdctl del deletes keys", anySubs: []string{"del"}},
}
