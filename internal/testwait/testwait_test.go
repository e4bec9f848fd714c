package testwait

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// recorder is a testing.TB with a deadline of its choosing that keeps what
// Fatalf was given and ends its goroutine, as a real test's Fatalf does.
type recorder struct {
	testing.TB
	deadline time.Time // as go test's -timeout would set it
	failed   string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Deadline() (time.Time, bool) { return r.deadline, true }

// in returns a recorder whose waits give up d from now.
func in(d time.Duration) *recorder {
	return &recorder{deadline: time.Now().Add(deadlineMargin + d)}
}

// run calls f on r in its own goroutine (Fatalf ends it) and returns the
// failure message, "" if none.
func run(r *recorder, f func(tb testing.TB)) string {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r.failed
}

func TestUntilReturnsOnceCondHolds(t *testing.T) {
	calls := 0
	msg := run(in(time.Minute), func(tb testing.TB) {
		Until(tb, "the third call", func() bool { calls++; return calls == 3 })
	})
	if msg != "" {
		t.Fatalf("got failure %q; want none", msg)
	}
	if calls != 3 {
		t.Errorf("got %d calls; want 3 (no call after the condition held)", calls)
	}
}

func TestUntilFailsAtTheDeadlineSayingWhat(t *testing.T) {
	r := in(20 * time.Millisecond)
	msg := run(r, func(tb testing.TB) { Until(tb, "the moon to turn blue", func() bool { return false }) })
	if !strings.HasPrefix(msg, "testwait: gave up after ") || !strings.Contains(msg, "waiting for the moon to turn blue") {
		t.Errorf("got failure %q; want it to say it gave up waiting for the moon to turn blue", msg)
	}
	if now, end := time.Now(), r.deadline.Add(-deadlineMargin); now.Before(end) {
		t.Errorf("gave up %v before the deadline; want at it", end.Sub(now))
	}
}

func TestUntilChecksAtOnce(t *testing.T) {
	// A deadline already past still checks once: a condition that already
	// holds passes.
	if msg := run(in(-time.Second), func(tb testing.TB) { Until(tb, "nothing", func() bool { return true }) }); msg != "" {
		t.Errorf("got failure %q; want none", msg)
	}
}

func TestRecv(t *testing.T) {
	ch := make(chan int, 1)
	ch <- 7
	if got := Recv(t, "seven", ch); got != 7 {
		t.Errorf("got %d; want 7", got)
	}
	msg := run(in(10*time.Millisecond), func(tb testing.TB) { Recv(tb, "a value nobody sends", make(chan int)) })
	if !strings.Contains(msg, "waiting for a value nobody sends") {
		t.Errorf("got failure %q; want it to say what it waited for", msg)
	}
}

func TestDeadlineFollowsTheTest(t *testing.T) {
	d, ok := t.Deadline()
	got := Deadline(t)
	switch {
	case ok && !got.Equal(d.Add(-deadlineMargin)):
		t.Errorf("got %v; want the test's deadline %v less %v", got, d, deadlineMargin)
	case !ok && time.Until(got) > noDeadline:
		t.Errorf("got %v from now; want at most %v without a deadline", time.Until(got), noDeadline)
	}
	ctx := Context(t)
	if cd, ok := ctx.Deadline(); !ok || !cd.Equal(got) {
		t.Errorf("Context's deadline %v, %v; want %v", cd, ok, got)
	}
}

// TestInABubble: in a testing/synctest bubble, where T.Deadline panics,
// End never fires and Recv waits on its channel alone.
func TestInABubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		if End(t) != nil {
			t.Error("End in a bubble: got a channel; want nil (synctest reports a wait that cannot end)")
		}
		ch := make(chan int)
		go func() {
			time.Sleep(time.Hour) // fake time
			ch <- 3
		}()
		if got := Recv(t, "three after an hour of fake time", ch); got != 3 {
			t.Errorf("got %d; want 3", got)
		}
	})
}
