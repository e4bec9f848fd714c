package bastion

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/postern/postern/internal/ratelimit"
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
	// DefaultCommandWait is how long a command over the rate waits for its
	// turn before it is refused instead: a loop that runs a little faster
	// than the rate is slowed to it, as a busy server would, rather than
	// failing a command in twenty; a burst that would wait longer is told
	// to come back.
	DefaultCommandWait = 5 * time.Second

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

// limiter holds the per-agent command rate (a token bucket per agent, from
// internal/ratelimit) and the streak of identical denied requests. It is
// safe for concurrent use.
//
// Its keys are agent ids and only authenticated agents reach it, so it
// holds at most one small entry per registered agent.
type limiter struct {
	rate *ratelimit.Keyed

	// mu guards streaks and every denialStreak in it.
	mu      sync.Mutex
	streaks map[string]*denialStreak
}

// denialStreak is one agent's run of identical denied requests.
type denialStreak struct {
	key   string // the request denied last, as requestKey says
	count int    // how many times in a row it was denied
}

// newLimiter limits each agent to rate commands a second with bursts of
// burst; a negative rate is no limit.
func newLimiter(rate float64, burst int, now func() time.Time) *limiter {
	return &limiter{rate: ratelimit.New(rate, burst, 0, now), streaks: map[string]*denialStreak{}}
}

// allow takes one command from agent's bucket if its turn comes within
// max, and reports how long to wait for it; else it reports false and how
// long until the next command may start.
func (l *limiter) allow(agent string, max time.Duration) (bool, time.Duration) {
	return l.rate.AllowWithin(agent, max)
}

// penalty returns how long agent waits before request key is decided, and
// how many times in a row it was denied before: zero unless key is the
// request the agent was last denied, RepeatDeniedStreak times or more.
func (l *limiter) penalty(agent, key string) (time.Duration, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	a := l.streaks[agent]
	if a == nil || a.key != key || a.count < RepeatDeniedStreak {
		return 0, 0
	}
	d := RepeatDeniedDelay
	for i := RepeatDeniedStreak; i < a.count && d < RepeatDeniedMaxDelay; i++ {
		d *= 2
	}
	return min(d, RepeatDeniedMaxDelay), a.count
}

// record notes how agent's request key was decided: a denial extends or
// starts the streak, anything allowed ends it.
func (l *limiter) record(agent, key string, denied bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	a := l.streaks[agent]
	if a == nil {
		if !denied {
			return
		}
		a = &denialStreak{}
		l.streaks[agent] = a
	}
	switch {
	case !denied:
		a.key, a.count = "", 0
	case a.key == key:
		a.count++
	default:
		a.key, a.count = key, 1
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

// limitsText says the server's command limits in words, for the help and
// a rate-limited refusal.
func (s *Server) limitsText() string {
	if s.cfg.CommandRate < 0 {
		return "no command rate limit"
	}
	t := fmt.Sprintf("an agent may start %g commands a second (%d at once)", s.cfg.CommandRate, s.cfg.CommandBurst)
	if s.cfg.CommandWait > 0 {
		t += fmt.Sprintf("; past that a command waits up to %v for its turn", s.cfg.CommandWait)
	}
	return t
}
