package bastion

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
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
	"go.uber.org/goleak"
	"golang.org/x/crypto/ssh"
)

// These tests pin the relay's guarantees against a real OpenSSH sshd as the
// target and, as the agent, the real ssh client where its behaviour is the
// point, or an x/crypto client where the test must observe frames. Between
// them sits relayHarness: a minimal agent-facing SSH server that parses the
// session requests with requests.go and hands the channel to startUpstream
// and relay, as session.go does, without routing or policy.

// relayLeakCheck verifies at the end of the test, after every other cleanup
// (cleanups run last-registered first), that the test left no goroutine
// behind. Call it first.
func relayLeakCheck(t *testing.T) {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
}

// relayHarness is the agent-facing server of the tests.
type relayHarness struct {
	sshd    *testsshd.Server
	addr    string
	port    int
	hostKey ssh.PublicKey
	agent   ssh.Signer // the agent's key, for x/crypto clients
	keyPath string     // the same key as a file, for the ssh binary
	up      *ssh.Client
	results chan relayResult // one per relayed session
	cancel  func()           // ends the ctx every relay runs under
	frames  chan []string    // per relayed session, what relay sent the agent besides data
	waits   relayWaits       // every relay's
}

// frameRecorder records, in call order, the requests, EOF and close that
// relay sends on the agent's channel. x/crypto writes a channel's messages
// in the order of the calls, so this is the order on the wire.
type frameRecorder struct {
	ssh.Channel
	// mu protects events.
	mu     sync.Mutex
	events []string
}

func (r *frameRecorder) record(e string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *frameRecorder) frames() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...)
}

func (r *frameRecorder) SendRequest(name string, wantReply bool, payload []byte) (bool, error) {
	r.record(name)
	return r.Channel.SendRequest(name, wantReply, payload)
}

func (r *frameRecorder) CloseWrite() error {
	r.record("eof")
	return r.Channel.CloseWrite()
}

func (r *frameRecorder) Close() error {
	r.record("close")
	return r.Channel.Close()
}

// relayHarnessOpts configure startRelayHarness.
type relayHarnessOpts struct {
	// goneWait is the relays' waits.gone, for the test that trips it; the
	// test's deadline if zero, as is every other wait of the relays.
	goneWait time.Duration
}

// startRelayHarness connects to the package's shared target and serves
// agents on a 127.0.0.1 port until the test ends.
func startRelayHarness(t *testing.T, o relayHarnessOpts) *relayHarness {
	t.Helper()
	sshd := sharedTarget.Get(t)
	up, err := ssh.Dial("tcp", sshd.Addr, sshd.ClientConfig())
	if err != nil {
		t.Fatalf("dial target: %v\n%s", err, sshd.Log())
	}

	_, hostPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	hostSigner, err := ssh.NewSignerFromKey(hostPriv)
	if err != nil {
		t.Fatal(err)
	}
	_, agentPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	agentSigner, err := ssh.NewSignerFromKey(agentPriv)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(agentPriv, "relay test agent")
	if err != nil {
		t.Fatal(err)
	}
	keyPath := filepath.Join(t.TempDir(), "agent_key")
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}

	agentPub := agentSigner.PublicKey().Marshal()
	cfg := &ssh.ServerConfig{
		PublicKeyCallback: func(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			if bytes.Equal(key.Marshal(), agentPub) {
				return &ssh.Permissions{}, nil
			}
			return nil, errors.New("unknown key")
		},
	}
	cfg.AddHostKey(hostSigner)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &relayHarness{
		sshd:    sshd,
		addr:    ln.Addr().String(),
		port:    ln.Addr().(*net.TCPAddr).Port,
		hostKey: hostSigner.PublicKey(),
		agent:   agentSigner,
		keyPath: keyPath,
		up:      up,
		results: make(chan relayResult, 64),
		frames:  make(chan []string, 64),
		waits:   relayWaits{teardown: testwait.Remaining(t), gone: testwait.Remaining(t)},
	}
	if o.goneWait != 0 {
		h.waits.gone = o.goneWait
	}

	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	var wg sync.WaitGroup
	// connsMu protects conns, the accepted connections closed at cleanup.
	var connsMu sync.Mutex
	conns := map[net.Conn]bool{}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			connsMu.Lock()
			conns[nc] = true
			connsMu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				h.serveConn(ctx, &wg, nc, cfg)
			}()
		}
	}()
	t.Cleanup(func() {
		cancel()
		ln.Close()
		connsMu.Lock()
		for nc := range conns {
			nc.Close()
		}
		connsMu.Unlock()
		up.Close()
		wg.Wait()
	})
	return h
}

// serveConn runs one agent connection: session channels only.
func (h *relayHarness) serveConn(ctx context.Context, wg *sync.WaitGroup, nc net.Conn, cfg *ssh.ServerConfig) {
	sconn, chans, reqs, err := ssh.NewServerConn(nc, cfg)
	if err != nil {
		nc.Close()
		return
	}
	defer sconn.Close()
	wg.Add(1)
	go func() {
		defer wg.Done()
		ssh.DiscardRequests(reqs)
	}()
	for nch := range chans {
		if nch.ChannelType() != "session" {
			nch.Reject(ssh.UnknownChannelType, "session only")
			continue
		}
		ch, chReqs, err := nch.Accept()
		if err != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.serveSession(ctx, wg, ch, chReqs)
		}()
	}
}

// serveSession reads the session's setup requests up to exec or shell, then
// starts the upstream session and relays, as session.go does.
func (h *relayHarness) serveSession(ctx context.Context, wg *sync.WaitGroup, ch ssh.Channel, reqs <-chan *ssh.Request) {
	var st upstreamStart
	started := false
	for !started {
		req, ok := <-reqs
		if !ok {
			ch.Close()
			return
		}
		accept := false
		switch req.Type {
		case "env":
			e, err := parseEnv(req.Payload)
			if err == nil && envAllowed(e.Name) {
				st.Env = append(st.Env, e)
				accept = true
			}
		case "pty-req":
			if _, raw, err := parsePtyReq(req.Payload); err == nil {
				st.PtyReq, accept = raw, true
			}
		case "exec":
			if cmd, err := parseExec(req.Payload); err == nil {
				st.Command, accept, started = cmd, true, true
			}
		case "shell":
			accept, started = true, true
		}
		if req.WantReply {
			req.Reply(accept, nil)
		}
	}

	fail := func(reason error) {
		fmt.Fprintf(ch.Stderr(), "postern: %v\n", reason)
		ch.SendRequest("exit-status", false, exitStatusPayload(255))
		ch.CloseWrite()
		ch.Close()
	}
	upCh, upReqs, err := h.up.OpenChannel("session", nil)
	if err != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ssh.DiscardRequests(reqs)
		}()
		fail(err)
		return
	}
	if err := startUpstream(upCh, st); err != nil {
		upCh.Close()
		wg.Add(2)
		go func() {
			defer wg.Done()
			ssh.DiscardRequests(upReqs)
		}()
		go func() {
			defer wg.Done()
			ssh.DiscardRequests(reqs)
		}()
		fail(err)
		return
	}
	rec := &frameRecorder{Channel: ch}
	// The hook records itself among the frames, so that TestRelayFrameOrder
	// sees that the outcome is known (and audited, in the server) before
	// the agent is told.
	r := &relay{down: rec, downReqs: reqs, up: upCh, upReqs: upReqs, waits: h.waits,
		beforeExit: func(early relayResult) {
			status := "none"
			if early.ExitStatus != nil {
				status = fmt.Sprint(*early.ExitStatus)
			}
			rec.record("before-exit:" + status)
		}}
	res := r.run(ctx)
	select {
	case h.frames <- rec.frames():
	default: // only TestRelayFrameOrder reads them
	}
	h.results <- res
	if res.Err != nil {
		fail(res.Err)
	}
}

// result returns the next relay's result.
func (h *relayHarness) result(t *testing.T) relayResult {
	t.Helper()
	return testwait.Recv(t, "a relay to return", h.results)
}

// dial connects an x/crypto client to the harness as the agent.
func (h *relayHarness) dial(t *testing.T) *ssh.Client {
	t.Helper()
	c, err := ssh.Dial("tcp", h.addr, &ssh.ClientConfig{
		User:            "agent",
		Auth:            []ssh.AuthMethod{ssh.PublicKeys(h.agent)},
		HostKeyCallback: ssh.FixedHostKey(h.hostKey),
	})
	if err != nil {
		t.Fatalf("dial harness: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// relayPath says where a real ssh client connects: through the relay or straight
// to the target sshd.
type relayPath int

const (
	throughRelay relayPath = iota
	directToTarget
)

func (v relayPath) String() string {
	if v == directToTarget {
		return "direct"
	}
	return "relay"
}

// sshCommand builds a real ssh client command line that runs remote on the
// target, through the relay or directly, with its own key and no user
// config, agent or known hosts.
func (h *relayHarness) sshCommand(t *testing.T, v relayPath, extra []string, remote string) *exec.Cmd {
	t.Helper()
	bin := e2e.Tool(t, "ssh", "openssh-client")
	key, port, user := h.keyPath, h.port, "agent"
	if v == directToTarget {
		key, port, user = filepath.Join(h.sshd.Dir, "id_ed25519"), h.sshd.Port, h.sshd.User
	}
	args := []string{
		"-F", "/dev/null",
		"-o", "StrictHostKeyChecking=no",
		"-o", "UserKnownHostsFile=/dev/null",
		"-o", "BatchMode=yes",
		"-o", "IdentitiesOnly=yes",
		"-o", "LogLevel=ERROR",
		"-i", key,
		"-p", strconv.Itoa(port),
	}
	args = append(args, extra...)
	args = append(args, user+"@127.0.0.1", remote)
	cmd := exec.CommandContext(testwait.Context(t), bin, args...)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SSH_AUTH_SOCK=") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	return cmd
}

// relaySSHRun is what a real ssh client reported.
type relaySSHRun struct {
	stdout, stderr []byte
	code           int
}

// runSSH runs the real ssh client with stdin and returns its output and exit
// code.
func (h *relayHarness) runSSH(t *testing.T, v relayPath, extra []string, remote string, stdin io.Reader) relaySSHRun {
	t.Helper()
	cmd := h.sshCommand(t, v, extra, remote)
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("ssh %s %q: %v", v, remote, err)
	}
	return relaySSHRun{stdout: stdout.Bytes(), stderr: stderr.Bytes(), code: cmd.ProcessState.ExitCode()}
}

// TestRelayExitCodes: the agent's ssh reports what it would report talking
// to the target directly, and relay reports the target's exit status or
// signal.
func TestRelayExitCodes(t *testing.T) {
	relayLeakCheck(t)
	h := startRelayHarness(t, relayHarnessOpts{})
	tests := []struct {
		name       string
		command    string
		wantCode   int
		wantStatus int // -1: none
		wantSignal string
	}{
		{name: "zero", command: "exit 0", wantCode: 0, wantStatus: 0},
		{name: "one", command: "echo out; echo err >&2; exit 1", wantCode: 1, wantStatus: 1},
		{name: "seven", command: "exit 7", wantCode: 7, wantStatus: 7},
		{name: "not found", command: "postern-no-such-command", wantCode: 127, wantStatus: 127},
		// OpenSSH's client exits 255 when the session ends by a signal.
		{name: "signal", command: "kill -TERM $$", wantCode: 255, wantStatus: -1, wantSignal: "TERM"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			direct := h.runSSH(t, directToTarget, nil, tt.command, nil)
			relayed := h.runSSH(t, throughRelay, nil, tt.command, nil)
			res := h.result(t)
			if relayed.code != direct.code {
				t.Errorf("exit code through relay: got %d; want %d (direct)", relayed.code, direct.code)
			}
			if relayed.code != tt.wantCode {
				t.Errorf("exit code: got %d; want %d", relayed.code, tt.wantCode)
			}
			if !bytes.Equal(relayed.stdout, direct.stdout) {
				t.Errorf("stdout through relay: got %q; want %q (direct)", relayed.stdout, direct.stdout)
			}
			if !bytes.Equal(relayed.stderr, direct.stderr) {
				t.Errorf("stderr through relay: got %q; want %q (direct)", relayed.stderr, direct.stderr)
			}
			if res.Err != nil {
				t.Errorf("relay error: got %v; want nil", res.Err)
			}
			switch {
			case tt.wantStatus < 0 && res.ExitStatus != nil:
				t.Errorf("exit status: got %d; want none", *res.ExitStatus)
			case tt.wantStatus >= 0 && res.ExitStatus == nil:
				t.Errorf("exit status: got none; want %d", tt.wantStatus)
			case tt.wantStatus >= 0 && *res.ExitStatus != uint32(tt.wantStatus):
				t.Errorf("exit status: got %d; want %d", *res.ExitStatus, tt.wantStatus)
			}
			if res.ExitSignal != tt.wantSignal {
				t.Errorf("exit signal: got %q; want %q", res.ExitSignal, tt.wantSignal)
			}
		})
	}

	// The x/crypto client sees the signal as the target sent it.
	c := h.dial(t)
	sess, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	err = sess.Run("kill -TERM $$")
	h.result(t)
	var ee *ssh.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("x/crypto Run: got %v; want *ssh.ExitError", err)
	}
	if got, want := ee.Signal(), "TERM"; got != want {
		t.Errorf("x/crypto exit signal: got %q; want %q", got, want)
	}
}

// TestRelayFrameOrder: the agent sees exit-status, then EOF, then close.
func TestRelayFrameOrder(t *testing.T) {
	relayLeakCheck(t)
	h := startRelayHarness(t, relayHarnessOpts{})

	t.Run("x/crypto", func(t *testing.T) {
		c := h.dial(t)
		ch, reqs, err := c.OpenChannel("session", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer ch.Close()
		ok, err := ch.SendRequest("exec", true, ssh.Marshal(execRequest{Command: "echo out; echo err >&2; exit 3"}))
		if err != nil || !ok {
			t.Fatalf("exec: got %v, %v; want true, nil", ok, err)
		}
		var stderr []byte
		stderrDone := make(chan struct{})
		go func() {
			defer close(stderrDone)
			stderr, _ = io.ReadAll(ch.Stderr())
		}()
		stdout, err := io.ReadAll(ch)
		if err != nil {
			t.Fatal(err)
		}
		<-stderrDone
		// The demultiplexer queues a request before it marks a later EOF,
		// so at EOF an exit-status sent before it is already queued. This
		// cannot see an exit-status sent just after the EOF (the client
		// may be slower than the demultiplexer): the frames recorded at
		// relay's side and the openssh subtest pin that order.
		var first *ssh.Request
		select {
		case first = <-reqs:
		default:
		}
		if first == nil || first.Type != "exit-status" {
			t.Fatalf("at EOF: got request %v; want exit-status already received", first)
		}
		if st, err := parseExitStatus(first.Payload); err != nil || st != 3 {
			t.Errorf("exit-status: got %d, %v; want 3", st, err)
		}
		// Close follows: the request channel ends with nothing more.
		for req := range reqs {
			t.Errorf("after exit-status: got request %q; want close", req.Type)
		}
		if got, want := string(stdout), "out\n"; got != want {
			t.Errorf("stdout: got %q; want %q", got, want)
		}
		if got, want := string(stderr), "err\n"; got != want {
			t.Errorf("stderr: got %q; want %q", got, want)
		}
		if res := h.result(t); res.Err != nil {
			t.Errorf("relay error: got %v; want nil", res.Err)
		}
		if got, want := strings.Join(<-h.frames, ","), "before-exit:3,exit-status,eof,close"; got != want {
			t.Errorf("frames relay sent: got %s; want %s", got, want)
		}
	})

	// OpenSSH's client logs each frame as it handles it (-vv), in wire
	// order: the order it sees must be exit-status, EOF, close.
	t.Run("openssh", func(t *testing.T) {
		run := h.runSSH(t, throughRelay, []string{"-vv", "-o", "LogLevel=DEBUG2"}, "echo hi", nil)
		h.result(t)
		if run.code != 0 {
			t.Fatalf("exit code: got %d; want 0\n%s", run.code, run.stderr)
		}
		var order []string
		for _, line := range strings.Split(string(run.stderr), "\n") {
			switch {
			case strings.Contains(line, "rtype exit-status"):
				order = append(order, "exit-status")
			case strings.Contains(line, "channel 0: rcvd eof"):
				order = append(order, "eof")
			case strings.Contains(line, "channel 0: rcvd close"):
				order = append(order, "close")
			}
		}
		if got, want := strings.Join(order, ","), "exit-status,eof,close"; got != want {
			t.Errorf("frames seen by ssh: got %s; want %s\n%s", got, want, run.stderr)
		}
	})
}

// TestRelayBinaryRoundTrip10MiB: every byte value passes both ways unchanged.
func TestRelayBinaryRoundTrip10MiB(t *testing.T) {
	relayLeakCheck(t)
	h := startRelayHarness(t, relayHarnessOpts{})
	const size = 10 << 20
	in := make([]byte, size)
	if _, err := rand.Read(in); err != nil {
		t.Fatal(err)
	}
	run := h.runSSH(t, throughRelay, nil, "cat", bytes.NewReader(in))
	res := h.result(t)
	if run.code != 0 {
		t.Fatalf("exit code: got %d; want 0\n%s", run.code, run.stderr)
	}
	if got, want := sha256.Sum256(run.stdout), sha256.Sum256(in); got != want {
		t.Errorf("sha256 of %d bytes back: got %x; want %x", len(run.stdout), got, want)
	}
	if res.BytesIn != size || res.BytesOut != size {
		t.Errorf("bytes counted: got in %d, out %d; want %d each", res.BytesIn, res.BytesOut, size)
	}
}

// TestRelayStderr4MiB: a command that writes only to stderr, past the 2 MiB
// channel window, finishes: the relay drains stderr while stdout is quiet.
func TestRelayStderr4MiB(t *testing.T) {
	relayLeakCheck(t)
	h := startRelayHarness(t, relayHarnessOpts{})
	const size = 4 << 20
	run := h.runSSH(t, throughRelay, nil, fmt.Sprintf("head -c %d /dev/zero >&2; echo done", size), nil)
	res := h.result(t)
	if run.code != 0 {
		t.Fatalf("exit code: got %d; want 0", run.code)
	}
	if len(run.stderr) != size || bytes.Count(run.stderr, []byte{0}) != size {
		t.Errorf("stderr: got %d bytes (%d zero); want %d zero bytes", len(run.stderr), bytes.Count(run.stderr, []byte{0}), size)
	}
	if got, want := string(run.stdout), "done\n"; got != want {
		t.Errorf("stdout: got %q; want %q", got, want)
	}
	if got, want := res.BytesOut, int64(size+len("done\n")); got != want {
		t.Errorf("bytes out: got %d; want %d", got, want)
	}
}

// TestRelayTrailingOutput: output the target sends after its exit-status
// (a background process still holding stdout) reaches the agent, before the
// exit status.
func TestRelayTrailingOutput(t *testing.T) {
	relayLeakCheck(t)
	h := startRelayHarness(t, relayHarnessOpts{})
	// The shell prints its pid and a fifo, leaves a reader of the fifo in
	// the background holding stdout, and exits 3. Once the shell is gone
	// (so sshd has sent exit-status), a second session writes to the fifo,
	// so the trailing line is sent after the exit status.
	const script = `f=$(mktemp -u); mkfifo "$f"; echo "$$ $f"; (cat "$f"; rm -f "$f") & exit 3`
	cmd := h.sshCommand(t, throughRelay, nil, script)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(stdout)
	first, err := r.ReadString('\n')
	if err != nil {
		cmd.Wait()
		t.Fatalf("first line: %v; stderr %s", err, stderr.String())
	}
	pid, fifo, _ := strings.Cut(strings.TrimSpace(first), " ")

	trigger, err := h.up.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer trigger.Close()
	if out, err := trigger.CombinedOutput(fmt.Sprintf(`while kill -0 %s 2>/dev/null; do sleep 0.01; done; echo trailing > %s`, pid, fifo)); err != nil {
		t.Fatalf("trigger: %v: %s", err, out)
	}

	rest, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	res := h.result(t)
	if got, want := string(rest), "trailing\n"; got != want {
		t.Errorf("output after the exit status: got %q; want %q", got, want)
	}
	if code := cmd.ProcessState.ExitCode(); code != 3 {
		t.Errorf("exit code: got %d (%v); want 3; stderr %s", code, err, stderr.String())
	}
	if res.Err != nil || res.ExitStatus == nil || *res.ExitStatus != 3 {
		t.Errorf("relay result: got status %v, err %v; want 3, nil", res.ExitStatus, res.Err)
	}
}

// TestRelayStdinEOF: the agent's EOF on stdin reaches the command.
func TestRelayStdinEOF(t *testing.T) {
	relayLeakCheck(t)
	h := startRelayHarness(t, relayHarnessOpts{})
	run := h.runSSH(t, throughRelay, nil, "wc -c", strings.NewReader("hello"))
	res := h.result(t)
	if got, want := strings.TrimSpace(string(run.stdout)), "5"; got != want || run.code != 0 {
		t.Errorf("wc -c: got %q, exit %d; want %q, exit 0", got, run.code, want)
	}
	if res.BytesIn != 5 {
		t.Errorf("bytes in: got %d; want 5", res.BytesIn)
	}
}

// TestRelayAgentNeverClosesStdin: the session ends when the command exits,
// although the agent keeps its stdin open.
func TestRelayAgentNeverClosesStdin(t *testing.T) {
	relayLeakCheck(t)
	h := startRelayHarness(t, relayHarnessOpts{})

	t.Run("openssh", func(t *testing.T) {
		cmd := h.sshCommand(t, throughRelay, nil, "echo done")
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		defer stdin.Close()
		var stdout bytes.Buffer
		cmd.Stdout = &stdout
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Wait closes stdin only after ssh has exited.
		err = cmd.Wait()
		res := h.result(t)
		if err != nil || stdout.String() != "done\n" {
			t.Errorf("ssh: got %q, %v; want %q, nil", stdout.String(), err, "done\n")
		}
		if res.Err != nil {
			t.Errorf("relay error: got %v; want nil", res.Err)
		}
	})

	t.Run("x/crypto", func(t *testing.T) {
		c := h.dial(t)
		ch, reqs, err := c.OpenChannel("session", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer ch.Close()
		if ok, err := ch.SendRequest("exec", true, ssh.Marshal(execRequest{Command: "echo done"})); err != nil || !ok {
			t.Fatalf("exec: got %v, %v; want true, nil", ok, err)
		}
		out, err := io.ReadAll(ch)
		if err != nil || string(out) != "done\n" {
			t.Errorf("stdout: got %q, %v; want %q", out, err, "done\n")
		}
		var got []string
		for req := range reqs {
			got = append(got, req.Type)
		}
		if strings.Join(got, ",") != "exit-status" {
			t.Errorf("requests before close: got %v; want [exit-status]", got)
		}
		res := h.result(t)
		if res.Err != nil || res.ExitStatus == nil || *res.ExitStatus != 0 {
			t.Errorf("relay result: got status %v, err %v; want 0, nil", res.ExitStatus, res.Err)
		}
	})
}

// TestRelayPtyWindowSize: the pty is allocated with the agent's size, and a
// window change reaches it.
func TestRelayPtyWindowSize(t *testing.T) {
	relayLeakCheck(t)
	h := startRelayHarness(t, relayHarnessOpts{})

	t.Run("openssh -tt", func(t *testing.T) {
		direct := h.runSSH(t, directToTarget, []string{"-tt"}, "stty size", nil)
		relayed := h.runSSH(t, throughRelay, []string{"-tt"}, "stty size", nil)
		h.result(t)
		if relayed.code != 0 || !bytes.Equal(relayed.stdout, direct.stdout) {
			t.Errorf("stty size through relay: got %q, exit %d; want %q, exit 0 (direct)", relayed.stdout, relayed.code, direct.stdout)
		}
	})

	t.Run("x/crypto window-change", func(t *testing.T) {
		c := h.dial(t)
		sess, err := c.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		defer sess.Close()
		if err := sess.RequestPty("xterm", 40, 100, ssh.TerminalModes{ssh.ECHO: 0}); err != nil {
			t.Fatalf("pty: %v", err)
		}
		stdin, err := sess.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := sess.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		// The command reads a line between the two sizes. x/crypto hands a
		// channel's requests and its data to the relay on separate Go
		// channels, so the window change may reach the target after the
		// line: the command polls until the size changes. Should it never
		// change, the wait below ends at the test's deadline, and the
		// session's end at the test's end hangs up the pty and the poll.
		if err := sess.Start(`stty size; read x; while [ "$(stty size)" = "40 100" ]; do sleep 0.05; done; stty size`); err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(stdout)
		first, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if got, want := strings.TrimSpace(first), "40 100"; got != want {
			t.Errorf("size at start: got %q; want %q", got, want)
		}
		if err := sess.WindowChange(50, 120); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(stdin, "go\n"); err != nil {
			t.Fatal(err)
		}
		read := make(chan []byte, 1)
		go func() {
			rest, _ := io.ReadAll(r)
			read <- rest
		}()
		rest := testwait.Recv(t, "the size after the window change", read)
		lines := strings.Fields(strings.ReplaceAll(string(rest), "\r", ""))
		if got, want := strings.Join(lines, " "), "50 120"; got != want {
			t.Errorf("size after window-change: got %q; want %q", got, want)
		}
		if err := sess.Wait(); err != nil {
			t.Errorf("wait: %v", err)
		}
		h.result(t)
	})
}

// TestRelayEnvAllowlist: LANG, LC_*, GIT_PROTOCOL reach the target; other
// variables do not, although the target would accept them.
func TestRelayEnvAllowlist(t *testing.T) {
	relayLeakCheck(t)
	h := startRelayHarness(t, relayHarnessOpts{}) // the shared target accepts all of them
	setEnv := []string{"-o", "SetEnv=LANG=C.UTF-8 LC_CTYPE=C GIT_PROTOCOL=version=2 FOO=bar"}
	const show = `echo "LANG=${LANG-unset} LC_CTYPE=${LC_CTYPE-unset} GIT_PROTOCOL=${GIT_PROTOCOL-unset} FOO=${FOO-unset}"`
	direct := h.runSSH(t, directToTarget, setEnv, show, nil)
	relayed := h.runSSH(t, throughRelay, setEnv, show, nil)
	h.result(t)
	if got, want := strings.TrimSpace(string(direct.stdout)), "LANG=C.UTF-8 LC_CTYPE=C GIT_PROTOCOL=version=2 FOO=bar"; got != want {
		t.Fatalf("direct (the target accepts all four): got %q; want %q", got, want)
	}
	if got, want := strings.TrimSpace(string(relayed.stdout)), "LANG=C.UTF-8 LC_CTYPE=C GIT_PROTOCOL=version=2 FOO=unset"; got != want {
		t.Errorf("through relay: got %q; want %q", got, want)
	}
}

// TestRelayUpstreamLost: when the target's connection drops mid-command,
// relay returns an error with the agent's channel open, and the caller's 255
// and reason reach the agent.
func TestRelayUpstreamLost(t *testing.T) {
	relayLeakCheck(t)
	h := startRelayHarness(t, relayHarnessOpts{})
	// cat ends on its own when sshd closes its stdin, so nothing lingers on
	// the target.
	cmd := h.sshCommand(t, throughRelay, nil, "echo started; exec cat")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "started\n" {
		cmd.Wait()
		t.Fatalf("first line: got %q, %v; want %q", line, err, "started\n")
	}
	h.up.Close()
	res := h.result(t)
	io.Copy(io.Discard, stdout)
	cmd.Wait()
	if res.Err == nil {
		t.Errorf("relay error: got nil; want the lost target")
	}
	if code := cmd.ProcessState.ExitCode(); code != 255 {
		t.Errorf("exit code: got %d; want 255", code)
	}
	if !strings.Contains(stderr.String(), "without an exit status") {
		t.Errorf("stderr: got %q; want the reason", stderr.String())
	}
}

// TestRelayContextEnds: ending ctx stops the relay with an error and the
// agent's channel still open, so the caller's 255 and reason reach the
// agent.
func TestRelayContextEnds(t *testing.T) {
	relayLeakCheck(t)
	h := startRelayHarness(t, relayHarnessOpts{})
	c := h.dial(t)
	sess, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	stdin, err := sess.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := sess.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	sess.Stderr = &stderr
	if err := sess.Start("echo started; exec cat"); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(stdout)
	if line, err := r.ReadString('\n'); err != nil || line != "started\n" {
		t.Fatalf("first line: got %q, %v; want %q", line, err, "started\n")
	}
	h.cancel()
	res := h.result(t)
	if !errors.Is(res.Err, context.Canceled) {
		t.Errorf("relay error: got %v; want context.Canceled", res.Err)
	}
	io.Copy(io.Discard, r)
	err = sess.Wait()
	var ee *ssh.ExitError
	if !errors.As(err, &ee) || ee.ExitStatus() != 255 {
		t.Errorf("session end: got %v; want exit status 255", err)
	}
	if !strings.Contains(stderr.String(), "relay stopped") {
		t.Errorf("stderr: got %q; want the reason", stderr.String())
	}
}

// TestRelayAgentClosesChannel: an agent that closes its session channel
// mid-command (its connection stays) ends the command as closing a direct
// channel to sshd does: relay closes the upstream channel, sshd closes the
// command's output, the command ends by SIGPIPE at its next write, and relay
// reports that end with AgentGone.
func TestRelayAgentClosesChannel(t *testing.T) {
	relayLeakCheck(t)
	h := startRelayHarness(t, relayHarnessOpts{})
	c := h.dial(t)
	ch, reqs, err := c.OpenChannel("session", nil)
	if err != nil {
		t.Fatal(err)
	}
	go ssh.DiscardRequests(reqs)
	marker := newMarker(t)
	if ok, err := ch.SendRequest("exec", true, ssh.Marshal(execRequest{Command: "yes " + marker})); err != nil || !ok {
		t.Fatalf("exec: got %v, %v; want true, nil", ok, err)
	}
	if line, err := bufio.NewReader(ch).ReadString('\n'); err != nil || line != marker+"\n" {
		t.Fatalf("first line: got %q, %v; want %q", line, err, marker+"\n")
	}
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	res := h.result(t)
	if !res.AgentGone || res.Err != nil || res.ExitSignal != "PIPE" || res.ExitStatus != nil {
		t.Errorf("relay result: agent gone %v, err %v, signal %q, status %v; want true, nil, PIPE, none", res.AgentGone, res.Err, res.ExitSignal, res.ExitStatus)
	}
	waitRemoteGone(t, marker)
}

// TestRelayAgentGoneCommandRunsOn: a command without a pty that neither
// reads nor writes runs on when the agent goes, as it does after a direct
// client goes (sshd closes its pipes, which it does not use); relay waits
// its waits.gone for an end that does not come and says so.
func TestRelayAgentGoneCommandRunsOn(t *testing.T) {
	relayLeakCheck(t)
	// The wait for the command's end is what this test trips: it is short,
	// and nothing in the test has to happen before it ends.
	h := startRelayHarness(t, relayHarnessOpts{goneWait: 100 * time.Millisecond})
	c := h.dial(t)
	ch, reqs, err := c.OpenChannel("session", nil)
	if err != nil {
		t.Fatal(err)
	}
	go ssh.DiscardRequests(reqs)
	marker := newMarker(t)
	if ok, err := ch.SendRequest("exec", true, ssh.Marshal(execRequest{Command: "echo started; sleep 600; echo " + marker})); err != nil || !ok {
		t.Fatalf("exec: got %v, %v; want true, nil", ok, err)
	}
	if line, err := bufio.NewReader(ch).ReadString('\n'); err != nil || line != "started\n" {
		t.Fatalf("first line: got %q, %v; want %q", line, err, "started\n")
	}
	c.Close() // the agent's connection goes
	res := h.result(t)
	if !res.AgentGone || res.Err == nil || !strings.Contains(res.Err.Error(), "did not report the command's end within") {
		t.Errorf("relay result: agent gone %v, err %v; want true and the end not reported", res.AgentGone, res.Err)
	}
	if len(processesWith(t, marker)) == 0 {
		t.Errorf("the remote command ended; want it running on, as after a direct client goes")
	}
}
