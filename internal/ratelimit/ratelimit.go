// Package ratelimit is postern's one rate limiter: a token bucket per key
// (an agent, an address, an admin name, a console token), built on
// golang.org/x/time/rate, with the clock injected so that tests move time
// themselves, and with a bound on how many keys it keeps.
//
// The bastion limits how fast each agent starts commands; the web page
// limits logins per address and per name, and API calls per token and per
// address. Each is a Keyed.
package ratelimit

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Keyed is a token bucket per key: Rate tokens a second up to Burst. It is
// safe for concurrent use.
//
// With MaxKeys set it keeps at most that many buckets: when full, it drops
// the buckets that have refilled (a full bucket carries no information),
// and if none has, it refuses new keys rather than grow, which fails closed
// under a flood of distinct keys.
type Keyed struct {
	limit   rate.Limit // rate.Inf: no limit
	burst   int
	maxKeys int // no bound if zero
	now     func() time.Time

	// mu guards buckets.
	mu      sync.Mutex
	buckets map[string]*rate.Limiter
}

// New returns a limiter of perSecond tokens a second up to burst per key;
// a negative perSecond is no limit. now is the clock (time.Now if nil).
func New(perSecond float64, burst, maxKeys int, now func() time.Time) *Keyed {
	l := &Keyed{limit: rate.Limit(perSecond), burst: burst, maxKeys: maxKeys, now: now,
		buckets: map[string]*rate.Limiter{}}
	if perSecond < 0 {
		l.limit = rate.Inf
	}
	if l.now == nil {
		l.now = time.Now
	}
	return l
}

// Allow takes one token for key. When none is left it reports false and how
// long until one is.
func (l *Keyed) Allow(key string) (bool, time.Duration) {
	ok, d := l.AllowWithin(key, 0)
	if ok {
		return true, 0
	}
	return false, d
}

// AllowWithin takes one token for key if one is there within max: it
// reports true and how long the caller must wait for it (zero when one is
// there now; the token is the caller's, in its turn, whether it waits or
// not). Else it takes nothing and reports false and how long until a
// token is.
func (l *Keyed) AllowWithin(key string, max time.Duration) (bool, time.Duration) {
	if l.limit == rate.Inf {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b := l.bucket(key, now)
	if b == nil {
		return false, time.Second
	}
	r := b.ReserveN(now, 1)
	if !r.OK() {
		return false, never
	}
	d := r.DelayFrom(now)
	if d > max {
		r.CancelAt(now)
		return false, d
	}
	return true, d
}

// Peek reports whether key has a token, and if not how long until it has,
// without taking one.
func (l *Keyed) Peek(key string) (bool, time.Duration) {
	if l.limit == rate.Inf {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b := l.bucket(key, now)
	if b == nil {
		return false, time.Second
	}
	tokens := b.TokensAt(now)
	if tokens >= 1 {
		return true, 0
	}
	if l.limit == 0 {
		return false, never
	}
	return false, time.Duration((1 - tokens) / float64(l.limit) * float64(time.Second))
}

// Charge takes a token for key even when none is left (the bucket goes into
// debt), for counting failures after the fact: each failed login counts,
// however many arrive at once.
func (l *Keyed) Charge(key string) {
	if l.limit == rate.Inf {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if b := l.bucket(key, now); b != nil {
		b.ReserveN(now, 1)
	}
}

// Reset forgets key: its bucket starts full again (a successful login
// clears its failures).
func (l *Keyed) Reset(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.buckets, key)
}

// never is the wait reported when no token will ever come (a rate of zero).
const never = time.Duration(math.MaxInt64)

// bucket returns key's bucket, creating it full; nil when the table is full
// of buckets that have not refilled. Callers hold mu.
func (l *Keyed) bucket(key string, now time.Time) *rate.Limiter {
	if b, ok := l.buckets[key]; ok {
		return b
	}
	if l.maxKeys > 0 && len(l.buckets) >= l.maxKeys {
		for k, b := range l.buckets {
			if b.TokensAt(now) >= float64(l.burst) {
				delete(l.buckets, k)
			}
		}
		if len(l.buckets) >= l.maxKeys {
			return nil
		}
	}
	b := rate.NewLimiter(l.limit, l.burst)
	// A new limiter's bucket is full as of its first use; pin that to the
	// injected clock, not the wall clock.
	b.SetLimitAt(now, l.limit)
	l.buckets[key] = b
	return b
}
