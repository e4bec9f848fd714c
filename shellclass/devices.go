package shellclass

import (
	"path"
	"strings"
)

// Device files are decided by every path a word may name, not only by its
// text after lexical cleaning: `~/../../dev/sda` and `../../dev/sda` reach
// /dev from a home directory of unknown depth, /proc/PID/root,
// /proc/PID/task/TID/root and /proc/PID/cwd are links to a directory
// (`..` after one goes up from where the link leads, which lexical
// cleaning cannot see), /dev/fd/N and /proc/PID/fd/N lead to whatever
// directory that descriptor holds, and a relative path may start at / (a
// user whose home is missing starts there) or, once the string changes
// directory, anywhere.

const deviceWhy = "opening or reading this file acts on the machine (a watchdog reboots it unless closed with the magic character; port and memory reads can hang hardware; /proc/kmsg readers take messages from the logger)"

// pathCandidates returns the absolute paths, cleaned, that the path s may
// name. cwdMoves says the string changes directory, so that a relative
// path may start in /dev or /proc.
func pathCandidates(s string, cwdMoves bool) []string {
	if s == "" {
		return nil
	}
	var out []string
	add := func(p string) {
		p = path.Clean(p)
		for _, q := range out {
			if q == p {
				return
			}
		}
		out = append(out, p)
	}
	absolute := strings.HasPrefix(s, "/")
	rel := s
	if strings.HasPrefix(s, "~") {
		// ~ or ~user: a home directory of unknown depth.
		_, rel, _ = strings.Cut(s, "/")
		absolute = false
	}
	if absolute {
		add(stripRootLinks(path.Clean(s)))
	} else {
		add("/" + rel)
		if cwdMoves {
			add("/dev/" + rel)
			add("/proc/" + rel)
		}
	}
	comps := strings.Split(s, "/")
	for i, c := range comps {
		rest := strings.Join(comps[i+1:], "/")
		switch {
		case c == "..":
			// Enough .. from somewhere near the root reach it.
			add("/" + rest)
		case absolute && i >= 1 && linkToDir(comps[:i+1]):
			add("/" + rest)
			add("/dev/" + rest)
		}
	}
	return out
}

// linkToDir reports whether the path made of comps (starting with "" for
// the root) is a link to a directory the text does not show: /proc/P/root,
// /proc/P/cwd, their task/T forms, /proc/P/fd/N and /dev/fd/N.
func linkToDir(comps []string) bool {
	n := len(comps)
	proc := func(i int) bool {
		return i < n && (comps[i] == "self" || comps[i] == "thread-self" || isFD(comps[i]) || strings.ContainsAny(comps[i], "*?["))
	}
	switch {
	case n == 4 && comps[1] == "dev" && comps[2] == "fd":
		return true
	case n >= 4 && comps[1] == "proc" && proc(2):
		tail := comps[3:]
		if len(tail) >= 3 && tail[0] == "task" {
			tail = tail[2:]
		}
		switch {
		case len(tail) == 1 && (tail[0] == "root" || tail[0] == "cwd"):
			return true
		case len(tail) == 2 && tail[0] == "fd":
			return true
		}
	}
	return false
}

// stripRootLinks strips the /proc/PID/root and /proc/PID/task/TID/root
// prefixes of a cleaned path: each is a link to the root directory.
func stripRootLinks(s string) string {
	for {
		comps := strings.Split(s, "/")
		switch {
		case len(comps) >= 4 && linkToDir(comps[:4]) && comps[3] == "root":
			s = path.Clean("/" + strings.Join(comps[4:], "/"))
		case len(comps) >= 6 && comps[3] == "task" && linkToDir(comps[:6]) && comps[5] == "root":
			s = path.Clean("/" + strings.Join(comps[6:], "/"))
		default:
			return s
		}
	}
}

// argPaths returns the paths an argument may hold: the word, and every
// part of it from a "/" on (the value of --opt=/path, -f/path).
func argPaths(s string) []string {
	out := []string{s}
	if strings.HasPrefix(s, "-") {
		out = out[:0]
	}
	for i := 1; i < len(s); i++ {
		if s[i] == '/' && s[i-1] != '/' {
			out = append(out, s[i:])
		}
	}
	return out
}

// opensDevice reports whether an argument names, or is a glob that can
// match, a device of sideEffectDevices by any path it may name
// (pathCandidates), also as the value of an option. A value known only
// at run time is not checked (docs/classification.md, What the
// classifier cannot see).
func opensDevice(a value) (string, bool) {
	return opensDeviceIn(a, false)
}

func opensDeviceIn(a value, cwdMoves bool) (string, bool) {
	if !a.known && a.why != "glob pattern" {
		return "", false
	}
	for _, s := range argPaths(a.s) {
		for _, p := range pathCandidates(s, cwdMoves) {
			if a.known {
				if dev, ok := sideEffectDevice(p); ok {
					return dev, true
				}
				continue
			}
			for _, d := range append(sideEffectDevices, "/dev/watchdog0", "/dev/watchdog1", "/dev/char/10:130") {
				if ok, _ := path.Match(p, d); ok {
					return d, true
				}
			}
		}
	}
	return "", false
}

// sideEffectDevice reports whether a cleaned absolute path is one of the
// devices that act when opened.
func sideEffectDevice(p string) (string, bool) {
	for _, d := range sideEffectDevices {
		if p == d || d == "/dev/watchdog" && strings.HasPrefix(p, d) || strings.HasPrefix(p, "/dev/char/") {
			return p, true
		}
	}
	return "", false
}

// SideEffectDevice reports whether opening the absolute path p acts on the
// machine by itself, and which device it names: a watchdog (opening it
// arms a reboot), /dev/port, /dev/mem, /dev/kmem, /dev/snapshot,
// /proc/kmsg, also through /proc/PID/root and /dev/char. The SFTP gate asks
// it of every path it opens or links to: an open for reading is otherwise
// a read.
func SideEffectDevice(p string) (string, bool) {
	return opensDevice(value{s: p, known: true})
}

// SideEffectDeviceWhy says why opening such a device is destructive.
const SideEffectDeviceWhy = deviceWhy

// devices raises cl to destructive if one of args opens a device that acts
// when opened (opensDevice), and reports whether it did.
func (c *classifier) devices(cl *cmdCall, what string, args []value) bool {
	for _, a := range args {
		if dev, ok := opensDeviceIn(c.resolvedArg(a), c.cwdMoves); ok {
			c.raiseCall(cl, Destructive, what+" opens "+dev+": "+deviceWhy)
			return true
		}
	}
	return false
}

// resolvedArg returns a word that is one quoted or unquoted variable
// assigned a literal earlier in the string (`f=/dev/watchdog; cat "$f"`)
// as that literal, for the device checks; any other word as it is.
func (c *classifier) resolvedArg(a value) value {
	if a.known || a.word == nil {
		return a
	}
	if vs, _, ok := c.resolveName(a); ok && len(vs) == 1 {
		return vs[0]
	}
	return a
}

// isBlockDevice reports whether a path may name a block device by the
// naming conventions of Linux (docs/classification.md, Redirections): the
// known prefixes, /dev/root, and any /dev/DIR/NAME outside the
// directories of character devices and file systems (LVM's /dev/VG/LV,
// /dev/disk/..., /dev/block/...).
func isBlockDevice(p string) bool {
	for _, c := range pathCandidates(p, false) {
		if blockDevicePath(c) {
			return true
		}
	}
	return false
}

func blockDevicePath(p string) bool {
	for _, prefix := range blockDevicePrefixes {
		if strings.HasPrefix(p, prefix) {
			return true
		}
	}
	rest, ok := strings.CutPrefix(p, "/dev/")
	if !ok {
		return false
	}
	for _, prefix := range numberedBlockDevices {
		if n, ok := strings.CutPrefix(rest, prefix); ok && n != "" && n[0] >= '0' && n[0] <= '9' {
			return true
		}
	}
	dir, _, two := strings.Cut(rest, "/")
	return rest == "root" || two && !charDeviceDirs[dir]
}

// charDeviceDirs are directories of /dev that hold character devices,
// pseudo terminals or file systems, not disks.
var charDeviceDirs = map[string]bool{"pts": true, "shm": true, "fd": true, "mqueue": true, "hugepages": true, "net": true, "input": true, "snd": true, "dri": true, "cpu": true, "usb": true, "v4l": true, "serial": true, "dma_heap": true, "char": true, "bus": true, "vfio": true}

// blockDeviceArgs raises a command that is not read to destructive when an
// argument names a block device: `cp x /dev/sda`, `tee /dev/nvme0n1`.
func (c *classifier) blockDeviceArgs(cl *cmdCall, base string, args []value) {
	for _, a := range args {
		a = c.resolvedArg(a)
		if !a.known {
			continue
		}
		for _, s := range argPaths(a.s) {
			if strings.Contains(s, "dev") && isBlockDevice(s) {
				c.raiseCall(cl, Destructive, base+" may write block device "+s)
				return
			}
		}
	}
}

// mayHoldDevices reports whether walking the tree below a path (or the
// working directory, for ".") may reach device files: the root, /dev and
// /proc and what is below them, through any path the word may name; a
// word known only at run time may be any of them.
func (c *classifier) mayHoldDevices(a value) bool {
	a = c.resolvedArg(a)
	if !a.known {
		return true
	}
	if !strings.HasPrefix(a.s, "/") && !strings.HasPrefix(a.s, "~") && !strings.Contains(a.s, "..") && !c.cwdMoves {
		return false // below the home directory
	}
	for _, p := range pathCandidates(a.s, c.cwdMoves) {
		if p == "/" || p == "/dev" || p == "/proc" || strings.HasPrefix(p, "/dev/") || strings.HasPrefix(p, "/proc/") {
			return true
		}
	}
	return false
}

// mayHoldKmsg reports whether walking the tree below a path may reach
// /proc/kmsg: the root, /proc, or a path that leads there (/proc/PID/root,
// ~/../..). A word known only at run time and a relative path after cd
// are not followed, as for the other files a name known only at run time
// may open (docs/classification.md, What the classifier cannot see): grep's
// ceiling stays read.
func (c *classifier) mayHoldKmsg(a value) bool {
	a = c.resolvedArg(a)
	if !a.known {
		return false
	}
	if !strings.HasPrefix(a.s, "/") && !strings.HasPrefix(a.s, "~") && !strings.Contains(a.s, "..") {
		return false
	}
	for _, p := range pathCandidates(a.s, false) {
		if p == "/" || p == "/proc" {
			return true
		}
	}
	return false
}
