package bastion

import (
	"context"
	"math"
	"sync"
	"time"
)

// Defaults of the per-agent limits. An agent is usually a program in a loop;
// these bound what a runaway loop costs the targets, the audit log and the
// admins, while leaving room for the bursts real tools make (Ansible with
// many forks, a CI job's parallel steps, the 50 concurrent ssh of a burst).
const (
	// DefaultCommandRate is how many commands (exec and shell sessions,
	// SFTP sessions) one agent may start per second, over all of its
	// connections together, once its burst is spent.
	DefaultCommandRate = 20
	// DefaultCommandBurst is how many commands an agent may start at once
	// before DefaultCommandRate applies.
	DefaultCommandBurst = 100

	// RepeatDeniedStreak is how many identical denied requests in a row
	// (same SSH user name, same command) make postern slow the agent down:
	// an agent that retries a denied command unchanged is stuck, and every
	// retry costs a decision and an audit row. The next identical request
	// waits RepeatDeniedDelay before it is decided, and each further one
	// twice as long as the last, up to RepeatDeniedMaxDelay. A different
	// request, or an allowed one, ends the streak.
	RepeatDeniedStreak   = 3
	RepeatDeniedDelay    = time.Second
	RepeatDeniedMaxDelay = 16 * time.Second
)

// limiter holds the per-agent command rate (a token bucket) and the streak
// of identical denied requests. It is safe for concurrent use.
//
// Its map is keyed by agent id and only authenticated agents reach it, so
// it holds at most one small entry per registered agent.
type limiter struct {
	rate  float64 // tokens per second; no limit if negative
	burst float64
	now   func() time.Time

	// mu guards agents and every agentLimit in it.
	mu     sync.Mutex
	agents map[string]*agentLimit
}

// agentLimit is one agent's state.
type agentLimit struct {
	tokens float64   // commands it may start now (rate limit)
	last   time.Time // when tokens was last refilled

	deniedKey    string // the request denied last, as requestKey says
	deniedStreak int    // how many times in a row it was denied
}

func newLimiter(rate float64, burst int, now func() time.Time) *limiter {
	return &limiter{rate: rate, burst: float64(burst), now: now, agents: map[string]*agentLimit{}}
}

// stateLocked returns agent's state, creating it with a full bucket.
func (l *limiter) stateLocked(agent string) *agentLimit {
	a := l.agents[agent]
	if a == nil {
		a = &agentLimit{tokens: l.burst, last: l.now()}
		l.agents[agent] = a
	}
	return a
}

// allow takes one command from agent's bucket. When the bucket is empty it
// reports false and how long until the next command may start.
func (l *limiter) allow(agent string) (bool, time.Duration) {
	if l.rate < 0 {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	a := l.stateLocked(agent)
	now := l.now()
	if elapsed := now.Sub(a.last); elapsed > 0 {
		a.tokens = math.Min(l.burst, a.tokens+elapsed.Seconds()*l.rate)
	}
	a.last = now
	if a.tokens >= 1 {
		a.tokens--
		return true, 0
	}
	if l.rate == 0 {
		return false, time.Duration(math.MaxInt64)
	}
	wait := time.Duration((1 - a.tokens) / l.rate * float64(time.Second))
	return false, max(wait, time.Millisecond)
}

// penalty returns how long agent waits before request key is decided, and
// how many times in a row it was denied before: zero unless key is the
// request the agent was last denied, RepeatDeniedStreak times or more.
func (l *limiter) penalty(agent, key string) (time.Duration, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	a := l.agents[agent]
	if a == nil || a.deniedKey != key || a.deniedStreak < RepeatDeniedStreak {
		return 0, 0
	}
	d := RepeatDeniedDelay
	for i := RepeatDeniedStreak; i < a.deniedStreak && d < RepeatDeniedMaxDelay; i++ {
		d *= 2
	}
	return min(d, RepeatDeniedMaxDelay), a.deniedStreak
}

// record notes how agent's request key was decided: a denial extends or
// starts the streak, anything allowed ends it.
func (l *limiter) record(agent, key string, denied bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	a := l.stateLocked(agent)
	switch {
	case !denied:
		a.deniedKey, a.deniedStreak = "", 0
	case a.deniedKey == key:
		a.deniedStreak++
	default:
		a.deniedKey, a.deniedStreak = key, 1
	}
}

// requestKey names a request as the agent sent it, for "identical": the SSH
// user name (which may be the alias), the command, and whether it was a
// shell.
func requestKey(user, cmd string, shell bool) string {
	kind := "exec"
	if shell {
		kind = "shell"
	}
	return kind + "\x00" + user + "\x00" + cmd
}

// sleepCtx waits d, or until ctx ends (then it returns ctx's error).
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
