package sftpgate

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"testing"

	"github.com/pkg/sftp"
)

// TestReadAheadPatterns reads an upstream file sequentially, from a middle
// offset (reget), backwards and at random, through the read-ahead, and
// compares every byte.
func TestReadAheadPatterns(t *testing.T) {
	data := make([]byte, 3*chunkSize+12345)
	rand.Read(data)
	tests := []struct {
		name string
		offs func() []int64
		size int
	}{
		{"sequential 32 KiB", func() []int64 { return seq(0, int64(len(data)), 32<<10) }, 32 << 10},
		{"from the middle", func() []int64 { return seq(chunkSize+100, int64(len(data)), 32<<10) }, 32 << 10},
		{"backwards", func() []int64 { return rev(seq(0, int64(len(data)), 40<<10)) }, 40 << 10},
		{"one big read", func() []int64 { return []int64{0} }, len(data) + 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := uploadForTest(t, data)
			ra := newReadAhead(f)
			defer func() { ra.wait(); f.Close() }()
			for _, off := range tt.offs() {
				p := make([]byte, tt.size)
				n, err := ra.ReadAt(p, off)
				if err != nil && err != io.EOF {
					t.Fatalf("ReadAt(%d): %v", off, err)
				}
				end := min(off+int64(tt.size), int64(len(data)))
				if want := data[off:end]; !bytes.Equal(p[:n], want) {
					t.Fatalf("ReadAt(%d) = %d bytes differing from the file; want %d", off, n, len(want))
				}
				if end == int64(len(data)) && n == len(p) {
					t.Fatalf("ReadAt(%d) filled %d bytes past the end", off, n)
				}
			}
			if n, err := ra.ReadAt(make([]byte, 10), int64(len(data))); n != 0 || err != io.EOF {
				t.Errorf("read at the end = %d, %v; want 0, EOF", n, err)
			}
		})
	}
}

// TestWriteBehind writes a file in out-of-order and contiguous pieces and
// checks the target's copy after Flush.
func TestWriteBehind(t *testing.T) {
	data := make([]byte, 2*chunkSize+777)
	rand.Read(data)
	f := uploadForTest(t, nil)
	w := newWriteBehind(f)
	offs := seq(0, int64(len(data)), 32<<10)
	offs[1], offs[2] = offs[2], offs[1]
	for _, off := range offs {
		end := min(off+32<<10, int64(len(data)))
		buf := append([]byte(nil), data[off:end]...)
		if _, err := w.WriteAt(buf, off); err != nil {
			t.Fatal(err)
		}
		for i := range buf {
			buf[i] = 0 // the caller may reuse its buffer at once
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(data))
	if _, err := f.ReadAt(got, 0); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	f.Close()
	if !bytes.Equal(got, data) {
		t.Error("target copy differs from what was written")
	}
}

func seq(from, to, step int64) []int64 {
	var out []int64
	for o := from; o < to; o += step {
		out = append(out, o)
	}
	return out
}

func rev(s []int64) []int64 {
	for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
		s[i], s[j] = s[j], s[i]
	}
	return s
}

// uploadForTest returns data as an open upstream file on an in-memory
// target, opened for reading and writing.
func uploadForTest(t *testing.T, data []byte) *sftp.File {
	t.Helper()
	c, closeFn := newMemTarget().session(t)
	t.Cleanup(func() { closeFn() })
	f, err := c.OpenFile("/f", os.O_RDWR|os.O_CREATE)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > 0 {
		if _, err := f.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// TestWriteBehindConcurrent writes from 8 goroutines at once, as the
// request server's workers do, and checks every byte landed where it was
// written.
func TestWriteBehindConcurrent(t *testing.T) {
	data := make([]byte, 6*chunkSize+999)
	rand.Read(data)
	f := uploadForTest(t, nil)
	w := newWriteBehind(f)
	offs := make(chan int64, 1024)
	for _, o := range seq(0, int64(len(data)), 32<<10) {
		offs <- o
	}
	close(offs)
	done := make(chan error, 8)
	for g := 0; g < 8; g++ {
		go func() {
			for off := range offs {
				end := min(off+32<<10, int64(len(data)))
				if _, err := w.WriteAt(append([]byte(nil), data[off:end]...), off); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	for g := 0; g < 8; g++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(data))
	if _, err := f.ReadAt(got, 0); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Error("target copy differs from what 8 concurrent writers wrote")
	}
}

// TestReadAheadConcurrentReuse: eight readers take the file in overlapping
// 32 KiB reads at once, as pkg/sftp's workers do, several times over, so
// that chunk buffers go back to the pool and are reused while other reads
// still copy out of their chunks; every byte must still be the file's.
func TestReadAheadConcurrentReuse(t *testing.T) {
	data := make([]byte, 6*chunkSize+4321)
	rand.Read(data)
	f := uploadForTest(t, data)
	ra := newReadAhead(f)
	defer func() { ra.wait(); f.Close() }()
	const size = 32 << 10
	for round := 0; round < 3; round++ {
		// Overlapping starts: every 24 KiB, so neighbouring reads share
		// bytes and a chunk's bytes are handed out more than once.
		offs := seq(0, int64(len(data)), 24<<10)
		errs := make(chan error, 8)
		next := make(chan int64)
		go func() {
			defer close(next)
			for _, off := range offs {
				next <- off
			}
		}()
		for w := 0; w < 8; w++ {
			go func() {
				var err error
				for off := range next {
					p := make([]byte, size)
					n, rerr := ra.ReadAt(p, off)
					if rerr != nil && rerr != io.EOF && err == nil {
						err = rerr
					}
					end := min(off+size, int64(len(data)))
					if !bytes.Equal(p[:n], data[off:end]) && err == nil {
						err = fmt.Errorf("round %d: ReadAt(%d) = %d bytes differing from the file; want %d", round, off, n, end-off)
					}
				}
				errs <- err
			}()
		}
		for w := 0; w < 8; w++ {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
	}
}
