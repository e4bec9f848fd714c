package demotarget

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"time"
)

// confineProbeTimeout bounds the trial run of bubblewrap at Start.
const confineProbeTimeout = 10 * time.Second

// confinement is how the target runs commands: in bubblewrap (bwrap set)
// or, when that was not asked for or cannot run, as the user running
// postern, with why in reason.
type confinement struct {
	bwrap  string // the bwrap binary; "" when commands are not confined
	reason string // why commands are not confined; "" when they are
}

// systemDirs are the directories of programs and libraries a command
// needs, bound read-only (or as the symbolic links they are, on a system
// with a merged /usr).
func systemDirs() []string {
	return []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}
}

// systemFiles are the files of /etc that programs read to run (user and
// group names, name resolution, time zone, the loader's cache, Debian's
// alternatives), bound read-only when they exist. /etc/shadow and the rest
// of /etc are not there.
func systemFiles() []string {
	return []string{"/etc/passwd", "/etc/group", "/etc/hosts", "/etc/resolv.conf", "/etc/nsswitch.conf",
		"/etc/localtime", "/etc/ld.so.cache", "/etc/alternatives"}
}

// bwrapArgs are bubblewrap's arguments that run argv in a view of the
// system where only dir (the scratch directory, also the working
// directory) is writable, the programs are read-only, /tmp is empty and
// private, and the rest of the host's files (home directories, /etc/shadow,
// the data directory of postern) are not there at all.
func bwrapArgs(dir string, argv ...string) []string {
	args := []string{"--die-with-parent", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"}
	for _, d := range systemDirs() {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			if target, err := os.Readlink(d); err == nil {
				args = append(args, "--symlink", target, d)
			}
		case fi.IsDir():
			args = append(args, "--ro-bind", d, d)
		}
	}
	for _, f := range systemFiles() {
		args = append(args, "--ro-bind-try", f, f)
	}
	args = append(args, "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
		"--bind", dir, dir, "--chdir", dir, "--")
	return append(args, argv...)
}

// confine finds bubblewrap and proves it runs here (a container may forbid
// the namespaces it needs) by running the shell's `true` in it.
func confine(dir, shell string) confinement {
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		return confinement{reason: "bubblewrap (bwrap) is not installed"}
	}
	ctx, cancel := context.WithTimeout(context.Background(), confineProbeTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, bwrap, bwrapArgs(dir, shell, "-c", "true")...).CombinedOutput()
	if err != nil {
		return confinement{reason: fmt.Sprintf("bubblewrap does not run here (%v: %s)", err, firstLine(out))}
	}
	return confinement{bwrap: bwrap}
}

// command is the process that runs the shell's argv: in bubblewrap when
// the target confines commands.
func (c confinement) command(dir string, argv ...string) *exec.Cmd {
	if c.bwrap == "" {
		return exec.Command(argv[0], argv[1:]...)
	}
	return exec.Command(c.bwrap, bwrapArgs(dir, argv...)...)
}

// firstLine is the first line of b, for an error message.
func firstLine(b []byte) string {
	for i, c := range b {
		if c == '\n' {
			return string(b[:i])
		}
	}
	return string(b)
}

// Confined reports whether commands run confined to the scratch directory
// (in bubblewrap), and if not, why.
func (t *Target) Confined() (bool, string) {
	return t.confined.bwrap != "", t.confined.reason
}
