package sftpgate

import (
	"fmt"
	"strings"
	"time"
)

// Attribute flags (draft-02 §5).
const (
	attrSize        = 0x00000001
	attrUIDGID      = 0x00000002
	attrPermissions = 0x00000004
	attrACModTime   = 0x00000008
	attrExtended    = 0x80000000
)

// attrs is an ATTRS field as the gate needs it: to classify a setstat (a
// size is a truncation), to decide whether it rides on a write, and to show
// an approver what it changes. The gate never re-encodes a client's attrs:
// the packet is forwarded as it came.
type attrs struct {
	flags        uint32
	size         uint64
	uid, gid     uint32
	perm         uint32
	atime, mtime uint32
	extended     int // count of extended pairs
}

// setuid, setgid and sticky bits of a mode.
const specialModeBits = 0o7000

// readAttrs decodes an ATTRS field.
func (d *decoder) attrs() attrs {
	var a attrs
	a.flags = d.u32()
	if a.flags&attrSize != 0 {
		a.size = d.u64()
	}
	if a.flags&attrUIDGID != 0 {
		a.uid = d.u32()
		a.gid = d.u32()
	}
	if a.flags&attrPermissions != 0 {
		a.perm = d.u32()
	}
	if a.flags&attrACModTime != 0 {
		a.atime = d.u32()
		a.mtime = d.u32()
	}
	if a.flags&attrExtended != 0 {
		n := d.u32()
		// Each pair is at least 8 bytes: a bound before the loop, so a
		// forged count cannot spin.
		if d.err == nil && uint64(n)*8 > uint64(d.rest()) {
			d.fail(errShort)
			return a
		}
		for i := uint32(0); i < n && d.err == nil; i++ {
			d.str()
			d.str()
		}
		a.extended = int(n)
	}
	return a
}

// ridesOnWrite reports whether a setstat with a carries only what a file
// upload sets after its data (permissions and times, as `scp -p` and
// `sftp put -p` send them): no size, owner or extended attribute, and no
// setuid, setgid or sticky bit, each of which is decided on its own.
func (a attrs) ridesOnWrite() bool {
	if a.flags&^(attrPermissions|attrACModTime) != 0 {
		return false
	}
	return a.flags&attrPermissions == 0 || a.perm&specialModeBits == 0
}

// describe says what a setstat, mkdir or open with a would set, for the
// approval text: "size 4, mode 0600, mtime 2026-12-02T21:30:00Z".
func (a attrs) describe() string {
	var parts []string
	if a.flags&attrSize != 0 {
		parts = append(parts, fmt.Sprintf("size %d", a.size))
	}
	if a.flags&attrPermissions != 0 {
		parts = append(parts, fmt.Sprintf("mode %04o", a.perm&0o7777))
	}
	if a.flags&attrUIDGID != 0 {
		parts = append(parts, fmt.Sprintf("uid %d gid %d", a.uid, a.gid))
	}
	if a.flags&attrACModTime != 0 {
		parts = append(parts,
			"atime "+time.Unix(int64(a.atime), 0).UTC().Format(time.RFC3339),
			"mtime "+time.Unix(int64(a.mtime), 0).UTC().Format(time.RFC3339))
	}
	if a.extended > 0 {
		parts = append(parts, fmt.Sprintf("%d extended attributes", a.extended))
	}
	return strings.Join(parts, ", ")
}

// openFlagsText names an open's flags as OpenSSH's sftp-server logs them.
func openFlagsText(pflags uint32) string {
	var parts []string
	for _, f := range []struct {
		bit  uint32
		name string
	}{{fxfRead, "read"}, {fxfWrite, "write"}, {fxfAppend, "append"}, {fxfCreat, "create"}, {fxfTrunc, "truncate"}, {fxfExcl, "exclusive"}} {
		if pflags&f.bit != 0 {
			parts = append(parts, f.name)
		}
	}
	if len(parts) == 0 {
		return "no flags"
	}
	return strings.Join(parts, ",")
}

// appendDirAttrs encodes the made-up attributes of a directory of the
// virtual root: size 0, owner 0, the mode, and mtime as both times.
func appendDirAttrs(b []byte, perm uint32, mtime time.Time) []byte {
	b = appendU32(b, attrSize|attrUIDGID|attrPermissions|attrACModTime)
	b = appendU64(b, 0)
	b = appendU32(b, 0)
	b = appendU32(b, 0)
	b = appendU32(b, 0o040000|perm) // S_IFDIR
	t := uint32(mtime.Unix())
	b = appendU32(b, t)
	b = appendU32(b, t)
	return b
}
