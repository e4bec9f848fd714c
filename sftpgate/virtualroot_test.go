package sftpgate

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pkg/sftp"

	"github.com/postern/postern/internal/testwait"
)

// What the virtual root answers about itself and across aliases, and what
// rides on a write (docs/sftp.md). bastion/sftp_virtualroot_test.go runs
// the same through postern with OpenSSH's sftp, paramiko and asyncssh.

// lockedBuffer is an io.Writer that tests read while the gate writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// refusals records what the gate reports through Config.Refused.
type refusals struct {
	mu   sync.Mutex
	list []string // "method class alias paths: reason"
}

func (r *refusals) refused(op Op, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.list = append(r.list, fmt.Sprintf("%s %s %q %q: %s", op.Method, op.Class, op.Alias, op.Paths, reason))
}

func (r *refusals) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.list
	r.list = nil
	return l
}

// readTarget returns the content of p on alias's target, around the gate;
// nil if it does not exist.
func (h *harness) readTarget(alias, p string) []byte {
	h.t.Helper()
	var b []byte
	h.seed(alias, func(c *sftp.Client) {
		f, err := c.Open(p)
		if errors.Is(err, os.ErrNotExist) {
			return
		}
		if err != nil {
			h.t.Fatalf("read %s:%s: %v", alias, p, err)
		}
		defer f.Close()
		if b, err = io.ReadAll(f); err != nil {
			h.t.Fatalf("read %s:%s: %v", alias, p, err)
		}
		if b == nil {
			b = []byte{}
		}
	})
	return b
}

// handleOf sends a request answered with a handle (open, opendir) and
// returns the handle.
func (r *rawConn) handleOf(typ byte, fields ...any) string {
	r.t.Helper()
	rt, ans := r.call(typ, fields...)
	if rt != fxpHandle {
		code, msg := statusOf(ans)
		r.t.Fatalf("%s %v: got type %d (%d %q); want a handle", packetName(typ), fields, rt, code, msg)
	}
	d := &decoder{b: ans}
	s, _ := d.str()
	return s
}

// awaitOutcome waits until an outcome of method on path has been recorded
// and returns it.
func (h *harness) awaitOutcome(method, p string) Outcome {
	h.t.Helper()
	var got Outcome
	testwait.Until(h.t, "the outcome of "+method+" "+p, func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		for i, oo := range h.outcomes {
			if oo.op.Method == method && oo.op.Paths[0] == p {
				got = oo.o
				h.outcomes = slices.Delete(h.outcomes, i, i+1)
				return true
			}
		}
		return false
	})
	return got
}

// TestCopyAcrossAliases: a copy-data between handles on two aliases (what
// OpenSSH's sftp sends for `cp /web/f /db/g`, after opening /db/g with the
// truncate flag) is carried out by the gate: the destination becomes the
// copy, with OpenSSH's sftp-server's answers for a range and for the end of
// the source, and the copy is noted on the destination's write row.
func TestCopyAcrossAliases(t *testing.T) {
	h := startHarness(t, harnessOpts{aliases: []string{"web", "db"}, raw: true})
	src := make([]byte, 3*copyChunk+1234) // several chunks, the last one short
	for i := range src {
		src[i] = byte(i*7 + i/251)
	}
	h.writeFile("web", "/f", string(src))
	r := newRawConn(t, h.conn)
	size := uint64(len(src))
	tests := []struct {
		name                       string
		readOff, readLen, writeOff uint64
		wantCode                   uint32
		want                       []byte
	}{
		{"the whole file, as OpenSSH's cp", 0, 0, 0, fxOK, src},
		{"a range to an offset", 10, 2*copyChunk + 5, 3, fxOK, append(make([]byte, 3), src[10:10+2*copyChunk+5]...)},
		{"a length past the end", 100, size, 0, fxEOF, src[100:]},
		{"from past the end", size + 10, 0, 0, fxOK, []byte{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h.writeFile("db", "/g", "an older file, to be replaced")
			hs := r.handleOf(fxpOpen, "/web/f", uint32(fxfRead), uint32(0))
			hd := r.handleOf(fxpOpen, "/db/g", uint32(fxfWrite|fxfCreat|fxfTrunc), uint32(0))
			code, msg := r.status(fxpExtended, extCopyData, hs, tt.readOff, tt.readLen, hd, tt.writeOff)
			if code != tt.wantCode {
				t.Errorf("copy-data: got %d %q; want %d", code, msg, tt.wantCode)
			}
			for _, hh := range []string{hs, hd} {
				if code, msg := r.status(fxpClose, hh); code != fxOK {
					t.Errorf("close: got %d %q", code, msg)
				}
			}
			if got := h.readTarget("db", "/g"); !bytes.Equal(got, tt.want) {
				t.Errorf("db:/g holds %d bytes; want %d, the copy", len(got), len(tt.want))
			}
			// Any request but a stat or setstat of /g ends the write:
			// its row is written, saying what rode on it.
			r.status(fxpStat, "/")
			o := h.awaitOutcome("put", "/g")
			note := fmt.Sprintf("copy-data from \"/f\" on web (%s): status %d", copyRange(&request{readOff: tt.readOff, readLen: tt.readLen, writeOff: tt.writeOff}), tt.wantCode)
			if o.Status != fxOK || len(o.Rode) != 1 || !strings.HasPrefix(o.Rode[0], note) {
				t.Errorf("the put's outcome: got %+v; want status 0 and %q", o, note)
			}
		})
	}
	var got []string
	for _, op := range h.takeOps() {
		got = append(got, op.Alias+" "+op.Method)
	}
	if want := slices.Repeat([]string{"web get", "db put"}, len(tests)); !slices.Equal(got, want) {
		t.Errorf("decisions %q; want %q: the copy rides on the put", got, want)
	}
}

// TestCopyAcrossAliasesIntoReadHandle: a copy-data into a handle opened
// only for reading, which no write could change, is refused before
// anything is read, and recorded; the destination is as it was.
func TestCopyAcrossAliasesIntoReadHandle(t *testing.T) {
	var rec refusals
	h := startHarness(t, harnessOpts{aliases: []string{"web", "db"}, raw: true, config: func(c *Config) { c.Refused = rec.refused }})
	h.writeFile("web", "/f", "source")
	h.writeFile("db", "/g", "unchanged")
	r := newRawConn(t, h.conn)
	hs := r.handleOf(fxpOpen, "/web/f", uint32(fxfRead), uint32(0))
	hd := r.handleOf(fxpOpen, "/db/g", uint32(fxfRead), uint32(0))
	h.takeOps()
	if code, msg := r.status(fxpExtended, extCopyData, hs, uint64(0), uint64(0), hd, uint64(0)); code != fxFailure || !strings.Contains(msg, "not opened for writing") {
		t.Errorf("copy-data: got %d %q; want a failure, not opened for writing", code, msg)
	}
	if ops := h.takeOps(); len(ops) != 0 {
		t.Errorf("decisions %+v; want none", ops)
	}
	var got []string
	testwait.Until(t, "the refusal to be recorded", func() bool {
		got = append(got, rec.take()...)
		return len(got) > 0
	})
	if want := `copy-data write "" ["/web/f" "/db/g"]: sftpgate: copy-data into a file not opened for writing`; !slices.Equal(got, []string{want}) {
		t.Errorf("recorded %q; want [%q]", got, want)
	}
	if got := string(h.readTarget("db", "/g")); got != "unchanged" {
		t.Errorf("db:/g = %q after the refusal; want unchanged", got)
	}
}

// TestMkdirOfTheRoot: a mkdir of "/" or of an alias answers as a server
// does for a directory that exists (SSH_FX_FAILURE), so that asyncssh's
// makedirs goes on past it, with no decision and nothing dialed.
func TestMkdirOfTheRoot(t *testing.T) {
	var rec refusals
	h := startHarness(t, harnessOpts{aliases: []string{"web"}, raw: true, config: func(c *Config) { c.Refused = rec.refused }})
	r := newRawConn(t, h.conn)
	for _, p := range []string{"/", "/web", "/web/", "web", "/web/x/../"} {
		if code, msg := r.status(fxpMkdir, p, uint32(0)); code != fxFailure || !strings.Contains(msg, "already exists") {
			t.Errorf("mkdir %q: got %d %q; want SSH_FX_FAILURE, already exists", p, code, msg)
		}
	}
	if n := len(h.takeOps()) + h.dialCount("web"); n != 0 {
		t.Errorf("got %d decisions and dials; want none", n)
	}
	r.status(fxpStat, "/") // a request after the mkdirs: every refusal recorded before it was
	if got := rec.take(); len(got) != 0 {
		t.Errorf("refusals recorded %q; want none: a directory that exists is no refusal", got)
	}
}

// TestRefusalsSayWhyAndAreRecorded: each refusal the gate makes itself
// carries its reason in the status message and on stderr (OpenSSH's sftp
// shows neither the message nor, for df, anything at all) and is recorded,
// in the agent's own paths; nothing is decided or dialed.
func TestRefusalsSayWhyAndAreRecorded(t *testing.T) {
	var rec refusals
	var stderr lockedBuffer
	h := startHarness(t, harnessOpts{aliases: []string{"web", "db"}, raw: true, stderr: &stderr,
		config: func(c *Config) { c.Refused = rec.refused }})
	r := newRawConn(t, h.conn)
	rootDir := r.handleOf(fxpOpendir, "/")
	readOnly := "the virtual root is read-only"
	tests := []struct {
		name     string
		typ      byte
		fields   []any
		wantCode uint32
		wantMsg  string
		wantRec  string // method class alias paths
	}{
		{"mkdir in the root", fxpMkdir, []any{"/new", uint32(0)}, fxPermissionDenied, readOnly, `mkdir write "" ["/new"]`},
		{"put in the root", fxpOpen, []any{"/x.txt", uint32(fxfWrite | fxfCreat | fxfTrunc), uint32(0)}, fxPermissionDenied, readOnly, `put write "" ["/x.txt"]`},
		{"remove an alias", fxpRemove, []any{"/web"}, fxPermissionDenied, readOnly, `remove destructive "" ["/web"]`},
		{"rmdir the root", fxpRmdir, []any{"/"}, fxPermissionDenied, readOnly, `rmdir destructive "" ["/"]`},
		{"rename an alias", fxpRename, []any{"/web", "/www"}, fxPermissionDenied, readOnly, `rename write "" ["/web" "/www"]`},
		{"setstat an alias", fxpSetstat, []any{"/web", uint32(attrPermissions), uint32(0o700)}, fxPermissionDenied, readOnly, `setstat write "" ["/web"]`},
		{"fsetstat the root", fxpFsetstat, []any{rootDir, uint32(attrPermissions), uint32(0o777)}, fxPermissionDenied, readOnly, `fsetstat write "" ["/"]`},
		{"rename across aliases", fxpRename, []any{"/web/a", "/db/a"}, fxFailure, "cannot rename across aliases (web to db)", `rename write "" ["/web/a" "/db/a"]`},
		{"posix-rename across aliases", fxpExtended, []any{extPosixRename, "/web/a", "/db/../db/a"}, fxFailure, "cannot posix-rename across aliases", `posix-rename write "" ["/web/a" "/db/../db/a"]`},
		{"hardlink across aliases", fxpExtended, []any{extHardlink, "/web/a", "/db/a"}, fxFailure, "cannot hardlink across aliases", `hardlink write "" ["/web/a" "/db/a"]`},
		{"symlink into another alias", fxpSymlink, []any{"/db/a", "/web/l"}, fxPermissionDenied, "cannot point at /db/a", `symlink write "" ["/db/a" "/web/l"]`},
		{"statvfs of the root", fxpExtended, []any{extStatVFS, "/"}, fxOpUnsupported, "no file system", `statvfs read "" ["/"]`},
		{"fstatvfs of the root", fxpExtended, []any{extFstatVFS, rootDir}, fxOpUnsupported, "no file system", `fstatvfs read "" ["/"]`},
		{"a control byte", fxpStat, []any{"/web/a\x1b[2J"}, fxPermissionDenied, "control byte 0x1b", `stat read "" ["/web/a?[2J"]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, msg := r.status(tt.typ, tt.fields...)
			if code != tt.wantCode || !strings.Contains(msg, tt.wantMsg) {
				t.Errorf("got %d %q; want %d with %q", code, msg, tt.wantCode, tt.wantMsg)
			}
			if !strings.Contains(stderr.String(), msg+"\n") {
				t.Errorf("stderr %q; want the line %q", stderr.String(), msg)
			}
			var got []string
			testwait.Until(t, "the refusal to be recorded", func() bool {
				got = append(got, rec.take()...)
				return len(got) > 0
			})
			if want := tt.wantRec + ": " + msg; !slices.Equal(got, []string{want}) {
				t.Errorf("recorded %q; want [%q]", got, want)
			}
		})
	}
	if n := len(h.takeOps()) + h.dialCount("web") + h.dialCount("db"); n != 0 {
		t.Errorf("got %d decisions and dials; want none", n)
	}
}

// TestFixedViewRefusalRecorded: in an alias's own view the gate's refusal
// is recorded on that alias.
func TestFixedViewRefusalRecorded(t *testing.T) {
	var rec refusals
	h := startHarness(t, harnessOpts{fixed: "web", raw: true, config: func(c *Config) { c.Refused = rec.refused }})
	r := newRawConn(t, h.conn)
	if code, _ := r.status(fxpOpen, "x\x07", uint32(fxfWrite|fxfCreat), uint32(0)); code != fxPermissionDenied {
		t.Errorf("open of a path with BEL: got %d; want permission denied", code)
	}
	var got []string
	testwait.Until(t, "the refusal to be recorded", func() bool {
		got = append(got, rec.take()...)
		return len(got) > 0
	})
	if want := `put write "web" ["x?"]: sftpgate: path contains control byte 0x07 at offset 1`; !slices.Equal(got, []string{want}) {
		t.Errorf("recorded %q; want [%q]", got, want)
	}
}

// TestRevokedAliasLeavesTheRoot: an alias whose grant is revoked during the
// session is gone from "/" at the next listing, and a path on it answers as
// a missing path does; so does one the Decider finds no grant for.
func TestRevokedAliasLeavesTheRoot(t *testing.T) {
	var mu sync.Mutex
	granted := []string{"web", "db"}
	h := startHarness(t, harnessOpts{aliases: []string{"web", "db"}, config: func(c *Config) {
		c.Granted = func(context.Context) ([]string, error) {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(granted), nil
		}
	}})
	h.writeFile("web", "/f", "x")
	list := func() []string {
		t.Helper()
		fis, err := h.client.ReadDir("/")
		if err != nil {
			t.Fatalf("ls /: %v", err)
		}
		var names []string
		for _, fi := range fis {
			names = append(names, fi.Name())
		}
		return names
	}
	if got := list(); !slices.Equal(got, []string{"db", "web"}) {
		t.Fatalf("ls /: got %q; want db and web", got)
	}
	mu.Lock()
	granted = []string{"web", "new"}
	mu.Unlock()
	if got := list(); !slices.Equal(got, []string{"new", "web"}) {
		t.Errorf("ls / after db was revoked and new granted: got %q; want new and web", got)
	}
	for _, p := range []string{"/db", "/db/f"} {
		if _, err := h.client.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("stat %s: got %v; want no such file", p, err)
		}
	}
	// The Decider's word: web's grant is gone though Granted still has it.
	h.deny = func(op Op) error { return fmt.Errorf("postern: %w", ErrNoSuchAlias) }
	if _, err := h.client.Stat("/web/f"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stat /web/f with no grant: got %v; want no such file", err)
	}
	mu.Lock()
	granted = nil
	mu.Unlock()
	if got := list(); len(got) != 0 {
		t.Errorf("ls / with no grant left: got %q; want nothing", got)
	}
}

// TestRidesNarrow: a setstat of modes and times rides on a write only for
// the file of the write handle the agent has just closed (stats of it may
// come between), and only while the Rider says the write's rule still
// holds; it is noted on that write's row. Anything else is decided.
func TestRidesNarrow(t *testing.T) {
	var mu sync.Mutex
	ruleHolds := true
	var asked []string
	h := startHarness(t, harnessOpts{aliases: []string{"web"}, ride: func(_ context.Context, write, op Op) bool {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, write.Method+" "+write.Paths[0]+" <- "+op.Method+" "+op.Paths[0])
		return ruleHolds
	}})
	c := h.client
	put := func(p string) *sftp.File {
		t.Helper()
		f, err := c.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
		if err != nil {
			t.Fatalf("open %s: %v", p, err)
		}
		if _, err := f.Write([]byte("data")); err != nil {
			t.Fatal(err)
		}
		return f
	}
	rule := func(holds bool) {
		mu.Lock()
		ruleHolds = holds
		mu.Unlock()
	}
	put("/web/old").Close()
	f := put("/web/up")
	steps := []struct {
		name string
		run  func() error
		want []string // method class detail of each decision
	}{
		{"fsetstat mode on the write handle", func() error { return f.Chmod(0o640) }, nil},
		{"close", f.Close, nil},
		{"stat between", func() error { _, err := c.Stat("/web/up"); return err }, []string{"stat read "}},
		{"setstat mode of the file just closed", func() error { return c.Chmod("/web/up", 0o600) }, nil},
		{"setstat times of it", func() error { return c.Chtimes("/web/up", time.Unix(1e9, 0), time.Unix(1e9, 0)) }, nil},
		{"setstat of a file written before", func() error { return c.Chmod("/web/old", 0o600) }, []string{"setstat write mode 0600"}},
		{"setstat of the file closed, after another request", func() error { return c.Chmod("/web/up", 0o644) }, []string{"setstat write mode 0644"}},
	}
	run := func(steps []struct {
		name string
		run  func() error
		want []string
	}) {
		for _, step := range steps {
			h.takeOps()
			if err := step.run(); err != nil {
				t.Errorf("%s: %v", step.name, err)
			}
			var got []string
			for _, op := range h.takeOps() {
				got = append(got, fmt.Sprintf("%s %s %s", op.Method, op.Class, op.Detail))
			}
			if !slices.Equal(got, step.want) {
				t.Errorf("%s: got decisions %q; want %q", step.name, got, step.want)
			}
		}
	}
	run(steps)
	o := h.awaitOutcome("put", "/up")
	wantRode := []string{"fsetstat (mode 0640): status 0", "setstat (mode 0600): status 0", "setstat (atime 2001-09-09T01:46:40Z, mtime 2001-09-09T01:46:40Z): status 0"}
	if !slices.Equal(o.Rode, wantRode) {
		t.Errorf("the put's row: rode %q; want %q", o.Rode, wantRode)
	}
	mu.Lock()
	if want := "put /up <- setstat /up"; len(asked) != 3 || asked[1] != want {
		t.Errorf("the Rider was asked %q; want three times, %q second", asked, want)
	}
	mu.Unlock()

	// The rule changes: nothing rides, on the handle or after its close.
	g := put("/web/later")
	rule(false)
	run([]struct {
		name string
		run  func() error
		want []string
	}{
		{"fsetstat mode on the write handle", func() error { return g.Chmod(0o640) }, []string{"fsetstat write mode 0640"}},
		{"fsetstat size where the writes end", func() error { return g.Truncate(4) }, []string{"fsetstat destructive size 4"}},
		{"close", g.Close, nil},
		{"setstat mode of the file just closed", func() error { return c.Chmod("/web/later", 0o600) }, []string{"setstat write mode 0600"}},
	})
	c.Stat("/web")
	if o := h.awaitOutcome("put", "/later"); len(o.Rode) != 0 {
		t.Errorf("the put's row after the rule changed: rode %q; want nothing", o.Rode)
	}
}

// TestWriteRowWhenSessionEnds: a write whose handle the agent leaves open
// gets its row when the session ends, saying so.
func TestWriteRowWhenSessionEnds(t *testing.T) {
	h := startHarness(t, harnessOpts{aliases: []string{"web"}})
	f, err := h.client.OpenFile("/web/f", os.O_WRONLY|os.O_CREATE)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("x"))
	h.client.Close()
	if err := h.served(); err != nil {
		t.Errorf("Serve: %v", err)
	}
	h.done <- nil // for the cleanup
	o := h.awaitOutcome("put", "/f")
	if o.Status != fxOK || !slices.Equal(o.Rode, []string{"the session ended before the file was closed"}) {
		t.Errorf("the put's outcome: got %+v; want status 0 and the session's end", o)
	}
}

// TestCopyAcrossAliasesSourceLost: when the source's target ends its
// session in the middle of a copy, the copy-data is answered with the loss,
// nothing waits past it, and the session goes on.
func TestCopyAcrossAliasesSourceLost(t *testing.T) {
	src, dst := newRawTarget(t), newRawTarget(t)
	chunk := strings.Repeat("a", copyChunk)
	src.answer = func(req []byte) []byte {
		switch req[4] {
		case fxpOpen:
			return handleAnswer(req, "s")
		case fxpRead:
			d := &decoder{b: req, off: 9}
			d.str()
			if d.u64() == 0 {
				b := newPacket(fxpData, 8+len(chunk))
				b = appendU32(b, binary.BigEndian.Uint32(req[5:9]))
				b = appendStr(b, chunk)
				return finish(b)
			}
			// The second read: the target dies with it unanswered.
			src.mu.Lock()
			defer src.mu.Unlock()
			src.conns[0].Close()
		}
		return nil
	}
	dst.answer = func(req []byte) []byte {
		if req[4] == fxpOpen {
			return handleAnswer(req, "d")
		}
		return nil
	}
	dial := func(ctx context.Context, alias string) (*Upstream, error) {
		if alias == "web" {
			return src.dial(ctx, alias)
		}
		return dst.dial(ctx, alias)
	}
	h := startHarness(t, harnessOpts{aliases: []string{"web", "db"}, raw: true, dial: dial})
	r := newRawConn(t, h.conn)
	hs := r.handleOf(fxpOpen, "/web/f", uint32(fxfRead), uint32(0))
	hd := r.handleOf(fxpOpen, "/db/g", uint32(fxfWrite|fxfCreat|fxfTrunc), uint32(0))
	if code, msg := r.status(fxpExtended, extCopyData, hs, uint64(0), uint64(0), hd, uint64(0)); code != fxConnectionLost || !strings.Contains(msg, "web ended") {
		t.Errorf("copy-data: got %d %q; want the loss of web's session", code, msg)
	}
	var wrote int
	testwait.Until(t, "db to take the chunk read before the loss", func() bool {
		wrote = 0
		for _, req := range dst.requests() {
			if req[4] == fxpWrite {
				wrote++
			}
		}
		return wrote > 0
	})
	if wrote != 1 {
		t.Errorf("db got %d writes; want the one chunk read before the loss", wrote)
	}
	if code, msg := r.status(fxpStat, "/"); code != fxOK {
		t.Errorf("stat / after the loss: got %d %q; want the session going on", code, msg)
	}
}
