package bastion

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/postern/postern/internal/e2e"
	"github.com/postern/postern/internal/testsshd"
	"github.com/postern/postern/internal/testwait"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/sftpgate"
	"github.com/postern/postern/store"
	"golang.org/x/crypto/ssh"
)

// harness is a real sshd target, a store and policy engine, and a postern
// bastion serving on loopback, driven by the real ssh client.
type harness struct {
	t      testing.TB
	target *testsshd.Server
	st     *store.Store
	eng    *policy.Engine
	// alice and bob are registered approvers, who decide the tests'
	// requests (the store refuses a decision by anyone else).
	alice, bob policy.Decider
	srv        *Server
	addr       string
	port       string
	keyPath    string
	signer     ssh.Signer
	dir        string
	lifetime   time.Duration
	config     func(*Config)
	server     func(*Server)
	served     chan error
	events     *harnessEvents
	// database is the PostgreSQL URL the store runs on ("" for SQLite in
	// dir); replicaAddrs, when set, are the addresses of every replica
	// serving it, this one's first (addReplica).
	database     string
	replicaAddrs []string
	maxConns     int // the store's connection bound, for addReplica's store too
}

// harnessEvents collects what the bastion announces through its test
// hooks, over restarts, so that tests wait on the event rather than poll
// the store.
type harnessEvents struct {
	// mu guards the fields below.
	mu      sync.Mutex
	audits  []policy.Record
	waits   []policy.Approval
	taken   int           // waits already returned by waitPending
	changed chan struct{} // closed and replaced at each event
}

func newHarnessEvents() *harnessEvents { return &harnessEvents{changed: make(chan struct{})} }

func (e *harnessEvents) audited(r policy.Record) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.audits = append(e.audits, r)
	close(e.changed)
	e.changed = make(chan struct{})
}

func (e *harnessEvents) waiting(a policy.Approval) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.waits = append(e.waits, a)
	close(e.changed)
	e.changed = make(chan struct{})
}

// poke wakes the waits on e, for a test whose condition also looks at
// something the bastion does not announce (a client that ended).
func (e *harnessEvents) poke() {
	e.mu.Lock()
	defer e.mu.Unlock()
	close(e.changed)
	e.changed = make(chan struct{})
}

// await waits until cond holds over the events so far, and fails t at
// the test's deadline saying what it waited for and what came.
func (e *harnessEvents) await(t testing.TB, what string, cond func(audits []policy.Record, waits []policy.Approval) bool) {
	t.Helper()
	start := time.Now()
	if !e.awaitUntil(testwait.Deadline(t), cond) {
		t.Fatalf("waited %v for %s; %s", time.Since(start).Round(time.Millisecond), what, e.summary())
	}
}

// awaitUntil waits until cond holds over the events so far and reports
// whether it did before end. cond runs under the lock and must not block;
// every event wakes the wait.
func (e *harnessEvents) awaitUntil(end time.Time, cond func(audits []policy.Record, waits []policy.Approval) bool) bool {
	timer := time.NewTimer(time.Until(end))
	defer timer.Stop()
	for {
		e.mu.Lock()
		ok := cond(e.audits, e.waits)
		changed := e.changed
		e.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-changed:
		case <-timer.C:
			return false
		}
	}
}

// summary says what was announced so far: the count of each, and the
// last few audit records.
func (e *harnessEvents) summary() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var last []string
	for _, r := range e.audits[max(0, len(e.audits)-5):] {
		last = append(last, string(r.Outcome)+" "+r.ConnectionAlias+" "+strconv.Quote(r.Operation))
	}
	return fmt.Sprintf("%d audit records (the last: %v), %d approval waits", len(e.audits), last, len(e.waits))
}

type harnessOpts struct {
	rules    store.Rules
	env      store.Env
	hostKeys []string // override the pinned host key
	port     int      // override the target port
	// target, if set, starts a target of the test's own with these
	// options, for a test about the target (its death, its keys, its log)
	// or one that needs other settings; the package's shared target if
	// nil.
	target   *testsshd.Options
	lifetime time.Duration // approval lifetime; the test's deadline if zero
	config   func(*Config) // adjusts the server's Config
	server   func(*Server) // adjusts the server before it serves (test hooks)
	recipe   string        // the connection's recipe key
	maxConns int           // the store's connection bound (store.Options.MaxConns)
	database string        // a PostgreSQL URL to run the store on; SQLite if empty
}

func newHarness(t testing.TB, o harnessOpts) *harness {
	t.Helper()
	e2e.Tool(t, "ssh", "openssh-client")
	var tgt *testsshd.Server
	if o.target != nil {
		tgt = testsshd.Start(t, *o.target)
	} else {
		tgt = sharedTarget.Get(t)
	}
	ctx := context.Background()
	dir := t.TempDir()
	d := store.Dir{Path: dir, DatabaseURL: o.database}
	if _, err := d.Init(ctx, store.Options{}); err != nil {
		t.Fatal(err)
	}
	st, err := d.Open(ctx, store.Options{MaxConns: o.maxConns})
	if err != nil {
		t.Fatal(err)
	}
	var deciders []policy.Decider
	for _, n := range []string{"alice", "bob"} {
		a, err := st.CreateAdmin(ctx, store.Unaudited(), n, "$argon2id$unused", store.RoleApprover)
		if err != nil {
			t.Fatal(err)
		}
		deciders = append(deciders, policy.Decider{AdminID: a.ID, Name: a.Name})
	}
	keyPath, signer := newAgentKey(t, dir, "agent")
	if _, err := st.CreateAgent(ctx, store.Unaudited(), "agent1", string(ssh.MarshalAuthorizedKey(signer.PublicKey()))); err != nil {
		t.Fatal(err)
	}
	env := o.env
	if env == "" {
		env = store.EnvDev
	}
	hostKeys := o.hostKeys
	if hostKeys == nil {
		hostKeys = []string{tgt.KnownHostsLine}
	}
	port := tgt.Port
	if o.port != 0 {
		port = o.port
	}
	if _, err := st.CreateConnection(ctx, store.Unaudited(), store.NewConnection{
		Alias: "web", Host: tgt.Host, Port: port, User: tgt.User,
		PrivateKey: tgt.UserKeyPEM, HostKeys: hostKeys, Env: env, Recipe: o.recipe,
	}); err != nil {
		t.Fatal(err)
	}
	rules := o.rules
	if rules == (store.Rules{}) {
		rules = store.DefaultRules()
	}
	if _, err := st.SetGrant(ctx, store.Unaudited(), "agent1", "web", rules); err != nil {
		t.Fatal(err)
	}
	// A second connection the agent holds no grant for.
	if _, err := st.CreateConnection(ctx, store.Unaudited(), store.NewConnection{
		Alias: "secret", Host: tgt.Host, Port: tgt.Port, User: tgt.User,
		PrivateKey: tgt.UserKeyPEM, HostKeys: []string{tgt.KnownHostsLine}, Env: store.EnvProduction,
	}); err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, target: tgt, st: st, alice: deciders[0], bob: deciders[1], keyPath: keyPath, signer: signer, dir: dir, lifetime: o.lifetime, config: o.config, server: o.server,
		events: newHarnessEvents(), database: o.database, maxConns: o.maxConns}
	if h.lifetime == 0 {
		// No approval expires under a test that does not set it: a busy
		// machine may take long to get an admin's answer to it.
		h.lifetime = testwait.Remaining(t)
	}
	h.start()
	t.Cleanup(func() {
		h.stop()
		st.Close()
	})
	return h
}

// newAgentKey writes a new ed25519 key for an agent as dir/NAME_ed25519 and
// returns its path and signer.
func newAgentKey(t testing.TB, dir, name string) (string, ssh.Signer) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, name)
	if err != nil {
		t.Fatal(err)
	}
	keyPath := filepath.Join(dir, name+"_ed25519")
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return keyPath, signer
}

// start runs a policy engine and a bastion on the harness's store, as a
// postern process would.
func (h *harness) start() {
	h.t.Helper()
	eng, err := policy.New(policy.Options{Store: h.st, ApprovalLifetime: h.lifetime})
	if err != nil {
		h.t.Fatal(err)
	}
	hk, err := store.Dir{Path: h.dir}.HostKey()
	if err != nil {
		h.t.Fatal(err)
	}
	cfg := Config{Store: h.st, Policy: eng, HostKey: hk}
	patient(h.t, &cfg)
	if h.config != nil {
		h.config(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	patientServer(h.t, srv)
	srv.audited, srv.waiting = h.events.audited, h.events.waiting
	if h.server != nil {
		h.server(srv)
	}
	addr := "127.0.0.1:0"
	if h.addr != "" {
		addr = h.addr // a restart keeps the address agents know
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		h.t.Fatal(err)
	}
	h.served = make(chan error, 1)
	go func() { h.served <- srv.Serve(ln) }()
	h.eng, h.srv, h.addr = eng, srv, ln.Addr().String()
	_, h.port, _ = net.SplitHostPort(h.addr)
}

// patient sets every bound of cfg on peers and clients that a test's
// success must beat to the test's deadline: a busy machine can delay an
// agent's or a target's handshake, an answer to a keepalive or a
// handshake slot's holder past the defaults of a few seconds, and a test
// then fails for the load, not for the code. A test about one of them
// sets it in its own config function, which runs after this.
func patient(t testing.TB, cfg *Config) {
	d := testwait.Remaining(t)
	cfg.HandshakeTimeout = d
	cfg.HandshakeLease = d
	cfg.KeepaliveInterval = d
	cfg.Upstream.HandshakeTimeout = d
	cfg.Upstream.KeepaliveTimeout = d
	cfg.Upstream.IdleTimeout = d
}

// patientServer sets the server's own bounds on peers as patient does the
// Config's: how long it waits for an agent's KEXINIT before it gives up
// choosing the cipher, the relay's waits, and the SFTP gate's waits for the
// target's answers.
func patientServer(t testing.TB, srv *Server) {
	d := testwait.Remaining(t)
	srv.kexInitWait = d
	srv.relayWaits = relayWaits{teardown: d, gone: d}
	srv.sftpConfig = func(c *sftpgate.Config) { c.TargetTimeout, c.Drain = d, d }
}

// stop shuts the bastion and its engine down, as SIGTERM would.
func (h *harness) stop() {
	if h.srv == nil {
		return
	}
	if err := h.srv.Shutdown(testwait.Context(h.t)); err != nil {
		h.t.Errorf("Shutdown: %v", err)
	}
	if err := <-h.served; !errors.Is(err, ErrServerClosed) {
		h.t.Errorf("Serve returned %v; want ErrServerClosed", err)
	}
	h.eng.Close()
	h.srv = nil
}

type sshResult struct {
	stdout, stderr string
	code           int
}

// clientOpts are the options every OpenSSH client (ssh, sftp, scp) uses to
// reach the bastion as the agent; portFlag is -p for ssh, -P for sftp and
// scp.
func (h *harness) clientOpts(portFlag string) []string {
	return []string{"-F", "/dev/null", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
		"-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "-o", "IdentitiesOnly=yes", "-i", h.keyPath, portFlag, h.port}
}

// runClient runs an OpenSSH client with stdin and returns its output and
// exit status.
//
// A client still running at the test's deadline is killed: the test fails
// (with Errorf, as runClient may run on a goroutine of its own) and the
// result says so, with exit status -1.
func (h *harness) runClient(stdin, name string, args ...string) sshResult {
	h.t.Helper()
	ctx := testwait.Context(h.t)
	cmd := exec.CommandContext(ctx, name, args...)
	// A process of the client's that outlives it and holds its output
	// open is waited for until the deadline too.
	cmd.WaitDelay = testwait.Remaining(h.t)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := sshResult{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		h.t.Errorf("%s %v: still running at the test's deadline; killed it", name, args)
		r.code = -1
		r.stderr += "\n(killed by the test at its deadline)"
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		h.t.Fatalf("%s %v: %v", name, args, err)
	}
	return r
}

// ssh runs the real OpenSSH client against the bastion.
func (h *harness) ssh(stdin string, args ...string) sshResult {
	h.t.Helper()
	return h.runClient(stdin, "ssh", append(h.clientOpts("-p"), args...)...)
}

// auditCount waits until the bastion has audited a record with outcome
// (the row is written just after the agent's session ends), then counts
// the audit rows with that outcome in the store.
func (h *harness) auditCount(outcome policy.Outcome) int {
	h.t.Helper()
	return h.auditCountWant(outcome, 1)
}

// auditCountWant is auditCount waiting for want records.
func (h *harness) auditCountWant(outcome policy.Outcome, want int) int {
	h.t.Helper()
	h.events.await(h.t, fmt.Sprintf("%d audit records with outcome %s", want, outcome), func(audits []policy.Record, _ []policy.Approval) bool {
		n := 0
		for _, r := range audits {
			if r.Outcome == outcome {
				n++
			}
		}
		return n >= want
	})
	return h.auditRows(outcome)
}

func (h *harness) auditRows(outcome policy.Outcome) int {
	h.t.Helper()
	rows, err := h.st.ListAudit(context.Background(), store.AuditFilter{})
	if err != nil {
		h.t.Fatal(err)
	}
	n := 0
	for _, r := range rows {
		if r.Decision == string(outcome) {
			n++
		}
	}
	return n
}

var allowAll = store.Rules{Read: store.RuleAllow, Write: store.RuleAllow, Destructive: store.RuleAllow}

func TestExitStatuses(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{rules: allowAll})
	tests := []struct {
		cmd  string
		want int
	}{
		{"true", 0},
		{"false", 1},
		{"exit 7", 7},
		{"no-such-command-postern", 127},
		// Output closed long before the exit: the session still ends with
		// the command's own status.
		{"exec >/dev/null 2>&1; sleep 2.5; exit 5", 5},
		{"kill -TERM $$", 255}, // OpenSSH's ssh exits 255 when the remote command dies by a signal
	}
	for _, tt := range tests {
		t.Run(tt.cmd, func(t *testing.T) {
			got := h.ssh("", "127.0.0.1", "web", tt.cmd)
			if got.code != tt.want {
				t.Errorf("exit status = %d; want %d (stderr %q)", got.code, tt.want, got.stderr)
			}
		})
	}
}

func TestRouting(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{"first word is the alias", []string{"127.0.0.1", "web", "echo", "hi"}, 0, "hi\n", ""},
		{"user name is the alias", []string{"web@127.0.0.1", "echo hi"}, 0, "hi\n", ""},
		{"user name routing keeps an alias-like first word", []string{"web@127.0.0.1", "echo web"}, 0, "web\n", ""},
		{"help lists aliases", []string{"127.0.0.1", "help"}, 0, "web", ""},
		{"no command lists aliases", []string{"-T", "127.0.0.1"}, 0, "web", ""},
		{"unknown alias", []string{"127.0.0.1", "nosuch", "ls"}, ExitUsage, "", `unknown alias "nosuch"`},
		{"alias without a grant answers like an unknown one", []string{"127.0.0.1", "secret", "ls"}, ExitUsage, "", `unknown alias "secret"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := h.ssh("", tt.args...)
			if got.code != tt.wantCode {
				t.Fatalf("exit status = %d; want %d (stdout %q, stderr %q)", got.code, tt.wantCode, got.stdout, got.stderr)
			}
			if tt.wantStdout != "" && !strings.Contains(got.stdout, tt.wantStdout) {
				t.Errorf("stdout = %q; want it to contain %q", got.stdout, tt.wantStdout)
			}
			if tt.wantStderr != "" && !strings.Contains(got.stderr, tt.wantStderr) {
				t.Errorf("stderr = %q; want it to contain %q", got.stderr, tt.wantStderr)
			}
			if tt.wantCode == ExitUsage {
				if n := h.auditCountWant(policy.Denied, 1); n < 1 {
					t.Errorf("denied audit rows = %d; want the unknown alias audited", n)
				}
			}
			if strings.Contains(got.stdout, "secret") {
				t.Errorf("stdout %q names an alias the agent holds no grant for", got.stdout)
			}
		})
	}
}

func TestDeniedRunsNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	file := filepath.Join(t.TempDir(), "made")
	got := h.ssh("", "127.0.0.1", "web", "touch "+file)
	if got.code != ExitRefused {
		t.Fatalf("exit status = %d; want %d (stderr %q)", got.code, ExitRefused, got.stderr)
	}
	if !strings.Contains(got.stderr, "denied") || !strings.Contains(got.stderr, "write") {
		t.Errorf("stderr = %q; want a denial naming the class", got.stderr)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("file %s exists after a denied command (stat err %v)", file, err)
	}
	if n := h.auditCount(policy.Denied); n != 1 {
		t.Errorf("denied audit rows = %d; want 1", n)
	}
}

func TestAskApproveRuns(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{rules: store.Rules{Read: store.RuleAllow, Write: store.RuleAsk, Destructive: store.RuleDeny}})
	file := filepath.Join(t.TempDir(), "made")
	done := make(chan sshResult, 1)
	go func() { done <- h.ssh("", "127.0.0.1", "web", "touch "+file) }()
	id := h.waitPending()
	if _, err := h.eng.Approve(context.Background(), id, h.alice, policy.Scope{}); err != nil {
		t.Fatal(err)
	}
	got := <-done
	if got.code != 0 {
		t.Fatalf("exit status = %d; want 0 (stderr %q)", got.code, got.stderr)
	}
	if !strings.Contains(got.stderr, id) || !strings.Contains(got.stderr, "postern approvals approve "+id) {
		t.Errorf("stderr = %q; want the approval id and how to decide it", got.stderr)
	}
	if _, err := os.Stat(file); err != nil {
		t.Errorf("approved command did not run: %v", err)
	}
	if n := h.auditCount(policy.Approved); n != 1 {
		t.Errorf("approved audit rows = %d; want 1", n)
	}
}

func TestAskDenyKeepsTarget(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{rules: store.Rules{Read: store.RuleAllow, Write: store.RuleDeny, Destructive: store.RuleAsk}})
	file := filepath.Join(t.TempDir(), "keep")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan sshResult, 1)
	go func() { done <- h.ssh("", "127.0.0.1", "web", "rm -f "+file) }()
	id := h.waitPending()
	if _, err := h.eng.Deny(context.Background(), id, h.bob, "not today"); err != nil {
		t.Fatal(err)
	}
	got := <-done
	if got.code != ExitRefused {
		t.Fatalf("exit status = %d; want %d (stderr %q)", got.code, ExitRefused, got.stderr)
	}
	if !strings.Contains(got.stderr, "not today") {
		t.Errorf("stderr = %q; want the admin's reason", got.stderr)
	}
	if _, err := os.Stat(file); err != nil {
		t.Errorf("target file gone after a denied rm: %v", err)
	}
}

// waitPending waits until an agent is told that it waits for an approval,
// and returns that approval's id. Each call takes the next such wait, in
// the order the bastion announced them.
func (h *harness) waitPending() string {
	h.t.Helper()
	var id string
	h.events.await(h.t, "an agent to wait for an approval", func(_ []policy.Record, waits []policy.Approval) bool {
		if h.events.taken == len(waits) {
			return false
		}
		id = waits[h.events.taken].ID
		h.events.taken++
		return true
	})
	return id
}

func TestInteractiveShellIsDestructive(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{rules: store.Rules{Read: store.RuleAllow, Write: store.RuleAllow, Destructive: store.RuleDeny}})
	got := h.ssh("", "-tt", "web@127.0.0.1")
	if got.code != ExitRefused {
		t.Fatalf("exit status = %d; want %d (stderr %q)", got.code, ExitRefused, got.stderr+got.stdout)
	}
	if !strings.Contains(got.stderr+got.stdout, "interactive shell") {
		t.Errorf("output %q; want the reason naming the interactive shell", got.stderr+got.stdout)
	}
}

func TestRefusesForwarding(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{rules: allowAll})
	cfg := &ssh.ClientConfig{User: "agent", Auth: []ssh.AuthMethod{ssh.PublicKeys(h.signer)}, HostKeyCallback: ssh.InsecureIgnoreHostKey()}
	c, err := ssh.Dial("tcp", h.addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if conn, err := c.Dial("tcp", h.target.Addr); err == nil {
		conn.Close()
		t.Fatal("direct-tcpip through the bastion succeeded; want it refused")
	}
	if _, err := c.Listen("tcp", "127.0.0.1:0"); err == nil {
		t.Fatal("tcpip-forward succeeded; want it refused")
	}
	sess, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	if err := sess.RequestSubsystem("netconf"); err == nil {
		t.Error("subsystem netconf succeeded; want it refused")
	}
	sess.Close()
	c.Close()
	if n := h.auditCountWant(policy.Denied, 3); n < 3 {
		t.Errorf("denied audit rows = %d; want at least 3 (forward, listen, subsystem)", n)
	}
}

func TestUnknownKeyRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	block, _ := ssh.MarshalPrivateKey(priv, "stranger")
	other := filepath.Join(t.TempDir(), "stranger")
	if err := os.WriteFile(other, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	h.keyPath = other
	got := h.ssh("", "127.0.0.1", "web", "true")
	if got.code != 255 || !strings.Contains(got.stderr, "Permission denied") {
		t.Errorf("exit %d stderr %q; want 255 and Permission denied", got.code, got.stderr)
	}
}

func TestHostKeyMismatchRefused(t *testing.T) {
	t.Parallel()
	_, wrong, _ := ed25519.GenerateKey(rand.Reader)
	wrongPub, _ := ssh.NewSignerFromKey(wrong)
	line := "127.0.0.1 " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(wrongPub.PublicKey())))
	h := newHarness(t, harnessOpts{hostKeys: []string{line}})
	got := h.ssh("", "127.0.0.1", "web", "true")
	if got.code != ExitUnreachable || !strings.Contains(got.stderr, "host key of web changed") {
		t.Errorf("exit %d stderr %q; want %d and \"host key of web changed\"", got.code, got.stderr, ExitUnreachable)
	}
	if n := h.auditCount(policy.Failed); n != 1 {
		t.Errorf("failed audit rows = %d; want 1", n)
	}
}

func TestTargetUnreachable(t *testing.T) {
	t.Parallel()
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	h := newHarness(t, harnessOpts{port: port})
	got := h.ssh("", "127.0.0.1", "web", "true")
	if got.code != ExitUnreachable || !strings.Contains(got.stderr, "unreachable") {
		t.Errorf("exit %d stderr %q; want %d and a reason", got.code, got.stderr, ExitUnreachable)
	}
}

// client is an x/crypto SSH client logged in to the bastion as the agent.
func (h *harness) client() *ssh.Client {
	h.t.Helper()
	cfg := &ssh.ClientConfig{User: "agent", Auth: []ssh.AuthMethod{ssh.PublicKeys(h.signer)}, HostKeyCallback: ssh.InsecureIgnoreHostKey()}
	c, err := ssh.Dial("tcp", h.addr, cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	return c
}

// runSession runs cmd on a new session of c and returns its stdout, stderr
// and exit status; err is set when the session did not end with an exit
// status.
func runSession(c *ssh.Client, cmd string) (stdout, stderr string, code int, err error) {
	s, err := c.NewSession()
	if err != nil {
		return "", "", 0, err
	}
	defer s.Close()
	var out, errb bytes.Buffer
	s.Stdout, s.Stderr = &out, &errb
	err = s.Run(cmd)
	var ee *ssh.ExitError
	if errors.As(err, &ee) {
		code, err = ee.ExitStatus(), nil
	}
	return out.String(), errb.String(), code, err
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// auditRowsFor counts audit rows of a connection alias.
func (h *harness) auditRowsFor(alias string) int {
	h.t.Helper()
	rows, err := h.st.ListAudit(context.Background(), store.AuditFilter{})
	if err != nil {
		h.t.Fatal(err)
	}
	n := 0
	for _, r := range rows {
		if r.ConnectionAlias == alias {
			n++
		}
	}
	return n
}

// TestConnectionChangeOnOpenConnection: sessions on one agent connection
// use a kept copy of the connection row, but a change of the row (here a
// re-pinned host key, as after `conn update`) is seen by the next session,
// in both directions, without reconnecting.
func TestConnectionChangeOnOpenConnection(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	c := h.client()
	defer c.Close()
	run := func(cmd string) (string, string, int) {
		t.Helper()
		stdout, stderr, code, err := runSession(c, cmd)
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		return stdout, stderr, code
	}
	if out, errOut, code := run("web echo first"); code != 0 || out != "first\n" {
		t.Fatalf("first session: got exit %d, stdout %q, stderr %q; want 0 and \"first\\n\"", code, out, errOut)
	}

	_, wrong, _ := ed25519.GenerateKey(rand.Reader)
	wrongPub, _ := ssh.NewSignerFromKey(wrong)
	wrongLine := "127.0.0.1 " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(wrongPub.PublicKey())))
	if _, err := h.st.UpdateConnectionAddress(ctx, store.Unaudited(), "web", h.target.Host, h.target.Port, []string{wrongLine}); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := run("web echo second"); code != ExitUnreachable || !strings.Contains(errOut, "host key of web changed") {
		t.Errorf("after re-pinning a wrong key: got exit %d, stdout %q, stderr %q; want %d and \"host key of web changed\"", code, out, errOut, ExitUnreachable)
	}
	// The attempt with the stale copy was decided again, not audited: one
	// row for the command, the failed dial.
	if n := h.auditCount(policy.Failed); n != 1 {
		t.Errorf("failed audit rows after the re-pinned key: got %d; want 1", n)
	}

	if _, err := h.st.UpdateConnectionAddress(ctx, store.Unaudited(), "web", h.target.Host, h.target.Port, []string{h.target.KnownHostsLine}); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := run("web echo third"); code != 0 || out != "third\n" {
		t.Errorf("after re-pinning the right key: got exit %d, stdout %q, stderr %q; want 0 and \"third\\n\"", code, out, errOut)
	}
}
