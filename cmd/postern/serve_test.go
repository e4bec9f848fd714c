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
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"

	"github.com/postern/postern/bastion"
	"github.com/postern/postern/internal/testwait"
	"github.com/postern/postern/store"
)

// fakeAgentServer is an agentServer whose Serve blocks until Shutdown, or
// returns serveErr at once when that is set, or keeps serving after
// Shutdown until release is closed when hang is set.
type fakeAgentServer struct {
	serveErr error
	shutErr  error
	hang     bool

	// mu protects shutdowns and grace.
	mu        sync.Mutex
	shutdowns int
	grace     time.Duration // what the first Shutdown's context left it
	stopped   chan struct{}
	release   chan struct{}
}

func newFakeAgentServer() *fakeAgentServer {
	return &fakeAgentServer{stopped: make(chan struct{}), release: make(chan struct{})}
}

func (f *fakeAgentServer) Serve(ln net.Listener) error {
	if f.serveErr != nil {
		return f.serveErr
	}
	if f.hang {
		<-f.release
	} else {
		<-f.stopped
	}
	return bastion.ErrServerClosed
}

func (f *fakeAgentServer) Shutdown(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.shutdowns++
	if f.shutdowns == 1 {
		if d, ok := ctx.Deadline(); ok {
			f.grace = time.Until(d)
		}
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

// TestServeUntil drives serveUntil's shutdown with a fake server on fake
// time: the shutdown grace is the real default, and a Serve that keeps
// serving after Shutdown is given up on once it has passed.
func TestServeUntil(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		serveErr error // Serve returns this at once
		shutErr  error
		hang     bool // Serve does not return after Shutdown
		cancel   bool // the signal arrives
		wantErr  string
	}{
		{name: "signal: clean shutdown", cancel: true},
		{name: "signal: grace ran out", cancel: true, shutErr: context.DeadlineExceeded},
		{name: "signal: shutdown failed", cancel: true, shutErr: errors.New("boom"), wantErr: "serve: shutdown: boom"},
		{name: "signal: serve kept serving", cancel: true, hang: true,
			wantErr: "serve: bastion: the bastion kept serving after Shutdown"},
		{name: "serve failed", serveErr: errors.New("accept: too many files"), wantErr: "serve: bastion: accept: too many files"},
		{name: "serve stopped by itself", serveErr: bastion.ErrServerClosed, wantErr: "serve: bastion: stopped without being asked to"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := newFakeAgentServer()
				srv.serveErr, srv.shutErr, srv.hang = tt.serveErr, tt.shutErr, tt.hang
				defer close(srv.release)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				if tt.cancel {
					cancel()
				}
				start := time.Now()
				err := serveUntil(ctx, srv, listenTestAddr(t), bastion.DefaultShutdownGrace, zerolog.Nop())
				got := ""
				if err != nil {
					got = err.Error()
				}
				if got != tt.wantErr {
					t.Errorf("got error %q; want %q", got, tt.wantErr)
				}
				if srv.shutdowns != 1 || srv.grace != bastion.DefaultShutdownGrace {
					t.Errorf("got %d Shutdown calls with a grace of %v; want 1 with %v", srv.shutdowns, srv.grace, bastion.DefaultShutdownGrace)
				}
				waited, want := time.Since(start), time.Duration(0)
				if tt.hang {
					want = bastion.DefaultShutdownGrace
				}
				if waited != want {
					t.Errorf("serveUntil returned after %v; want %v", waited, want)
				}
			})
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
		{name: "key check timeout zero", args: []string{"serve", "--data", c.data, "--key-check-timeout", "0s"}, want: "--key-check-timeout must be positive"},
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
	deadline := time.NewTimer(testwait.Remaining(p.t))
	defer deadline.Stop()
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
		case <-deadline.C:
			p.t.Fatalf("no log %q by the test's deadline; stderr:\n%s", message, p.stderrText())
		}
	}
}

// logged returns the first JSON log line so far with that message, nil if
// none: for a line logged before the one a test waited for.
func (p *bgPostern) logged(message string) map[string]any {
	for _, line := range strings.Split(p.stderrText(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["message"] == message {
			return m
		}
	}
	return nil
}

// stop sends SIGTERM and returns the exit status.
func (p *bgPostern) stop() int {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.t.Logf("SIGTERM: %v", err)
	}
	return p.wait()
}

// wait waits for the bgPostern to exit and returns its status.
func (p *bgPostern) wait() int {
	p.t.Helper()
	done := make(chan error, 1)
	go func() {
		io.Copy(io.Discard, p.stdout)
		for range p.lines {
		}
		done <- p.cmd.Wait()
	}()
	deadline := time.NewTimer(testwait.Remaining(p.t))
	defer deadline.Stop()
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
	case <-deadline.C:
		p.cmd.Process.Kill()
		p.t.Fatalf("postern did not exit by the test's deadline; stderr:\n%s", p.stderrText())
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
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	conn.SetDeadline(testwait.Deadline(t))
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

// TestRunBastionServesAsOneGroup: the bastion, the web page and the
// metrics listener stop together. A signal stops all three cleanly; when
// one of them fails (its listener is closed under it), the others stop
// too and runBastion returns that failure.
func TestRunBastionServesAsOneGroup(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		broken  string // the server whose listener is closed: "bastion", "web" or "metrics"
		wantErr string // in the error; "" for none (the signal)
	}{
		{name: "signal"},
		{name: "bastion fails", broken: "bastion", wantErr: "serve: bastion: "},
		{name: "web page fails", broken: "web", wantErr: "web: serve: "},
		{name: "metrics fail", broken: "metrics", wantErr: "metrics: serve: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newCLI(t)
			d := store.Dir{Path: c.data}
			st, err := d.Open(testwait.Context(t), store.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			hostKey, err := d.HostKey()
			if err != nil {
				t.Fatal(err)
			}
			lns := map[string]net.Listener{}
			for _, name := range []string{"bastion", "web", "metrics"} {
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				lns[name] = ln
			}
			wp, err := loadWeb(lns["web"], &webFlags{}, "", c.data, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if tt.broken != "" {
				lns[tt.broken].Close()
			}
			var logs lockedBuffer
			ctx, cancel := context.WithCancel(testwait.Context(t))
			defer cancel()
			done := make(chan error, 1)
			go func() {
				done <- runBastion(ctx, bastionParams{Store: st, HostKey: hostKey, Listener: lns["bastion"], Web: wp,
					Metrics: lns["metrics"], ApprovalTTL: time.Hour, Logger: zerolog.New(&logs), DataDir: c.data})
			}()
			if tt.broken == "" {
				// The signal comes once all three serve.
				for text, wrote := logs.next(); !strings.Contains(text, "metrics serving"); text, wrote = logs.next() {
					testwait.Done(t, "the metrics listener to serve", wrote)
				}
				cancel()
			}
			err = testwait.Recv(t, "runBastion to return", done)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if tt.wantErr == "" && got != "" || !strings.Contains(got, tt.wantErr) {
				t.Errorf("got error %q; want %q", got, tt.wantErr)
			}
			// Every server stopped and closed its listener. (Accept with a
			// deadline past says so without a dial, which could reach
			// another test's listener on the port just freed.)
			for name, ln := range lns {
				ln.(*net.TCPListener).SetDeadline(time.Now().Add(-time.Second))
				if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
					t.Errorf("the %s listener after runBastion returned: Accept says %v; want it closed", name, err)
				}
			}
			if tt.broken != "bastion" && !strings.Contains(logs.String(), "shutting down: no new agents") {
				t.Errorf("the bastion did not shut down gracefully; log:\n%s", logs.String())
			}
		})
	}
}
