// Package testwait bounds the waits of tests, and is the one place where a
// test polls.
//
// A busy machine can delay anything that takes real time: a key exchange,
// a process start, a commit. A test that gives such work a fixed few
// seconds fails when the machine is loaded, not when the code is wrong.
// So no wait here has a bound of its own: every wait ends at the test
// binary's own deadline (go test -timeout, ten minutes unless set) less a
// margin, so that what hung is reported by the wait that hung, with what
// it waited for, rather than by go test's goroutine dump. A test that
// measures a timeout of the code under test sets that timeout itself, or
// uses fake time in a testing/synctest bubble.
//
// Most tests wait on an event: a channel, a hook of the code under test, a
// line a process prints. Recv bounds such a wait. A few tests wait on state
// that nothing announces: a process leaving the process table, a row
// another process commits, a counter behind a mutex. Those call Until,
// which checks often and gives up at the deadline. Context and Deadline
// give the same bound to what takes a context or a time: a client process,
// a dial, a connection's deadline.
package testwait

import (
	"context"
	"testing"
	"time"
)

// Poll intervals: the first check is immediate; then the wait between
// checks doubles from minPoll up to maxPoll, so that a condition that holds
// within milliseconds is seen within milliseconds, and a longer wait costs
// a check every 50 ms.
const (
	minPoll = time.Millisecond
	maxPoll = 50 * time.Millisecond
)

// deadlineMargin is left between giving up and go test's own timeout, so
// that the wait's message, not the timeout's goroutine dump, says what
// hung.
const deadlineMargin = 5 * time.Second

// noDeadline bounds the waits of a test binary run with -timeout 0 (no
// deadline), or of a testing.TB that has none (a benchmark's *testing.B):
// something must end a wait that can never succeed.
const noDeadline = 10 * time.Minute

// Deadline returns when a wait of tb gives up: the test binary's deadline
// less deadlineMargin, or noDeadline from now where there is none.
func Deadline(tb testing.TB) time.Time {
	if d, ok, _ := testDeadline(tb); ok {
		return d.Add(-deadlineMargin)
	}
	return time.Now().Add(noDeadline)
}

// testDeadline returns tb's deadline, if it has one, and whether tb runs
// in a testing/synctest bubble, where time is fake and T.Deadline panics:
// there a wait needs no bound of its own, since synctest reports a wait
// that can never end (every goroutine of the bubble blocked) as a
// deadlock at once.
func testDeadline(tb testing.TB) (d time.Time, ok, bubble bool) {
	t, has := tb.(interface{ Deadline() (time.Time, bool) })
	if !has {
		return time.Time{}, false, false
	}
	defer func() {
		if recover() != nil {
			d, ok, bubble = time.Time{}, false, true
		}
	}()
	d, ok = t.Deadline()
	return d, ok, false
}

// Remaining returns the time left until Deadline(tb), at least zero: the
// bound to give a client's own timeout option (ssh -o ConnectTimeout) or
// a deadline of the code under test that a test must not trip.
func Remaining(tb testing.TB) time.Duration {
	return max(0, time.Until(Deadline(tb)))
}

// Context returns a context that ends at Deadline(tb) and when tb ends
// (its cleanup), for the processes and dials of a test.
func Context(tb testing.TB) context.Context {
	ctx, cancel := context.WithDeadline(context.Background(), Deadline(tb))
	tb.Cleanup(cancel)
	return ctx
}

// End returns a channel that receives at Deadline(tb), for a select that
// waits on several events at once; the case that receives from it fails
// the test saying what did not come. (An unstopped timer is collected
// once unreferenced, since Go 1.23.)
//
// In a testing/synctest bubble it never receives: there synctest reports a
// wait that cannot end.
func End(tb testing.TB) <-chan time.Time {
	if _, _, bubble := testDeadline(tb); bubble {
		return nil
	}
	return time.After(time.Until(Deadline(tb)))
}

// Until calls cond until it returns true. When Deadline(tb) passes first,
// it fails tb with "gave up after D waiting for WHAT". cond runs on the
// calling goroutine and may call tb.Fatal itself (to stop at once when
// what it waits for can no longer happen).
//
// Until is not for a testing/synctest bubble, where time is fake: there,
// synctest.Wait says when everything else is blocked.
func Until(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	start := time.Now()
	end := Deadline(tb)
	pause := minPoll
	for checks := 1; ; checks++ {
		if cond() {
			return
		}
		now := time.Now()
		if !now.Before(end) {
			tb.Fatalf("testwait: gave up after %v waiting for %s (%d checks)", now.Sub(start).Round(time.Millisecond), what, checks)
		}
		time.Sleep(min(pause, end.Sub(now)))
		pause = min(2*pause, maxPoll)
	}
}

// Recv receives a value from ch. When none comes before Deadline(tb) it
// fails tb saying what it waited for. In a testing/synctest bubble it
// waits on ch alone (see End).
func Recv[T any](tb testing.TB, what string, ch <-chan T) T {
	tb.Helper()
	start := time.Now()
	select {
	case v := <-ch:
		return v
	case <-End(tb):
		tb.Fatalf("testwait: nothing came in %v waiting for %s", time.Since(start).Round(time.Millisecond), what)
		var zero T
		return zero
	}
}

// Done waits until ch is closed or sends, as Recv does, for the channels
// of type <-chan struct{} that signal an event.
func Done(tb testing.TB, what string, ch <-chan struct{}) {
	tb.Helper()
	Recv(tb, what, ch)
}
