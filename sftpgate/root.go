package sftpgate

import (
	"fmt"
	"path"
	"slices"
	"time"
)

// The virtual root ("/" and "/ALIAS" in `sftp bastion`) lies on no target:
// the gate answers for it, without a decision (it shows only the agent's
// own aliases) and without dialing anything.

// Modes of the virtual directories: nothing can be created in "/"; an
// alias's contents are its target's to govern.
const (
	rootPerm  = 0o555
	aliasPerm = 0o755
)

// rootBatch is how many entries one answer to a readdir of "/" holds.
const rootBatch = 100

// rootAttrs answers a stat of "/" or "/ALIAS".
func (s *session) rootAttrs(id uint32, t target) []byte {
	perm := uint32(rootPerm)
	if t.alias != "" {
		perm = aliasPerm
	}
	b := newPacket(fxpAttrs, 40)
	b = appendU32(b, id)
	b = appendDirAttrs(b, perm, s.started)
	return finish(b)
}

// nameAnswer is SSH_FXP_NAME with one name and empty attributes, as
// OpenSSH's sftp-server answers realpath.
func nameAnswer(id uint32, name string) []byte {
	b := newPacket(fxpName, 16+2*len(name))
	b = appendU32(b, id)
	b = appendU32(b, 1)
	b = appendStr(b, name)
	b = appendStr(b, name)
	b = appendU32(b, 0)
	return finish(b)
}

// rootEntry is one entry of the listing of "/".
type rootEntry struct {
	name string
	perm uint32
}

// rootEntries lists "/": ".", "..", then the aliases in order.
func (s *session) rootEntries() []rootEntry {
	entries := []rootEntry{{".", rootPerm}, {"..", rootPerm}}
	for _, a := range s.names {
		entries = append(entries, rootEntry{a, aliasPerm})
	}
	return entries
}

// rootReaddir answers a readdir of "/" from h: the next batch of the
// entries taken when it was opened, then SSH_FX_EOF.
func (s *session) rootReaddir(id uint32, h *handle) []byte {
	entries := h.entries
	start := h.next
	end := min(start+rootBatch, len(entries))
	h.next = end
	if start >= len(entries) {
		return statusPacket(id, fxEOF, "End of file")
	}
	b := newPacket(fxpName, 128*(end-start))
	b = appendU32(b, id)
	b = appendU32(b, uint32(end-start))
	for _, e := range entries[start:end] {
		b = appendStr(b, e.name)
		b = appendStr(b, longName(e.name, e.perm, s.started))
		b = appendDirAttrs(b, e.perm, s.started)
	}
	return finish(b)
}

// longName is an `ls -l` line for a virtual directory, in the layout of
// OpenSSH's sftp-server (mode, links, owner, group, size, date, name), so
// that clients that parse it (libssh reads owner and group from it) find
// every field.
func longName(name string, perm uint32, mtime time.Time) string {
	mode := []byte("d---------")
	for i, c := range "rwxrwxrwx" {
		if perm&(1<<(8-i)) != 0 {
			mode[1+i] = byte(c)
		}
	}
	date := mtime.Format("Jan _2 15:04")
	if time.Since(mtime) > 180*24*time.Hour {
		date = mtime.Format("Jan _2  2006")
	}
	return fmt.Sprintf("%s %3d %-8s %-8s %8d %s %s", mode, 2, "root", "root", 0, date, name)
}

// virtualName maps a path the target answered (realpath, expand-path) to
// the agent's view; ok is false for one the gate cannot show (relative, or
// with control bytes).
func (s *session) virtualName(alias, p string) (string, bool) {
	if s.fixed != "" {
		return p, true
	}
	if !path.IsAbs(p) || checkPath(p) != nil {
		return "", false
	}
	return virtualPath(location{Alias: alias, Path: path.Clean(p)}), true
}

// refreshAliases reads the agent's aliases again (Config.Granted), so that
// "/" shows the grants as they are now. On an error they stay as they
// were: what reaches a target is decided by the Decider anyway.
func (s *session) refreshAliases() {
	if s.fixed != "" || s.cfg.Granted == nil {
		return
	}
	aliases, err := s.cfg.Granted(s.ctx)
	if err != nil {
		s.log.Warn().Err(err).Msg("sftp: reading the agent's aliases failed; the virtual root keeps the last ones read")
		return
	}
	s.names, s.aliases = sortedAliases(aliases)
}

// dropAlias takes alias out of the virtual root: the Decider found no
// grant for it.
func (s *session) dropAlias(alias string) {
	if s.fixed != "" || !s.aliases[alias] {
		return
	}
	delete(s.aliases, alias)
	s.names = slices.DeleteFunc(slices.Clone(s.names), func(n string) bool { return n == alias })
}

// sortedAliases returns the usable aliases sorted and as a set. A name that
// cannot be one directory of the root (empty, ".", "..", or holding "/" or a
// control byte) is left out rather than shown broken.
func sortedAliases(aliases []string) ([]string, map[string]bool) {
	set := make(map[string]bool, len(aliases))
	var names []string
	for _, a := range aliases {
		if a == "" || a == "." || a == ".." || path.Base(a) != a || checkPath(a) != nil || set[a] {
			continue
		}
		set[a] = true
		names = append(names, a)
	}
	slices.Sort(names)
	return names, set
}
