package bastion

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/postern/postern/store"
)

// DefaultLockPoll is how often the server reads the locks, and the state of
// the agents it serves, to end the live sessions that a lock, a disabled or
// a removed agent forbids. The locks are read from the database, so a lock
// made through any door of any replica, or by the CLI beside it, ends the
// sessions here within about this long (the issue asks for a second).
const DefaultLockPoll = 250 * time.Millisecond

// liveSession is one session channel of an agent that postern can end: an
// exec or shell command, whether waiting for an approval or running, or an
// SFTP session. It is registered while the session runs (liveSet).
type liveSession struct {
	agentID, agentName string
	// ctx derives from the server's context and ends (with an *endedError
	// as its cause) when postern ends the session: a running relay stops
	// there and closes the upstream channel. wait derives from the agent
	// connection's context and ends with it too: waits for an approval and
	// the SFTP gate run under it.
	ctx, wait          context.Context
	cancel, cancelWait context.CancelCauseFunc

	// mu guards conns, the ids of the connections the session was routed
	// to (an SFTP session in the virtual root may reach several).
	mu    sync.Mutex
	conns map[string]struct{}
}

// endedError is why postern ended a live session: a lock's words, or the
// agent disabled or removed.
type endedError struct{ why string }

func (e *endedError) Error() string { return "ended by postern: " + e.why }

// reach records that the session goes to connection id, so that a lock of
// that connection ends it.
func (l *liveSession) reach(id string) {
	l.mu.Lock()
	if l.conns == nil {
		l.conns = map[string]struct{}{}
	}
	l.conns[id] = struct{}{}
	l.mu.Unlock()
}

func (l *liveSession) reaches(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.conns[id]
	return ok
}

// end ends the session for why; only the first call counts.
func (l *liveSession) end(why string) {
	err := &endedError{why: why}
	l.cancel(err)
	l.cancelWait(err)
}

// ended is why postern ended the session, "" while it has not.
func (l *liveSession) ended() string {
	var e *endedError
	if errors.As(context.Cause(l.ctx), &e) {
		return e.why
	}
	return ""
}

// liveSet is the server's registry of live sessions.
type liveSet struct {
	mu sync.Mutex
	m  map[*liveSession]struct{}
}

// add registers a session of ac; the caller removes it when the session
// ends.
func (s *Server) addLive(ac *agentConn) *liveSession {
	l := &liveSession{agentID: ac.agentID, agentName: ac.agentName}
	l.ctx, l.cancel = context.WithCancelCause(s.ctx)
	l.wait, l.cancelWait = context.WithCancelCause(ac.ctx)
	s.live.mu.Lock()
	if s.live.m == nil {
		s.live.m = map[*liveSession]struct{}{}
	}
	s.live.m[l] = struct{}{}
	s.live.mu.Unlock()
	return l
}

// removeLive unregisters l and releases its contexts.
func (s *Server) removeLive(l *liveSession) {
	s.live.mu.Lock()
	delete(s.live.m, l)
	s.live.mu.Unlock()
	l.cancel(context.Canceled)
	l.cancelWait(context.Canceled)
}

func (s *Server) liveSessions() []*liveSession {
	s.live.mu.Lock()
	defer s.live.mu.Unlock()
	out := make([]*liveSession, 0, len(s.live.m))
	for l := range s.live.m {
		out = append(out, l)
	}
	return out
}

// startLockWatch starts the goroutine that ends locked sessions, once, on
// the first Serve; it ends with the server (Shutdown waits for it in wg).
// The caller holds s.mu.
func (s *Server) startLockWatch() {
	if s.lockWatch {
		return
	}
	s.lockWatch = true
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.watchLocks(s.endForbidden)
	}()
}

// watchLocks runs pass (endForbidden) every LockPoll until the server's
// context ends. It takes pass as an argument so that a test can count the
// passes in fake time without a database.
func (s *Server) watchLocks(pass func(context.Context) error) {
	t := time.NewTicker(s.cfg.LockPoll)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(s.ctx, 4*s.cfg.LockPoll+time.Second)
		if err := pass(ctx); err != nil && s.ctx.Err() == nil {
			s.log.Error().Err(err).Msg("reading the locks to end locked sessions")
		}
		cancel()
	}
}

// endForbidden ends every live session that a lock, or its agent disabled
// or removed, forbids now. With no live session it reads nothing.
func (s *Server) endForbidden(ctx context.Context) error {
	live := s.liveSessions()
	if len(live) == 0 {
		return nil
	}
	locks, err := s.cfg.Store.ActiveLocks(ctx)
	if err != nil {
		return err
	}
	agentLocks := map[string]store.Lock{}
	var connLocks []store.Lock
	for _, l := range locks {
		if l.Kind == store.LockAgent {
			agentLocks[l.TargetID] = l
		} else {
			connLocks = append(connLocks, l)
		}
	}
	seen := map[string]bool{}
	var ids []string
	for _, l := range live {
		if !seen[l.agentID] {
			seen[l.agentID] = true
			ids = append(ids, l.agentID)
		}
	}
	disabled, err := s.cfg.Store.AgentStates(ctx, ids)
	if err != nil {
		return err
	}
	for _, l := range live {
		why := ""
		if lk, ok := agentLocks[l.agentID]; ok {
			why = lk.Words()
		} else if d, ok := disabled[l.agentID]; !ok {
			why = "agent " + l.agentName + " was removed"
		} else if d {
			why = "agent " + l.agentName + " was disabled"
		} else {
			for _, lk := range connLocks {
				if l.reaches(lk.TargetID) {
					why = lk.Words()
					break
				}
			}
		}
		if why != "" && l.ended() == "" {
			s.log.Info().Str("agent_id", l.agentID).Str("why", why).Msg("ending a live session")
			l.end(why)
		}
	}
	return nil
}
