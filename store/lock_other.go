//go:build !unix

package store

import (
	"errors"
	"os"
)

// tryLock refuses: without a file lock postern cannot keep a second server
// off the data directory, and it fails closed rather than run unguarded.
func tryLock(*os.File) error {
	return errors.New("locking a data directory is not supported on this system")
}
