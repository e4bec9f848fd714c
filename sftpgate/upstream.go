package sftpgate

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/pkg/sftp"
)

// errClosed answers requests that race the end of the session.
var errClosed = errors.New("sftpgate: session closed")

// upstreams holds one upstream SFTP session per alias for one agent
// session. A session is dialed on the first operation that needs its alias,
// so that `sftp bastion` listing "/" opens nothing, and is kept until Serve
// returns: an agent's transfer of many files pays for one channel and one
// SFTP handshake per target, not one per file.
type upstreams struct {
	dial Dialer

	// mu protects slots and closed.
	mu     sync.Mutex
	slots  map[string]*upstreamSlot
	closed bool
}

// upstreamSlot is one alias's session, or its dial in progress.
type upstreamSlot struct {
	ready chan struct{} // closed when up or err is set
	up    *Upstream
	err   error
}

func newUpstreams(dial Dialer) *upstreams {
	return &upstreams{dial: dial, slots: make(map[string]*upstreamSlot)}
}

// client returns alias's session, dialing it if no operation has yet. A
// failed dial is forgotten, so that the next operation tries again; the
// operations that waited on it get its error.
func (p *upstreams) client(ctx context.Context, alias string) (*sftp.Client, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errClosed
	}
	s, ok := p.slots[alias]
	if ok {
		p.mu.Unlock()
		select {
		case <-s.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if s.err != nil {
			return nil, s.err
		}
		return s.up.Client, nil
	}
	s = &upstreamSlot{ready: make(chan struct{})}
	p.slots[alias] = s
	p.mu.Unlock()

	up, err := p.dial(ctx, alias)
	if err == nil && (up == nil || up.Client == nil) {
		err = errors.New("dialer returned no client")
	}
	if err != nil {
		err = fmt.Errorf("sftpgate: open sftp session to %s: %w", alias, err)
	}

	p.mu.Lock()
	late := err == nil && p.closed
	if err != nil || late {
		delete(p.slots, alias)
	}
	if late {
		err = errClosed
	}
	s.up, s.err = nil, err
	if err == nil {
		s.up = up
	}
	close(s.ready)
	p.mu.Unlock()

	if late {
		closeUpstream(up)
	}
	if err != nil {
		return nil, err
	}
	return up.Client, nil
}

// closeAll closes every session; later calls of client fail. A dial still in
// progress closes its session itself when it completes.
func (p *upstreams) closeAll() error {
	p.mu.Lock()
	p.closed = true
	var ups []*Upstream
	for alias, s := range p.slots {
		select {
		case <-s.ready:
			if s.up != nil {
				ups = append(ups, s.up)
			}
			delete(p.slots, alias)
		default:
		}
	}
	p.mu.Unlock()

	var errs []error
	for _, up := range ups {
		if err := closeUpstream(up); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// closeUpstream ends up with its Close, or closes its client if it has none.
func closeUpstream(up *Upstream) error {
	if up.Close != nil {
		return up.Close()
	}
	return up.Client.Close()
}
