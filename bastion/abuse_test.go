package bastion

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/postern/postern/internal/testwait"
)

// This file pins what one abusive agent can cost postern, and that other
// agents keep working meanwhile: a thousand sessions on one connection,
// malformed requests, and output that is never read.

// otherAgentWorks runs a command as a second agent with the real ssh
// client and fails t unless it succeeds.
func (h *harness) otherAgentWorks(keyPath string) {
	h.t.Helper()
	if got := h.sshAs(keyPath, "", "127.0.0.1", "web", "echo other"); got.code != 0 || got.stdout != "other\n" {
		h.t.Errorf("another agent meanwhile: exit %d stdout %q stderr %q; want 0 and other", got.code, got.stdout, got.stderr)
	}
}

// execOn sends exec cmd on a raw session channel and returns its output
// and exit status.
func execOn(t *testing.T, ch ssh.Channel, reqs <-chan *ssh.Request, cmd string) (string, int) {
	t.Helper()
	ok, err := ch.SendRequest("exec", true, ssh.Marshal(execRequest{Command: cmd}))
	if err != nil || !ok {
		t.Fatalf("exec %q: ok %v, err %v; want accepted", cmd, ok, err)
	}
	return readSession(t, ch, reqs)
}

// readSession reads a session's stdout to the end and its exit status.
func readSession(t *testing.T, ch ssh.Channel, reqs <-chan *ssh.Request) (string, int) {
	t.Helper()
	status := make(chan int, 1)
	go func() {
		code := -1
		for req := range reqs {
			if req.Type == "exit-status" {
				if st, err := parseExitStatus(req.Payload); err == nil {
					code = int(st)
				}
			}
			if req.WantReply {
				req.Reply(false, nil)
			}
		}
		status <- code
	}()
	out, err := io.ReadAll(ch)
	if err != nil {
		t.Fatalf("read output: %v", err)
	}
	ch.Close()
	return string(out), testwait.Recv(t, "the session's end", status)
}

// TestThousandSessionsOneConnection: one agent connection asks for 1,000
// sessions at once. DefaultMaxSessionsPerConn are opened, every other one
// is refused with "resource shortage" and a message naming the limit, the
// connection stays usable, and another agent is unaffected.
func TestThousandSessionsOneConnection(t *testing.T) {
	leakCheck(t)
	h := newHarness(t, harnessOpts{})
	key2 := h.addAgent("agent2", "web")
	c := h.client()
	defer c.Close()

	const n = 1000
	var (
		mu       sync.Mutex // guards the three below
		accepted []ssh.Channel
		refused  int
		other    []error
	)
	var wg sync.WaitGroup
	for w := 0; w < 20; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < n/20; i++ {
				ch, reqs, err := c.OpenChannel("session", nil)
				mu.Lock()
				var oce *ssh.OpenChannelError
				switch {
				case err == nil:
					go ssh.DiscardRequests(reqs)
					accepted = append(accepted, ch)
				case errors.As(err, &oce) && oce.Reason == ssh.ResourceShortage &&
					strings.Contains(oce.Message, fmt.Sprintf("at most %d sessions", DefaultMaxSessionsPerConn)):
					refused++
				default:
					other = append(other, err)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(accepted) != DefaultMaxSessionsPerConn || refused != n-DefaultMaxSessionsPerConn || len(other) != 0 {
		t.Fatalf("sessions accepted %d, refused %d, other errors %v; want %d, %d, none",
			len(accepted), refused, other, DefaultMaxSessionsPerConn, n-DefaultMaxSessionsPerConn)
	}
	h.otherAgentWorks(key2)

	// A session that ends gives its place back on the same connection,
	// once the bastion's session goroutine has ended, which the agent
	// cannot see: ask until it is given.
	accepted[0].Close()
	var ch ssh.Channel
	var reqs <-chan *ssh.Request
	var err error
	testwait.Until(t, "a session to open after one closed", func() bool {
		ch, reqs, err = c.OpenChannel("session", nil)
		return err == nil
	})
	if out, code := execOn(t, ch, reqs, "web echo ok"); code != 0 || out != "ok\n" {
		t.Errorf("command on the freed place: %q, exit %d; want ok, 0", out, code)
	}
	for _, ch := range accepted[1:] {
		ch.Close()
	}
}

// TestGarbageRequests: malformed and unknown requests on a session are
// answered "no" and leave it usable; a malformed subsystem request ends its
// session with ExitUsage; data sent before exec is the command's stdin;
// env requests are bounded; another agent is unaffected.
func TestGarbageRequests(t *testing.T) {
	leakCheck(t)
	h := newHarness(t, harnessOpts{rules: allowAll})
	key2 := h.addAgent("agent2", "web")
	c := h.client()
	defer c.Close()

	long := strings.Repeat("\x00\x1b[2J\xff", 8<<10)
	tests := []struct {
		name    string
		typ     string
		payload []byte
		ends    bool // the session ends with ExitUsage
	}{
		{"exec empty payload", "exec", nil, false},
		{"exec short length", "exec", []byte{0, 0, 0, 9, 'l', 's'}, false},
		{"exec trailing bytes", "exec", append(ssh.Marshal(execRequest{"web ls"}), 1, 2, 3), false},
		{"exec huge length", "exec", []byte{0xff, 0xff, 0xff, 0xff, 'x'}, false},
		{"env garbage", "env", []byte{1, 2, 3}, false},
		{"env not allowed", "env", ssh.Marshal(envVar{"LD_PRELOAD", "/tmp/x.so"}), false},
		{"env NUL in value", "env", ssh.Marshal(envVar{"LANG", "C\x00x"}), false},
		{"pty-req truncated", "pty-req", []byte{0, 0, 0, 5, 'x', 't'}, false},
		{"window-change garbage", "window-change", []byte{9}, false},
		{"signal garbage", "signal", []byte{0, 0, 1}, false},
		{"unknown type", "xyzzy@example.com", []byte(long), false},
		{"control bytes type", "\x1b]0;pwned\x07", nil, false},
		{"x11 garbage", "x11-req", []byte{1}, false},
		{"subsystem garbage", "subsystem", []byte{0, 0, 0, 200}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ch, reqs, err := c.OpenChannel("session", nil)
			if err != nil {
				t.Fatal(err)
			}
			ok, err := ch.SendRequest(tt.typ, true, tt.payload)
			if err != nil || ok {
				t.Fatalf("reply ok %v, err %v; want refused", ok, err)
			}
			if tt.ends {
				if _, code := readSession(t, ch, reqs); code != ExitUsage {
					t.Errorf("exit %d; want %d", code, ExitUsage)
				}
				return
			}
			if out, code := execOn(t, ch, reqs, "web echo still"); code != 0 || out != "still\n" {
				t.Errorf("exec after the garbage: %q, exit %d; want still, 0", out, code)
			}
		})
	}

	t.Run("garbage during a command", func(t *testing.T) {
		ch, reqs, err := c.OpenChannel("session", nil)
		if err != nil {
			t.Fatal(err)
		}
		// Raw bytes before the exec: buffered within the channel window,
		// they become the command's stdin.
		data := bytes.Repeat([]byte{0, 0xff, '\n', 0x1b}, 16<<10)
		if _, err := ch.Write(data); err != nil {
			t.Fatal(err)
		}
		ok, err := ch.SendRequest("exec", true, ssh.Marshal(execRequest{Command: "web wc -c"}))
		if err != nil || !ok {
			t.Fatalf("exec: ok %v, err %v", ok, err)
		}
		for _, r := range []struct {
			typ     string
			payload []byte
		}{{"window-change", []byte{1}}, {"signal", nil}, {"exec", ssh.Marshal(execRequest{"web id"})}, {"env", ssh.Marshal(envVar{"LANG", "C"})}, {"pty-req", nil}} {
			if ok, err := ch.SendRequest(r.typ, true, r.payload); err != nil || ok {
				t.Errorf("%s during a command: ok %v, err %v; want refused", r.typ, ok, err)
			}
		}
		ch.CloseWrite()
		if out, code := readSession(t, ch, reqs); code != 0 || strings.TrimSpace(out) != strconv.Itoa(len(data)) {
			t.Errorf("wc -c of the early data: %q, exit %d; want %d, 0", out, code, len(data))
		}
	})

	t.Run("env flood", func(t *testing.T) {
		ch, reqs, err := c.OpenChannel("session", nil)
		if err != nil {
			t.Fatal(err)
		}
		kept := 0
		name := "LC_"
		for i := 0; i < 1000; i++ {
			name += "X"
			ok, err := ch.SendRequest("env", true, ssh.Marshal(envVar{name, strings.Repeat("v", 1<<10)}))
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				kept++
			}
		}
		if kept != maxSessionEnv {
			t.Errorf("env variables kept = %d; want %d", kept, maxSessionEnv)
		}
		if ok, _ := ch.SendRequest("env", true, ssh.Marshal(envVar{"LC_X", "replaced"})); !ok {
			t.Error("a kept name sent again: refused; want its value replaced")
		}
		if out, code := execOn(t, ch, reqs, "web echo ok"); code != 0 || out != "ok\n" {
			t.Errorf("exec after the env flood: %q, exit %d; want ok, 0", out, code)
		}
	})

	h.otherAgentWorks(key2)
}

// sshChannelWindow is the receive window x/crypto grants each channel
// (its channelWindowSize): both the agent's client here and postern's
// upstream client buffer at most this much of a session's output.
const sshChannelWindow = 2 << 20

// TestAgentNeverReadsOutput: an agent starts commands that write without
// end and never reads their output. Flow control holds the targets' writers
// once the windows are full: the bytes they manage to write and postern's
// heap growth stay within a bound made of window sizes, and other agents
// keep working.
func TestAgentNeverReadsOutput(t *testing.T) {
	leakCheck(t)
	h := newHarness(t, harnessOpts{rules: allowAll})
	key2 := h.addAgent("agent2", "web")
	c := h.client()
	defer c.Close()

	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)

	const sessions = 4
	const chunk = 64 << 10
	dir := t.TempDir()
	var counters []string
	for i := 0; i < sessions; i++ {
		counter := filepath.Join(dir, "count"+strconv.Itoa(i))
		counters = append(counters, counter)
		ch, reqs, err := c.OpenChannel("session", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer ch.Close()
		go ssh.DiscardRequests(reqs)
		cmd := fmt.Sprintf("web i=0; while :; do head -c %d /dev/zero || exit; i=$((i+1)); echo $i > %s; done", chunk, counter)
		if ok, err := ch.SendRequest("exec", true, ssh.Marshal(execRequest{Command: cmd})); err != nil || !ok {
			t.Fatalf("exec: ok %v, err %v", ok, err)
		}
		// Never read ch.
	}

	// Wait until flow control holds every writer: its head is blocked in
	// write(2) on a full pipe, which sshd no longer reads, having filled
	// its window to postern, which filled the agent's. By then each
	// writer has written at least the agent's window. Nothing announces
	// that: the target's processes are looked at until it holds at two
	// looks in a row with the same counts.
	read := func() []int {
		var n []int
		for _, f := range counters {
			b, _ := os.ReadFile(f)
			v, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			n = append(n, v)
		}
		return n
	}
	var counts, last []int
	testwait.Until(t, "every writer to be held in write(2) with the agent's window full", func() bool {
		for _, f := range counters {
			if !writerBlocked(t, f) {
				last = nil
				return false
			}
		}
		counts = read()
		for _, n := range counts {
			if int64(n)*chunk < sshChannelWindow {
				last = nil
				return false
			}
		}
		held := slices.Equal(counts, last)
		last = counts
		return held
	})

	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	growth := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	// Per session: the agent's receive window (this test's client), the
	// window postern grants upstream, and the relay's copy buffers; for the
	// connection, one batch; and 16 MiB for everything else.
	bound := int64(sessions*(2*sshChannelWindow+2*relayBufferSize) + maxBatch + 16<<20)
	var written int64
	for _, n := range counts {
		written += int64(n) * chunk
	}
	t.Logf("held after %v chunks of %d B (%d MiB written in all); heap growth %d KiB, bound %d KiB",
		counts, chunk, written>>20, growth>>10, bound>>10)
	if growth > bound {
		t.Errorf("heap growth %d B with %d unread sessions; want at most %d", growth, sessions, bound)
	}
	// What the targets wrote fits in the windows and pipes on the way
	// (two SSH windows, sshd's buffer, the pipe), with a wide margin.
	if perSession := written / sessions; perSession > 64<<20 {
		t.Errorf("written per unread session = %d B; want at most %d (flow control holds the writer)", perSession, 64<<20)
	}
	h.otherAgentWorks(key2)
	if got := h.ssh("", "127.0.0.1", "web", "echo same-agent"); got.code != 0 {
		t.Errorf("the same agent on another connection: exit %d stderr %q; want 0", got.code, got.stderr)
	}
}

// writerBlocked reports whether the writer loop whose command line names
// counter has a head process blocked in write(2) (/proc/PID/syscall starts
// with the number of write; a write to a pipe blocks only when the pipe is
// full).
func writerBlocked(t *testing.T, counter string) bool {
	t.Helper()
	for _, loop := range processesWith(t, counter) {
		for _, pid := range childrenOf(loop) {
			comm, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
			if strings.TrimSpace(string(comm)) != "head" {
				continue
			}
			sc, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "syscall"))
			if err != nil {
				continue // gone meanwhile
			}
			if f := strings.Fields(string(sc)); len(f) > 0 && f[0] == strconv.Itoa(syscall.SYS_WRITE) {
				return true
			}
		}
	}
	return false
}

// childrenOf lists the processes whose parent is pid, read from /proc.
func childrenOf(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// The command name in parentheses may hold spaces: the fields
		// after its closing parenthesis are state, then ppid.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		if f := strings.Fields(string(stat[i+1:])); len(f) >= 2 && f[1] == strconv.Itoa(pid) {
			out = append(out, child)
		}
	}
	return out
}
