// Package fakeclock is a settable clock for tests of code that takes a
// `func() time.Time` (store.Options.Now, policy.Options.Now), so that
// expiry and timestamps are tested without waiting.
package fakeclock

import (
	"sync"
	"time"
)

// Clock is a clock that moves only when told to. It is safe for
// concurrent use.
type Clock struct {
	mu sync.Mutex // guards t
	t  time.Time
}

// New returns a clock set to a fixed, recognisable instant.
func New() *Clock {
	return &Clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}
