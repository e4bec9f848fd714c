package shellclass

import (
	"strconv"

	"mvdan.cc/sh/v3/syntax"
)

// On Linux, opening /dev/stdout, /dev/stderr or /dev/fd/N opens again the
// file that descriptor refers to (they lead to /proc/self/fd/N), with the
// flags of the new open: `cat 1<F >/dev/stdout` opens F for writing and
// truncates it, although F was redirected for reading only. So output to
// those names is neutral only while the descriptor is the session's own
// stream (a pipe or socket from sshd), /dev/null, a pipe or a
// here-document. Every redirection in the string, nested strings
// included and in any order, is recorded as a binding of its descriptor;
// once the whole string is read, checkReopens raises every reopen of a
// descriptor that some binding may point at a file.

// fdBinding is one redirection that makes a descriptor refer to something.
type fdBinding struct {
	fd int // 0-9; -1 for {name}>..., which bash puts at 10 or above
	// dup is the descriptor duplicated (N<&M, N>&M), or -1.
	dup int
	// reopen is set for output to a name that reopens descriptor dup.
	reopen bool
	// neutral is set for a target that cannot be written through: a pipe
	// (a process substitution), a here-document, /dev/null.
	neutral bool
	// target is the file, when the binding names one.
	target value
}

// fdReopen is one redirection that opens /dev/stdout, /dev/stderr or
// /dev/fd/1 or 2 for writing.
type fdReopen struct {
	sc   *scope
	node syntax.Node
	fd   int
	path string
}

// reopenFD returns the descriptor a path opens again when it is opened, for
// the names that are neutral sinks while the descriptor is untouched.
func reopenFD(p string) (int, bool) {
	switch p {
	case "/dev/stdout", "/dev/fd/1":
		return 1, true
	case "/dev/stderr", "/dev/fd/2":
		return 2, true
	}
	return 0, false
}

// redirFDs returns the descriptors a redirection binds: its number, or the
// default of its operator (0 for input, 1 for output, 1 and 2 for &>).
func redirFDs(r *syntax.Redirect) []int {
	if r.N != nil {
		if isFD(r.N.Value) && len(r.N.Value) <= 2 {
			n := 0
			for _, ch := range r.N.Value {
				n = n*10 + int(ch-'0')
			}
			return []int{n}
		}
		return []int{-1} // {name}>file
	}
	switch r.Op {
	case syntax.RdrIn, syntax.RdrInOut, syntax.DplIn, syntax.Hdoc, syntax.DashHdoc, syntax.WordHdoc:
		return []int{0}
	case syntax.RdrAll, syntax.AppAll:
		return []int{1, 2}
	case syntax.DplOut:
		if r.Word != nil && !isFD(r.Word.Lit()) && r.Word.Lit() != "-" {
			return []int{1, 2} // >&file is &>file
		}
	}
	return []int{1}
}

// procSubstOnly reports whether a redirection target is one process
// substitution: a pipe to or from a command the walker classifies.
func procSubstOnly(w *syntax.Word) bool {
	if w == nil || len(w.Parts) != 1 {
		return false
	}
	_, ok := w.Parts[0].(*syntax.ProcSubst)
	return ok
}

// bindFDs records what r binds. It reports whether r is output to a
// reopening name, which checkReopens decides once the string is read.
func (c *classifier) bindFDs(sc *scope, r *syntax.Redirect) (reopen bool) {
	b := fdBinding{dup: -1}
	switch {
	case r.Op == syntax.Hdoc || r.Op == syntax.DashHdoc || r.Op == syntax.WordHdoc:
		b.neutral = true
	case procSubstOnly(r.Word):
		b.neutral = true
	case r.Op == syntax.DplIn || r.Op == syntax.DplOut:
		v := wordValue(r.Word, c.opts.Dialect)
		switch {
		case v.known && v.s == "-":
			b.neutral = true // closed
		case v.known && isFD(v.s) && len(v.s) <= 2:
			b.dup = 0
			for _, ch := range v.s {
				b.dup = b.dup*10 + int(ch-'0')
			}
		default:
			b.target = v
		}
	default:
		v := wordValue(r.Word, c.opts.Dialect)
		b.target = v
		if v.known && v.s == "/dev/null" {
			b.neutral = true
		}
		if fd, ok := reopenFD(v.s); ok && v.known && r.Op != syntax.RdrIn {
			b.dup, b.reopen, b.target = fd, true, value{}
			c.reopens = append(c.reopens, fdReopen{sc: sc, node: r, fd: fd, path: v.s})
			reopen = true
		}
	}
	for _, fd := range redirFDs(r) {
		b.fd = fd
		c.fdBindings = append(c.fdBindings, b)
	}
	return reopen
}

// checkReopens raises every reopen of a descriptor that a binding anywhere
// in the string may point at a file: opening the name opens that file for
// writing. The class is that of writing the file.
func (c *classifier) checkReopens() {
	if len(c.reopens) == 0 {
		return
	}
	targets := c.fdTargets()
	for _, ro := range c.reopens {
		for _, t := range targets[ro.fd] {
			cls, what := Write, "a file"
			switch {
			case !t.known:
				cls, what = Destructive, "a file known only at run time ("+t.why+")"
			case isBlockDevice(t.s):
				cls, what = Destructive, "block device "+t.s
			default:
				if dev, ok := opensDevice(t); ok {
					cls, what = Destructive, dev
				} else {
					what = t.s
				}
			}
			c.raise(ro.sc, ro.node, cls, "redirect to "+ro.path+" opens again what descriptor "+strconv.Itoa(ro.fd)+" refers to, and this command redirects it to "+what+": it is opened for writing")
		}
	}
}

// fdTargets returns, for descriptors 1 and 2, every file a binding in the
// string may make them refer to, following duplications (N<&M) and
// reopens (2>/dev/stdout) to a fixed point.
func (c *classifier) fdTargets() map[int][]value {
	out := map[int][]value{}
	seen := map[int]map[string]bool{}
	add := func(fd int, v value) bool {
		key := v.s
		if !v.known {
			key = "\x00" + v.why
		}
		if seen[fd] == nil {
			seen[fd] = map[string]bool{}
		}
		if seen[fd][key] {
			return false
		}
		seen[fd][key] = true
		out[fd] = append(out[fd], v)
		return true
	}
	for changed := true; changed; {
		changed = false
		for _, b := range c.fdBindings {
			if b.neutral || b.fd < 0 {
				continue
			}
			if b.dup < 0 {
				changed = add(b.fd, b.target) || changed
				continue
			}
			for _, t := range append([]value(nil), out[b.dup]...) {
				changed = add(b.fd, t) || changed
			}
		}
	}
	return out
}
