package main

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/postern/postern/store"
	"github.com/postern/postern/web"
)

// The data directory is 0700 and its secret files 0600 after init, serve,
// backup and migrate, under the usual umask of 022; files and directories
// found open to others are closed, with a warning naming each and its old
// mode. The tests are not parallel: the umask is the process's, and serve
// inherits it.

func setUmask(t *testing.T, mask int) {
	old := syscall.Umask(mask)
	t.Cleanup(func() { syscall.Umask(old) })
}

// wantPerm fails t for each path whose permission bits are not want.
func wantPerm(t *testing.T, want fs.FileMode, paths ...string) {
	t.Helper()
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if got := st.Mode().Perm(); got != want {
			t.Errorf("%s: mode %04o; want %04o", p, got, want)
		}
	}
}

// secretPaths are the data directory's secret files that exist while serve
// runs with the web page: all of them.
func secretPaths(data string) []string {
	d := store.Dir{Path: data}
	return []string{d.DatabasePath(), d.DatabasePath() + "-wal", d.DatabasePath() + "-shm",
		d.MasterKeyPath(), d.HostKeyPath(), d.LockPath(), filepath.Join(data, web.SelfSignedKeyFile)}
}

// modeWarnings are the files of JSON log lines in log that warn of a fixed
// mode, with the old mode each had.
func modeWarnings(t *testing.T, log string) map[string]string {
	t.Helper()
	got := map[string]string{}
	for _, line := range strings.Split(log, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil || m["level"] != "warn" {
			continue
		}
		if file, ok := m["file"].(string); ok && m["new_mode"] != nil {
			got[file], _ = m["old_mode"].(string)
		}
	}
	return got
}

// openUp gives each path mode 0644 (0755 for a directory) and returns what
// the warnings should say.
func openUp(t *testing.T, paths ...string) map[string]string {
	t.Helper()
	want := map[string]string{}
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		m := fs.FileMode(0o644)
		if st.IsDir() {
			m = 0o755
		}
		if err := os.Chmod(p, m); err != nil {
			t.Fatal(err)
		}
		want[p] = fmt.Sprintf("%04o", m)
	}
	return want
}

func wantWarnings(t *testing.T, what, log string, want map[string]string) {
	t.Helper()
	got := modeWarnings(t, log)
	bad := len(got) != len(want)
	for p, m := range want {
		bad = bad || got[p] != m
	}
	if bad {
		t.Errorf("%s: warned of (file: old mode) %v; want %v\nlog:\n%s", what, got, want, log)
	}
}

func TestFileModesInitServeBackup(t *testing.T) {
	setUmask(t, 0o022)

	// init makes the directory 0700 and every file 0600.
	c := newCLI(t)
	d := store.Dir{Path: c.data}
	wantPerm(t, 0o700, c.data)
	wantPerm(t, 0o600, d.DatabasePath(), d.MasterKeyPath(), d.HostKeyPath())

	// init on a directory made beforehand, open to others, closes it
	// before it writes a key into it.
	pre := filepath.Join(t.TempDir(), "pre")
	if err := os.Mkdir(pre, 0o755); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, "", "init", "--data", pre)
	if r.code != 0 {
		t.Fatalf("init: exit %d\n%s", r.code, r.stderr)
	}
	wantPerm(t, 0o700, pre)
	wantPerm(t, 0o600, filepath.Join(pre, store.DatabaseFile), filepath.Join(pre, store.MasterKeyFile), filepath.Join(pre, store.HostKeyFile))
	wantWarnings(t, "init", r.stderr, map[string]string{pre: "0755"})

	// serve makes the web page's key, and the database's -wal and -shm,
	// 0600.
	s := startServe(t, c.data)
	wantPerm(t, 0o600, secretPaths(c.data)...)
	if code := s.end(syscall.SIGTERM); code != 0 {
		t.Fatalf("serve: exit %d\n%s", code, s.stderrText())
	}
	wantWarnings(t, "first serve", s.stderrText(), nil)

	// Files open to others (as an installation from before, or a cp
	// without -p, left them) are closed by serve at start, with a
	// warning each. The -wal and -shm files a crash leaves behind too.
	for _, name := range []string{store.DatabaseFile + "-wal", store.DatabaseFile + "-shm"} {
		if err := os.WriteFile(filepath.Join(c.data, name), []byte("left by a crash"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want := openUp(t, append(secretPaths(c.data), c.data)...)
	s = startServe(t, c.data)
	wantWarnings(t, "serve", s.stderrText(), want)
	wantPerm(t, 0o700, c.data)
	wantPerm(t, 0o600, secretPaths(c.data)...)
	wantPerm(t, 0o644, filepath.Join(c.data, web.SelfSignedCertFile)) // public

	// backup, while serve runs, into an empty directory open to others.
	dest := t.TempDir()
	if err := os.Chmod(dest, 0o755); err != nil {
		t.Fatal(err)
	}
	out := c.ok("", "backup", dest)
	wantPerm(t, 0o700, dest)
	entries, err := os.ReadDir(dest)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
		wantPerm(t, 0o600, filepath.Join(dest, e.Name()))
	}
	if len(names) != 5 {
		t.Errorf("backup wrote %v; want the database, both keys, the web page's certificate and key\n%s", names, out)
	}
	if code := s.end(syscall.SIGTERM); code != 0 {
		t.Fatalf("serve: exit %d\n%s", code, s.stderrText())
	}

	// An admin command fixes what it finds too, and says so on stderr.
	want = openUp(t, d.DatabasePath(), d.MasterKeyPath())
	r = c.run("", "agent", "list")
	if r.code != 0 {
		t.Fatalf("agent list: exit %d\n%s", r.code, r.stderr)
	}
	wantWarnings(t, "agent list", r.stderr, want)
	wantPerm(t, 0o600, d.DatabasePath(), d.MasterKeyPath())
}

// TestFileModesMigrate: migrate opens the SQLite data directory it moves
// from, and closes it to others first.
func TestFileModesMigrate(t *testing.T) {
	setUmask(t, 0o022)
	c := newCLI(t)
	d := store.Dir{Path: c.data}
	want := openUp(t, c.data, d.DatabasePath(), d.MasterKeyPath(), d.HostKeyPath())
	r := runCLI(t, "", "migrate", "--from-sqlite", c.data, "--database", testPG.NewDatabase(t))
	if r.code != 0 {
		t.Fatalf("migrate: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	wantWarnings(t, "migrate", r.stderr, want)
	wantPerm(t, 0o700, c.data)
	wantPerm(t, 0o600, d.DatabasePath(), d.MasterKeyPath(), d.HostKeyPath())
}
