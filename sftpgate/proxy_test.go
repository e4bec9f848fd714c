package sftpgate

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pkg/sftp"
	"github.com/postern/postern/internal/testwait"
	"github.com/postern/postern/policy"
)

// rawTarget is an SFTP target that speaks packets itself, so that a test
// sees exactly what the gate forwards, in which order, and controls every
// answer. Each dial is one session; all share the record.
type rawTarget struct {
	t    testing.TB
	exts []extension
	// answer returns the answer to a request frame (length included);
	// nil answers SSH_FX_OK.
	answer func(req []byte) []byte

	wg sync.WaitGroup
	// mu protects reqs and conns.
	mu    sync.Mutex
	reqs  [][]byte
	conns []net.Conn
}

func newRawTarget(t testing.TB, exts ...extension) *rawTarget {
	rt := &rawTarget{t: t, exts: exts}
	t.Cleanup(func() {
		rt.mu.Lock()
		for _, c := range rt.conns {
			c.Close()
		}
		rt.mu.Unlock()
		rt.wg.Wait()
	})
	return rt
}

func (rt *rawTarget) dial(ctx context.Context, alias string) (*Upstream, error) {
	a, b := tcpPair(rt.t)
	rt.mu.Lock()
	rt.conns = append(rt.conns, b)
	rt.mu.Unlock()
	rt.wg.Add(1)
	go func() {
		defer rt.wg.Done()
		rt.serve(b)
	}()
	return &Upstream{Conn: a, Close: a.Close}, nil
}

func (rt *rawTarget) serve(conn net.Conn) {
	r := bufio.NewReader(conn)
	if _, err := readPacket(r, nil, maxUpstreamPacket); err != nil {
		return
	}
	b := newPacket(fxpVersion, 64)
	b = appendU32(b, 3)
	for _, e := range rt.exts {
		b = appendStr(b, e.name)
		b = appendStr(b, e.version)
	}
	if _, err := conn.Write(finish(b)); err != nil {
		return
	}
	for {
		req, err := readPacket(r, nil, maxUpstreamPacket)
		if err != nil {
			return
		}
		rt.mu.Lock()
		rt.reqs = append(rt.reqs, req)
		rt.mu.Unlock()
		var ans []byte
		if rt.answer != nil {
			ans = rt.answer(req)
		}
		if ans == nil {
			ans = statusPacket(binary.BigEndian.Uint32(req[5:9]), fxOK, "Success")
		}
		if _, err := conn.Write(ans); err != nil {
			return
		}
	}
}

// requests returns the frames the target received, in order.
func (rt *rawTarget) requests() [][]byte {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return slices.Clone(rt.reqs)
}

// handleAnswer answers an open with handle h.
func handleAnswer(req []byte, h string) []byte {
	b := newPacket(fxpHandle, 8+len(h))
	b = appendU32(b, binary.BigEndian.Uint32(req[5:9]))
	b = appendStr(b, h)
	return finish(b)
}

// recvID reads one answer and returns its type, id and the rest.
func (r *rawConn) recvID() (byte, uint32, []byte) {
	r.t.Helper()
	typ, p := r.recv()
	return typ, binary.BigEndian.Uint32(p), p[4:]
}

// statusOf decodes a status answer's code and message.
func statusOf(p []byte) (uint32, string) {
	d := &decoder{b: p}
	code := d.u32()
	msg, _ := d.str()
	return code, msg
}

// TestPipelinedWritesKeepOrder: writes sent without waiting reach the
// target in the agent's order, each acknowledged by the target's own
// status on the agent's id, and nothing is sent to the agent before the
// target answers.
func TestPipelinedWritesKeepOrder(t *testing.T) {
	rt := newRawTarget(t, extension{extFsync, "1"})
	rt.answer = func(req []byte) []byte {
		switch req[4] {
		case fxpOpen:
			return handleAnswer(req, "H")
		case fxpWrite:
			// The target's verdict differs by offset, so that each
			// status must go back on its own request.
			off := binary.BigEndian.Uint64(req[14:])
			if off%3 == 2 {
				return statusPacket(binary.BigEndian.Uint32(req[5:9]), fxFailure, fmt.Sprintf("no room at %d", off))
			}
		case fxpRealpath:
			b := newPacket(fxpName, 32)
			b = appendU32(b, binary.BigEndian.Uint32(req[5:9]))
			b = appendU32(b, 1)
			b = appendStr(b, "/home/u")
			b = appendStr(b, "/home/u")
			b = appendU32(b, 0)
			return finish(b)
		}
		return nil
	}
	h := startHarness(t, harnessOpts{fixed: "web", raw: true, dial: rt.dial})
	r := newRawConn(t, h.conn)
	r.send(fxpOpen, uint32(7), "/f", uint32(fxfWrite|fxfCreat|fxfAppend), uint32(0))
	if typ, id, p := r.recvID(); typ != fxpHandle || id != 7 || !bytes.Equal(p, []byte("\x00\x00\x00\x01H")) {
		t.Fatalf("open: got type %d id %d %q; want the target's handle H on id 7", typ, id, p)
	}
	const n = 100
	for i := range n {
		r.send(fxpWrite, uint32(1000+i), "H", uint64(i), fmt.Sprintf("chunk %d", i))
	}
	r.send(fxpExtended, uint32(2000), extFsync, "H")
	r.send(fxpClose, uint32(2001), "H")
	for i := range n {
		typ, id, p := r.recvID()
		code, msg := statusOf(p)
		wantCode, wantMsg := uint32(fxOK), "Success"
		if i%3 == 2 {
			wantCode, wantMsg = fxFailure, fmt.Sprintf("no room at %d", i)
		}
		if typ != fxpStatus || id != uint32(1000+i) || code != wantCode || msg != wantMsg {
			t.Fatalf("answer %d: got type %d id %d %d %q; want status on id %d: %d %q", i, typ, id, code, msg, 1000+i, wantCode, wantMsg)
		}
	}
	for _, want := range []uint32{2000, 2001} {
		if typ, id, _ := r.recvID(); typ != fxpStatus || id != want {
			t.Errorf("got type %d id %d; want status on id %d", typ, id, want)
		}
	}
	// The target saw the gate's realpath of ".", the open, then every
	// write in order with its data, the fsync and the close.
	var seen []string
	for _, req := range rt.requests() {
		d := &decoder{b: req, off: 9}
		switch req[4] {
		case fxpWrite:
			d.str()
			off := d.u64()
			data, _ := d.str()
			seen = append(seen, fmt.Sprintf("write %d %s", off, data))
		case fxpExtended:
			name, _ := d.str()
			seen = append(seen, name)
		default:
			seen = append(seen, packetName(req[4]))
		}
	}
	want := []string{"realpath", "open"}
	for i := range n {
		want = append(want, fmt.Sprintf("write %d chunk %d", i, i))
	}
	want = append(want, extFsync, "close")
	if !slices.Equal(seen, want) {
		t.Errorf("target saw %q; want %q", seen, want)
	}
	if ops := h.takeOps(); len(ops) != 1 || ops[0].Method != "put" || ops[0].Detail != "write,append,create" {
		t.Errorf("got decisions %+v; want the open only, as a put", ops)
	}
}

// TestDecisionHoldsLaterRequests: while a request waits for its decision,
// the gate keeps reading the agent's packets but forwards nothing behind
// it, so the target sees every request in the agent's order.
func TestDecisionHoldsLaterRequests(t *testing.T) {
	rt := newRawTarget(t)
	release := make(chan struct{})
	waiting := make(chan struct{})
	var once sync.Once
	decide := func(ctx context.Context, op Op) (Finish, error) {
		if op.Method == "mkdir" {
			once.Do(func() { close(waiting) })
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return nil, nil
	}
	h := startHarness(t, harnessOpts{aliases: []string{"web"}, raw: true, dial: rt.dial, decide: decide})
	r := newRawConn(t, h.conn)
	// A stat first, so that the upstream is open before the mkdir waits.
	r.send(fxpStat, uint32(1), "/web/a")
	r.recvID()
	r.send(fxpMkdir, uint32(2), "/web/d", uint32(0))
	testwait.Recv(t, "the mkdir to wait for a decision", waiting)
	for i := range maxQueued {
		r.send(fxpStat, uint32(10+i), fmt.Sprintf("/web/s%d", i))
	}
	close(release)
	if typ, id, _ := r.recvID(); typ != fxpStatus || id != 2 {
		t.Fatalf("got type %d id %d; want the mkdir's status first", typ, id)
	}
	for i := range maxQueued {
		if _, id, _ := r.recvID(); id != uint32(10+i) {
			t.Fatalf("answer %d: got id %d; want %d", i, id, 10+i)
		}
	}
	var seen []string
	for _, req := range rt.requests() {
		d := &decoder{b: req, off: 9}
		p, _ := d.str()
		seen = append(seen, packetName(req[4])+" "+p)
	}
	want := []string{"stat /a", "mkdir /d"}
	for i := range maxQueued {
		want = append(want, fmt.Sprintf("stat /s%d", i))
	}
	if !slices.Equal(seen, want) {
		t.Errorf("target saw %q; want %q", seen, want)
	}
}

// TestVersionExchange: the fixed view advertises the target's extensions
// that postern serves, in the target's order; one postern does not parse,
// or at a version it does not know, is dropped, and a request for it is
// refused without reaching the target. The virtual root advertises every
// extension postern serves.
func TestVersionExchange(t *testing.T) {
	rt := newRawTarget(t,
		extension{"vendor@example.com", "1"}, extension{extFsync, "1"}, extension{extStatVFS, "1"},
		extension{extPosixRename, "1"}, extension{extLimits, "1"})
	fixed := startHarness(t, harnessOpts{fixed: "web", raw: true, dial: rt.dial})
	root := startHarness(t, harnessOpts{aliases: []string{"web"}, raw: true, dial: rt.dial})
	version := func(conn io.ReadWriter) []extension {
		r := &rawConn{t: t, conn: conn}
		r.send(fxpInit, uint32(6)) // a newer client: answered 3
		typ, p := r.recv()
		d := &decoder{b: p}
		if v := d.u32(); typ != fxpVersion || v != 3 {
			t.Fatalf("got type %d version %d; want version 3", typ, v)
		}
		var exts []extension
		for d.rest() > 0 {
			name, _ := d.str()
			ver, _ := d.str()
			exts = append(exts, extension{name, ver})
		}
		return exts
	}
	if got, want := version(fixed.conn), []extension{{extFsync, "1"}, {extPosixRename, "1"}, {extLimits, "1"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("fixed view advertises %v; want %v", got, want)
	}
	if got := version(root.conn); !reflect.DeepEqual(got, knownExtensions) {
		t.Errorf("virtual root advertises %v; want %v", got, knownExtensions)
	}
	r := &rawConn{t: t, conn: fixed.conn}
	for _, tt := range []struct {
		name string
		args []any
	}{
		{"vendor@example.com", []any{"x"}},
		{extStatVFS, []any{"/"}},
		{extHardlink, []any{"/a", "/b"}},
	} {
		code, msg := r.status(fxpExtended, append([]any{tt.name}, tt.args...)...)
		if code != fxOpUnsupported {
			t.Errorf("%s: got %d %q; want SSH_FX_OP_UNSUPPORTED", tt.name, code, msg)
		}
	}
	// An unknown packet type, likewise.
	if code, _ := r.status(99, "x"); code != fxOpUnsupported {
		t.Errorf("packet type 99: got %d; want SSH_FX_OP_UNSUPPORTED", code)
	}
	for _, req := range rt.requests() {
		if req[4] == fxpExtended || req[4] == 99 {
			t.Errorf("target received %s; want nothing undecided or unsupported forwarded", packetName(req[4]))
		}
	}
}

// TestLimits: the fixed view caps the target's limits at what postern
// accepts; the virtual root answers the draft's minimums itself.
func TestLimits(t *testing.T) {
	rt := newRawTarget(t, extension{extLimits, "1"})
	rt.answer = func(req []byte) []byte {
		if req[4] != fxpExtended {
			return nil
		}
		b := newPacket(fxpExtendedReply, 36)
		b = appendU32(b, binary.BigEndian.Uint32(req[5:9]))
		for _, v := range []uint64{1 << 30, 0, 4096, 77} {
			b = appendU64(b, v)
		}
		return finish(b)
	}
	limits := func(conn io.ReadWriter) []uint64 {
		r := newRawConn(t, conn)
		typ, p := r.call(fxpExtended, extLimits)
		if typ != fxpExtendedReply {
			t.Fatalf("limits: got type %d", typ)
		}
		d := &decoder{b: p}
		return []uint64{d.u64(), d.u64(), d.u64(), d.u64()}
	}
	fixed := startHarness(t, harnessOpts{fixed: "web", raw: true, dial: rt.dial})
	if got, want := limits(fixed.conn), []uint64{MaxPacket, MaxPacket - 1024, 4096, 77}; !slices.Equal(got, want) {
		t.Errorf("fixed view limits: got %v; want %v", got, want)
	}
	root := startHarness(t, harnessOpts{aliases: []string{"web"}, raw: true, dial: rt.dial})
	if got, want := limits(root.conn), []uint64{34000, 32768, 32768, maxHandles}; !slices.Equal(got, want) {
		t.Errorf("virtual root limits: got %v; want %v", got, want)
	}
	if ops := root.takeOps(); len(ops) != 0 {
		t.Errorf("virtual root limits made decisions %+v; want none", ops)
	}
}

// TestRootListing: "/" lists ".", ".." and the aliases, with `ls -l` long
// names, then says end of file; nothing is dialed or decided.
func TestRootListing(t *testing.T) {
	h := startHarness(t, harnessOpts{aliases: []string{"web", "db"}, raw: true})
	r := newRawConn(t, h.conn)
	typ, p := r.call(fxpOpendir, "/")
	if typ != fxpHandle {
		t.Fatalf("opendir /: got type %d", typ)
	}
	d := &decoder{b: p}
	handle, _ := d.str()
	typ, p = r.call(fxpReaddir, handle)
	if typ != fxpName {
		t.Fatalf("readdir: got type %d", typ)
	}
	d = &decoder{b: p}
	var names, longs []string
	for n := d.u32(); n > 0; n-- {
		name, _ := d.str()
		long, _ := d.str()
		d.attrs()
		names, longs = append(names, name), append(longs, long)
	}
	if d.err != nil {
		t.Fatalf("readdir answer: %v", d.err)
	}
	if want := []string{".", "..", "db", "web"}; !slices.Equal(names, want) {
		t.Errorf("names: got %q; want %q", names, want)
	}
	for _, l := range longs {
		if f := strings.Fields(l); len(f) != 9 || !strings.HasPrefix(f[0], "d") || f[2] != "root" || f[3] != "root" {
			t.Errorf("long name %q; want an ls -l line of a directory owned by root", l)
		}
	}
	if typ, p := r.call(fxpReaddir, handle); typ != fxpStatus || binary.BigEndian.Uint32(p) != fxEOF {
		t.Errorf("second readdir: got type %d; want SSH_FX_EOF", typ)
	}
	if code, _ := r.status(fxpClose, handle); code != fxOK {
		t.Errorf("close: got %d; want OK", code)
	}
	if code, msg := r.status(fxpReaddir, handle); code != fxFailure || msg != "sftpgate: invalid handle" {
		t.Errorf("readdir after close: got %d %q; want an invalid handle", code, msg)
	}
	if n := h.dialCount("web") + h.dialCount("db"); n != 0 || len(h.takeOps()) != 0 {
		t.Errorf("got %d dials and decisions; want none for the virtual root", n)
	}
}

// TestHandlesNamespaced: in the virtual root each handle the agent gets is
// the gate's, bound to one alias's handle; one it was not given, or one it
// closed, is refused without reaching any target.
func TestHandlesNamespaced(t *testing.T) {
	h := startHarness(t, harnessOpts{aliases: []string{"web", "db"}, raw: true})
	h.writeFile("web", "/f", "on web")
	h.writeFile("db", "/f", "on db!")
	r := newRawConn(t, h.conn)
	open := func(p string) string {
		typ, ans := r.call(fxpOpen, p, uint32(fxfRead), uint32(0))
		if typ != fxpHandle {
			t.Fatalf("open %s: got type %d", p, typ)
		}
		d := &decoder{b: ans}
		s, _ := d.str()
		return s
	}
	read := func(handle string) (byte, string) {
		typ, ans := r.call(fxpRead, handle, uint64(0), uint32(100))
		d := &decoder{b: ans}
		if typ == fxpStatus {
			code := d.u32()
			msg, _ := d.str()
			return typ, fmt.Sprintf("%d %s", code, msg)
		}
		s, _ := d.str()
		return typ, s
	}
	hw, hd := open("/web/f"), open("/db/f")
	if hw == hd {
		t.Fatalf("handles of two aliases are both %q", hw)
	}
	for handle, want := range map[string]string{hw: "on web", hd: "on db!"} {
		if typ, got := read(handle); typ != fxpData || got != want {
			t.Errorf("read %q: got %d %q; want %q", handle, typ, got, want)
		}
	}
	for _, forged := range []string{"", "0", "999", hw + "x", "\x00\x00\x00\x01"} {
		if typ, got := read(forged); typ != fxpStatus || got != "4 sftpgate: invalid handle" {
			t.Errorf("read with forged handle %q: got %d %q; want an invalid handle", forged, typ, got)
		}
	}
	if code, _ := r.status(fxpClose, hw); code != fxOK {
		t.Errorf("close: got %d", code)
	}
	if typ, got := read(hw); typ != fxpStatus || got != "4 sftpgate: invalid handle" {
		t.Errorf("read after close: got %d %q; want an invalid handle", typ, got)
	}
	// A second close is answered as OpenSSH's sftp-server answers it
	// (issue 25: postern answered 4 with its own words).
	for _, h := range []string{hw, "999"} {
		if code, msg := r.status(fxpClose, h); code != fxNoSuchFile || msg != "No such file" {
			t.Errorf("close of %q, not open: got %d %q; want %d \"No such file\"", h, code, msg, fxNoSuchFile)
		}
	}
}

// TestCrossAliasRefused: rename and hard link across aliases fail, and a
// symlink cannot point into another alias; nothing is decided.
func TestCrossAliasRefused(t *testing.T) {
	h := startHarness(t, harnessOpts{aliases: []string{"web", "db"}, raw: true})
	h.writeFile("web", "/a", "a")
	r := newRawConn(t, h.conn)
	tests := []struct {
		name     string
		typ      byte
		fields   []any
		wantCode uint32
		wantMsg  string
	}{
		{"rename", fxpRename, []any{"/web/a", "/db/a"}, fxFailure, "cannot rename across aliases (web to db)"},
		{"posix-rename", fxpExtended, []any{extPosixRename, "/web/a", "/db/a"}, fxFailure, "cannot posix-rename across aliases"},
		{"hardlink", fxpExtended, []any{extHardlink, "/web/a", "/db/a"}, fxFailure, "cannot hardlink across aliases"},
		{"symlink into another alias", fxpSymlink, []any{"/db/a", "/web/l"}, fxPermissionDenied, "cannot point at /db/a"},
		{"symlink dotdot into another alias", fxpSymlink, []any{"/web/../db/a", "/web/l"}, fxPermissionDenied, "cannot point at"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, msg := r.status(tt.typ, tt.fields...)
			if code != tt.wantCode || !strings.Contains(msg, tt.wantMsg) {
				t.Errorf("got %d %q; want %d with %q", code, msg, tt.wantCode, tt.wantMsg)
			}
		})
	}
	if ops := h.takeOps(); len(ops) != 0 {
		t.Errorf("got decisions %+v; want none", ops)
	}
	if n := h.dialCount("db"); n != 0 {
		t.Errorf("got %d dials to db; want none", n)
	}
}

// TestSetstatRidesOnWrite: modes and times set on a file this session just
// wrote ride on that decision (scp -p asks once), and so does a truncation
// of the handle where its writes end (an upload in place); any other size,
// an owner or a setuid bit is decided on its own, and so is a setstat of a
// file the session did not just write or of a directory (virtualroot_test.go
// has the rest).
func TestSetstatRidesOnWrite(t *testing.T) {
	h := startHarness(t, harnessOpts{aliases: []string{"web"}})
	h.writeFile("web", "/other", "x")
	h.seed("web", func(c *sftp.Client) {
		if err := c.Mkdir("/old"); err != nil {
			t.Fatal(err)
		}
	})
	c := h.client
	f, err := c.OpenFile("/web/up", os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("data"))
	for _, step := range []struct {
		name string
		run  func() error
		want []string // method class detail of each decision
	}{
		{"fsetstat mode on the write handle", func() error { return f.Chmod(0o640) }, nil},
		{"fsetstat size where the writes end", func() error { return f.Truncate(4) }, nil},
		{"fsetstat size short of the writes' end", func() error { return f.Truncate(2) }, []string{"fsetstat destructive size 2"}},
		{"close", f.Close, nil},
		{"setstat mode after the write", func() error { return c.Chmod("/web/up", 0o600) }, nil},
		{"setstat times after the write", func() error { return c.Chtimes("/web/up", time.Unix(1e9, 0), time.Unix(1e9, 0)) }, nil},
		{"setstat setuid after the write", func() error { return c.Chmod("/web/up", 0o4755) }, []string{"setstat write mode 4755"}},
		{"setstat owner after the write", func() error { return c.Chown("/web/up", 1, 1) }, []string{"setstat write uid 1 gid 1"}},
		{"setstat size after the write", func() error { return c.Truncate("/web/up", 1) }, []string{"setstat destructive size 1"}},
		{"setstat of a file not written", func() error { return c.Chmod("/web/other", 0o600) }, []string{"setstat write mode 0600"}},
		{"mkdir", func() error { return c.Mkdir("/web/made") }, []string{"mkdir write "}},
		{"setstat mode of the directory made", func() error { return c.Chmod("/web/made", 0o700) }, []string{"setstat write mode 0700"}},
		{"mkdir of a directory that exists", func() error { return c.Mkdir("/web/old") }, []string{"mkdir write "}},
		{"setstat mode of a directory the mkdir did not make", func() error { return c.Chmod("/web/old", 0o700) }, []string{"setstat write mode 0700"}},
	} {
		h.takeOps()
		// The in-memory target fails some of these (a setstat of a
		// directory, a mkdir of one that exists); the decisions are what
		// is checked.
		step.run()
		var got []string
		for _, op := range h.takeOps() {
			got = append(got, fmt.Sprintf("%s %s %s", op.Method, op.Class, op.Detail))
		}
		if !slices.Equal(got, step.want) {
			t.Errorf("%s: got decisions %q; want %q", step.name, got, step.want)
		}
	}
	// A handle opened for reading carries no write: fsetstat on it is
	// decided.
	g, err := c.Open("/web/other")
	if err != nil {
		t.Fatal(err)
	}
	h.takeOps()
	g.Chmod(0o644)
	g.Close()
	if ops := h.takeOps(); len(ops) != 1 || ops[0].Method != "fsetstat" || ops[0].Class != policy.Write {
		t.Errorf("fsetstat on a read handle: got decisions %+v; want one write", ops)
	}
}

// TestMalformedRequests: a request that cannot be parsed is answered
// SSH_FX_BAD_MESSAGE on its id and the session goes on; a stream whose
// framing cannot be trusted ends the session with an error.
func TestMalformedRequests(t *testing.T) {
	h := startHarness(t, harnessOpts{aliases: []string{"web"}, raw: true})
	r := newRawConn(t, h.conn)
	for _, bad := range [][]byte{
		fuzzPacket(fxpStat, uint32(5), uint32(100)),                                      // a string cut short
		fuzzPacket(fxpOpen, uint32(5), "/web/f"),                                         // no flags
		fuzzPacket(fxpSetstat, uint32(5), "/web/f", uint32(attrExtended), uint32(1<<30)), // a forged count
		fuzzPacket(fxpWrite, uint32(5), "1", uint64(0), uint32(1<<20)),                   // data shorter than said
		fuzzPacket(fxpExtended, uint32(5), uint32(1<<31)),                                // no name
	} {
		if _, err := h.conn.Write(bad); err != nil {
			t.Fatal(err)
		}
		typ, id, p := r.recvID()
		code, msg := statusOf(p)
		if typ != fxpStatus || id != 5 || code != fxBadMessage || !strings.HasPrefix(msg, "sftpgate: malformed ") {
			t.Errorf("%x: got type %d id %d %d %q; want SSH_FX_BAD_MESSAGE on id 5", bad, typ, id, code, msg)
		}
	}
	if code, _ := r.status(fxpStat, "/web"); code != fxOK {
		t.Errorf("stat after the malformed requests: got %d; want the session still serving", code)
	}
	// A length beyond MaxPacket cannot be skipped safely.
	h.conn.Write([]byte{0, 0x10, 0, 1, fxpStat})
	if err := h.served(); err == nil || !errors.Is(err, errFraming) {
		t.Errorf("Serve: got %v; want a framing error", err)
	}
	h.done <- nil
}

// TestOutcomes: every allowed operation's outcome is the target's answer:
// its status code, or OK for an answer that carries data.
func TestOutcomes(t *testing.T) {
	h := startHarness(t, harnessOpts{aliases: []string{"web"}})
	h.writeFile("web", "/f", "x")
	h.client.Stat("/web/f")
	h.client.Stat("/web/missing")
	h.client.Mkdir("/web/f")
	// Outcomes are recorded after the answers; all of them once Serve has
	// returned.
	h.client.Close()
	if err := h.served(); err != nil {
		t.Errorf("Serve: %v", err)
	}
	h.done <- nil // for the cleanup
	got := map[string]string{}
	for _, oo := range h.takeOutcomes() {
		got[oo.op.Method+" "+oo.op.Paths[0]] = fmt.Sprintf("answered %v, %s", oo.o.Answered, statusName(oo.o.Status))
		if (oo.o.Status == fxOK) != (oo.o.Message == "") {
			t.Errorf("%s: message %q with status %d; want one exactly when not OK", oo.op.Method, oo.o.Message, oo.o.Status)
		}
	}
	want := map[string]string{
		"stat /f":       "answered true, SSH_FX_OK",
		"stat /missing": "answered true, SSH_FX_NO_SUCH_FILE",
		"mkdir /f":      "answered true, SSH_FX_FAILURE",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got outcomes %v; want %v", got, want)
	}
}

// TestFixedViewTargetEnds: when the target ends the fixed view's session,
// the requests it left unanswered are answered SSH_FX_CONNECTION_LOST,
// their outcomes recorded as unanswered, and the agent's session ends.
func TestFixedViewTargetEnds(t *testing.T) {
	rt := newRawTarget(t)
	gone := make(chan struct{})
	rt.answer = func(req []byte) []byte {
		if req[4] == fxpMkdir {
			close(gone)
			// The target dies with the request unanswered.
			rt.mu.Lock()
			defer rt.mu.Unlock()
			rt.conns[0].Close()
		}
		return nil
	}
	h := startHarness(t, harnessOpts{fixed: "web", raw: true, dial: rt.dial})
	r := newRawConn(t, h.conn)
	r.send(fxpMkdir, uint32(3), "/d", uint32(0))
	testwait.Recv(t, "the target to take the mkdir", gone)
	typ, id, p := r.recvID()
	if code, _ := statusOf(p); typ != fxpStatus || id != 3 || code != fxConnectionLost {
		t.Errorf("got type %d id %d code %d; want SSH_FX_CONNECTION_LOST on id 3", typ, id, code)
	}
	if err := h.served(); err == nil || !strings.Contains(err.Error(), "web ended the sftp session") {
		t.Errorf("Serve: got %v; want the target's end", err)
	}
	h.done <- nil
	if o := h.takeOutcomes(); len(o) != 1 || o[0].o.Answered || o[0].o.Status != fxConnectionLost {
		t.Errorf("outcomes %+v; want the mkdir unanswered", o)
	}
}

// TestVirtualRootRedialsLostTarget: in the virtual root a target whose
// session ends loses its handles; the next request dials it again.
func TestVirtualRootRedialsLostTarget(t *testing.T) {
	h := startHarness(t, harnessOpts{aliases: []string{"web"}})
	h.writeFile("web", "/f", "x")
	f, err := h.client.Open("/web/f")
	if err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	up := h.upstreams["web"]
	h.mu.Unlock()
	up.Close() // the target's end of the session
	if _, err := f.Stat(); err == nil {
		t.Error("fstat on a handle of a lost session succeeded")
	}
	if _, err := h.client.Stat("/web/f"); err != nil {
		t.Errorf("stat after the loss: %v; want the target dialed again", err)
	}
	if n := h.dialCount("web"); n != 2 {
		t.Errorf("got %d dials; want 2", n)
	}
}

// TestRootAnswers: the virtual root answers the extensions that have no
// path on a target itself.
func TestRootAnswers(t *testing.T) {
	h := startHarness(t, harnessOpts{aliases: []string{"web"}, raw: true})
	r := newRawConn(t, h.conn)
	if got, err := r.name(fxpExtended, extHomeDir, ""); err != nil || got != "/" {
		t.Errorf("home-directory: got %q, %v; want /", got, err)
	}
	for p, want := range map[string]string{"~": "/", "~/web": "/web", "/web/..": "/"} {
		if got, err := r.name(fxpExtended, extExpandPath, p); err != nil || got != want {
			t.Errorf("expand-path %q: got %q, %v; want %q", p, got, err, want)
		}
	}
	ids := string(binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, 0), 1000))
	typ, p := r.call(fxpExtended, extUsersGroups, ids, "")
	if typ != fxpExtendedReply || !bytes.Equal(p, []byte{0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}) {
		t.Errorf("users-groups-by-id: got type %d %x; want two empty user names and no groups", typ, p)
	}
	if code, _ := r.status(fxpExtended, extStatVFS, "/"); code != fxOpUnsupported {
		t.Errorf("statvfs /: got %d; want SSH_FX_OP_UNSUPPORTED", code)
	}
	if n := h.dialCount("web"); n != 0 {
		t.Errorf("got %d dials; want none", n)
	}
}

// chanWriter sends each write on a channel.
type chanWriter chan string

func (w chanWriter) Write(p []byte) (int, error) {
	w <- string(p)
	return len(p), nil
}

// TestTargetStderrRelayed: what the target's session writes on stderr
// (sftp-server -e logs there) reaches the agent's stderr, as OpenSSH's
// client shows it.
func TestTargetStderrRelayed(t *testing.T) {
	rt := newRawTarget(t)
	pr, pw := io.Pipe()
	dial := func(ctx context.Context, alias string) (*Upstream, error) {
		u, err := rt.dial(ctx, alias)
		if err != nil {
			return nil, err
		}
		closeConn := u.Close
		u.Stderr = pr
		u.Close = func() error {
			pw.Close()
			return closeConn()
		}
		return u, nil
	}
	lines := make(chanWriter, 1)
	h := startHarness(t, harnessOpts{fixed: "web", raw: true, dial: dial, stderr: lines})
	newRawConn(t, h.conn)
	if _, err := pw.Write([]byte("sftp-server: a log line\n")); err != nil {
		t.Fatal(err)
	}
	if got := <-lines; got != "sftp-server: a log line\n" {
		t.Errorf("agent's stderr got %q; want the target's line", got)
	}
}
