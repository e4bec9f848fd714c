package readsandbox

import (
	"fmt"
	"strings"
)

// Mechanism is a way a target runs a command with a read-only filesystem.
type Mechanism string

// The mechanisms, most capable first (Mechanisms).
const (
	// Bwrap is bubblewrap: one program, about a process start's cost.
	Bwrap Mechanism = "bwrap"
	// Unshare is util-linux's unshare and mount: no extra package, but
	// one mount(8) run per mount point and several process starts.
	Unshare Mechanism = "unshare"
)

// Mechanisms lists the mechanisms in the order a probe tries them.
func Mechanisms() []Mechanism { return []Mechanism{Bwrap, Unshare} }

// ExitFailed is the exit status of a wrapped command whose sandbox did not
// start: 126, the shell's "cannot execute", which is also postern's own
// status for "refused, nothing ran". The command itself did not run.
const ExitFailed = 126

// failedLine is what the target prints on stderr, after the mechanism's own
// message, when the sandbox did not start. postern cannot print it itself:
// the target's stderr reaches the agent unchanged, and only the wrapper
// knows whether the command ran.
func failedLine(m Mechanism) string {
	return fmt.Sprintf("postern: the read-only sandbox (%s) did not start on the target, so the command did not run", m)
}

// Wrap returns the command string that makes the target's login shell run
// command exactly as it would run it directly, but in m's read-only
// sandbox. sshd runs what it is given as `$SHELL -c STRING`; so does the
// sandbox for command, with the same user, working directory, environment
// and PATH, the same stdin, stdout and stderr, and $0 set to the login
// shell's own $0 (which is what bash and dash name in their error
// messages: "bash: line 1: x: command not found").
//
// The wrapper is the target's login shell's to parse: it is written in the
// syntax bash, dash, ash and zsh share, and command appears in it once,
// single-quoted, so that nothing in it is expanded before the sandbox's
// shell reads it. A login shell of another family (csh, fish) fails to
// parse it and runs nothing.
//
// Exit status: the command's own. When the sandbox does not start (the
// program is missing, namespaces are disabled, a mount fails), the wrapper
// prints the mechanism's message and then postern's line on stderr and exits
// ExitFailed, and the command has not run: the wrapper knows which happened
// from a signal that only a sandbox that reached the command can give (see
// wrapBwrap and wrapUnshare), never from the exit status, which the command
// could give too. A command that a signal ends exits with 128 plus the
// signal's number instead of reporting the signal, as a shell reports it:
// the wrapper waits for it rather than replacing itself with it, which is
// how it can tell the sandbox's failure from the command's.
func Wrap(m Mechanism, command string) (string, error) {
	switch m {
	case Bwrap:
		return wrapBwrap(command), nil
	case Unshare:
		return wrapUnshare(command), nil
	}
	return "", fmt.Errorf("readsandbox: unknown mechanism %q", m)
}

// bwrapArgs are bubblewrap's options, in the order it applies them:
//
//   - --unshare-user: a user namespace even for root. As root, bwrap
//     otherwise makes none, and its own process that waits for the command
//     stays outside the sandbox as root without capabilities: a command in
//     the sandbox, root without capabilities too, could then open
//     /proc/PARENT/root and write through bwrap's view of the filesystem.
//     In a user namespace of its own the command has no access to processes
//     outside it (ptrace rules), and only its own user is mapped: files and
//     processes of other users show as nobody and nogroup (a listed
//     difference).
//   - --cap-drop ALL: as root bwrap keeps every capability unless told
//     (its manual's "no caps are left" is for unprivileged users); with
//     CAP_SYS_ADMIN the command could remount / read-write.
//   - --die-with-parent: the command ends when the login shell does, as it
//     would directly when sshd ends the shell.
//   - --ro-bind / /: every mount, recursively, read-only, nosuid and nodev.
//   - --dev /dev, --remount-ro /dev: a new /dev with only null, zero, full,
//     random, urandom and tty (device nodes are written through even on a
//     read-only mount; the target's disks must not be there), itself
//     read-only.
//
// Not --unshare-pid or --unshare-net: processes and the network stay the
// target's own, for ps, ss and journalctl.
func bwrapArgs() string {
	return "--unshare-user --cap-drop ALL --die-with-parent --ro-bind / / --dev /dev --remount-ro /dev"
}

// wrapBwrap runs command under bubblewrap. bwrap's --json-status-fd writes
// {"exit-code": N} only when the command was executed (its child tells it so
// through a pipe that the exec closes) and the command has ended: without
// that line, the sandbox did not start. The line goes to fd 3, a pipe the
// login shell reads through a command substitution, while fd 4 carries the
// real stdout to the command; neither fd reaches the command (bwrap closes
// the status fd in the child, and 4 is closed before bwrap starts).
func wrapBwrap(command string) string {
	return `{ s=$(bwrap --json-status-fd 3 ` + bwrapArgs() + ` -- "$SHELL" -c ` + quote(command) +
		` "$0" 3>&1 1>&4 4>&-); } 4>&1; r=$?; case $s in *'"exit-code"'*) exit "$r";; esac; ` +
		`printf '%s\n' ` + quote(failedLine(Bwrap)) + ` >&2; exit ` + fmt.Sprint(ExitFailed)
}

// unshareScript runs in a user namespace of its own that maps only the
// user's own uid and gid to themselves (unshare -c), with the capabilities
// the namespace grants kept across exec (--keep-caps), and in a mount
// namespace of its own (-m, whose mounts are private: nothing here reaches
// the target's). Its arguments: $1 the login shell, $2 the command, $3 the
// login shell's $0. It
//
//  1. mounts a small private tmpfs on /dev/shm for two mount tables
//     (mount(8) reads a table from a file it can open twice, not from a
//     pipe), hiding the target's shared memory inside the sandbox;
//  2. binds /dev's harmless devices onto themselves (mount -a -T: one
//     mount(8) run for the table, rather than one per device);
//  3. remounts every mount read-only, nosuid and nodev in one run (mount
//     -a -o remount goes over every mounted filesystem, util-linux 2.34),
//     keeping the flags the kernel locked when the namespace was made
//     (libmount passes a mount's current flags with the new ones). /dev
//     becomes nodev, so that the target's disks and terminals cannot be
//     opened: device nodes are written through even on a read-only mount;
//  4. gives the device binds of step 2 their devices back (they inherited
//     nodev from /dev in step 3);
//  5. drops every capability for good (setpriv: the bounding set too, so
//     that root does not get them back at exec, and no_new_privs) and runs
//     a sh that prints "ok" on fd 3, the only proof that every step worked,
//     and closes it before it becomes the login shell.
//
// The command is then the user itself, without capabilities: it cannot
// remount anything, and in a user namespace of its own it has no access to
// processes outside it (ptrace rules, /proc/PID/root). Only the user's own
// uid and gid are mapped: files and processes of other users show as nobody
// and nogroup, as under bwrap. mount(8) run by a user other than root
// drops its setuid privileges and works with the capabilities the namespace
// gave, which is what it needs. Any step that fails ends the script before
// the command runs.
const unshareScript = `mount -t tmpfs -o size=16k,mode=700 postern /dev/shm || exit
b= d=
for n in null zero full random urandom tty; do b="$b/dev/$n /dev/$n none bind 0 0
"; d="${d}none /dev/$n none remount,bind,ro,nosuid,dev 0 0
"; done
printf %s "$b" >/dev/shm/binds && printf %s "$d" >/dev/shm/devices || exit
mount -a -T /dev/shm/binds && mount -a -o remount,bind,ro,nosuid,nodev && mount -a -T /dev/shm/devices || exit
exec setpriv --no-new-privs --inh-caps=-all --ambient-caps=-all --bounding-set=-all -- /bin/sh -c 'printf ok >&3; exec 3>&-; exec "$0" -c "$1" "$2"' "$1" "$2" "$3"`

// wrapUnshare runs command under unshare (see unshareScript); "ok" on fd 3
// tells the login shell that the command was reached.
func wrapUnshare(command string) string {
	return `{ s=$(unshare -c -m --keep-caps -- /bin/sh -c ` + quote(unshareScript) + ` postern "$SHELL" ` + quote(command) +
		` "$0" 3>&1 1>&4 4>&-); } 4>&1; r=$?; case $s in ok) exit "$r";; esac; ` +
		`printf '%s\n' ` + quote(failedLine(Unshare)) + ` >&2; exit ` + fmt.Sprint(ExitFailed)
}

// quote single-quotes s for a POSIX shell: nothing inside is expanded, and
// each single quote in s closes the quoted text, adds a backslash-escaped
// quote and opens it again.
func quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
