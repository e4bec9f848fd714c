package bastion

import (
	"context"
	"time"

	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
)

// openAhead is an upstream session channel opened while the policy decides
// and the journal row is written, so that an allowed command does not wait
// for the target's channel round trip after its decision. Measured with
// OpenSSH's ControlMaster client on two cores, the open took about 0.3 ms
// of each exec's serial path (bench/RESULTS.md).
//
// A bare session channel runs nothing: the target starts a process only
// for an exec, shell or subsystem request, and those are sent by
// startUpstream alone, after the decision allowed the command. A refused
// command's channel is closed without a request ever sent on it.
//
// The goroutine that opens the channel belongs to the session: take or
// abandon must be called exactly once, and both wait for it to end.
type openAhead struct {
	cancel context.CancelFunc
	done   chan struct{}
	// up and err are written by the opening goroutine before done is
	// closed, and read only after.
	up  *UpstreamSession
	err error
}

// startOpenAhead begins opening a session channel to conn on the pool.
func (s *Server) startOpenAhead(ctx context.Context, conn *store.Connection) *openAhead {
	ctx, cancel := context.WithCancel(ctx)
	o := &openAhead{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(o.done)
		o.up, o.err = s.pool.Open(ctx, conn)
	}()
	return o
}

// take waits for the open and returns its outcome, as pool.Open would
// have. The caller owns the session from then on.
func (o *openAhead) take() (*UpstreamSession, error) {
	<-o.done
	o.cancel()
	return o.up, o.err
}

// abandon stops the open and, if the channel was opened, closes it and
// drains its requests until the target acknowledges the close (the
// upstream connection is pooled: an unread request channel would stall
// every session on it). It waits for the opening goroutine, which a target
// that answers the open late holds no longer than the pool's keepalive
// bound, and for the drain at most relayTeardownWait, as relay does; a
// target that never acknowledges keeps the drain until its client closes.
// Callers abandon after they have told the agent.
func (o *openAhead) abandon() {
	o.cancel()
	<-o.done
	if o.up == nil {
		return
	}
	_ = o.up.Close()
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		for req := range o.up.Requests {
			refuse(req)
		}
	}()
	t := time.NewTimer(relayTeardownWait)
	defer t.Stop()
	select {
	case <-drained:
	case <-t.C:
	}
}

// allowedByGrant reports whether the grant's rule for class is allow: only
// then is the upstream channel opened before the decision. The decision
// itself reads the grant again; a stale cached grant costs at most a
// channel opened and closed.
func allowedByGrant(g store.Grant, class policy.Class) bool {
	switch class {
	case policy.Read:
		return g.Rules.Read == store.RuleAllow
	case policy.Write:
		return g.Rules.Write == store.RuleAllow
	case policy.Destructive:
		// A production connection asks for destructive operations
		// whatever the stored rule says (policy.Decide).
		return g.Rules.Destructive == store.RuleAllow && g.Env != store.EnvProduction
	}
	return false
}
