package bastion

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/postern/postern/internal/fakeclock"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
	"golang.org/x/crypto/ssh"
)

func TestLimiterRatePerAgent(t *testing.T) {
	t.Parallel()
	clk := fakeclock.New()
	l := newLimiter(1, 1, clk.Now)
	if ok, _ := l.allow("a1", 0); !ok {
		t.Fatal("a1 first: refused; want allowed")
	}
	if ok, _ := l.allow("a1", 0); ok {
		t.Fatal("a1 second: allowed; want refused")
	}
	if ok, _ := l.allow("a2", 0); !ok {
		t.Error("a2 first: refused; want its own bucket")
	}
	if ok, retry := l.allow("a1", 0); ok || retry != time.Second {
		t.Errorf("a1 third: allowed %v retry %v; want refused, retry 1s", ok, retry)
	}
}

// TestLimiterWaitsWithin: a command whose turn comes within the wait
// takes it (the token is its own while it waits); one further away takes
// nothing.
func TestLimiterWaitsWithin(t *testing.T) {
	t.Parallel()
	clk := fakeclock.New()
	l := newLimiter(1, 1, clk.Now)
	tests := []struct {
		name     string
		max      time.Duration
		wantOK   bool
		wantWait time.Duration
	}{
		{"from the burst", 5 * time.Second, true, 0},
		{"its turn in a second", 5 * time.Second, true, time.Second},
		{"the next turn, after the one taken", 5 * time.Second, true, 2 * time.Second},
		{"too far for a wait of a second", time.Second, false, 3 * time.Second},
		{"nothing was taken by the refusal", 3 * time.Second, true, 3 * time.Second},
	}
	for _, tt := range tests {
		if ok, wait := l.allow("a1", tt.max); ok != tt.wantOK || wait != tt.wantWait {
			t.Errorf("%s: got %v, wait %v; want %v, %v", tt.name, ok, wait, tt.wantOK, tt.wantWait)
		}
	}
}

func TestLimiterRepeatDenied(t *testing.T) {
	t.Parallel()
	type step struct {
		key    string
		denied bool
		// wantDelay is the penalty before the step's request is decided.
		wantDelay time.Duration
	}
	d := RepeatDeniedDelay
	tests := []struct {
		name  string
		steps []step
	}{
		{"three denials then growing delays", []step{
			{"A", true, 0}, {"A", true, 0}, {"A", true, 0},
			{"A", true, d}, {"A", true, 2 * d}, {"A", true, 4 * d},
		}},
		{"bounded", []step{
			{"A", true, 0}, {"A", true, 0}, {"A", true, 0}, {"A", true, d}, {"A", true, 2 * d}, {"A", true, 4 * d},
			{"A", true, 8 * d}, {"A", true, RepeatDeniedMaxDelay}, {"A", true, RepeatDeniedMaxDelay}, {"A", true, RepeatDeniedMaxDelay},
		}},
		{"a different request is not delayed and restarts the streak", []step{
			{"A", true, 0}, {"A", true, 0}, {"A", true, 0}, {"B", true, 0}, {"A", true, 0}, {"A", true, 0}, {"A", true, 0}, {"A", true, d},
		}},
		{"an allowed request ends the streak", []step{
			{"A", true, 0}, {"A", true, 0}, {"A", true, 0}, {"A", false, d}, {"A", true, 0}, {"A", true, 0},
		}},
		{"allowed repeats are never delayed", []step{
			{"A", false, 0}, {"A", false, 0}, {"A", false, 0}, {"A", false, 0},
		}},
		{"two denials are not a streak", []step{
			{"A", true, 0}, {"A", true, 0}, {"B", true, 0}, {"A", true, 0},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLimiter(DefaultCommandRate, DefaultCommandBurst, fakeclock.New().Now)
			for i, st := range tt.steps {
				got, _ := l.penalty("a1", st.key)
				if got != st.wantDelay {
					t.Fatalf("step %d (%s): delay %v; want %v", i, st.key, got, st.wantDelay)
				}
				l.record("a1", st.key, st.denied)
			}
			if got, _ := l.penalty("a2", "A"); got != 0 {
				t.Errorf("another agent's delay = %v; want 0", got)
			}
		})
	}
}

// TestRateLimitPerAgent: an agent's command rate counts over all of its
// connections; past it the agent reads "rate limited", gets ExitRefused
// and nothing runs; the refusal is audited as denied, "rate limited"; and
// another agent is not limited by it.
func TestRateLimitPerAgent(t *testing.T) {
	leakCheck(t)
	h := newHarness(t, harnessOpts{config: func(c *Config) {
		c.CommandRate = 1e-9 // no refill while the test runs
		c.CommandBurst = 3
	}})
	for i := 0; i < 3; i++ { // three connections, one command each
		if got := h.ssh("", "127.0.0.1", "web", "echo ok"); got.code != 0 {
			t.Fatalf("command %d within the burst: exit %d stderr %q; want 0", i, got.code, got.stderr)
		}
	}
	file := filepath.Join(t.TempDir(), "made")
	got := h.ssh("", "127.0.0.1", "web", "touch "+file)
	if got.code != ExitRefused || !strings.Contains(got.stderr, "postern: rate limited") {
		t.Errorf("over the rate: exit %d stderr %q; want %d and \"postern: rate limited\"", got.code, got.stderr, ExitRefused)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("a rate-limited command ran (stat err %v)", err)
	}
	row := h.lastAudit("web", 4)
	if row.Decision != string(policy.Denied) || row.Reason != "rate limited" || row.Operation != "touch "+file {
		t.Errorf("audit row: decision %q reason %q operation %q; want denied, \"rate limited\", %q", row.Decision, row.Reason, row.Operation, "touch "+file)
	}
	// SFTP sessions count too.
	if got := h.sftpBatch("agent", "ls /\n"); got.code == 0 || !strings.Contains(got.stderr, "rate limited") {
		t.Errorf("sftp over the rate: exit %d stderr %q; want a failure and \"rate limited\"", got.code, got.stderr)
	}

	key2 := h.addAgent("agent2", "web")
	if got := h.sshAs(key2, "", "127.0.0.1", "web", "echo other"); got.code != 0 || got.stdout != "other\n" {
		t.Errorf("another agent: exit %d stdout %q stderr %q; want 0 and other", got.code, got.stdout, got.stderr)
	}
}

// fakeSleep records the penalty waits instead of sleeping.
type fakeSleep struct {
	mu    sync.Mutex // guards waits
	waits []time.Duration
}

func (f *fakeSleep) sleep(ctx context.Context, d time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.waits = append(f.waits, d)
	return ctx.Err()
}

func (f *fakeSleep) take() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := f.waits
	f.waits = nil
	return w
}

// TestRepeatedDenialsSlowDown: three identical denied requests in a row
// make the fourth wait RepeatDeniedDelay, the fifth twice that, each with a
// line on stderr saying so; a different, allowed command is not delayed and
// ends the streak.
func TestRepeatedDenialsSlowDown(t *testing.T) {
	leakCheck(t)
	fs := &fakeSleep{}
	h := newHarness(t, harnessOpts{server: func(s *Server) { s.sleep = fs.sleep }})
	file := filepath.Join(t.TempDir(), "made")
	deny := func(i int, wantDelay time.Duration) {
		t.Helper()
		got := h.ssh("", "127.0.0.1", "web", "touch "+file)
		if got.code != ExitRefused || !strings.Contains(got.stderr, "denied") {
			t.Fatalf("request %d: exit %d stderr %q; want %d, denied", i, got.code, got.stderr, ExitRefused)
		}
		waits := fs.take()
		slowed := strings.Contains(got.stderr, "slowing you down")
		switch {
		case wantDelay == 0 && (slowed || len(waits) != 0):
			t.Errorf("request %d: waits %v stderr %q; want no delay", i, waits, got.stderr)
		case wantDelay != 0 && (!slowed || fmt.Sprint(waits) != fmt.Sprint([]time.Duration{wantDelay})):
			t.Errorf("request %d: waits %v stderr %q; want one wait of %v and a line saying so", i, waits, got.stderr, wantDelay)
		}
	}
	for i := 1; i <= RepeatDeniedStreak; i++ {
		deny(i, 0)
	}
	deny(4, RepeatDeniedDelay)
	deny(5, 2*RepeatDeniedDelay)
	if got := h.ssh("", "127.0.0.1", "web", "echo changed"); got.code != 0 || strings.Contains(got.stderr, "slowing") {
		t.Fatalf("a different, allowed command: exit %d stderr %q; want 0 without delay", got.code, got.stderr)
	}
	if w := fs.take(); len(w) != 0 {
		t.Errorf("a different command waited %v; want no wait", w)
	}
	deny(6, 0) // the streak starts again
	if n := h.auditCountWant(policy.Denied, 6); n != 6 {
		t.Errorf("denied audit rows = %d; want 6", n)
	}
}

// addAgent registers another agent with a fresh key and grants it aliases
// with the default rules; it returns the path of its private key.
func (h *harness) addAgent(name string, aliases ...string) string {
	h.t.Helper()
	ctx := context.Background()
	keyPath, signer := newAgentKey(h.t, h.dir, name)
	if _, err := h.st.CreateAgent(ctx, store.Unaudited(), name, string(ssh.MarshalAuthorizedKey(signer.PublicKey()))); err != nil {
		h.t.Fatal(err)
	}
	for _, a := range aliases {
		if _, err := h.st.SetGrant(ctx, store.Unaudited(), name, a, store.DefaultRules()); err != nil {
			h.t.Fatal(err)
		}
	}
	return keyPath
}

// sshAs runs the real ssh client as the agent whose key is at keyPath.
func (h *harness) sshAs(keyPath, stdin string, args ...string) sshResult {
	h.t.Helper()
	opts := h.clientOpts("-p")
	for i := range opts {
		if opts[i] == "-i" {
			opts[i+1] = keyPath
		}
	}
	return h.runClient(stdin, "ssh", append(opts, args...)...)
}

// TestRateLimitIsNotADenial: a command over the rate is refused with the
// limit and when to retry, and the refusals do not count as denials (issue
// 25: 200 refusals made the next allowed command wait up to 16 s); with a
// wait, a command over the rate waits its turn and runs, saying nothing;
// the help names the limits.
func TestRateLimitIsNotADenial(t *testing.T) {
	leakCheck(t)
	clk := fakeclock.New()
	fs := &fakeSleep{}
	// The limiter's clock is the test's; the server's stays real (its
	// handshake deadlines).
	h := newHarness(t, harnessOpts{config: func(c *Config) {
		c.CommandRate, c.CommandBurst, c.CommandWait = 1, 1, -1
	}, server: func(s *Server) { s.limits, s.sleep = newLimiter(1, 1, clk.Now), fs.sleep }})
	if got := h.ssh("", "127.0.0.1", "web", "echo a"); got.code != 0 {
		t.Fatalf("within the burst: exit %d stderr %q; want 0", got.code, got.stderr)
	}
	for i := 1; i <= RepeatDeniedStreak; i++ {
		got := h.ssh("", "127.0.0.1", "web", "echo b")
		want := "postern: rate limited (a limit, not a denial): an agent may start 1 commands a second (1 at once); nothing ran; retry in 1s\r\n"
		if got.code != ExitRefused || got.stderr != want || got.stdout != "" {
			t.Fatalf("over the rate, %d: exit %d stdout %q stderr %q; want %d and %q", i, got.code, got.stdout, got.stderr, ExitRefused, want)
		}
	}
	clk.Advance(time.Second)
	got := h.ssh("", "127.0.0.1", "web", "echo b")
	if got.code != 0 || got.stdout != "b\n" || got.stderr != "" {
		t.Errorf("the same command once the rate allows it: exit %d stdout %q stderr %q; want 0, b, nothing on stderr", got.code, got.stdout, got.stderr)
	}
	if w := fs.take(); len(w) != 0 {
		t.Errorf("after %d rate-limited refusals the command waited %v; want no slow-down", RepeatDeniedStreak, w)
	}

	clk2 := fakeclock.New()
	fs2 := &fakeSleep{}
	h2 := newHarness(t, harnessOpts{config: func(c *Config) {
		c.CommandRate, c.CommandBurst, c.CommandWait = 1, 1, 5*time.Second
	}, server: func(s *Server) { s.limits, s.sleep = newLimiter(1, 1, clk2.Now), fs2.sleep }})
	for i, want := range [][]time.Duration{nil, {time.Second}, {2 * time.Second}} {
		got := h2.ssh("", "127.0.0.1", "web", "echo c")
		if got.code != 0 || got.stdout != "c\n" || got.stderr != "" {
			t.Errorf("command %d with a wait: exit %d stdout %q stderr %q; want 0, c, nothing on stderr", i, got.code, got.stdout, got.stderr)
		}
		if w := fs2.take(); fmt.Sprint(w) != fmt.Sprint(want) {
			t.Errorf("command %d with a wait: waited %v; want %v", i, w, want)
		}
	}
	clk2.Advance(time.Minute)
	help := h2.ssh("", "127.0.0.1", "help")
	if want := "Limits: an agent may start 1 commands a second (1 at once); past that a command waits up to 5s for its turn.\n"; !strings.Contains(help.stdout, want) {
		t.Errorf("help: %q; want it to hold %q", help.stdout, want)
	}
}
