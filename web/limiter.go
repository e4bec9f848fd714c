package web

import (
	"sync"
	"time"
)

// limiter is a token bucket per key (an address, an admin name, a console
// token): rate tokens a second up to burst. It keeps at most maxKeys
// buckets; when full, it drops buckets that have refilled (they carry no
// information), and if none has, it refuses new keys rather than grow —
// failing closed under a flood of distinct keys.
type limiter struct {
	rate    float64
	burst   float64
	maxKeys int
	now     func() time.Time

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

func newLimiter(rate float64, burst, maxKeys int, now func() time.Time) *limiter {
	return &limiter{rate: rate, burst: float64(burst), maxKeys: maxKeys, now: now, buckets: map[string]*bucket{}}
}

// allow takes one token for key. When none is left it returns false and how
// long until one is.
func (l *limiter) allow(key string) (bool, time.Duration) {
	return l.take(key, 1, true)
}

// peek reports whether key has a token, without taking it.
func (l *limiter) peek(key string) (bool, time.Duration) {
	return l.take(key, 1, false)
}

// charge takes a token for key even when none is left (the bucket goes
// negative), for counting failures after the fact.
func (l *limiter) charge(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.refill(key)
	if b != nil {
		b.tokens--
	}
}

// reset forgets key (a successful login clears its failures).
func (l *limiter) reset(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.buckets, key)
}

func (l *limiter) take(key string, n float64, consume bool) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.refill(key)
	if b == nil {
		return false, time.Second
	}
	if b.tokens >= n {
		if consume {
			b.tokens -= n
		}
		return true, 0
	}
	wait := time.Duration((n - b.tokens) / l.rate * float64(time.Second))
	if wait < time.Second {
		wait = time.Second
	}
	return false, wait
}

// refill returns key's bucket brought up to date, creating it full; nil when
// the table is full of active buckets. Callers hold mu.
func (l *limiter) refill(key string) *bucket {
	now := l.now()
	b, ok := l.buckets[key]
	if !ok {
		if len(l.buckets) >= l.maxKeys {
			l.sweep(now)
			if len(l.buckets) >= l.maxKeys {
				return nil
			}
		}
		b = &bucket{tokens: l.burst, last: now}
		l.buckets[key] = b
		return b
	}
	if el := now.Sub(b.last).Seconds(); el > 0 {
		b.tokens += el * l.rate
		if b.tokens > l.burst {
			b.tokens = l.burst
		}
		b.last = now
	}
	return b
}

// sweep drops the buckets that are full again. Callers hold mu.
func (l *limiter) sweep(now time.Time) {
	for k, b := range l.buckets {
		if b.tokens+now.Sub(b.last).Seconds()*l.rate >= l.burst {
			delete(l.buckets, k)
		}
	}
}
