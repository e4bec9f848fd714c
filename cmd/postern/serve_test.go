package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/postern/postern/bastion"
)

// fakeAgentServer is an agentServer whose Serve blocks until Shutdown, or
// returns serveErr at once when that is set.
type fakeAgentServer struct {
	serveErr error
	shutErr  error

	// mu protects shutdowns.
	mu        sync.Mutex
	shutdowns int
	stopped   chan struct{}
}

func newFakeAgentServer() *fakeAgentServer { return &fakeAgentServer{stopped: make(chan struct{})} }

func (f *fakeAgentServer) Serve(ln net.Listener) error {
	if f.serveErr != nil {
		return f.serveErr
	}
	<-f.stopped
	return bastion.ErrServerClosed
}

func (f *fakeAgentServer) Shutdown(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.shutdowns++
	if f.shutdowns == 1 {
		close(f.stopped)
	}
	return f.shutErr
}

func listenTestAddr(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

func TestServeUntil(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		serveErr error // Serve returns this at once
		shutErr  error
		cancel   bool // the signal arrives
		wantErr  string
	}{
		{name: "signal: clean shutdown", cancel: true},
		{name: "signal: grace ran out", cancel: true, shutErr: context.DeadlineExceeded},
		{name: "signal: shutdown failed", cancel: true, shutErr: errors.New("boom"), wantErr: "serve: shutdown: boom"},
		{name: "serve failed", serveErr: errors.New("accept: too many files"), wantErr: "serve: bastion: accept: too many files"},
		{name: "serve stopped by itself", serveErr: bastion.ErrServerClosed, wantErr: "serve: bastion: stopped without being asked to"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFakeAgentServer()
			srv.serveErr, srv.shutErr = tt.serveErr, tt.shutErr
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.cancel {
				cancel()
			}
			done := make(chan error, 1)
			go func() { done <- serveUntil(ctx, srv, listenTestAddr(t), time.Second, zerolog.Nop()) }()
			var err error
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("serveUntil did not return")
			}
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.wantErr {
				t.Errorf("got error %q; want %q", got, tt.wantErr)
			}
			if srv.shutdowns != 1 {
				t.Errorf("got %d Shutdown calls; want 1", srv.shutdowns)
			}
		})
	}
}

func TestServeBadFlags(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	tests := []struct {
		name string
		args []string
		want string // in stderr
	}{
		{name: "approval ttl zero", args: []string{"serve", "--data", c.data, "--approval-ttl", "0s"}, want: "--approval-ttl must be positive"},
		{name: "approval ttl not a duration", args: []string{"serve", "--data", c.data, "--approval-ttl", "soon"}, want: "approval-ttl"},
		{name: "log level", args: []string{"serve", "--data", c.data, "--log-level", "loud"}, want: `--log-level "loud"`},
		{name: "listen address", args: []string{"serve", "--data", c.data, "--ssh-listen", "2222"}, want: "want HOST:PORT"},
		{name: "argument", args: []string{"serve", "--data", c.data, "extra"}, want: "want no arguments"},
		{name: "unknown flag", args: []string{"serve", "--data", c.data, "--bogus"}, want: "unknown flag"},
		{name: "no data dir", args: []string{"serve", "--data", filepath.Join(t.TempDir(), "none")}, want: "does not exist"},
		{name: "demo log level", args: []string{"demo", "--dir", t.TempDir(), "--log-level", "loud"}, want: `--log-level "loud"`},
		{name: "demo empty dir", args: []string{"demo", "--dir", ""}, want: "--dir must not be empty"},
		{name: "demo argument", args: []string{"demo", "now"}, want: "want no arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runCLI(t, "", tt.args...)
			if r.code != 2 || !strings.Contains(r.stderr, tt.want) {
				t.Errorf("postern %s: got exit %d, stderr %q; want 2 and %q", strings.Join(tt.args, " "), r.code, r.stderr, tt.want)
			}
			if strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
				t.Errorf("stderr: got %q; want one line", r.stderr)
			}
		})
	}
}

func TestServeListenInUse(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	ln := listenTestAddr(t)
	r := c.run("", "serve", "--ssh-listen", ln.Addr().String())
	if r.code != 1 || !strings.Contains(r.stderr, "address already in use") {
		t.Errorf("serve: got exit %d, stderr %q; want 1 and address already in use", r.code, r.stderr)
	}
	// demo listens before it sets anything up.
	dir := filepath.Join(t.TempDir(), "demo")
	r = runCLI(t, "", "demo", "--dir", dir, "--ssh-listen", ln.Addr().String())
	if r.code != 1 || !strings.Contains(r.stderr, "address already in use") {
		t.Errorf("demo: got exit %d, stderr %q; want 1 and address already in use", r.code, r.stderr)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("demo: %s was created; want nothing set up when the port is taken", dir)
	}
}

// bgPostern is postern running in the background, with its stderr read line
// by line.
type bgPostern struct {
	t      *testing.T
	cmd    *exec.Cmd
	lines  chan string // stderr lines; closed at EOF
	stdout io.ReadCloser

	// mu protects stderr, a copy of everything read from it.
	mu     sync.Mutex
	stderr strings.Builder
}

// startPostern starts postern with args; Cleanup kills it if the test did not
// stop it.
func startPostern(t *testing.T, args ...string) *bgPostern {
	t.Helper()
	cmd := exec.Command(posternBin, args...)
	cmd.Env = cliEnv()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &bgPostern{t: t, cmd: cmd, lines: make(chan string, 1000), stdout: stdout}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.mu.Lock()
			p.stderr.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return p
}

func (p *bgPostern) stderrText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// waitLog waits for a JSON log line with that message and returns it.
func (p *bgPostern) waitLog(message string) map[string]any {
	p.t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				p.t.Fatalf("postern exited before logging %q; stderr:\n%s", message, p.stderrText())
			}
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) == nil && m["message"] == message {
				return m
			}
		case <-timeout:
			p.t.Fatalf("no log %q within 30s; stderr:\n%s", message, p.stderrText())
		}
	}
}

// stop sends SIGTERM and returns the exit status.
func (p *bgPostern) stop() int {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.t.Logf("SIGTERM: %v", err)
	}
	return p.wait()
}

// wait waits (bounded) for the bgPostern to exit and returns its status.
func (p *bgPostern) wait() int {
	p.t.Helper()
	done := make(chan error, 1)
	go func() {
		io.Copy(io.Discard, p.stdout)
		for range p.lines {
		}
		done <- p.cmd.Wait()
	}()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			p.t.Fatalf("wait: %v", err)
		}
		return 0
	case <-time.After(bastion.DefaultShutdownGrace + 20*time.Second):
		p.cmd.Process.Kill()
		p.t.Fatalf("postern did not exit; stderr:\n%s", p.stderrText())
		return -1
	}
}

// TestServeSIGTERM starts postern serve on a free port, checks that it
// answers SSH, and stops it with SIGTERM: exit status 0 and a stop log.
func TestServeSIGTERM(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	p := startPostern(t, "serve", "--data", c.data, "--ssh-listen", "127.0.0.1:0", "--log-level", "debug")
	m := p.waitLog("postern serving")
	addr, _ := m["addr"].(string)
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	banner, err := bufio.NewReader(conn).ReadString('\n')
	conn.Close()
	if err != nil || !strings.HasPrefix(banner, "SSH-2.0-") {
		t.Errorf("banner: got %q, %v; want SSH-2.0-...", banner, err)
	}
	if code := p.stop(); code != 0 {
		t.Errorf("SIGTERM: got exit %d; want 0\nstderr:\n%s", code, p.stderrText())
	}
	if !strings.Contains(p.stderrText(), `"postern stopped"`) {
		t.Errorf("stderr: got %q; want the stop log line", p.stderrText())
	}
}
