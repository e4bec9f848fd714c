package main

// Helpers shared by the end-to-end tests that run `postern serve` as its
// own process against a real sshd with the real OpenSSH clients: the rig
// they start from (a target, a data directory with connections to it, an
// agent with a grant, admins, serve), the agents' clients, and the waits.
//
// No wait here has a bound of its own: each ends at the test's deadline
// (internal/testwait), so that a busy machine makes a test slower, never
// failed. A client process runs under testwait.Context and is killed
// there; a wait on an event fails there saying what it waited for.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/postern/postern/internal/testsshd"
	"github.com/postern/postern/internal/testwait"
	"github.com/postern/postern/model"
	"github.com/postern/postern/store"
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
	code   int // -1 when the client could not be run or was killed at the test's deadline
	live   lockedBuffer
}

// lockedBuffer is a bytes.Buffer that a client writes while a test reads,
// and waits on: every write wakes the waiters.
type lockedBuffer struct {
	// mu protects b and wrote, which is closed and replaced at each write
	// (nil until the first wait).
	mu    sync.Mutex
	b     bytes.Buffer
	wrote chan struct{}
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.wrote != nil {
		close(l.wrote)
		l.wrote = nil
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// next returns the text so far and a channel closed at the next write.
func (l *lockedBuffer) next() (string, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.wrote == nil {
		l.wrote = make(chan struct{})
	}
	return l.b.String(), l.wrote
}

// startAgentRun runs an OpenSSH client (ssh, sftp) with args in the
// background, with stdin (nil: /dev/null), killed at the test's deadline.
// Wait for it with wait; no client outlives the test.
func startAgentRun(t *testing.T, stdin *os.File, name string, args ...string) *agentRun {
	t.Helper()
	a := &agentRun{done: make(chan struct{})}
	ctx, cancel := context.WithCancel(testwait.Context(t))
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = cliEnv()
	if stdin != nil {
		// A file, not a reader: Wait would wait for a reader's copy.
		cmd.Stdin = stdin
	}
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

// wait waits for the agent's run to end.
func (a *agentRun) wait(t *testing.T) {
	t.Helper()
	testwait.Done(t, "the agent's client to end", a.done)
}

// waitStderr waits until the running client has written text on stderr,
// and returns its stderr so far. Each write of the client wakes the wait.
func (a *agentRun) waitStderr(t *testing.T, text string) string {
	t.Helper()
	deadline := time.NewTimer(testwait.Remaining(t))
	defer deadline.Stop()
	for {
		got, wrote := a.live.next()
		if strings.Contains(got, text) {
			return got
		}
		select {
		case <-wrote:
		case <-a.done:
			if strings.Contains(a.stderr, text) {
				return a.stderr
			}
			t.Fatalf("the client ended (exit %d) without writing %q on stderr; stderr: %q", a.code, text, a.stderr)
		case <-deadline.C:
			t.Fatalf("no %q on the client's stderr by the test's deadline; stderr: %q", text, a.live.String())
		}
	}
}

// waitingLine is the start of the line postern writes on an agent's
// stderr when its operation waits for an approval; the id follows.
var waitingLine = regexp.MustCompile(`postern: waiting for approval (\S+): `)

// waitApproval waits until the running client is told that it waits for
// an approval, and returns the approval's id.
func (a *agentRun) waitApproval(t *testing.T) string {
	t.Helper()
	m := waitingLine.FindStringSubmatch(a.waitStderr(t, "postern: waiting for approval "))
	if m == nil {
		t.Fatalf("no approval id after %q on the client's stderr: %q", "postern: waiting for approval", a.live.String())
	}
	return m[1]
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

// options are the client options common to ssh and sftp. They set no
// ConnectTimeout: the bastion is on loopback, where a connection is made or
// refused at once, and the client is killed at the test's deadline.
func (a *e2eAgent) options() []string {
	return []string{"-F", "/dev/null", "-i", a.key.priv, "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
		"-o", "UserKnownHostsFile=" + a.knownHosts, "-o", "HostKeyAlias=" + bastionHostAlias,
		"-o", "StrictHostKeyChecking=yes"}
}

// ssh runs `ssh -p PORT HOST args...` against the bastion at addr in the
// background, with no input.
func (a *e2eAgent) ssh(t *testing.T, addr string, args ...string) *agentRun {
	t.Helper()
	return a.sshWithInput(t, addr, nil, args...)
}

// sshWithInput is ssh with stdin as the client's input (nil: none).
func (a *e2eAgent) sshWithInput(t *testing.T, addr string, stdin *os.File, args ...string) *agentRun {
	t.Helper()
	host, port := splitAddr(t, addr)
	argv := append(a.options(), "-p", port, host)
	return startAgentRun(t, stdin, "ssh", append(argv, args...)...)
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
	return startAgentRun(t, nil, "sftp", argv...)
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
	fingerprint string         // the web certificate's SHA-256 as logged
	started     map[string]any // the "postern serving" log line

	stdoutDone chan struct{}
	// mu protects out, everything read from stdout.
	mu  sync.Mutex
	out bytes.Buffer
}

// startServe starts postern serve on free loopback ports over data, with
// extra flags, and waits for both start log lines. An agent's handshake
// may take until the test's deadline (--handshake-timeout, 30 s by
// default), unless extra says otherwise.
func startServe(t *testing.T, data string, extra ...string) *e2eServe {
	t.Helper()
	args := append([]string{"serve", "--data", data, "--ssh-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0",
		"--handshake-timeout", outlast(t)}, extra...)
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
	s.started = s.waitLog("postern serving")
	s.sshAddr, _ = s.started["addr"].(string)
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

// end sends sig and waits for stdout to reach its end and the process to
// exit; it returns the exit status (-1 when killed by a signal). stdout is
// drained here first, so that bgPostern.wait, which discards what is left,
// finds nothing.
func (s *e2eServe) end(sig syscall.Signal) int {
	s.t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Logf("signal %v: %v", sig, err)
	}
	testwait.Done(s.t, fmt.Sprintf("postern's stdout to close after %v", sig), s.stdoutDone)
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

// secondAdmin is the approver approveChanges approves as: a person
// of the set-up, never one of a test's admins.
const secondAdmin = "second"

// approveChanges has secondAdmin (an approver, added on first use)
// approve every change of configuration that waits for a second admin,
// and returns their ids: the set-up's own changes that loosen production
// (a grant, an admin token), where the second person is not what the
// test is about.
func (c *cli) approveChanges() []string {
	c.t.Helper()
	var ids []string
	for _, a := range c.approvals(false) {
		if a.Kind != model.KindChange {
			continue
		}
		if len(ids) == 0 && !strings.Contains(c.ok("", "admin", "list"), secondAdmin+" ") {
			c.ok(newPassword()+"\n", "admin", "add", secondAdmin, "--role", "approver", "--password-file", "-")
		}
		c.ok("", "approvals", "approve", a.ID, "--as", secondAdmin)
		ids = append(ids, a.ID)
	}
	return ids
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

// waitPending waits until the agent's client a is told that it waits for
// an approval, and returns that request as the CLI lists it, checking that
// its operation contains text.
func (c *cli) waitPending(a *agentRun, text string) model.Approval {
	c.t.Helper()
	id := a.waitApproval(c.t)
	for _, r := range c.approvals(false) {
		if r.ID != id {
			continue
		}
		if !strings.Contains(r.Operation, text) {
			c.t.Fatalf("pending request %s is for %q; want it to contain %q", id, r.Operation, text)
		}
		return r
	}
	c.t.Fatalf("the agent waits for approval %s, which the CLI does not list as pending", id)
	return model.Approval{}
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

// checkTimeout is the --timeout of a key check (conn add, check, update,
// pin, rotate-key; apply) that a test means to pass: the time left to the
// test, so that a busy machine slows the check down without failing it. A
// check that must fail fails on its own (refused, rejected, mismatched),
// long before.
func checkTimeout(t *testing.T) []string {
	return []string{"--timeout", outlast(t)}
}

// outlast is the value of a duration flag for a real-time limit of postern
// that a test does not mean to reach (an approval's lifetime, a replica's
// lease): the time left to the test, so that no step of a slow run
// outlives it.
func outlast(t *testing.T) string {
	return testwait.Remaining(t).Round(time.Second).String()
}

// okCheck runs a command that checks a connection's key (conn add, check,
// update, pin, rotate-key; apply) with checkTimeout, and fails the test
// unless it exits 0.
func (c *cli) okCheck(args ...string) string {
	c.t.Helper()
	return c.ok("", append(args, checkTimeout(c.t)...)...)
}

// runCheck runs a command that checks a connection's key with
// checkTimeout.
func (c *cli) runCheck(args ...string) result {
	c.t.Helper()
	return c.run("", append(args, checkTimeout(c.t)...)...)
}

// e2eTarget is a real sshd with its user's private key in a file, as an
// admin hands it to conn add --key-file.
type e2eTarget struct {
	*testsshd.Server
	keyFile string
}

func newE2ETarget(t *testing.T, opts testsshd.Options) *e2eTarget {
	t.Helper()
	tg := &e2eTarget{Server: testsshd.Start(t, opts), keyFile: filepath.Join(t.TempDir(), "target_key")}
	if err := os.WriteFile(tg.keyFile, tg.UserKeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return tg
}

// addConn adds alias as a connection to tg with its user's key and host
// key, without a key check (which is not what the tests that use it are
// about), and extra flags.
func (c *cli) addConn(tg *e2eTarget, alias string, extra ...string) {
	c.t.Helper()
	c.ok("", append([]string{"conn", "add", "--no-check", alias, "--host", tg.Host, "--port", itoa(tg.Port),
		"--user", tg.User, "--key-file", tg.keyFile, "--host-key", bareKey(tg.HostKey)}, extra...)...)
}

// e2eRig is where an end-to-end test starts: a real sshd as the target, a
// data directory with connections to it, the agent bot with a grant on
// each, and admins; serve starts postern serve over it.
type e2eRig struct {
	t        *testing.T
	cli      *cli
	target   *e2eTarget
	agent    *e2eAgent // bot
	scratch  string    // a directory on the target (the same machine) for commands to touch
	password string    // every admin's; never logged
	srv      *e2eServe // the last serve started
}

// rigConfig is what newRig sets up.
type rigConfig struct {
	conns  []rigConn // the connections to the target; target (dev) if none
	grant  []string  // bot's rule flags on every connection (grant's defaults if none)
	admins []string  // admins, each with the rig's password
}

type rigConn struct{ alias, env string }

func newRig(t *testing.T, cfg rigConfig) *e2eRig {
	t.Helper()
	requireSSHClient(t)
	r := &e2eRig{t: t, cli: newCLI(t), target: newE2ETarget(t, testsshd.Options{}), scratch: t.TempDir(), password: "pw-" + newPassword()}
	if len(cfg.conns) == 0 {
		cfg.conns = []rigConn{{"target", "dev"}}
	}
	r.agent = newE2EAgent(t, r.cli, "bot")
	// The admins come first: the first is the installation's owner.
	if len(cfg.admins) > 0 {
		pw := writePasswordFile(t, r.password)
		for _, name := range cfg.admins {
			r.cli.ok("", "admin", "add", name, "--password-file", pw)
		}
	}
	for _, cn := range cfg.conns {
		r.cli.addConn(r.target, cn.alias, "--env", cn.env)
		r.cli.ok("", append([]string{"grant", "bot", cn.alias}, cfg.grant...)...)
	}
	// A grant on production waits for a second admin.
	r.cli.approveChanges()
	return r
}

// serve starts postern serve over the rig's data directory with flags.
func (r *e2eRig) serve(flags ...string) *e2eServe {
	r.t.Helper()
	r.srv = startServe(r.t, r.cli.data, flags...)
	return r.srv
}

// ssh runs command on alias through the bastion as bot, in the background.
func (r *e2eRig) ssh(alias, command string) *agentRun {
	r.t.Helper()
	return r.agent.ssh(r.t, r.srv.sshAddr, alias, command)
}

// file is name in the scratch directory.
func (r *e2eRig) file(name string) string { return filepath.Join(r.scratch, name) }
