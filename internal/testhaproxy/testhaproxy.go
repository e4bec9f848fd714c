// Package testhaproxy runs Debian's HAProxy in TCP mode in front of a set of
// backends, for tests of several postern replicas behind one address: the
// way agents reach a bastion that runs more than once. It starts haproxy in
// the foreground with its own configuration on a free loopback port, and
// stops it when the test ends.
//
// When haproxy is not installed the test is skipped with a message naming
// the package, unless POSTERN_E2E=1, in which case it fails.
package testhaproxy

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/postern/postern/internal/e2e"
	"github.com/postern/postern/internal/testwait"
)

// stopGrace is how long Stop lets haproxy finish after SIGTERM before it
// kills it: a stop that takes longer loses nothing a test checks.
const stopGrace = 5 * time.Second

// Path finds haproxy: /usr/sbin/haproxy, else PATH; "" if absent.
func Path() string {
	if st, err := os.Stat("/usr/sbin/haproxy"); err == nil && !st.IsDir() {
		return "/usr/sbin/haproxy"
	}
	if p, err := exec.LookPath("haproxy"); err == nil {
		return p
	}
	return ""
}

// Require skips the test when haproxy is missing, or fails it when
// POSTERN_E2E=1. It returns the path of haproxy.
func Require(t testing.TB) string {
	t.Helper()
	if p := Path(); p != "" {
		return p
	}
	e2e.Missing(t, "testhaproxy: haproxy", "haproxy")
	return ""
}

// Proxy is a running haproxy.
type Proxy struct {
	Addr string // 127.0.0.1:PORT, where clients connect

	cmd  *exec.Cmd
	done chan struct{}
	// mu protects log, haproxy's output.
	mu  sync.Mutex
	log bytes.Buffer
}

// Start runs haproxy in TCP mode, balancing each new connection round
// robin over backends (HOST:PORT each). A backend is checked every 200 ms
// (a TCP connect) and taken out after one failure; a connection that
// cannot reach its backend is sent to another (redispatch), so that when a
// backend dies its clients' reconnections land on a live one at once. The
// client and server timeouts are long: an agent's session may wait minutes
// for an approval without sending a byte.
func Start(t testing.TB, backends ...string) *Proxy {
	t.Helper()
	bin := Require(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var cfg strings.Builder
	fmt.Fprintf(&cfg, `global
    log stderr format short local0 info
    maxconn 4096

defaults
    mode tcp
    log global
    option tcplog
    timeout connect 2s
    timeout client 30m
    timeout server 30m
    retries 3
    option redispatch

frontend agents
    bind %s
    default_backend replicas

backend replicas
    balance roundrobin
`, addr)
	for i, b := range backends {
		fmt.Fprintf(&cfg, "    server r%d %s check inter 200ms fall 1 rise 1\n", i, b)
	}
	path := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(path, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &Proxy{Addr: addr, done: make(chan struct{})}
	// -db: stay in the foreground; -W: master-worker, so that SIGTERM
	// stops everything.
	p.cmd = exec.Command(bin, "-db", "-W", "-f", path)
	p.cmd.Stdout, p.cmd.Stderr = &lockedWriter{p}, &lockedWriter{p}
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("testhaproxy: start: %v", err)
	}
	go func() {
		p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(p.Stop)
	testwait.Until(t, "haproxy to listen on "+addr, func() bool {
		if c, err := net.Dial("tcp", addr); err == nil { // loopback: refused or connected at once
			c.Close()
			return true
		}
		select {
		case <-p.done:
			t.Fatalf("testhaproxy: haproxy exited: %s", p.Log())
		default:
		}
		return false
	})
	return p
}

// Port is the port clients connect to.
func (p *Proxy) Port() int {
	_, port, _ := net.SplitHostPort(p.Addr)
	n, _ := strconv.Atoi(port)
	return n
}

// Log returns what haproxy printed: one line per connection (option
// tcplog), naming the backend it went to.
func (p *Proxy) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// Stop stops haproxy and waits for it, killing it after stopGrace.
func (p *Proxy) Stop() {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(stopGrace):
		p.cmd.Process.Kill()
		<-p.done
	}
}

type lockedWriter struct{ p *Proxy }

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.p.mu.Lock()
	defer w.p.mu.Unlock()
	return w.p.log.Write(b)
}
