package auditsink

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/postern/postern/store"
)

// Defaults of the JSON lines file's rotation.
const (
	DefaultFileMaxSize = 100 << 20 // bytes
	DefaultFileKeep    = 5         // rotated files besides the current one
)

// FileSink appends each row's JSON record (record.go) as one line to a
// file, and syncs the file before a batch counts as delivered. A restart
// appends to the file that is there.
//
// Rotation is by size: before a batch that would take the file past
// maxSize (unless the file is empty), the file is closed and renamed PATH.1,
// PATH.1 becomes PATH.2 and so on, the one past keep is deleted, and a new
// PATH is opened; a batch is never split over two files. A reader that
// follows PATH by name (tail -F, Vector's or Fluent Bit's file inputs)
// sees the new file; rows are never rewritten, only renamed and, past
// keep, deleted. The files are made mode 0600 in a directory that must
// exist.
type FileSink struct {
	path    string
	maxSize int64
	keep    int
	f       *os.File
	size    int64
}

// NewFileSink writes to path, rotating at maxSize bytes and keeping keep
// rotated files (the defaults where zero or less).
func NewFileSink(path string, maxSize int64, keep int) *FileSink {
	if maxSize <= 0 {
		maxSize = DefaultFileMaxSize
	}
	if keep <= 0 {
		keep = DefaultFileKeep
	}
	return &FileSink{path: path, maxSize: maxSize, keep: keep}
}

// Send implements Sink.
func (s *FileSink) Send(_ context.Context, rows []store.AuditRow) error {
	var buf []byte
	for i := range rows {
		rec, err := Record(&rows[i])
		if err != nil {
			return err
		}
		buf = append(append(buf, rec...), '\n')
	}
	if err := s.open(); err != nil {
		return err
	}
	if s.size > 0 && s.size+int64(len(buf)) > s.maxSize {
		if err := s.rotate(); err != nil {
			return err
		}
	}
	before := s.size
	n, err := s.f.Write(buf)
	s.size += int64(n)
	if err != nil {
		// No half line for the retry to follow: cut what was written.
		if s.f.Truncate(before) == nil {
			s.size = before
		}
		return fmt.Errorf("auditsink: file: %w", err)
	}
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("auditsink: file: %w", err)
	}
	return nil
}

// open opens the file for appending if it is not open.
func (s *FileSink) open() error {
	if s.f != nil {
		return nil
	}
	f, err := os.OpenFile(s.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("auditsink: file: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("auditsink: file: %w", err)
	}
	s.f, s.size = f, fi.Size()
	return nil
}

// rotate closes the file, shifts the rotated ones by one (deleting the
// one past keep), renames the file PATH.1 and opens a new PATH.
func (s *FileSink) rotate() error {
	if err := s.Close(); err != nil {
		return err
	}
	name := func(i int) string { return s.path + "." + strconv.Itoa(i) }
	if err := os.Remove(name(s.keep)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("auditsink: file: rotate: %w", err)
	}
	for i := s.keep - 1; i >= 1; i-- {
		if err := os.Rename(name(i), name(i+1)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("auditsink: file: rotate: %w", err)
		}
	}
	if err := os.Rename(s.path, name(1)); err != nil {
		return fmt.Errorf("auditsink: file: rotate: %w", err)
	}
	if err := syncDir(filepath.Dir(s.path)); err != nil {
		return err
	}
	return s.open()
}

// syncDir makes the renames of a rotation durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("auditsink: file: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("auditsink: file: sync %s: %w", dir, err)
	}
	return nil
}

// Close implements Sink.
func (s *FileSink) Close() error {
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	if err != nil {
		return fmt.Errorf("auditsink: file: %w", err)
	}
	return nil
}
