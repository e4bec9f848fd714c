package testwait

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// recorder is a testing.TB that keeps what Fatalf was given and ends its
// goroutine, as a real test's Fatalf does.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls Until on a recorder in its own goroutine (Fatalf ends it) and
// returns the failure message, "" if none.
func run(timeout time.Duration, what string, cond func() bool) string {
	r := &recorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Until(r, timeout, what, cond)
	}()
	<-done
	return r.failed
}

func TestUntilReturnsOnceCondHolds(t *testing.T) {
	calls := 0
	if msg := run(time.Minute, "the third call", func() bool { calls++; return calls == 3 }); msg != "" {
		t.Fatalf("got failure %q; want none", msg)
	}
	if calls != 3 {
		t.Errorf("got %d calls; want 3 (no call after the condition held)", calls)
	}
}

func TestUntilFailsSayingWhat(t *testing.T) {
	msg := run(20*time.Millisecond, "the moon to turn blue", func() bool { return false })
	if !strings.HasPrefix(msg, "testwait: gave up after ") || !strings.Contains(msg, "waiting for the moon to turn blue") {
		t.Errorf("got failure %q; want it to say it gave up waiting for the moon to turn blue", msg)
	}
}

func TestUntilChecksAtOnce(t *testing.T) {
	// A zero timeout still checks once: a condition that already holds
	// passes.
	if msg := run(0, "nothing", func() bool { return true }); msg != "" {
		t.Errorf("got failure %q; want none", msg)
	}
}

func TestRecv(t *testing.T) {
	ch := make(chan int, 1)
	ch <- 7
	if got := Recv(t, time.Minute, "seven", ch); got != 7 {
		t.Errorf("got %d; want 7", got)
	}
	r := &recorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Recv(r, 10*time.Millisecond, "a value nobody sends", make(chan int))
	}()
	<-done
	if !strings.Contains(r.failed, "waiting for a value nobody sends") {
		t.Errorf("got failure %q; want it to say what it waited for", r.failed)
	}
}
