package sftpgate

import (
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/pkg/sftp"
)

// remoteFile relays an open handle's reads and writes to the same file open
// on the target. The request server calls ReadAt and WriteAt from several
// workers at once, which *sftp.File allows, and Close once when the agent
// closes the handle (or the session ends with it open); Close's error is
// the answer to the agent's close, so a write the target failed to flush is
// reported, not lost.
type remoteFile struct {
	f      *sftp.File
	reads  *readAhead
	writes *writeBehind
	// mixed is set for a file opened for both reading and writing: reads
	// must see the writes, so neither is buffered.
	mixed bool
}

func newRemoteFile(f *sftp.File, flags int) *remoteFile {
	r := &remoteFile{f: f, reads: newReadAhead(f), writes: newWriteBehind(f)}
	r.mixed = flags&(os.O_RDWR) != 0
	return r
}

// ReadAt reads from the target. io.EOF is passed on as is: the request
// server tells the end of a file by comparing with it.
func (r *remoteFile) ReadAt(p []byte, off int64) (int, error) {
	var n int
	var err error
	if r.mixed {
		n, err = r.f.ReadAt(p, off)
	} else {
		n, err = r.reads.ReadAt(p, off)
	}
	if err != nil {
		return n, relayError(err)
	}
	return n, nil
}

// WriteAt writes to the target (behind, unless the file is also read).
func (r *remoteFile) WriteAt(p []byte, off int64) (int, error) {
	if r.mixed {
		n, err := r.f.WriteAt(p, off)
		return n, relayError(err)
	}
	n, err := r.writes.WriteAt(p, off)
	return n, relayError(err)
}

// Close sends what is still queued, waits for the reads ahead, and closes
// the file on the target; a write the target failed is reported here.
func (r *remoteFile) Close() error {
	werr := r.writes.Flush()
	r.reads.wait()
	cerr := r.f.Close()
	if werr != nil {
		return relayError(werr)
	}
	return relayError(cerr)
}

// openFlags turns the flags of an SFTP open into the os flags the upstream
// client sends again. O_APPEND is passed through: the target opens the file
// for appending and ignores write offsets, as it would for the agent.
func openFlags(pf sftp.FileOpenFlags) int {
	var f int
	switch {
	case pf.Read && (pf.Write || pf.Append || pf.Creat || pf.Trunc):
		f = os.O_RDWR
	case pf.Read:
		f = os.O_RDONLY
	default:
		f = os.O_WRONLY
	}
	if pf.Append {
		f |= os.O_APPEND
	}
	if pf.Creat {
		f |= os.O_CREATE
	}
	if pf.Trunc {
		f |= os.O_TRUNC
	}
	if pf.Excl {
		f |= os.O_EXCL
	}
	return f
}

// listerAt serves a listing held in memory.
type listerAt []os.FileInfo

// ListAt copies entries from offset on and says io.EOF with the last.
func (l listerAt) ListAt(dst []os.FileInfo, offset int64) (int, error) {
	if offset >= int64(len(l)) {
		return 0, io.EOF
	}
	n := copy(dst, l[offset:])
	if offset+int64(n) >= int64(len(l)) {
		return n, io.EOF
	}
	return n, nil
}

// remoteInfo keeps the target's owner and group on a relayed FileInfo. The
// upstream client's FileInfo carries them in an *sftp.FileStat, which the
// request server does not read; it does read FileInfoUidGid.
type remoteInfo struct {
	os.FileInfo
	uid, gid uint32
}

func (i remoteInfo) Uid() uint32 { return i.uid }
func (i remoteInfo) Gid() uint32 { return i.gid }

// relayInfo wraps fi from the upstream client so that owner and group go
// back to the agent as the target sent them.
func relayInfo(fi os.FileInfo) os.FileInfo {
	if st, ok := fi.Sys().(*sftp.FileStat); ok {
		return remoteInfo{FileInfo: fi, uid: st.UID, gid: st.GID}
	}
	return fi
}

// dirInfo describes a directory of the virtual root: "/" itself or one
// alias. Nothing on a target stands behind it, so it is made up: mode 0555
// for "/" (nothing can be created there) and 0755 for an alias, whose
// contents the target governs.
type dirInfo struct {
	name  string
	perm  fs.FileMode
	mtime time.Time
}

func (d dirInfo) Name() string       { return d.name }
func (d dirInfo) Size() int64        { return 0 }
func (d dirInfo) Mode() fs.FileMode  { return fs.ModeDir | d.perm }
func (d dirInfo) ModTime() time.Time { return d.mtime }
func (d dirInfo) IsDir() bool        { return true }
func (d dirInfo) Sys() any           { return nil }
