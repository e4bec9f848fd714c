package demotarget

import (
	"bufio"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/postern/postern/internal/testwait"
	"go.uber.org/goleak"
	"golang.org/x/crypto/ssh"
)

// TestMain fails the package if any goroutine outlives its test: every
// target is closed by its test, and Close promises that nothing is left.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fixture is a running target and a client key it accepts.
type fixture struct {
	target *Target
	key    ssh.Signer
}

func newSigner(t *testing.T) ssh.Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func start(t *testing.T) *fixture {
	t.Helper()
	key := newSigner(t)
	// A command's output is read until the test's deadline after it exits:
	// a busy machine must not cut what a test compares. TestOutputDrain
	// sets a short drain of its own.
	tg, err := Start(Config{Dir: filepath.Join(t.TempDir(), "root"), AuthorizedKey: key.PublicKey(), OutputDrain: testwait.Remaining(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tg.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return &fixture{target: tg, key: key}
}

// dial connects with f.key, checking the host key against the target's.
func (f *fixture) dial(t *testing.T) *ssh.Client {
	t.Helper()
	c, err := ssh.Dial("tcp", f.target.Addr(), &ssh.ClientConfig{
		User:            "demo",
		Auth:            []ssh.AuthMethod{ssh.PublicKeys(f.key)},
		HostKeyCallback: ssh.FixedHostKey(f.target.HostKey()),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// outcome is what one exec produced.
type outcome struct {
	stdout, stderr []byte
	status         int    // -1 if no exit-status came
	signal         string // "" if no exit-signal came
	// reportBeforeEOF: the exit report was already queued when stdout hit
	// EOF, i.e. the target sent it first (requests and EOF are handled in
	// arrival order by the client's single reader).
	reportBeforeEOF bool
}

// run executes cmd over the raw channel API (not ssh.Session, so that the
// test sees the frames themselves) with stdin, then closes stdin.
func run(t *testing.T, c *ssh.Client, cmd string, stdin []byte) outcome {
	t.Helper()
	ch, reqs, err := c.OpenChannel("session", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	ok, err := ch.SendRequest("exec", true, ssh.Marshal(struct{ Command string }{cmd}))
	if err != nil || !ok {
		t.Fatalf("exec %q: got %v, %v; want accepted", cmd, ok, err)
	}
	go func() {
		ch.Write(stdin)
		ch.CloseWrite()
	}()
	errc := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(ch.Stderr())
		errc <- b
	}()
	out, err := io.ReadAll(ch)
	if err != nil {
		t.Fatalf("read stdout: %v", err)
	}
	o := outcome{stdout: out, status: -1}
	first := true
	timeout := testwait.End(t)
	for {
		var req *ssh.Request
		var open bool
		if first {
			select {
			case req, open = <-reqs:
				o.reportBeforeEOF = open
			default:
				first = false
				continue
			}
			first = false
		} else {
			select {
			case req, open = <-reqs:
			case <-timeout:
				t.Fatalf("exec %q: no channel close by the test's deadline", cmd)
			}
		}
		if !open {
			break
		}
		switch req.Type {
		case "exit-status":
			var p struct{ Status uint32 }
			if err := ssh.Unmarshal(req.Payload, &p); err != nil {
				t.Fatal(err)
			}
			o.status = int(p.Status)
		case "exit-signal":
			var p struct {
				Signal     string
				CoreDumped bool
				Error      string
				Lang       string
			}
			if err := ssh.Unmarshal(req.Payload, &p); err != nil {
				t.Fatal(err)
			}
			o.signal = p.Signal
		}
	}
	o.stderr = <-errc
	return o
}

func TestExitCodes(t *testing.T) {
	f := start(t)
	c := f.dial(t)
	tests := []struct {
		name   string
		cmd    string
		status int
		signal string
	}{
		{name: "success", cmd: "true", status: 0},
		{name: "failure", cmd: "false", status: 1},
		{name: "seven", cmd: "exit 7", status: 7},
		{name: "not found", cmd: "no-such-command-postern", status: 127},
		{name: "signal", cmd: "kill -TERM $$", status: -1, signal: "TERM"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := run(t, c, tt.cmd, nil)
			if o.status != tt.status || o.signal != tt.signal {
				t.Errorf("%q: got status %d signal %q; want %d %q (stderr %q)", tt.cmd, o.status, o.signal, tt.status, tt.signal, o.stderr)
			}
		})
	}
}

// TestOutputDrain: a background child that keeps stdout open does not
// hold the command's end past OutputDrain: the exit status comes. The
// drain is short here because its end is what this test is about; no
// output is compared, so a busy machine that cuts the copy early cannot
// fail it.
func TestOutputDrain(t *testing.T) {
	key := newSigner(t)
	tg, err := Start(Config{Dir: filepath.Join(t.TempDir(), "root"), AuthorizedKey: key.PublicKey(), OutputDrain: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tg.Close() })
	f := &fixture{target: tg, key: key}
	o := run(t, f.dial(t), "sleep 30 & exit 3", nil)
	if o.status != 3 || o.signal != "" {
		t.Errorf("got status %d signal %q; want 3 after the drain (stderr %q)", o.status, o.signal, o.stderr)
	}
}

func TestFrameOrder(t *testing.T) {
	f := start(t)
	c := f.dial(t)
	for i := range 20 {
		o := run(t, c, "echo hi; echo there >&2", nil)
		if !o.reportBeforeEOF {
			t.Fatalf("run %d: exit-status was not sent before EOF", i)
		}
		if string(o.stdout) != "hi\n" || string(o.stderr) != "there\n" || o.status != 0 {
			t.Fatalf("run %d: got %q %q %d; want hi, there, 0", i, o.stdout, o.stderr, o.status)
		}
	}
}

func TestStdin(t *testing.T) {
	f := start(t)
	c := f.dial(t)
	in := make([]byte, 3<<20)
	rand.Read(in)
	o := run(t, c, "cat", in)
	if sha256.Sum256(o.stdout) != sha256.Sum256(in) || o.status != 0 {
		t.Errorf("cat: got %d bytes, status %d; want the %d bytes back, 0", len(o.stdout), o.status, len(in))
	}
	o = run(t, c, "wc -c", []byte("12345"))
	if strings.TrimSpace(string(o.stdout)) != "5" {
		t.Errorf("wc -c: got %q; want 5", o.stdout)
	}
}

func TestStderr(t *testing.T) {
	f := start(t)
	c := f.dial(t)
	// More stderr than one channel window (2 MiB), which stalls a server
	// that does not drain it.
	o := run(t, c, "head -c 4194304 /dev/zero >&2; echo done", nil)
	if len(o.stderr) != 4<<20 || string(o.stdout) != "done\n" || o.status != 0 {
		t.Errorf("got %d stderr bytes, stdout %q, status %d; want 4 MiB, done, 0", len(o.stderr), o.stdout, o.status)
	}
}

func TestScratchDir(t *testing.T) {
	f := start(t)
	c := f.dial(t)
	dir, err := filepath.EvalSymlinks(f.target.Dir())
	if err != nil {
		t.Fatal(err)
	}
	o := run(t, c, `pwd -P; cd "$HOME" && pwd -P; echo x > note.txt`, nil)
	if got, want := string(o.stdout), dir+"\n"+dir+"\n"; got != want {
		t.Errorf("got %q; want %q (cwd and HOME the scratch dir)", got, want)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "note.txt")); err != nil || string(b) != "x\n" {
		t.Errorf("note.txt: got %q, %v; want x", b, err)
	}
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("scratch dir mode: got %v, %v; want 0700", st.Mode().Perm(), err)
	}
}

func TestShellRefused(t *testing.T) {
	f := start(t)
	c := f.dial(t)
	ch, _, err := c.OpenChannel("session", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if ok, err := ch.SendRequest("pty-req", true, ssh.Marshal(struct {
		Term             string
		Cols, Rows, W, H uint32
		Modes            string
	}{"xterm", 80, 24, 0, 0, ""})); err != nil || !ok {
		t.Errorf("pty-req: got %v, %v; want accepted", ok, err)
	}
	if ok, err := ch.SendRequest("env", true, ssh.Marshal(struct{ Name, Value string }{"LANG", "C"})); err != nil || ok {
		t.Errorf("env: got %v, %v; want refused", ok, err)
	}
	ok, err := ch.SendRequest("shell", true, nil)
	if err != nil || ok {
		t.Errorf("shell: got %v, %v; want refused", ok, err)
	}
	msg, _ := io.ReadAll(ch.Stderr())
	if !strings.Contains(string(msg), "demo target: interactive shells are not supported") {
		t.Errorf("stderr: got %q; want the refusal", msg)
	}
}

// TestSignal sends TERM, not INT: a test binary that a non-interactive
// shell started in the background (as CI scripts do) inherits SIGINT
// ignored, and so does every command it starts, so an INT would reach the
// command and be ignored, and the test would wait out the command's
// sleep (60 s in a run of 2026-12-07). postern itself handles SIGINT
// (serve's signal.NotifyContext), so what it starts has the default.
func TestSignal(t *testing.T) {
	f := start(t)
	c := f.dial(t)
	ch, reqs, err := c.OpenChannel("session", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if ok, err := ch.SendRequest("exec", true, ssh.Marshal(struct{ Command string }{"echo started; sleep 60"})); err != nil || !ok {
		t.Fatalf("exec: %v %v", ok, err)
	}
	buf := make([]byte, 8)
	if _, err := io.ReadFull(ch, buf); err != nil || string(buf) != "started\n" {
		t.Fatalf("got %q, %v; want started", buf, err)
	}
	if ok, err := ch.SendRequest("signal", true, ssh.Marshal(struct{ Signal string }{"TERM"})); err != nil || !ok {
		t.Fatalf("signal: got %v, %v; want delivered", ok, err)
	}
	for req := range reqs {
		if req.Type == "exit-signal" {
			var p struct{ Signal string }
			ssh.Unmarshal(req.Payload, &p)
			if p.Signal != "TERM" {
				t.Errorf("exit-signal: got %q; want TERM", p.Signal)
			}
			return
		}
	}
	t.Error("no exit-signal")
}

func TestOnlyTheAuthorizedKey(t *testing.T) {
	f := start(t)
	_, err := ssh.Dial("tcp", f.target.Addr(), &ssh.ClientConfig{
		User:            "demo",
		Auth:            []ssh.AuthMethod{ssh.PublicKeys(newSigner(t))},
		HostKeyCallback: ssh.FixedHostKey(f.target.HostKey()),
	})
	if err == nil || !strings.Contains(err.Error(), "unable to authenticate") {
		t.Errorf("got %v; want unable to authenticate", err)
	}
}

func TestBannerAndVersion(t *testing.T) {
	f := start(t)
	var banner string
	var version []byte
	c, err := ssh.Dial("tcp", f.target.Addr(), &ssh.ClientConfig{
		User: "demo",
		Auth: []ssh.AuthMethod{ssh.PublicKeys(f.key)},
		HostKeyCallback: func(_ string, _ net.Addr, key ssh.PublicKey) error {
			return ssh.FixedHostKey(f.target.HostKey())("", nil, key)
		},
		BannerCallback: func(m string) error { banner = m; return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	version = c.ServerVersion()
	c.Close()
	if !strings.Contains(banner, "postern demo target") || string(version) != ServerVersion {
		t.Errorf("got banner %q version %q; want the demo target named in both", banner, version)
	}
	if line := f.target.KnownHostsLine(); !strings.HasPrefix(line, "[127.0.0.1]:") || !strings.Contains(line, "ssh-ed25519 ") {
		t.Errorf("KnownHostsLine: got %q", line)
	}
}

func TestLoopbackOnly(t *testing.T) {
	key := newSigner(t)
	for _, addr := range []string{"0.0.0.0:0", ":0", "example.com:22"} {
		if tg, err := Start(Config{Dir: t.TempDir(), AuthorizedKey: key.PublicKey(), Addr: addr}); err == nil {
			tg.Close()
			t.Errorf("Start(%q): got nil error; want refused", addr)
		}
	}
}

// TestCloseEndsEverything closes the target under a running command and an
// idle connection; goleak (TestMain) then checks nothing is left.
func TestCloseEndsEverything(t *testing.T) {
	key := newSigner(t)
	tg, err := Start(Config{Dir: t.TempDir(), AuthorizedKey: key.PublicKey()})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{target: tg, key: key}
	c := f.dial(t)
	ch, _, err := c.OpenChannel("session", nil)
	if err != nil {
		t.Fatal(err)
	}
	// The shell prints its pid and becomes sleep (exec), so the pid is
	// the command's.
	if ok, err := ch.SendRequest("exec", true, ssh.Marshal(struct{ Command string }{"echo $$; exec sleep 600"})); err != nil || !ok {
		t.Fatalf("exec: %v %v", ok, err)
	}
	line, err := bufio.NewReader(ch).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("the command's pid: %q: %v", line, err)
	}
	f.dial(t) // an idle second connection
	if err := tg.Close(); err != nil {
		t.Fatal(err)
	}
	// Close returned: the command was killed and reaped, not left to run
	// out its 600 s.
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("signal 0 to the command (pid %d) after Close: %v; want ESRCH (killed and reaped)", pid, err)
	}
	// The channel ends (EOF or an error) instead of hanging.
	io.ReadAll(ch)
	if err := tg.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
