package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/rs/zerolog"
)

// withUmask runs the rest of the test with umask mask, the usual 022 unless
// told: tests that use it are not parallel, since the umask is the
// process's.
func withUmask(t *testing.T, mask int) {
	old := syscall.Umask(mask)
	t.Cleanup(func() { syscall.Umask(old) })
}

// wantModes fails t for each path whose permission bits are not want.
func wantModes(t *testing.T, want fs.FileMode, paths ...string) {
	t.Helper()
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if got := st.Mode().Perm(); got != want {
			t.Errorf("%s: mode %04o; want %04o", filepath.Base(p), got, want)
		}
	}
}

// writeRow writes to the store, so that SQLite has its -wal and -shm
// files.
func writeRow(t *testing.T, s *Store) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS filemode_probe (x)`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.ExecContext(ctx, `INSERT INTO filemode_probe VALUES (1)`); err != nil {
		t.Fatal(err)
	}
}

// TestSQLiteJournalFilesFollowDBMode checks what filemode.go relies on:
// modernc's SQLite creates the -wal and -shm files with the database
// file's mode (C SQLite's unix VFS does), whatever the umask.
func TestSQLiteJournalFilesFollowDBMode(t *testing.T) {
	withUmask(t, 0o022)
	for _, mode := range []fs.FileMode{0o600, 0o640} {
		path := filepath.Join(t.TempDir(), DatabaseFile)
		if err := os.WriteFile(path, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		s, err := Open(context.Background(), path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		writeRow(t, s)
		wantModes(t, mode, path, path+"-wal", path+"-shm")
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDirFileModes: under a umask of 022, init makes the directory 0700
// and every file, the database's -wal and -shm included, 0600.
func TestDirFileModes(t *testing.T) {
	withUmask(t, 0o022)
	ctx := context.Background()
	d := Dir{Path: filepath.Join(t.TempDir(), "data")}
	if _, err := d.Init(ctx, Options{}); err != nil {
		t.Fatal(err)
	}
	wantModes(t, DirMode, d.Path)
	wantModes(t, SecretMode, d.DatabasePath(), d.MasterKeyPath(), d.HostKeyPath())

	s, err := d.Open(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	writeRow(t, s)
	wantModes(t, SecretMode, d.DatabasePath(), d.DatabasePath()+"-wal", d.DatabasePath()+"-shm")

	// A backup is as closed, into a new directory and into an empty one
	// that was open to others.
	open := t.TempDir()
	if err := os.Chmod(open, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, dest := range []string{filepath.Join(t.TempDir(), "new", "backup"), open} {
		res, err := BackupDir(ctx, s, d, dest, BackupOptions{})
		if err != nil {
			t.Fatal(err)
		}
		wantModes(t, DirMode, dest)
		wantModes(t, SecretMode, res.Files...)
		if len(res.Files) != 3 {
			t.Errorf("backup files: got %v; want the database, host key and master key", res.Files)
		}
		left, _ := filepath.Glob(filepath.Join(dest, DatabaseFile+"-*"))
		if len(left) > 0 {
			t.Errorf("backup left %v", left)
		}
	}
}

// TestDirOpenFixesModes: a data directory whose directory and secret
// files are open to others (an installation from before the fix, or a
// careless cp) is closed by Open, with one warning per file naming it and
// its old mode. Files that are not secret, and a master key kept outside
// the directory, are left as they are.
func TestDirOpenFixesModes(t *testing.T) {
	withUmask(t, 0o022)
	ctx := context.Background()
	d := Dir{Path: filepath.Join(t.TempDir(), "data")}
	if _, err := d.Init(ctx, Options{}); err != nil {
		t.Fatal(err)
	}
	s, err := d.Open(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	writeRow(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// -wal and -shm files that a crash left behind, not empty (SQLite
	// itself gives an empty one the database's mode), and the web page's
	// key and certificate.
	for name, b := range map[string]string{DatabaseFile + "-wal": "not a wal", DatabaseFile + "-shm": "0000000000", "web-key.pem": "k", "web-cert.pem": "c"} {
		if err := os.WriteFile(filepath.Join(d.Path, name), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	outside := filepath.Join(t.TempDir(), "master.key")
	key, _ := os.ReadFile(d.MasterKeyPath())
	if err := os.WriteFile(outside, key, 0o644); err != nil {
		t.Fatal(err)
	}
	open := map[string]fs.FileMode{
		d.Path:                               0o755,
		d.DatabasePath():                     0o644,
		d.DatabasePath() + "-wal":            0o644,
		d.DatabasePath() + "-shm":            0o640,
		d.MasterKeyPath():                    0o604,
		d.HostKeyPath():                      0o666,
		filepath.Join(d.Path, "web-key.pem"): 0o644,
	}
	for p, m := range open {
		if err := os.Chmod(p, m); err != nil {
			t.Fatal(err)
		}
	}

	var logged bytes.Buffer
	log := zerolog.New(&logged)
	d.MasterKeyFile = outside
	s, err = d.Open(ctx, Options{Logger: &log, SecretFiles: []string{"web-key.pem"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	writeRow(t, s)

	wantModes(t, DirMode, d.Path)
	wantModes(t, SecretMode, d.DatabasePath(), d.DatabasePath()+"-wal", d.DatabasePath()+"-shm",
		filepath.Join(d.Path, MasterKeyFile), d.HostKeyPath(), filepath.Join(d.Path, "web-key.pem"))
	wantModes(t, 0o644, filepath.Join(d.Path, "web-cert.pem"), outside)

	warned := map[string]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(logged.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if m["level"] != "warn" {
			t.Errorf("log line %q: want level warn", line)
		}
		warned[m["file"].(string)] = m
	}
	for p, m := range open {
		w := warned[p]
		if w == nil || w["old_mode"] != fmt.Sprintf("%04o", m) || w["new_mode"] != fmt.Sprintf("%04o", m&^0o077) {
			t.Errorf("warning for %s (was %04o): got %v", p, m, w)
		}
	}
	if w := warned[outside]; w == nil || w["old_mode"] != "0644" || w["error"] == nil {
		t.Errorf("warning for the master key outside the directory: got %v; want one saying it was left 0644", w)
	}
	if len(warned) != len(open)+1 {
		t.Errorf("warned of %d files; want %d:\n%s", len(warned), len(open)+1, logged.String())
	}

	// Once closed, nothing is left to warn about.
	fixes, err := d.CheckModes("web-key.pem")
	if err != nil || len(fixes) != 1 || fixes[0].Path != outside {
		t.Errorf("second check: got %+v, %v; want only the master key outside", fixes, err)
	}
}
