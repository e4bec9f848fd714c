package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/rs/zerolog"
)

// File modes.
//
// The data directory holds the installation's secrets: the master key, the
// bastion's host key, the web page's TLS key, and the SQLite database with
// admins' password hashes and the audit log (its -wal and -shm files hold
// the newest of both). The directory is 0700 and these files 0600, set
// when they are made whatever the umask, and checked by Dir.Open: a
// directory or file that its group or others may reach loses those bits,
// with a warning naming it and the mode it had.
//
// SQLite creates the database file 0644 (less the umask) when it does not
// exist, and its -wal, -shm and -journal files with the mode of the
// database file. So openDB creates the database file 0600 first, and the
// files SQLite adds beside it follow (TestSQLiteJournalFilesFollowDBMode).

// Modes of the data directory and of its secret files.
const (
	DirMode    fs.FileMode = 0o700
	SecretMode fs.FileMode = 0o600
)

// notOwnerBits are the permission bits of group and others.
const notOwnerBits fs.FileMode = 0o077

// ModeFix is a directory or file of a data directory that its group or
// others could reach, found by CheckModes.
type ModeFix struct {
	Path string
	Old  fs.FileMode // the permission bits it had
	New  fs.FileMode // the permission bits it has now; Old when not changed
	// Err says why the mode was not changed: a file the admin keeps
	// outside the data directory (POSTERN_MASTER_KEY_FILE, --host-key-file)
	// is only warned about, and chmod may fail (a read-only mount).
	Err error
}

// errNotOurs is ModeFix.Err for a secret file outside the data directory.
var errNotOurs = errors.New("outside the data directory: change its mode yourself")

// secretNames are the data directory's files that only its owner may read.
func secretNames() []string {
	db := DatabaseFile
	return []string{db, db + "-wal", db + "-shm", db + "-journal", MasterKeyFile, HostKeyFile, LockFile}
}

// CheckModes makes the data directory and its secret files (the database
// and its -wal, -shm and -journal files, the master key, the host key, the
// lock file, and extra, names of more files in the directory such as the
// web page's TLS key) unreachable by group and others: the directory
// loses its group and other bits (0755 becomes 0700), and so does each
// file (0644 becomes 0600). Missing files are skipped, and so are symbolic
// links in the directory (chmod would change what they point to). A master
// key or host key file outside the directory is not changed, only
// reported, with Err set. It returns what it found.
func (d Dir) CheckModes(extra ...string) ([]ModeFix, error) {
	var fixes []ModeFix
	st, err := os.Stat(d.Path)
	if err != nil {
		return nil, fmt.Errorf("store: data directory: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("store: data directory %s is not a directory", d.Path)
	}
	if fix, ok := fixMode(d.Path, st.Mode().Perm(), true); ok {
		fixes = append(fixes, fix)
	}
	var paths []string
	for _, name := range append(secretNames(), extra...) {
		paths = append(paths, filepath.Join(d.Path, name))
	}
	for _, outside := range []string{d.MasterKeyFile, d.HostKeyFile} {
		if outside == "" {
			continue
		}
		if sameFile(filepath.Dir(outside), d.Path) {
			paths = append(paths, outside)
		} else if st, err := os.Stat(outside); err == nil && st.Mode().IsRegular() {
			if fix, ok := fixMode(outside, st.Mode().Perm(), false); ok {
				fixes = append(fixes, fix)
			}
		}
	}
	for _, p := range paths {
		st, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fixes, fmt.Errorf("store: %w", err)
		}
		if !st.Mode().IsRegular() {
			continue
		}
		if fix, ok := fixMode(p, st.Mode().Perm(), true); ok {
			fixes = append(fixes, fix)
		}
	}
	return fixes, nil
}

// fixMode clears the group and other bits of path, whose mode is perm, or
// with change false only reports them. It reports false when there were
// none.
func fixMode(path string, perm fs.FileMode, change bool) (ModeFix, bool) {
	if perm&notOwnerBits == 0 {
		return ModeFix{}, false
	}
	fix := ModeFix{Path: path, Old: perm, New: perm}
	if !change {
		fix.Err = errNotOurs
		return fix, true
	}
	if err := os.Chmod(path, perm&^notOwnerBits); err != nil {
		fix.Err = err
		return fix, true
	}
	fix.New = perm &^ notOwnerBits
	return fix, true
}

// sameFile reports whether a and b name the same directory.
func sameFile(a, b string) bool {
	sa, err := os.Stat(a)
	if err != nil {
		return false
	}
	sb, err := os.Stat(b)
	return err == nil && os.SameFile(sa, sb)
}

// checkModes is CheckModes with each finding logged as a warning.
func (d Dir) checkModes(log *zerolog.Logger, extra []string) error {
	fixes, err := d.CheckModes(extra...)
	LogModeFixes(log, fixes)
	return err
}

// LogModeFixes logs what CheckModes found, one warning each, to log (none
// if nil).
func LogModeFixes(log *zerolog.Logger, fixes []ModeFix) {
	if log == nil {
		return
	}
	for _, f := range fixes {
		ev := log.Warn().Str("file", f.Path).Str("old_mode", fmt.Sprintf("%04o", f.Old))
		if f.Err != nil {
			ev.Str("mode", fmt.Sprintf("%04o", f.New)).AnErr("error", f.Err).
				Msg("a secret file is readable by others and was left so")
			continue
		}
		ev.Str("new_mode", fmt.Sprintf("%04o", f.New)).Msg("a data directory file was open to others; its mode is fixed")
	}
}
