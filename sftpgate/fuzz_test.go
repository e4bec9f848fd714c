package sftpgate

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pkg/sftp"
	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/postern/postern/internal/testwait"
	"github.com/postern/postern/policy"
)

// fuzzAliases are the agent's aliases in FuzzSFTPRequests; fuzzHidden is a
// target that exists but that the agent holds no grant for: the gate must
// never dial it.
var fuzzAliases = []string{"web", "db"}

const fuzzHidden = "secret"

// FuzzSFTPRequests feeds arbitrary bytes to the gate as an agent's SFTP
// packet stream, in the virtual root or (first byte odd) the fixed view of
// "web", with in-memory targets behind it that record every path they are
// asked about. It checks that the gate
//
//   - does not panic, and Serve returns once the stream ends;
//   - leaves no goroutine behind (its own, the request server's, or an
//     upstream session's);
//   - dials only the agent's aliases, never another target;
//   - touches on a target only paths the Decider allowed for that alias:
//     every path a target saw is absolute, clean, free of control bytes
//     and no longer than MaxPathLen, and was in an allowed operation's
//     Paths. The Decider refuses destructive operations and any path with
//     "deny" in it, so neither may ever reach a target.
func FuzzSFTPRequests(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
		fixed := ""
		if len(data) > 0 && data[0]&1 == 1 {
			fixed = "web"
		}
		if len(data) > 0 {
			data = data[1:]
		}
		// In a bubble, every bound of the gate (a target's answer, the
		// drain of a session the agent ended) and the stream's own
		// pause run on fake time: an input that leaves the gate
		// waiting for an answer that never comes ends as soon as
		// everything else is blocked, not after real seconds, which
		// Go's fuzzing worker would take for a hang (it gives one input
		// 10 s) and which a busy machine could stretch.
		synctest.Test(t, func(t *testing.T) { runFuzzSession(t, fixed, data) })
	})
}

// fuzzFS is one in-memory target that records what it is asked to touch.
type fuzzFS struct {
	alias string
	raw   sftp.Handlers // the unrecorded handlers, for seeding
	rec   *fuzzRecorder
}

// fuzzRecorder collects the targets' paths and the Decider's verdicts.
type fuzzRecorder struct {
	// mu protects allowed, informed, seen, dialed, finishes and finished.
	mu       sync.Mutex
	allowed  map[string]map[string]bool // alias → paths in allowed operations
	informed map[string]map[string]bool // alias → rename destinations, which the gate may lstat
	seen     []fuzzTouch
	dialed   []string
	finishes int // operations allowed
	finished int // outcomes recorded
}

type fuzzTouch struct {
	alias, method string
	paths         []string
}

func (r *fuzzRecorder) touch(alias, method string, paths ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, fuzzTouch{alias, method, paths})
}

// recordingHandlers wraps an in-memory file system so that every request a
// target serves is recorded before it is served.
type recordingHandlers struct {
	fs    *fuzzFS
	inner sftp.Handlers
}

func (h *recordingHandlers) note(r *sftp.Request) {
	paths := []string{r.Filepath}
	switch r.Method {
	case "Rename", "PosixRename", "Link", "Symlink":
		paths = append(paths, r.Target)
	}
	h.fs.rec.touch(h.fs.alias, r.Method, paths...)
}

func (h *recordingHandlers) Fileread(r *sftp.Request) (io.ReaderAt, error) {
	h.note(r)
	return h.inner.FileGet.Fileread(r)
}

// fuzzMaxFile bounds a file on the fuzz targets. pkg/sftp's in-memory
// files are slices that grow to the end of a write or a truncate's size,
// so a fuzzed offset or size of gigabytes would take the fuzzing worker's
// memory (it did, in CI); a real target makes a sparse file, or says its
// disk is full, as this one does.
const fuzzMaxFile = 1 << 20

// errFuzzFull is a fuzz target's answer to a file past fuzzMaxFile.
var errFuzzFull = errors.New("fuzz target: file too large")

func (h *recordingHandlers) Filewrite(r *sftp.Request) (io.WriterAt, error) {
	h.note(r)
	w, err := h.inner.FilePut.Filewrite(r)
	if err != nil {
		return nil, err
	}
	return boundedFile{w: w}, nil
}

func (h *recordingHandlers) OpenFile(r *sftp.Request) (sftp.WriterAtReaderAt, error) {
	h.note(r)
	f, err := h.inner.FilePut.(sftp.OpenFileWriter).OpenFile(r)
	if err != nil {
		return nil, err
	}
	return boundedFile{w: f, r: f}, nil
}

func (h *recordingHandlers) Filecmd(r *sftp.Request) error {
	h.note(r)
	if r.Method == "Setstat" && r.AttrFlags().Size && r.Attributes().Size > fuzzMaxFile {
		return errFuzzFull
	}
	return h.inner.FileCmd.Filecmd(r)
}

// boundedFile is a fuzz target's open file, whose writes end at
// fuzzMaxFile.
type boundedFile struct {
	w io.WriterAt
	r io.ReaderAt // nil for a handle opened for writing only
}

func (f boundedFile) WriteAt(b []byte, off int64) (int, error) {
	if off < 0 || off > fuzzMaxFile || int64(len(b)) > fuzzMaxFile-off {
		return 0, errFuzzFull
	}
	return f.w.WriteAt(b, off)
}

func (f boundedFile) ReadAt(b []byte, off int64) (int, error) {
	if f.r == nil {
		return 0, os.ErrPermission
	}
	return f.r.ReadAt(b, off)
}

func (h *recordingHandlers) PosixRename(r *sftp.Request) error {
	h.note(r)
	return h.inner.FileCmd.(sftp.PosixRenameFileCmder).PosixRename(r)
}

func (h *recordingHandlers) StatVFS(r *sftp.Request) (*sftp.StatVFS, error) {
	h.note(r)
	return h.inner.FileCmd.(sftp.StatVFSFileCmder).StatVFS(r)
}

func (h *recordingHandlers) Filelist(r *sftp.Request) (sftp.ListerAt, error) {
	h.note(r)
	return h.inner.FileList.Filelist(r)
}

func (h *recordingHandlers) Lstat(r *sftp.Request) (sftp.ListerAt, error) {
	h.note(r)
	return h.inner.FileList.(sftp.LstatFileLister).Lstat(r)
}

func (h *recordingHandlers) Readlink(p string) (string, error) {
	h.fs.rec.touch(h.fs.alias, "Readlink", p)
	return h.inner.FileList.(sftp.ReadlinkFileLister).Readlink(p)
}

// fuzzHome is the fixed view's home directory on "web".
const fuzzHome = "/home/u"

func runFuzzSession(t *testing.T, fixed string, stream []byte) {
	rec := &fuzzRecorder{allowed: map[string]map[string]bool{}, informed: map[string]map[string]bool{}}
	targets := map[string]*fuzzFS{}
	for _, alias := range append([]string{fuzzHidden}, fuzzAliases...) {
		fs := &fuzzFS{alias: alias, raw: sftp.InMemHandler(), rec: rec}
		targets[alias] = fs
		seedFuzzTarget(t, fs)
	}
	decide := func(ctx context.Context, op Op) (Finish, error) {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if op.Method == "rename" || op.Method == "posix-rename" {
			// The gate lstats a rename's destination to tell the
			// Decider what it replaces, before the decision.
			if rec.informed[op.Alias] == nil {
				rec.informed[op.Alias] = map[string]bool{}
			}
			rec.informed[op.Alias][path.Clean(op.Paths[1])] = true
		}
		for _, p := range op.Paths {
			if strings.Contains(p, "deny") {
				return nil, fmt.Errorf("paths with deny are refused")
			}
		}
		if op.Class == policy.Destructive {
			return nil, fmt.Errorf("destructive operations are refused")
		}
		if rec.allowed[op.Alias] == nil {
			rec.allowed[op.Alias] = map[string]bool{}
		}
		for _, p := range op.Paths {
			// A target sees a path cleaned; the fixed view decides it as
			// sent (joined to the start directory if relative).
			rec.allowed[op.Alias][p] = true
			rec.allowed[op.Alias][path.Clean(p)] = true
		}
		rec.finishes++
		return func(Outcome) {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			rec.finished++
		}, nil
	}
	cfg := Config{
		Aliases: fuzzAliases,
		Fixed:   fixed,
		Decide:  decide,
		Logger:  zerolog.Nop(),
		Stderr:  io.Discard,
		Dial: func(ctx context.Context, alias string) (*Upstream, error) {
			rec.mu.Lock()
			rec.dialed = append(rec.dialed, alias)
			rec.mu.Unlock()
			fs := targets[alias]
			if fs == nil {
				return nil, fmt.Errorf("no target %s", alias)
			}
			h := &recordingHandlers{fs: fs, inner: fs.raw}
			start := ""
			if alias == fixed {
				start = fuzzHome
			}
			m := &memTarget{handlers: sftp.Handlers{FileGet: h, FilePut: h, FileCmd: h, FileList: h}, start: start}
			conn, closeFn := m.servePipe(t)
			return &Upstream{Conn: conn, Close: closeFn}, nil
		},
	}
	cfg = patient(t, cfg)
	agent := newStreamConn(stream, testwait.Deadline(t))
	done := make(chan error, 1)
	go func() { done <- Serve(context.Background(), agent, cfg) }()
	if err := testwait.Recv(t, "Serve to return after the stream's end", done); err != nil && !strings.HasPrefix(err.Error(), "sftpgate: ") {
		t.Errorf("Serve: got %v; want nil or an error starting with sftpgate:", err)
	}
	if agent.stalled.Load() {
		agent.mu.Lock()
		t.Errorf("the gate answered %d of the %d whole requests in the stream and went on reading; want every one answered", agent.got, agent.want)
		agent.mu.Unlock()
	}

	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.finished != rec.finishes {
		t.Errorf("%d operations allowed, %d outcomes recorded; want one each", rec.finishes, rec.finished)
	}
	allowedAlias := map[string]bool{}
	for _, a := range fuzzAliases {
		allowedAlias[a] = fixed == "" || a == fixed
	}
	for _, a := range rec.dialed {
		if !allowedAlias[a] {
			t.Errorf("dialed %q; want only %v", a, fuzzAliases)
		}
	}
	for _, tc := range rec.seen {
		if !allowedAlias[tc.alias] {
			t.Errorf("target %s saw %s %q; want it untouched", tc.alias, tc.method, tc.paths)
			continue
		}
		if tc.method == "Remove" || tc.method == "Rmdir" {
			t.Errorf("target %s saw %s %q; destructive operations are refused", tc.alias, tc.method, tc.paths)
		}
		for i, p := range tc.paths {
			if tc.method == "Symlink" && i == 0 {
				// The link's content, not a path the target touches; it
				// was decided as sent (relative) or mapped (absolute).
				if !rec.allowed[tc.alias][p] {
					t.Errorf("target %s: symlink content %q was not in an allowed operation", tc.alias, p)
				}
				continue
			}
			if !path.IsAbs(p) || path.Clean(p) != p || checkPath(p) != nil {
				t.Errorf("target %s: %s %q; want an absolute clean path without control bytes", tc.alias, tc.method, p)
			}
			if !rec.allowed[tc.alias][p] && !(tc.method == "Lstat" && rec.informed[tc.alias][p]) {
				t.Errorf("target %s: %s %q was not in an operation the Decider allowed", tc.alias, tc.method, p)
			}
		}
	}
}

// seedFuzzTarget writes a few files and directories on a target through
// its handlers, around the gate and unrecorded.
func seedFuzzTarget(t *testing.T, fs *fuzzFS) {
	cmd := func(method, p, target string) {
		r := sftp.NewRequest(method, p)
		r.Target = target
		if err := fs.raw.FileCmd.Filecmd(r); err != nil {
			t.Fatalf("seed %s %s: %v", method, p, err)
		}
	}
	for _, d := range []string{"/etc", "/home", fuzzHome, "/srv", "/srv/deny", "/srv/app"} {
		cmd("Mkdir", d, "")
	}
	for _, p := range []string{"/etc/hosts", fuzzHome + "/notes.txt", "/srv/deny/key", "/srv/app/a"} {
		r := sftp.NewRequest("Put", p)
		r.Flags = 0x2 | 0x8 // SSH_FXF_WRITE | SSH_FXF_CREAT
		w, err := fs.raw.FilePut.Filewrite(r)
		if err != nil {
			t.Fatalf("seed %s: %v", p, err)
		}
		if _, err := w.WriteAt([]byte("content of "+fs.alias+p), 0); err != nil {
			t.Fatal(err)
		}
	}
	cmd("Symlink", "/etc/hosts", "/srv/app/link")
}

// streamConn is the agent's end for the fuzzer: it reads the fuzzed
// stream, counts the gate's answers, and throws them away.
//
// It says EOF only once the gate has answered as many packets as the stream
// holds whole (or has stopped reading), because an agent that ends its side
// makes the gate stop its work at once: without the pause, most requests of
// a stream would be cut short and the fuzzer would see little of the
// handlers. A gate that never answered a request would leave a real
// agent's client waiting for ever: the pause then lasts until end, the
// test's deadline, and stalled says so.
type streamConn struct {
	r        *bytes.Reader
	want     int           // whole request packets in the stream
	answered chan struct{} // closed when the gate wrote want packets
	closed   chan struct{} // closed when the gate closes the stream: it stopped reading
	once     sync.Once
	end      time.Time   // when the pause gives up
	stalled  atomic.Bool // the pause gave up: a request went unanswered

	// mu protects got and partial.
	mu      sync.Mutex
	got     int
	partial []byte // the start of an answer not yet whole
}

func newStreamConn(stream []byte, end time.Time) *streamConn {
	c := &streamConn{r: bytes.NewReader(stream), want: countPackets(stream), answered: make(chan struct{}), closed: make(chan struct{}), end: end}
	if c.want == 0 {
		close(c.answered)
	}
	return c
}

// countPackets counts the whole packets at the start of stream that the
// request server will read, up to the first it refuses (empty or over
// pkg/sftp's 256 KiB limit).
func countPackets(stream []byte) int {
	n := 0
	for len(stream) >= 4 {
		l := binary.BigEndian.Uint32(stream)
		if l == 0 || l > 256<<10 || uint64(len(stream)-4) < uint64(l) {
			break
		}
		stream = stream[4+l:]
		n++
	}
	return n
}

func (c *streamConn) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if err == io.EOF {
		timer := time.NewTimer(time.Until(c.end))
		defer timer.Stop()
		select {
		case <-c.answered:
		case <-c.closed:
		case <-timer.C:
			c.stalled.Store(true)
		}
	}
	return n, err
}

func (c *streamConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.partial = append(c.partial, p...)
	for len(c.partial) >= 4 {
		l := int(binary.BigEndian.Uint32(c.partial))
		if len(c.partial)-4 < l {
			break
		}
		c.partial = c.partial[4+l:]
		c.got++
		if c.got == c.want {
			close(c.answered)
		}
	}
	return len(p), nil
}

// Close is the gate giving up on the stream (a fatal error): a Read
// waiting for answers that will not come returns at once.
func (c *streamConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return nil
}

// fuzzPacket builds one SFTP packet: type, then fields (uint32, uint64,
// string or []byte, each as the protocol encodes it).
func fuzzPacket(typ byte, fields ...any) []byte {
	b := []byte{0, 0, 0, 0, typ}
	for _, f := range fields {
		switch v := f.(type) {
		case uint32:
			b = binary.BigEndian.AppendUint32(b, v)
		case uint64:
			b = binary.BigEndian.AppendUint64(b, v)
		case string:
			b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
			b = append(b, v...)
		case []byte:
			b = append(b, v...)
		default:
			panic(fmt.Sprintf("fuzzPacket: field %T", f))
		}
	}
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// fuzzSeeds are packet streams that reach every handler of the gate, in
// both views: the first byte chooses the view (odd: fixed "web").
func fuzzSeeds() [][]byte {
	const (
		fxRead   = 0x1
		fxWrite  = 0x2
		fxAppend = 0x4
		fxCreat  = 0x8
		fxTrunc  = 0x10
		attrSize = 0x1
		attrPerm = 0x4
		attrTime = 0x8
	)
	noAttrs := uint32(0)
	init := fuzzPacket(fxpInit, uint32(3))
	stream := func(view byte, pkts ...[]byte) []byte {
		return append([]byte{view}, bytes.Join(append([][]byte{init}, pkts...), nil)...)
	}
	var seeds [][]byte
	for _, view := range []byte{0, 1} {
		p := func(s string) string {
			if view == 1 {
				return strings.TrimPrefix(s, "/web")
			}
			return s
		}
		seeds = append(seeds,
			stream(view),
			stream(view, fuzzPacket(fxpRealpath, uint32(1), "."), fuzzPacket(fxpRealpath, uint32(2), p("/web/../db/etc"))),
			stream(view, fuzzPacket(fxpStat, uint32(1), p("/web/etc/hosts")), fuzzPacket(7, uint32(2), p("/web/srv/app/link")),
				fuzzPacket(fxpReadlink, uint32(3), p("/web/srv/app/link"))),
			stream(view, fuzzPacket(11, uint32(1), p("/web/etc")), fuzzPacket(12, uint32(2), "1"), fuzzPacket(12, uint32(3), "1"), fuzzPacket(4, uint32(4), "1")),
			stream(view, fuzzPacket(fxpOpen, uint32(1), p("/web/etc/hosts"), uint32(fxRead), noAttrs),
				fuzzPacket(5, uint32(2), "1", uint64(0), uint32(4096)), fuzzPacket(8, uint32(3), "1"), fuzzPacket(4, uint32(4), "1")),
			stream(view, fuzzPacket(fxpOpen, uint32(1), p("/web/srv/new"), uint32(fxWrite|fxCreat|fxTrunc), noAttrs),
				fuzzPacket(6, uint32(2), "1", uint64(0), "hello"), fuzzPacket(6, uint32(3), "1", uint64(1<<20), "far"),
				fuzzPacket(10, uint32(4), "1", uint32(attrPerm), uint32(0o600)), fuzzPacket(4, uint32(5), "1")),
			stream(view, fuzzPacket(fxpOpen, uint32(1), p("/web/srv/app/a"), uint32(fxRead|fxWrite|fxAppend), noAttrs),
				fuzzPacket(6, uint32(2), "1", uint64(0), "x"), fuzzPacket(5, uint32(3), "1", uint64(0), uint32(10))),
			stream(view, fuzzPacket(fxpMkdir, uint32(1), p("/web/srv/d"), noAttrs), fuzzPacket(fxpRmdir, uint32(2), p("/web/srv/d")),
				fuzzPacket(fxpRemove, uint32(3), p("/web/etc/hosts"))),
			stream(view, fuzzPacket(fxpRename, uint32(1), p("/web/srv/app/a"), p("/web/srv/app/b")),
				fuzzPacket(fxpRename, uint32(2), "/web/srv/app/a", "/db/srv/app/a"),
				fuzzPacket(200, uint32(3), "posix-rename@openssh.com", p("/web/srv/app/b"), p("/web/srv/deny/b")),
				fuzzPacket(200, uint32(4), "hardlink@openssh.com", p("/web/etc/hosts"), p("/web/srv/h")),
				fuzzPacket(200, uint32(5), "statvfs@openssh.com", p("/web/etc"))),
			stream(view, fuzzPacket(fxpSymlink, uint32(1), "../../../secret/etc", p("/web/srv/l1")),
				fuzzPacket(fxpSymlink, uint32(2), "/db/etc/hosts", p("/web/srv/l2")),
				fuzzPacket(fxpSymlink, uint32(3), p("/web/etc/hosts"), p("/web/srv/l3"))),
			stream(view, fuzzPacket(9, uint32(1), p("/web/srv/app/a"), uint32(attrSize|attrPerm|attrTime), uint64(3), uint32(0o4755), uint32(1), uint32(2))),
			stream(view, fuzzPacket(fxpStat, uint32(1), "/secret/etc/hosts"), fuzzPacket(fxpOpen, uint32(2), "/secret/etc/hosts", uint32(fxRead), noAttrs),
				fuzzPacket(fxpMkdir, uint32(3), "/../secret/x", noAttrs), fuzzPacket(fxpStat, uint32(4), "/web/a\x00b"),
				fuzzPacket(fxpStat, uint32(5), strings.Repeat("/..", 2000)+"/secret")),
			stream(view, fuzzPacket(fxpMkdir, uint32(1), "/", noAttrs), fuzzPacket(fxpMkdir, uint32(2), "/web", noAttrs),
				fuzzPacket(fxpRemove, uint32(3), "/db"), fuzzPacket(fxpOpen, uint32(4), "/", uint32(fxRead), noAttrs)),
			// Every extension, on paths and on handles.
			stream(view, fuzzPacket(fxpOpen, uint32(1), p("/web/srv/app/a"), uint32(fxRead), noAttrs),
				fuzzPacket(fxpOpen, uint32(2), p("/web/srv/copy"), uint32(fxWrite|fxCreat), uint32(attrPerm), uint32(0o600)),
				fuzzPacket(200, uint32(3), "copy-data", "1", uint64(0), uint64(0), "2", uint64(0)),
				fuzzPacket(200, uint32(4), "fsync@openssh.com", "2"), fuzzPacket(200, uint32(5), "fstatvfs@openssh.com", "1"),
				fuzzPacket(10, uint32(6), "2", uint32(attrSize), uint64(0)), fuzzPacket(10, uint32(7), "1", uint32(attrPerm), uint32(0o777)),
				fuzzPacket(4, uint32(8), "1"), fuzzPacket(4, uint32(9), "2"), fuzzPacket(4, uint32(10), "2")),
			stream(view, fuzzPacket(200, uint32(1), "limits@openssh.com"), fuzzPacket(200, uint32(2), "expand-path@openssh.com", "~/x"),
				fuzzPacket(200, uint32(3), "home-directory", ""), fuzzPacket(200, uint32(4), "home-directory", "root"),
				fuzzPacket(200, uint32(5), "users-groups-by-id@openssh.com", "\x00\x00\x00\x00", "\x00\x00\x00\x01"),
				fuzzPacket(200, uint32(6), "lsetstat@openssh.com", p("/web/srv/app/link"), uint32(attrTime), uint32(1), uint32(2)),
				fuzzPacket(200, uint32(7), "nosuch@example.com", "x"), fuzzPacket(99, uint32(8), "x")),
			// A setstat that rides on a write, after it.
			stream(view, fuzzPacket(fxpOpen, uint32(1), p("/web/srv/up"), uint32(fxWrite|fxCreat|fxTrunc), noAttrs),
				fuzzPacket(6, uint32(2), "1", uint64(0), "x"), fuzzPacket(4, uint32(3), "1"),
				fuzzPacket(9, uint32(4), p("/web/srv/up"), uint32(attrPerm|attrTime), uint32(0o640), uint32(1), uint32(2))),
			// A request cut short, and a length beyond any packet.
			stream(view, fuzzPacket(fxpStat, uint32(1), "/web/etc")[:9]),
			stream(view, []byte{0xff, 0xff, 0xff, 0xff, fxpStat}),
		)
	}
	return seeds
}

// servePipe is serveBoth over memPipe instead of loopback TCP, for a
// testing/synctest bubble: a socket's read is not a wait the bubble can
// see, a channel's is.
func (m *memTarget) servePipe(t testing.TB) (io.ReadWriter, func() error) {
	a, b := memPipe()
	done := m.run(b)
	return a, func() error {
		err := a.Close()
		testwait.Recv(t, "the target's request server to end", done)
		return err
	}
}

// memPipe returns the two ends of an in-memory stream whose writes never
// block (each direction buffers without bound), so that two peers writing
// at once cannot deadlock as over net.Pipe. Closing either end ends both
// directions: reads return io.EOF once what was written is read, writes
// fail.
func memPipe() (*pipeEnd, *pipeEnd) {
	ab := &pipeBuf{ready: make(chan struct{}, 1)}
	ba := &pipeBuf{ready: make(chan struct{}, 1)}
	closed := make(chan struct{})
	once := &sync.Once{}
	return &pipeEnd{in: ba, out: ab, closed: closed, once: once},
		&pipeEnd{in: ab, out: ba, closed: closed, once: once}
}

// pipeBuf is one direction of a memPipe.
type pipeBuf struct {
	mu    sync.Mutex // protects data
	data  []byte
	ready chan struct{} // holds a token while data may be non-empty
}

// pipeEnd is one end of a memPipe.
type pipeEnd struct {
	in, out *pipeBuf
	closed  chan struct{} // shared by both ends
	once    *sync.Once
}

func (e *pipeEnd) Read(p []byte) (int, error) {
	for {
		e.in.mu.Lock()
		if len(e.in.data) > 0 {
			n := copy(p, e.in.data)
			e.in.data = e.in.data[n:]
			if len(e.in.data) > 0 {
				e.in.signal()
			}
			e.in.mu.Unlock()
			return n, nil
		}
		e.in.mu.Unlock()
		select {
		case <-e.in.ready:
		case <-e.closed:
			e.in.mu.Lock()
			empty := len(e.in.data) == 0
			e.in.mu.Unlock()
			if empty {
				return 0, io.EOF
			}
		}
	}
}

func (e *pipeEnd) Write(p []byte) (int, error) {
	select {
	case <-e.closed:
		return 0, io.ErrClosedPipe
	default:
	}
	e.out.mu.Lock()
	e.out.data = append(e.out.data, p...)
	e.out.signal()
	e.out.mu.Unlock()
	return len(p), nil
}

func (e *pipeEnd) Close() error {
	e.once.Do(func() { close(e.closed) })
	return nil
}

// signal leaves a token for a reader, if none is waiting there already.
func (b *pipeBuf) signal() {
	select {
	case b.ready <- struct{}{}:
	default:
	}
}
