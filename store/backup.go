package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Backups.
//
// A backup is a directory laid out like a data directory: the database
// (postern.db), and unless left out the master key and the bastion's host
// key. The database is copied with SQLite's VACUUM INTO, which reads one
// consistent snapshot in a read transaction: `postern serve` keeps
// answering and writing meanwhile (WAL mode lets readers and the writer go
// on together), and the copy holds every transaction committed before the
// snapshot and none after. Copying postern.db with cp while serve runs
// would not be consistent: its WAL file holds the newest transactions.
//
// The master key goes with the database because neither is of use without
// the other: the database's connection keys and notification URLs are
// sealed with it. Together they open every target, so a backup is as
// secret as the data directory (mode 0700, files 0600).

// BackupOptions configure BackupDir.
type BackupOptions struct {
	// WithoutMasterKey leaves the master key out, for a backup kept apart
	// from it.
	WithoutMasterKey bool
	// Extra names more files of the data directory to copy when they exist
	// (the web page's self-signed certificate and key).
	Extra []string
}

// BackupResult says what BackupDir wrote.
type BackupResult struct {
	Dir   string   // the backup directory
	Files []string // the files written, database first
}

// BackupDir writes a backup of src, whose database s is open, into dest,
// which must not exist or be empty. A failure removes what it wrote.
func BackupDir(ctx context.Context, s *Store, src Dir, dest string, opts BackupOptions) (res *BackupResult, err error) {
	if s.dialect == dialectPostgres {
		return nil, invalid("backup copies an SQLite data directory; back up PostgreSQL with its own tools (pg_dump, or the server's base backups), and the master key and host key apart from them")
	}
	if err := emptyOrMissingDir(dest); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dest, DirMode); err != nil {
		return nil, fmt.Errorf("store: backup: %w", err)
	}
	// An empty directory given may be open to others; the umask may have
	// taken bits off a new one.
	if err := os.Chmod(dest, DirMode); err != nil {
		return nil, fmt.Errorf("store: backup: %w", err)
	}
	res = &BackupResult{Dir: dest}
	defer func() {
		if err != nil {
			for _, f := range res.Files {
				os.Remove(f)
			}
		}
	}()
	db := filepath.Join(dest, DatabaseFile)
	if err := s.Backup(ctx, db); err != nil {
		return res, err
	}
	res.Files = append(res.Files, db)
	type fileCopy struct {
		from, to string
		required bool
	}
	copies := []fileCopy{{src.HostKeyPath(), filepath.Join(dest, HostKeyFile), true}}
	if !opts.WithoutMasterKey {
		copies = append(copies, fileCopy{src.MasterKeyPath(), filepath.Join(dest, MasterKeyFile), true})
	}
	for _, name := range opts.Extra {
		copies = append(copies, fileCopy{filepath.Join(src.Path, name), filepath.Join(dest, name), false})
	}
	for _, c := range copies {
		copied, err := copyFile(c.from, c.to)
		if err != nil && (c.required || !errors.Is(err, fs.ErrNotExist)) {
			return res, fmt.Errorf("store: backup: %w", err)
		}
		if copied {
			res.Files = append(res.Files, c.to)
		}
	}
	return res, nil
}

// Backup writes a consistent copy of the database to path, which must not
// exist, while others keep reading and writing it (VACUUM INTO).
func (s *Store) Backup(ctx context.Context, path string) error {
	if s.dialect == dialectPostgres {
		return invalid("backup copies an SQLite database; back up PostgreSQL with its own tools (pg_dump, or the server's base backups) and keep the master key apart from them")
	}
	// The copy is made 0600 before it holds anything: VACUUM INTO writes
	// into an empty file, and would create a missing one 0644.
	created, err := createFileExcl(path, noContent)
	if err != nil {
		return fmt.Errorf("store: backup: %w", err)
	}
	if !created {
		return fmt.Errorf("store: backup: %s exists already", path)
	}
	if _, err := s.db.ExecContext(ctx, `VACUUM INTO ?`, path); err != nil {
		os.Remove(path)
		return fmt.Errorf("store: backup to %s: %w", path, err)
	}
	return nil
}

// emptyOrMissingDir refuses a destination that holds anything: a backup
// never overwrites, or mixes with, another.
func emptyOrMissingDir(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("store: backup: %w", err)
	case len(entries) > 0:
		return invalid("backup directory %s is not empty; give a new one", dir)
	}
	return nil
}

// copyFile copies from to a new file to (mode 0600). It reports false,
// with an error wrapping fs.ErrNotExist, when from does not exist.
func copyFile(from, to string) (bool, error) {
	in, err := os.Open(from)
	if err != nil {
		return false, err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return false, err
	}
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(to)
		return false, err
	}
	return true, nil
}
