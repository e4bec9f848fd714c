package sftpgate

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/pkg/sftp"
	"github.com/postern/postern/internal/testwait"
	"github.com/postern/postern/policy"
)

func TestVirtualRootListing(t *testing.T) {
	h := startHarness(t, harnessOpts{aliases: []string{"web", "db", "", "a/b", ".."}})
	fis, err := h.client.ReadDir("/")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, fi := range fis {
		names = append(names, fi.Name())
		if !fi.IsDir() {
			t.Errorf("%s: got mode %v; want a directory", fi.Name(), fi.Mode())
		}
	}
	if want := []string{"db", "web"}; !slices.Equal(names, want) {
		t.Errorf("got %q; want %q", names, want)
	}
	for _, p := range []string{"/", "/web", "/db/", "web"} {
		fi, err := h.client.Stat(p)
		if err != nil || !fi.IsDir() {
			t.Errorf("stat %s: got %v, %v; want a directory", p, fi, err)
		}
	}
	if _, err := h.client.Stat("/nope"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("stat /nope: got %v; want not exist", err)
	}
	for _, p := range []string{".", "/", "/web/..", "web"} {
		got, err := h.client.RealPath(p)
		want := "/"
		if p == "web" {
			want = "/web"
		}
		if err != nil || got != want {
			t.Errorf("realpath %q: got %q, %v; want %q", p, got, err, want)
		}
	}
	if ops := h.takeOps(); len(ops) != 0 {
		t.Errorf("got decisions %+v; want none for the virtual root", ops)
	}
	if n := h.dialCount("web") + h.dialCount("db"); n != 0 {
		t.Errorf("got %d dials; want none for the virtual root", n)
	}
}

func TestVirtualRootIsReadOnly(t *testing.T) {
	h := startHarness(t, harnessOpts{aliases: []string{"web"}, raw: true})
	r := newRawConn(t, h.conn)
	tests := []struct {
		name   string
		typ    byte
		fields []any
	}{
		{"mkdir in root", fxpMkdir, []any{"/new", uint32(0)}},
		{"put in root", fxpOpen, []any{"/f", uint32(0x1a), uint32(0)}},
		{"remove alias", fxpRemove, []any{"/web"}},
		{"rmdir alias", fxpRmdir, []any{"/web"}},
		{"rmdir root", fxpRmdir, []any{"/"}},
		{"rename alias", fxpRename, []any{"/web", "/web2"}},
		{"rename into root", fxpRename, []any{"/web/f", "/f"}},
		{"symlink in root", fxpSymlink, []any{"/web/f", "/link"}},
		{"setstat alias", 9, []any{"/web", uint32(4), uint32(0o700)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, msg := r.status(tt.typ, tt.fields...)
			if code != fxPermissionDenied || !strings.Contains(msg, "virtual root is read-only") {
				t.Errorf("got %d %q; want permission denied, virtual root is read-only", code, msg)
			}
		})
	}
	if ops := h.takeOps(); len(ops) != 0 {
		t.Errorf("got decisions %+v; want none", ops)
	}
	if n := h.dialCount("web"); n != 0 {
		t.Errorf("got %d dials; want none", n)
	}
}

// TestDecideEveryOperation checks the class, method, paths and detail each
// SFTP operation is decided with, in both views, and that each then really
// happened on the target.
func TestDecideEveryOperation(t *testing.T) {
	for _, view := range []struct {
		name  string
		fixed string
		pre   string // the agent's prefix for the target's paths
	}{
		{"virtual root", "", "/web"},
		{"fixed", "web", ""},
	} {
		t.Run(view.name, func(t *testing.T) {
			o := harnessOpts{aliases: []string{"web"}}
			if view.fixed != "" {
				o = harnessOpts{fixed: "web"}
			}
			h := startHarness(t, o)
			h.seed("web", func(c *sftp.Client) {
				for _, d := range []string{"/d", "/d/empty"} {
					if err := c.Mkdir(d); err != nil {
						t.Fatal(err)
					}
				}
			})
			for _, f := range []string{"/d/f", "/d/g", "/d/h", "/d/m", "/d/gone", "/d/exists"} {
				h.writeFile("web", f, "hello")
			}
			h.seed("web", func(c *sftp.Client) {
				if err := c.Symlink("/d/f", "/d/link"); err != nil {
					t.Fatal(err)
				}
			})
			c, p := h.client, func(s string) string { return view.pre + s }
			// realpath is decided with the path as the agent sent it in
			// the fixed view (the target resolves it), mapped and clean
			// in the virtual root.
			realpathShown := "/d"
			if view.fixed != "" {
				realpathShown = "/d/../d"
			}
			tests := []struct {
				name string
				run  func() error
				want Op
			}{
				{"list", func() error { _, err := c.ReadDir(p("/d")); return err }, Op{"web", policy.Read, "list", []string{"/d"}, ""}},
				{"stat", func() error { _, err := c.Stat(p("/d/f")); return err }, Op{"web", policy.Read, "stat", []string{"/d/f"}, ""}},
				{"lstat", func() error { _, err := c.Lstat(p("/d/link")); return err }, Op{"web", policy.Read, "lstat", []string{"/d/link"}, ""}},
				{"readlink", func() error { _, err := c.ReadLink(p("/d/link")); return err }, Op{"web", policy.Read, "readlink", []string{"/d/link"}, ""}},
				{"realpath", func() error { _, err := c.RealPath(p("/d/../d")); return err }, Op{"web", policy.Read, "realpath", []string{realpathShown}, ""}},
				{"statvfs", func() error { _, err := c.StatVFS(p("/")); return err }, Op{"web", policy.Read, "statvfs", []string{"/"}, ""}},
				{"get", func() error { f, err := c.Open(p("/d/f")); f.Close(); return err }, Op{"web", policy.Read, "get", []string{"/d/f"}, ""}},
				{"put", func() error {
					f, err := c.OpenFile(p("/d/new"), os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
					f.Close()
					return err
				}, Op{"web", policy.Write, "put", []string{"/d/new"}, "write,create,truncate"}},
				{"append", func() error { f, err := c.OpenFile(p("/d/f"), os.O_WRONLY|os.O_APPEND); f.Close(); return err }, Op{"web", policy.Write, "put", []string{"/d/f"}, "write,append"}},
				{"open read-write", func() error { f, err := c.OpenFile(p("/d/f"), os.O_RDWR); f.Close(); return err }, Op{"web", policy.Write, "open", []string{"/d/f"}, "read,write"}},
				{"setstat", func() error { return c.Chmod(p("/d/m"), 0o600) }, Op{"web", policy.Write, "setstat", []string{"/d/m"}, "mode 0600"}},
				{"truncate", func() error { return c.Truncate(p("/d/m"), 2) }, Op{"web", policy.Destructive, "setstat", []string{"/d/m"}, "size 2"}},
				{"mkdir", func() error { return c.Mkdir(p("/d/sub")) }, Op{"web", policy.Write, "mkdir", []string{"/d/sub"}, ""}},
				{"rename", func() error { return c.Rename(p("/d/g"), p("/d/g2")) }, Op{"web", policy.Write, "rename", []string{"/d/g", "/d/g2"}, ""}},
				{"posix-rename", func() error { return c.PosixRename(p("/d/h"), p("/d/h2")) }, Op{"web", policy.Write, "posix-rename", []string{"/d/h", "/d/h2"}, ""}},
				{"posix-rename over a file", func() error { return c.PosixRename(p("/d/h2"), p("/d/exists")) },
					Op{"web", policy.Write, "posix-rename", []string{"/d/h2", "/d/exists"}, "replaces a file of 5 bytes"}},
				{"symlink", func() error { return c.Symlink("f", p("/d/sl")) }, Op{"web", policy.Write, "symlink", []string{"f", "/d/sl"}, ""}},
				{"hardlink", func() error { return c.Link(p("/d/f"), p("/d/hl")) }, Op{"web", policy.Write, "hardlink", []string{"/d/f", "/d/hl"}, ""}},
				{"remove", func() error { return c.Remove(p("/d/gone")) }, Op{"web", policy.Destructive, "remove", []string{"/d/gone"}, ""}},
				{"rmdir", func() error { return c.RemoveDirectory(p("/d/empty")) }, Op{"web", policy.Destructive, "rmdir", []string{"/d/empty"}, ""}},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					h.takeOps()
					if err := tt.run(); err != nil {
						t.Fatalf("%s: %v", tt.name, err)
					}
					ops := h.takeOps()
					if len(ops) == 0 || !reflect.DeepEqual(ops[0], tt.want) {
						t.Errorf("got decisions %+v; want first %+v", ops, tt.want)
					}
				})
			}
			// Each operation really happened on the target.
			h.seed("web", func(c *sftp.Client) {
				for _, f := range []string{"/d/new", "/d/sub", "/d/g2", "/d/exists", "/d/hl"} {
					if _, err := c.Stat(f); err != nil {
						t.Errorf("stat %s on the target: %v", f, err)
					}
				}
				for _, f := range []string{"/d/gone", "/d/empty", "/d/g", "/d/h", "/d/h2"} {
					if _, err := c.Lstat(f); !errors.Is(err, fs.ErrNotExist) {
						t.Errorf("lstat %s on the target: got %v; want not exist", f, err)
					}
				}
				if got, err := c.ReadLink("/d/sl"); err != nil || got != "f" {
					t.Errorf("readlink /d/sl on the target: got %q, %v; want %q", got, err, "f")
				}
				// (pkg/sftp's in-memory target ignores modes; openssh_test.go
				// checks them on a real one.)
				if fi, err := c.Stat("/d/m"); err != nil || fi.Size() != 2 {
					t.Errorf("/d/m on the target: got %v, %v; want 2 bytes", fi, err)
				}
			})
			// Every allowed operation's outcome was recorded, as the
			// target answered it (all of them once Serve has returned).
			h.client.Close()
			if err := h.served(); err != nil {
				t.Errorf("Serve: %v", err)
			}
			h.done <- nil // for the cleanup
			for _, oo := range h.takeOutcomes() {
				if !oo.o.Answered || oo.o.Status != fxOK {
					t.Errorf("%+v: outcome %+v; want answered OK", oo.op, oo.o)
				}
			}
		})
	}
}

// TestDenyLeavesTargetUnchanged refuses every write and destructive
// operation and checks the answer carries the Decider's reason and the
// target is as before.
func TestDenyLeavesTargetUnchanged(t *testing.T) {
	h := startHarness(t, harnessOpts{aliases: []string{"web"}, raw: true})
	h.seed("web", func(c *sftp.Client) { c.Mkdir("/d") })
	h.writeFile("web", "/d/f", "hello")
	const reason = "postern: write on web denied by the grant's rule"
	h.mu.Lock()
	h.deny = func(op Op) error {
		if op.Class == policy.Read {
			return nil
		}
		return errors.New(reason)
	}
	h.mu.Unlock()
	r := newRawConn(t, h.conn)
	tests := []struct {
		name   string
		typ    byte
		fields []any
	}{
		{"put truncate", fxpOpen, []any{"/web/d/f", uint32(0x1a), uint32(0)}},
		{"put new", fxpOpen, []any{"/web/d/new", uint32(0x0a), uint32(0)}},
		{"mkdir", fxpMkdir, []any{"/web/d/sub", uint32(0)}},
		{"remove", fxpRemove, []any{"/web/d/f"}},
		{"rmdir", fxpRmdir, []any{"/web/d"}},
		{"rename", fxpRename, []any{"/web/d/f", "/web/d/g"}},
		{"symlink", fxpSymlink, []any{"f", "/web/d/sl"}},
		{"setstat", 9, []any{"/web/d/f", uint32(4), uint32(0o600)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, msg := r.status(tt.typ, tt.fields...)
			if code != fxPermissionDenied || msg != reason {
				t.Errorf("got %d %q; want %d %q", code, msg, fxPermissionDenied, reason)
			}
		})
	}
	h.seed("web", func(c *sftp.Client) {
		fis, err := c.ReadDir("/d")
		if err != nil {
			t.Fatal(err)
		}
		if len(fis) != 1 || fis[0].Name() != "f" || fis[0].Size() != 5 || fis[0].Mode().Perm() != 0o644 {
			var got []string
			for _, fi := range fis {
				got = append(got, fi.Name()+" "+fi.Mode().String())
			}
			t.Errorf("target /d holds %q; want only f, 5 bytes, -rw-r--r--", got)
		}
	})
	// A refused read is refused the same way.
	h.mu.Lock()
	h.deny = func(Op) error { return errors.New("postern: no") }
	h.mu.Unlock()
	if code, msg := r.status(fxpStat, "/web/d/f"); code != fxPermissionDenied || msg != "postern: no" {
		t.Errorf("stat: got %d %q; want permission denied %q", code, msg, "postern: no")
	}
}

func TestDotDotStaysInside(t *testing.T) {
	h := startHarness(t, harnessOpts{aliases: []string{"web", "db"}, raw: true})
	h.seed("db", func(c *sftp.Client) { c.Mkdir("/x") })
	r := newRawConn(t, h.conn)
	tests := []struct {
		in       string
		wantCode uint32
		wantOp   *Op
	}{
		{"/web/../db/x", fxOK, &Op{"db", policy.Read, "stat", []string{"/x"}, ""}},
		{"/web/../../../db/x", fxOK, &Op{"db", policy.Read, "stat", []string{"/x"}, ""}},
		{"web/../db/x", fxOK, &Op{"db", policy.Read, "stat", []string{"/x"}, ""}},
		{"/web/../etc/passwd", fxNoSuchFile, nil},
		{"/web/..", fxOK, nil},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			code, msg := r.status(fxpStat, tt.in)
			if code != tt.wantCode {
				t.Errorf("stat %q: got %d %q; want code %d", tt.in, code, msg, tt.wantCode)
			}
			ops := h.takeOps()
			switch {
			case tt.wantOp == nil && len(ops) != 0:
				t.Errorf("got decisions %+v; want none", ops)
			case tt.wantOp != nil && (len(ops) != 1 || !reflect.DeepEqual(ops[0], *tt.wantOp)):
				t.Errorf("got decisions %+v; want %+v", ops, *tt.wantOp)
			}
		})
	}
	if code, msg := r.status(fxpMkdir, "/web/../newdir", uint32(0)); code != fxPermissionDenied {
		t.Errorf("mkdir /web/../newdir: got %d %q; want permission denied", code, msg)
	}
	if n := h.dialCount("web"); n != 0 {
		t.Errorf("got %d dials to web; want none", n)
	}
}

// TestFixedViewRelativePaths: the fixed view forwards a relative path as
// the agent sent it (the target resolves it, ".." stopping at "/"), and
// decides it joined to the start directory.
func TestFixedViewRelativePaths(t *testing.T) {
	h := startHarness(t, harnessOpts{fixed: "web", home: "/home/u"})
	h.seed("web", func(c *sftp.Client) { c.Mkdir("/x") })
	h.takeOps()
	if _, err := h.client.Stat("../../../../x"); err != nil {
		t.Fatal(err)
	}
	ops := h.takeOps()
	if want := (Op{"web", policy.Read, "stat", []string{"/home/u/../../../../x"}, ""}); len(ops) != 1 || !reflect.DeepEqual(ops[0], want) {
		t.Errorf("got decisions %+v; want %+v", ops, want)
	}
}

func TestHostilePaths(t *testing.T) {
	h := startHarness(t, harnessOpts{aliases: []string{"web"}, raw: true})
	r := newRawConn(t, h.conn)
	long := "/web/" + strings.Repeat("d/", MaxPathLen/2)
	tests := []struct {
		name    string
		typ     byte
		fields  []any
		wantMsg string
	}{
		{"NUL in stat", fxpStat, []any{"/web/etc/passwd\x00.txt"}, "control byte 0x00"},
		{"NUL in put", fxpOpen, []any{"/web/tmp/a\x00b", uint32(0x1a), uint32(0)}, "control byte 0x00"},
		{"newline in mkdir", fxpMkdir, []any{"/web/a\nb", uint32(0)}, "control byte 0x0a"},
		{"escape in realpath", fxpRealpath, []any{"/web/\x1b[2J"}, "control byte 0x1b"},
		{"NUL in symlink target", fxpSymlink, []any{"/web/x\x00", "/web/l"}, "control byte 0x00"},
		{"long stat", fxpStat, []any{long}, "longer than 4096"},
		{"long mkdir", fxpMkdir, []any{long, uint32(0)}, "longer than 4096"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, msg := r.status(tt.typ, tt.fields...)
			if code != fxPermissionDenied || !strings.Contains(msg, tt.wantMsg) {
				t.Errorf("got %d %q; want permission denied with %q", code, msg, tt.wantMsg)
			}
		})
	}
	if ops := h.takeOps(); len(ops) != 0 {
		t.Errorf("got decisions %+v; want none", ops)
	}
	if n := h.dialCount("web"); n != 0 {
		t.Errorf("got %d dials; want none", n)
	}
}

// TestSymlinkWireOrder sends SSH_FXP_SYMLINK as OpenSSH's sftp does (link
// target first, link path second) and checks the link made on the target.
func TestSymlinkWireOrder(t *testing.T) {
	h := startHarness(t, harnessOpts{aliases: []string{"web"}, raw: true})
	h.seed("web", func(c *sftp.Client) { c.Mkdir("/d") })
	h.writeFile("web", "/d/f", "hello")
	r := newRawConn(t, h.conn)
	if code, msg := r.status(fxpSymlink, "/web/d/f", "/web/d/abs"); code != fxOK {
		t.Fatalf("symlink: got %d %q", code, msg)
	}
	if code, msg := r.status(fxpSymlink, "f", "/web/d/rel"); code != fxOK {
		t.Fatalf("symlink: got %d %q", code, msg)
	}
	if code, msg := r.status(fxpSymlink, "/db/x", "/web/d/cross"); code != fxPermissionDenied || !strings.Contains(msg, "cannot point at") {
		t.Errorf("symlink into another alias: got %d %q; want permission denied", code, msg)
	}
	h.seed("web", func(c *sftp.Client) {
		for link, want := range map[string]string{"/d/abs": "/d/f", "/d/rel": "f"} {
			if got, err := c.ReadLink(link); err != nil || got != want {
				t.Errorf("readlink %s on the target: got %q, %v; want %q", link, got, err, want)
			}
		}
	})
	// Read back through the gate, an absolute content is in the agent's view.
	if got, err := r.name(fxpReadlink, "/web/d/abs"); err != nil || got != "/web/d/f" {
		t.Errorf("readlink through the gate: got %q, %v; want %q", got, err, "/web/d/f")
	}
}

func TestFixedViewStartsInHome(t *testing.T) {
	h := startHarness(t, harnessOpts{fixed: "web", home: "/home/u"})
	if n := h.dialCount("web"); n != 1 {
		t.Errorf("got %d dials; want the fixed target dialed at start", n)
	}
	if got, err := h.client.Getwd(); err != nil || got != "/home/u" {
		t.Errorf("getwd: got %q, %v; want /home/u", got, err)
	}
	f, err := h.client.Create("f.txt")
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("x"))
	f.Close()
	h.seed("web", func(c *sftp.Client) {
		if _, err := c.Stat("/home/u/f.txt"); err != nil {
			t.Errorf("f.txt is not in the home directory: %v", err)
		}
	})
	if n := h.dialCount("web"); n != 1 {
		t.Errorf("got %d dials; want one upstream session reused", n)
	}
}

func TestLazyDialAndReuse(t *testing.T) {
	h := startHarness(t, harnessOpts{aliases: []string{"web", "db"}})
	h.client.ReadDir("/")
	h.client.Stat("/web")
	if got := h.dialCount("web") + h.dialCount("db"); got != 0 {
		t.Fatalf("got %d dials before an alias is used; want 0", got)
	}
	for i := 0; i < 3; i++ {
		h.client.ReadDir("/web/")
		h.client.Stat("/web/x")
	}
	if got, want := [2]int{h.dialCount("web"), h.dialCount("db")}, [2]int{1, 0}; got != want {
		t.Errorf("got dials web, db = %v; want %v", got, want)
	}
	h.client.ReadDir("/db")
	if got := h.dialCount("db"); got != 1 {
		t.Errorf("got %d dials to db; want 1", got)
	}
}

func TestCleanEndClosesUpstreams(t *testing.T) {
	h := startHarness(t, harnessOpts{aliases: []string{"web", "db"}})
	h.writeFile("web", "/f", "hello")
	h.client.ReadDir("/web")
	h.client.ReadDir("/db")
	// A handle left open at the end is closed on the target too.
	if _, err := h.client.Open("/web/f"); err != nil {
		t.Fatal(err)
	}
	if err := h.client.Close(); err != nil {
		t.Fatal(err)
	}
	if err := h.served(); err != nil {
		t.Errorf("Serve after a clean end: got %v; want nil", err)
	}
	h.done <- nil // for the cleanup
	h.mu.Lock()
	defer h.mu.Unlock()
	if want := map[string]int{"web": 1, "db": 1}; !reflect.DeepEqual(h.closes, want) {
		t.Errorf("got closes %v; want %v", h.closes, want)
	}
}

// TestWaitingDecisionEndsWithAgent checks that an operation waiting for an
// approval stops waiting when the agent goes away, and Serve returns.
func TestWaitingDecisionEndsWithAgent(t *testing.T) {
	waiting := make(chan struct{})
	ended := make(chan error, 1)
	h := startHarness(t, harnessOpts{aliases: []string{"web"}, raw: true, decide: func(ctx context.Context, op Op) (Finish, error) {
		close(waiting)
		<-ctx.Done()
		ended <- ctx.Err()
		return nil, ctx.Err()
	}})
	r := newRawConn(t, h.conn)
	r.send(fxpMkdir, uint32(1), "/web/x", uint32(0))
	testwait.Recv(t, "the mkdir to wait for a decision", waiting)
	h.conn.Close()
	// The agent going is what ends the wait: the test's own cancel comes
	// only at its cleanup.
	if err := testwait.Recv(t, "the waiting decision to end after the agent went", ended); !errors.Is(err, context.Canceled) {
		t.Errorf("the waiting decision's context ended with %v; want context.Canceled", err)
	}
	// The agent left without an orderly end, abandoning the request:
	// whether Serve calls that an error is not what this test pins, only
	// that it returns.
	h.served()
	h.done <- nil
}

// TestServeStopsWithContext checks that Serve returns when its context ends,
// even with an operation waiting for a decision.
func TestServeStopsWithContext(t *testing.T) {
	a, b := tcpPair(t)
	defer a.Close()
	defer b.Close()
	ctx, cancel := context.WithCancel(context.Background())
	waiting := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, b, Config{
			Aliases: []string{"web"},
			Decide: func(ctx context.Context, op Op) (Finish, error) {
				close(waiting)
				<-ctx.Done()
				return nil, ctx.Err()
			},
			Dial: func(ctx context.Context, alias string) (*Upstream, error) { return nil, errors.New("unused") },
		})
	}()
	r := newRawConn(t, a)
	r.send(fxpStat, uint32(1), "/web/x")
	testwait.Recv(t, "the stat to wait for a decision", waiting)
	cancel()
	if err := testwait.Recv(t, "Serve to return after its context ended", done); !errors.Is(err, context.Canceled) {
		t.Errorf("got %v; want context.Canceled", err)
	}
}

func TestDialFailure(t *testing.T) {
	a, b := tcpPair(t)
	defer a.Close()
	defer b.Close()
	done := make(chan error, 1)
	dials := 0
	go func() {
		done <- Serve(context.Background(), b, Config{
			Aliases: []string{"web"},
			Decide:  allowAll,
			Dial: func(ctx context.Context, alias string) (*Upstream, error) {
				dials++
				return nil, errors.New("dial tcp 10.1.2.3:22: secret host detail")
			},
		})
	}()
	r := newRawConn(t, a)
	for i := 0; i < 2; i++ {
		code, msg := r.status(fxpStat, "/web/x")
		if code == fxOK || strings.Contains(msg, "10.1.2.3") || !strings.Contains(msg, "cannot reach web") {
			t.Errorf("got %d %q; want a failure naming web and not the host", code, msg)
		}
	}
	a.Close()
	testwait.Recv(t, "Serve to return", done)
	if dials != 2 {
		t.Errorf("got %d dials; want a failed dial retried", dials)
	}
}

func TestFixedDialFailureIsReturned(t *testing.T) {
	a, b := tcpPair(t)
	defer a.Close()
	defer b.Close()
	err := Serve(context.Background(), b, Config{
		Fixed:  "web",
		Decide: allowAll,
		Dial:   func(context.Context, string) (*Upstream, error) { return nil, errors.New("boom") },
	})
	if err == nil || !strings.HasPrefix(err.Error(), "sftpgate: ") {
		t.Errorf("got %v; want an sftpgate error", err)
	}
}

func TestReadWriteRelay(t *testing.T) {
	h := startHarness(t, harnessOpts{aliases: []string{"web"}})
	data := make([]byte, 1<<20+123)
	for i := range data {
		data[i] = byte(i * 7)
	}
	f, err := h.client.Create("/web/big")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadFrom(strings.NewReader(string(data))); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	g, err := h.client.Open("/web/big")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(g)
	g.Close()
	if err != nil || string(got) != string(data) {
		t.Fatalf("read back %d bytes, %v; want the %d written", len(got), err, len(data))
	}
	// Truncate on open.
	tr, err := h.client.OpenFile("/web/big", os.O_WRONLY|os.O_TRUNC)
	if err != nil {
		t.Fatal(err)
	}
	tr.Close()
	if fi, err := h.client.Stat("/web/big"); err != nil || fi.Size() != 0 {
		t.Errorf("after truncate: got %v, %v; want size 0", fi, err)
	}
	// Exclusive create of an existing file fails.
	if _, err := h.client.OpenFile("/web/big", os.O_WRONLY|os.O_CREATE|os.O_EXCL); err == nil {
		t.Errorf("exclusive create of an existing file succeeded")
	}
	// A missing file is not found, with the code clients branch on.
	if _, err := h.client.Open("/web/missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("open missing: got %v; want not exist", err)
	}
}

// TestSideEffectDevices: opening a device that acts on the machine when
// opened (a watchdog arms a reboot) is destructive even for reading, and
// so is a link to one, whose next open would be a read.
func TestSideEffectDevices(t *testing.T) {
	h := startHarness(t, harnessOpts{fixed: "web"})
	c := h.client
	tests := []struct {
		name   string
		run    func() error
		method string
		paths  []string
	}{
		{"read the watchdog", func() error {
			f, err := c.Open("/dev/watchdog")
			if err == nil {
				f.Close()
			}
			return err
		}, "get", []string{"/dev/watchdog"}},
		{"read through /proc/1/root", func() error {
			f, err := c.Open("/proc/1/root/dev/mem")
			if err == nil {
				f.Close()
			}
			return err
		}, "get", []string{"/proc/1/root/dev/mem"}},
		{"link to the watchdog", func() error { return c.Symlink("/dev/watchdog0", "/wd") }, "symlink", []string{"/dev/watchdog0", "/wd"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h.takeOps()
			_ = tt.run() // the in-memory target has no such device; the decision is what counts
			ops := h.takeOps()
			if len(ops) == 0 || ops[0].Class != policy.Destructive || ops[0].Method != tt.method ||
				!reflect.DeepEqual(ops[0].Paths, tt.paths) || !strings.Contains(ops[0].Detail, "acts on the machine") {
				t.Errorf("decisions %+v; want first a destructive %s of %v saying why", ops, tt.method, tt.paths)
			}
		})
	}
}
