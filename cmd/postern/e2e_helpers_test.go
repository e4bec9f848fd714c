package main

// Helpers shared by the end-to-end tests that run `postern serve` as its
// own process against a real sshd with the real OpenSSH clients: the
// browser tests, the fault tests and the secret-hygiene scenario.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/postern/postern/model"
	"github.com/postern/postern/store"
)

// Bounds of the end-to-end tests' waits.
const (
	// agentTimeout bounds one ssh or sftp run of an agent, its wait for a
	// decision included.
	agentTimeout = 2 * time.Minute
	// pendingTimeout bounds the wait for an agent's request to be listed
	// as pending.
	pendingTimeout = time.Minute
	// exitTimeout bounds the wait for a killed postern's process and pipes
	// to be gone.
	exitTimeout = 30 * time.Second
)

// bastionHostAlias is the name the agents' known_hosts pins the bastion's
// host key under (ssh -o HostKeyAlias): the pin then holds whatever port a
// restarted postern listens on.
const bastionHostAlias = "postern-bastion"

// agentRun is one ssh or sftp run of an agent in the background. stdout,
// stderr and code are set when done is closed; live has stderr as it
// comes.
type agentRun struct {
	done   chan struct{}
	stdout string
	stderr string
	code   int // -1 when the client could not be run or was cut by the bound
	live   lockedBuffer
}

// lockedBuffer is a bytes.Buffer that a client writes while a test reads.
type lockedBuffer struct {
	// mu protects b.
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

// startAgentRun runs an OpenSSH client (ssh, sftp) with args in the
// background, bounded by agentTimeout. Wait for it with wait; no client
// outlives the test.
func startAgentRun(t *testing.T, name string, args ...string) *agentRun {
	t.Helper()
	a := &agentRun{done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), agentTimeout)
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = cliEnv()
	var o bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &a.live
	go func() {
		defer close(a.done)
		defer cancel()
		err := cmd.Run()
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee):
			a.code = ee.ExitCode()
		case err != nil:
			a.code = -1
			a.live.Write([]byte(err.Error()))
		}
		a.stdout, a.stderr = o.String(), a.live.String()
	}()
	t.Cleanup(func() { cancel(); <-a.done })
	return a
}

// wait waits for the agent's run to end, at most agentTimeout.
func (a *agentRun) wait(t *testing.T) {
	t.Helper()
	select {
	case <-a.done:
	case <-time.After(agentTimeout + 10*time.Second):
		t.Fatal("the agent's client did not end")
	}
}

// waitStderr waits, bounded by pendingTimeout, until the running client
// has written text on stderr.
func (a *agentRun) waitStderr(t *testing.T, text string) {
	t.Helper()
	deadline := time.After(pendingTimeout)
	for !strings.Contains(a.live.String(), text) {
		select {
		case <-a.done:
			t.Fatalf("the client ended (exit %d) without writing %q on stderr; stderr: %q", a.code, text, a.stderr)
		case <-deadline:
			t.Fatalf("no %q on the client's stderr within %v; stderr: %q", text, pendingTimeout, a.live.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// e2eAgent is an agent registered with postern (its key pair on disk) and
// the OpenSSH options that reach the bastion with it and nothing else: no
// user config, no prompts, the bastion's host key pinned under
// bastionHostAlias.
type e2eAgent struct {
	name       string
	key        keyFiles
	knownHosts string
}

// newE2EAgent makes a key pair, registers it as agent name in c's data
// directory, and pins the data directory's bastion host key.
func newE2EAgent(t *testing.T, c *cli, name string) *e2eAgent {
	t.Helper()
	a := &e2eAgent{name: name, key: writeKeyFiles(t, name, "")}
	c.ok("", "agent", "add", name, "--key", a.key.pub)
	hostKey, err := (store.Dir{Path: c.data}).HostKey()
	if err != nil {
		t.Fatal(err)
	}
	a.knownHosts = filepath.Join(t.TempDir(), "known_hosts")
	line := bastionHostAlias + " " + string(ssh.MarshalAuthorizedKey(hostKey.PublicKey()))
	if err := os.WriteFile(a.knownHosts, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	return a
}

// options are the client options common to ssh and sftp.
func (a *e2eAgent) options() []string {
	return []string{"-F", "/dev/null", "-i", a.key.priv, "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
		"-o", "UserKnownHostsFile=" + a.knownHosts, "-o", "HostKeyAlias=" + bastionHostAlias,
		"-o", "StrictHostKeyChecking=yes", "-o", "ConnectTimeout=10"}
}

// ssh runs `ssh -p PORT HOST args...` against the bastion at addr in the
// background.
func (a *e2eAgent) ssh(t *testing.T, addr string, args ...string) *agentRun {
	t.Helper()
	host, port := splitAddr(t, addr)
	argv := append(a.options(), "-p", port, host)
	return startAgentRun(t, "ssh", append(argv, args...)...)
}

// sftp runs `sftp -b BATCH -P PORT USER@HOST` against the bastion at addr
// in the background; user routes (an alias, or the agent's name for the
// virtual root).
func (a *e2eAgent) sftp(t *testing.T, addr, user, batch string) *agentRun {
	t.Helper()
	host, port := splitAddr(t, addr)
	f := filepath.Join(t.TempDir(), "batch")
	if err := os.WriteFile(f, []byte(batch), 0o600); err != nil {
		t.Fatal(err)
	}
	argv := append(a.options(), "-b", f, "-P", port, user+"@"+host)
	return startAgentRun(t, "sftp", argv...)
}

func splitAddr(t *testing.T, addr string) (host, port string) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("bastion address %q: %v", addr, err)
	}
	return host, port
}

// e2eServe is `postern serve` with the web page on, run as its own process,
// with both its output streams kept whole: stderr (the log) by bgPostern,
// stdout here.
type e2eServe struct {
	*bgPostern
	sshAddr     string
	webURL      string
	fingerprint string // the web certificate's SHA-256 as logged

	stdoutDone chan struct{}
	// mu protects out, everything read from stdout.
	mu  sync.Mutex
	out bytes.Buffer
}

// startServe starts postern serve on free loopback ports over data, with
// extra flags, and waits for both start log lines.
func startServe(t *testing.T, data string, extra ...string) *e2eServe {
	t.Helper()
	args := append([]string{"serve", "--data", data, "--ssh-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0"}, extra...)
	s := &e2eServe{bgPostern: startPostern(t, args...), stdoutDone: make(chan struct{})}
	go func() {
		defer close(s.stdoutDone)
		buf := make([]byte, 4096)
		for {
			n, err := s.bgPostern.stdout.Read(buf)
			s.mu.Lock()
			s.out.Write(buf[:n])
			s.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	s.sshAddr, _ = s.waitLog("postern serving")["addr"].(string)
	m := s.waitLog("web page serving")
	s.webURL, _ = m["url"].(string)
	s.fingerprint, _ = m["tls_fingerprint"].(string)
	if s.sshAddr == "" || s.webURL == "" || s.fingerprint == "" {
		t.Fatalf("start logs: got ssh address %q, web URL %q, fingerprint %q; want all three", s.sshAddr, s.webURL, s.fingerprint)
	}
	return s
}

// stdoutText is what postern wrote to stdout so far.
func (s *e2eServe) stdoutText() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.String()
}

// end sends sig and waits, bounded, for stdout to reach its end and the
// process to exit; it returns the exit status (-1 when killed by a signal).
// stdout is drained here first, so that bgPostern.wait, which discards
// what is left, finds nothing.
func (s *e2eServe) end(sig syscall.Signal) int {
	s.t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Logf("signal %v: %v", sig, err)
	}
	select {
	case <-s.stdoutDone:
	case <-time.After(exitTimeout):
		s.t.Fatalf("postern's stdout stayed open %v after %v", exitTimeout, sig)
	}
	return s.wait()
}

// web is an HTTPS client for the page, pinned to the logged certificate.
func (s *e2eServe) web(t *testing.T) *webClient {
	return newWebClient(t, s.webURL, s.fingerprint)
}

// apiCall sends one API request with the bearer token (none if empty) and
// returns the status and body. A POST carries a fresh Idempotency-Key.
func apiCall(ctx context.Context, c *webClient, token, method, path, body string) (int, string) {
	c.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		c.t.Fatalf("build %s %s: %v", method, path, err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if method == http.MethodPost {
		req.Header.Set("Idempotency-Key", newPassword())
	}
	return c.do(req)
}

// approvals lists approval requests with the CLI (all of them, decided
// ones too, with all).
func (c *cli) approvals(all bool) []model.Approval {
	c.t.Helper()
	args := []string{"approvals", "list", "-o", "json"}
	if all {
		args = append(args, "--all")
	}
	var list []model.Approval
	if err := json.Unmarshal([]byte(c.ok("", args...)), &list); err != nil {
		c.t.Fatalf("approvals list -o json: %v", err)
	}
	return list
}

// waitPending polls the CLI until a pending request whose operation
// contains text is listed, and returns it.
func (c *cli) waitPending(text string) model.Approval {
	c.t.Helper()
	deadline := time.Now().Add(pendingTimeout)
	for {
		for _, a := range c.approvals(false) {
			if strings.Contains(a.Operation, text) {
				return a
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("no pending request for %q within %v", text, pendingTimeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// auditRows is the whole audit log through the CLI.
func (c *cli) auditRows() []model.AuditRow {
	c.t.Helper()
	var rows []model.AuditRow
	if err := json.Unmarshal([]byte(c.ok("", "audit", "-o", "json")), &rows); err != nil {
		c.t.Fatalf("audit -o json: %v", err)
	}
	return rows
}
