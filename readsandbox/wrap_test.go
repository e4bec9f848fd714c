package readsandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestWrapTransparent: a command run in the sandbox gives the same stdout,
// stderr and exit status as run directly by the same login shell (bash and
// dash), as root and as another user: the shell's own messages name the
// same $0, the working directory, environment and stdin are the same, and
// quotes of every kind reach the shell unchanged.
func TestWrapTransparent(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	// Each case checks several things at once: a wrapped run costs three
	// process starts more than a direct one, and the table runs for every
	// login and mechanism.
	cases := []struct {
		name, cmd, stdin string
		all              bool // run for every login, not only bash as root
	}{
		{"stdout, stderr and the exit status", `echo out; echo err >&2; exit 3`, "", true},
		{"the command's own 126 and 1", `false || exit 126`, "", false},
		{"the shell's own messages name the same $0", `no-such-command-postern; echo "$0" "$#"`, "", true},
		{"syntax error", `echo (`, "", false},
		{"working directory, environment, identity", `pwd; echo "$PWD $HOME $USER $LOGNAME $SHELL $PATH $LC_ALL"; env | grep -c .; id -u; id -g`, "", true},
		{"stdin, and stdin left unread", `tr a-z A-Z; head -n1 </dev/null`, "hello\nworld\n", true},
		{"quotes of every kind", `echo 'it'\''s' "a 'b' c"; x="a  b"; echo "$x" $x "$(echo sub)" $((1+2)); printf '%s\n' 'a\\b' "c\\d" e\\f`, "", true},
		{"newlines, globs, pipelines", "echo one\necho /etc/host*\nfalse | true; echo $?", "", false},
		{"here-document", "cat <<EOF\nline $((2*3))\nEOF", "", false},
		{"processes and /proc", `ps -o comm= -p $$ >/dev/null && echo ps; test -r /proc/1/stat && echo proc`, "", false},
		{"/dev/null and unicode", `echo hidden >/dev/null; echo 'h€llo ✓' 2>/dev/null`, "", false},
	}
	logins := map[string]func(t *testing.T) login{
		"bash root":   func(t *testing.T) login { return newLogin(t, "/bin/bash", 0) },
		"dash root":   func(t *testing.T) login { return newLogin(t, "/usr/bin/dash", 0) },
		"bash nobody": func(t *testing.T) login { return newLogin(t, "/bin/bash", nobodyID) },
	}
	for lname, mk := range logins {
		t.Run(lname, func(t *testing.T) {
			l := mk(t)
			for _, m := range Mechanisms() {
				t.Run(string(m), func(t *testing.T) {
					for _, tc := range cases {
						if !tc.all && lname != "bash root" {
							continue
						}
						want := l.run(t, tc.cmd, tc.stdin)
						got := l.wrapped(t, m, tc.cmd, tc.stdin)
						if got != want {
							t.Errorf("%s: %q in %s: got %+v; want %+v (direct)", tc.name, tc.cmd, m, got, want)
						}
					}
				})
			}
		})
	}
}

// TestWrapReadOnly: every way of writing that a command has (create,
// overwrite, append, truncate, remove, rename, link, mode, owner, times,
// through /dev/stdout, through $(…), remounting, through /proc/PID/root of a
// process outside) fails inside the sandbox, as root and as another user,
// and nothing in the home directory changes; every mount the command sees
// is read-only but the sandbox's own (/dev's device binds, bwrap's private
// devpts); and the target's disks cannot be opened.
func TestWrapReadOnly(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	token := strconv.Itoa(os.Getpid())
	t.Cleanup(func() {
		for _, p := range []string{"/tmp/postern-ro-", "/run/postern-ro-", "/var/tmp/postern-ro-", "/dev/shm/postern-ro-"} {
			if _, err := os.Lstat(p + token); err == nil {
				t.Errorf("%s%s exists after the sandboxed runs", p, token)
				os.Remove(p + token)
			}
		}
	})
	// Each attempt prints WROTE when the write went through.
	attempts := []string{
		`touch new`,
		`echo x > existing`,
		`echo x >> existing`,
		`: > existing`,
		`truncate -s 0 existing`,
		`rm -f existing`,
		`mkdir dir`,
		`rmdir empty`,
		`mv existing moved`,
		`ln -s existing symlink`,
		`ln existing hardlink`,
		`chmod 777 existing`,
		`chown nobody existing`,
		`touch -d 2001-01-01 existing`,
		`cat 1<existing >/dev/stdout`,
		`test -n "$(echo x > subst && echo w)"`,
		`git init -q repo`,
		`mkdir /tmp/postern-ro-` + token,
		`: > /run/postern-ro-` + token,
		`: > /var/tmp/postern-ro-` + token,
		`: > /dev/shm/postern-ro-` + token,
		`mount -o remount,rw /`,
		`mount -o remount,rw /proc`,
		`echo x > /proc/$PPID/root` + "$HOME" + `/escaped`,
		`echo 3 > /proc/sys/vm/drop_caches`,
	}
	var script strings.Builder
	for _, a := range attempts {
		// The attempt runs in a subshell so that an exit does not end the
		// script; 2>/dev/null keeps the expected failures quiet.
		script.WriteString("if (" + a + ") 2>/dev/null; then echo 'WROTE " + strings.ReplaceAll(a, "'", "") + "'; fi\n")
	}
	// Every mount must be read-only but the sandbox's own: the device
	// binds and bwrap's private devpts.
	// A mount point listed more than once is stacked: only the last one
	// listed (the top) can be reached.
	script.WriteString(`awk '{o[$5] = $6} END {for (m in o) print m, o[m]}' /proc/self/mountinfo | while read -r m o; do case $m in /dev/null|/dev/zero|/dev/full|/dev/random|/dev/urandom|/dev/tty|/dev/pts) continue;; esac; case ,$o, in *,ro,*) ;; *) echo "RW MOUNT $m $o";; esac; done` + "\n")
	// Block devices: not there (bwrap) or not openable (unshare's nodev).
	// Opened for reading only, so that a sandbox that did not hold reads
	// a byte and writes none.
	script.WriteString(`for d in $(cd /sys/class/block 2>/dev/null && ls); do [ -b /dev/$d ] || continue; if (head -c1 /dev/$d >/dev/null) 2>/dev/null; then echo "OPENED /dev/$d"; fi; done` + "\n")
	script.WriteString(`echo x >/dev/null && echo null-ok; head -c4 /dev/zero | wc -c; echo done`)

	for _, uid := range []int{0, nobodyID} {
		for _, m := range Mechanisms() {
			t.Run(string(m)+"/"+map[int]string{0: "root", nobodyID: "nobody"}[uid], func(t *testing.T) {
				l := newLogin(t, "/bin/bash", uid)
				for _, f := range []string{"existing"} {
					if err := os.WriteFile(filepath.Join(l.home, f), []byte("original\n"), 0o644); err != nil {
						t.Fatal(err)
					}
					os.Chown(filepath.Join(l.home, f), uid, uid)
				}
				if err := os.Mkdir(filepath.Join(l.home, "empty"), 0o755); err != nil {
					t.Fatal(err)
				}
				os.Chown(filepath.Join(l.home, "empty"), uid, uid)
				before := snapshot(t, l.home)
				got := l.wrapped(t, m, script.String(), "")
				if got.code != 0 || got.stdout != "null-ok\n4\ndone\n" {
					t.Errorf("in %s as uid %d: exit %d, stdout %q, stderr %q; want exit 0 and only null-ok, 4, done",
						m, uid, got.code, got.stdout, got.stderr)
				}
				if after := snapshot(t, l.home); after != before {
					t.Errorf("in %s as uid %d the home directory changed:\nbefore %s\nafter  %s", m, uid, before, after)
				}
				// The same writes directly do change it: the test can fail.
				if direct := l.run(t, `touch new && rm -f existing && echo ok`, ""); direct.stdout != "ok\n" {
					t.Errorf("directly: %+v; want the writes to work", direct)
				}
			})
		}
	}
}

// snapshot describes every file under dir: name, mode, size, content and
// modification time.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		b.WriteString(rel + " " + fi.Mode().String() + " " + fi.ModTime().String())
		if fi.Mode().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			b.WriteString(" " + string(data))
		}
		b.WriteString("; ")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestWrapSubmounts: mounts below / (a tmpfs, a tmpfs inside it, a bind
// mount), made in a mount namespace of the test's own so that the machine's
// mounts do not change, are read-only in the sandbox too, while the same
// writes directly work.
func TestWrapSubmounts(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	l := newLogin(t, "/bin/bash", 0)
	for _, d := range []string{"sub", "src", "bound"} {
		if err := os.Mkdir(filepath.Join(l.home, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The mounts, then the login shell with the command.
	l.prefix = []string{"unshare", "-m", "--propagation", "private", "/bin/sh", "-c",
		`mount -t tmpfs t sub && mkdir sub/deeper && mount -t tmpfs t sub/deeper && mount --bind src bound && exec "$0" "$@"`}
	writes := `for f in sub/x sub/deeper/x bound/x; do if (: >"$f") 2>/dev/null; then echo "wrote $f"; fi; done`
	for _, m := range Mechanisms() {
		if got := l.wrapped(t, m, writes, ""); got.stdout != "" || got.code != 0 {
			t.Errorf("in %s: %+v; want no write to work", m, got)
		}
	}
	if _, err := os.Stat(filepath.Join(l.home, "src", "x")); err == nil {
		t.Errorf("a write through the bind mount reached its source from the sandbox")
	}
	if got := l.run(t, writes, ""); got.stdout != "wrote sub/x\nwrote sub/deeper/x\nwrote bound/x\n" {
		t.Errorf("directly: %+v; want every write to work", got)
	}
}

// TestWrapFailsClosed: when the sandbox does not start (the program is
// missing, it fails to set up, a mount fails, a later step is missing) the
// command does not run, and the wrapper exits ExitFailed with the
// mechanism's message and then postern's line on stderr; a command that
// fails on its own, with any status, never gets postern's line.
func TestWrapFailsClosed(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	// bin makes a directory of programs for PATH: real ones by name, and
	// fakes given as scripts.
	bin := func(t *testing.T, real []string, fakes map[string]string) string {
		dir := t.TempDir()
		for _, name := range real {
			p, err := exec.LookPath(name)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(p, filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
		for name, script := range fakes {
			if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	const command = `echo RAN; exit 0`
	cases := []struct {
		name string
		m    Mechanism
		path func(t *testing.T) string
		want string // in stderr, before postern's line
	}{
		{"bwrap not installed", Bwrap, func(t *testing.T) string { return bin(t, nil, nil) }, "bwrap: command not found"},
		{"bwrap fails before the clone", Bwrap, func(t *testing.T) string {
			return bin(t, nil, map[string]string{"bwrap": `echo "bwrap: No permissions to create new namespace" >&2; exit 1`})
		}, "No permissions to create new namespace"},
		{"bwrap fails in the child, after reporting it", Bwrap, func(t *testing.T) string {
			return bin(t, nil, map[string]string{"bwrap": `echo '{ "child-pid": 42 }' >&3; echo "bwrap: Can't mount proc" >&2; exit 1`})
		}, "Can't mount proc"},
		{"unshare not installed", Unshare, func(t *testing.T) string { return bin(t, []string{"sh"}, nil) }, "unshare: command not found"},
		{"user namespaces refused", Unshare, func(t *testing.T) string {
			return bin(t, nil, map[string]string{"unshare": `echo "unshare: unshare failed: Operation not permitted" >&2; exit 1`})
		}, "Operation not permitted"},
		{"a mount fails", Unshare, func(t *testing.T) string {
			return bin(t, []string{"unshare", "setpriv"}, map[string]string{"mount": `echo "mount: /dev/shm: permission denied." >&2; exit 32`})
		}, "mount: /dev/shm: permission denied."},
		{"setpriv missing", Unshare, func(t *testing.T) string { return bin(t, []string{"unshare", "mount"}, nil) }, "setpriv"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := newLogin(t, "/bin/bash", 0)
			l.path = tc.path(t)
			got := l.wrapped(t, tc.m, command, "")
			line := failedLine(tc.m) + "\n"
			if got.code != ExitFailed || strings.Contains(got.stdout, "RAN") ||
				!strings.HasSuffix(got.stderr, line) || !strings.Contains(got.stderr, tc.want) {
				t.Errorf("got %+v; want exit %d, no RAN, stderr with %q and ending %q", got, ExitFailed, tc.want, line)
			}
		})
	}
	// The command's own failures pass through without postern's line.
	l := newLogin(t, "/bin/bash", 0)
	for _, m := range Mechanisms() {
		for _, code := range []string{"1", "126", "127"} {
			got := l.wrapped(t, m, "echo ran; exit "+code, "")
			if strconv.Itoa(got.code) != code || got.stdout != "ran\n" || got.stderr != "" {
				t.Errorf("%s, exit %s: got %+v; want the command's own exit and no message", m, code, got)
			}
		}
	}
}
