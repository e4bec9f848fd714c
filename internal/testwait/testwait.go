// Package testwait bounds the waits of tests, and is the one place where a
// test polls.
//
// Most tests wait on an event: a channel, a hook of the code under test, a
// line a process prints, or fake time inside a testing/synctest bubble.
// Recv bounds such a wait, so that an event that never comes fails the
// test at once, saying what it waited for, instead of hanging it into go
// test's ten-minute timeout.
//
// A few tests wait on state that nothing announces: a process leaving the
// process table, a row another process commits, a counter behind a mutex.
// Those call Until, which checks often, gives up at a stated bound and
// fails the test saying what it waited for.
package testwait

import (
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

// Until calls cond until it returns true. When timeout passes first, or
// the test's own deadline (go test -timeout) is about to, it fails tb with
// "gave up after TIMEOUT waiting for WHAT". cond runs on the calling
// goroutine and may call tb.Fatal itself (to stop at once when what it
// waits for can no longer happen).
//
// Until is not for a testing/synctest bubble, where time is fake: there,
// synctest.Wait says when everything else is blocked.
func Until(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	start := time.Now()
	end := start.Add(timeout)
	if d, ok := deadline(tb); ok && d.Before(end) {
		end = d
	}
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

// deadlineMargin is left between giving up and go test's own timeout, so
// that Until's message, not the timeout's goroutine dump, says what hung.
const deadlineMargin = 5 * time.Second

// deadline returns the test binary's deadline less deadlineMargin, when tb
// is a *testing.T that has one.
func deadline(tb testing.TB) (time.Time, bool) {
	t, ok := tb.(interface{ Deadline() (time.Time, bool) })
	if !ok {
		return time.Time{}, false
	}
	d, ok := t.Deadline()
	if !ok {
		return time.Time{}, false
	}
	return d.Add(-deadlineMargin), true
}

// Recv receives a value from ch. When none comes within timeout it fails
// tb saying what it waited for: a bound for a wait on an event, which
// should come at once, so that a test that would hang fails fast instead.
func Recv[T any](tb testing.TB, timeout time.Duration, what string, ch <-chan T) T {
	tb.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		tb.Fatalf("testwait: nothing came within %v waiting for %s", timeout, what)
		var zero T
		return zero
	}
}
