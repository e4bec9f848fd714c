package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// LockFile is the file of a data directory that `postern serve` and
// `postern demo` lock while they run.
const LockFile = "postern.lock"

// One postern serves a data directory at a time. A second one would take
// the first one's running operations for interrupted ones (the journal of
// migrations/0004) and audit them as failed, while they still run. The
// lock is an OS file lock (flock) on LockFile: the kernel drops it when the
// process ends however it ends, so a crash never leaves a stale lock, and
// the admin CLI, which takes no lock, keeps working alongside.

// DirLock is a held lock of a data directory. Unlock it when done; the
// process ending drops it too.
type DirLock struct {
	f *os.File
}

// LockedError says that another process holds the data directory's lock.
type LockedError struct {
	Path string // the lock file
	PID  int    // the holder's process id as it wrote it; 0 if it could not be read
}

func (e *LockedError) Error() string {
	holder := "another process"
	if e.PID > 0 {
		holder = "process " + strconv.Itoa(e.PID)
	}
	return fmt.Sprintf("store: the data directory is in use: %s holds %s; one postern serve (or demo) runs per data directory",
		holder, e.Path)
}

// LockPath is the lock file of the data directory.
func (d Dir) LockPath() string { return filepath.Join(d.Path, LockFile) }

// Lock takes the data directory's lock without waiting, and writes this
// process's id into the lock file for the next one to name. It returns a
// *LockedError when another process holds it.
func (d Dir) Lock() (*DirLock, error) {
	path := d.LockPath()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("store: lock the data directory: %w", err)
	}
	if err := tryLock(f); err != nil {
		f.Close()
		if errors.Is(err, errLockHeld) {
			return nil, &LockedError{Path: path, PID: readLockPID(path)}
		}
		return nil, fmt.Errorf("store: lock %s: %w", path, err)
	}
	pid := []byte(strconv.Itoa(os.Getpid()) + "\n")
	err = f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt(pid, 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("store: write %s: %w", path, err)
	}
	return &DirLock{f: f}, nil
}

// Unlock releases the lock and empties the lock file, so that it names no
// process that has stopped.
func (l *DirLock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	_ = l.f.Truncate(0)
	err := l.f.Close() // closing the descriptor drops the flock
	l.f = nil
	if err != nil {
		return fmt.Errorf("store: unlock the data directory: %w", err)
	}
	return nil
}

// errLockHeld is tryLock's answer when another process holds the lock.
var errLockHeld = errors.New("lock held")

// Bounds of reading the holder's pid: a holder writes it just after it
// took the lock, so an empty file is read again a few times, briefly.
const (
	lockPIDTries = 10
	lockPIDPause = 20 * time.Millisecond
)

// readLockPID reads the pid the lock's holder wrote, 0 if there is none.
func readLockPID(path string) int {
	for i := 0; i < lockPIDTries; i++ {
		b, err := os.ReadFile(path)
		if err != nil {
			return 0
		}
		if s := strings.TrimSpace(string(b)); s != "" {
			pid, err := strconv.Atoi(s)
			if err != nil || pid <= 0 {
				return 0
			}
			return pid
		}
		time.Sleep(lockPIDPause)
	}
	return 0
}
