package sftpgate

import (
	"encoding/binary"
	"strconv"
)

// handle is an open file or directory as the gate knows it. Requests on a
// handle ride on the decision of the open that made it; a handle the agent
// names that the gate did not hand out is refused, so that no request on a
// handle reaches a target undecided.
type handle struct {
	up     *upstream // nil for the virtual root's own listing of "/"
	remote string    // the target's handle
	alias  string
	path   string // the path on the target
	shown  string // the path as decisions show it
	dir    bool
	// write is set when the open was decided as a write (any of write,
	// append, create, truncate, exclusive): writes, fsync and an fsetstat
	// of modes and times ride on it.
	write bool
	// end is where the handle's writes so far end (the largest offset
	// plus length). Only the dispatcher reads and writes it.
	end uint64
	// next is the root listing's next entry to send.
	next int
}

// lookup returns the handle the agent named.
func (s *session) lookup(name string) *handle {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.handles[name]
}

// forget drops a handle the agent closed.
func (s *session) forget(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.handles, name)
}

// tooManyHandles reports whether the session holds maxHandles handles.
func (s *session) tooManyHandles() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.handles) >= maxHandles
}

// addHandle records h and returns the name the agent will use for it: the
// target's own in the fixed view (a pass-through), a name of the gate's in
// the virtual root, where handles of several targets share one session and
// must not collide or be usable on another alias.
func (s *session) addHandle(h *handle) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	name := h.remote
	if s.fixed == "" {
		s.nextHandle++
		name = strconv.FormatUint(s.nextHandle, 10)
	}
	s.handles[name] = h
	if h.write {
		s.written.add(writtenKey(h.alias, h.path))
	}
	return name
}

// dropHandles forgets every handle on up, whose session ended.
func (s *session) dropHandles(up *upstream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, h := range s.handles {
		if h.up == up {
			delete(s.handles, name)
		}
	}
}

// writtenKey is path on alias in the set of what the session wrote.
func writtenKey(alias, path string) string { return alias + "\x00" + path }

// wroteTo reports whether the session opened path on alias for writing, or
// made it with mkdir.
func (s *session) wroteTo(alias, path string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.written.has(writtenKey(alias, path))
}

// markWritten adds a path the session made to what it wrote.
func (s *session) markWritten(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.written.add(key)
}

// opened records the handle a target answered an open with, and returns
// the answer as the agent gets it (in the virtual root, with the gate's
// handle name). An answer that is not a handle (a refusal) passes as it is.
func (s *session) opened(h *handle, frame []byte) []byte {
	if frame[4] != fxpHandle {
		return frame
	}
	d := &decoder{b: frame, off: 9}
	remote, at := d.str()
	if d.err != nil {
		return statusPacket(binary.BigEndian.Uint32(frame[5:9]), fxFailure, "sftpgate: the target answered with a malformed handle")
	}
	h.remote = remote
	name := s.addHandle(h)
	if name == remote {
		return frame
	}
	return splice(frame, edit{at, strField(name)})
}

// recentWrites bounds recentSet: the files a session opened for writing,
// and the directories it made, that a later setstat of modes and times may
// ride on. `scp -p` and `sftp put -p` set them right after each file (and
// each directory's after its files), so the recent ones suffice.
const recentWrites = 1024

// recentSet is a set of strings that keeps the newest n.
type recentSet struct {
	n     int
	order []string
	set   map[string]bool
}

func newRecentSet(n int) recentSet { return recentSet{n: n, set: map[string]bool{}} }

func (r *recentSet) add(k string) {
	if r.set[k] {
		return
	}
	if len(r.order) >= r.n {
		delete(r.set, r.order[0])
		r.order = r.order[1:]
	}
	r.order = append(r.order, k)
	r.set[k] = true
}

func (r *recentSet) has(k string) bool { return r.set[k] }
