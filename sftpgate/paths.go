package sftpgate

import (
	"fmt"
	"path"
	"strings"
)

// MaxPathLen bounds every path the agent sends, before and after cleaning.
// It is Linux's PATH_MAX: no target accepts a longer path, and a bound keeps
// a hostile client from making the gate clean, log and relay megabytes.
const MaxPathLen = 4096

// location is where a path of the virtual root leads.
type location struct {
	// Alias is the connection the path lies on; "" is the virtual root "/"
	// itself, which lies on no target.
	Alias string
	// Path is the absolute, clean path on the target ("" with no Alias).
	Path string
}

// isAliasDir reports whether loc is the top of an alias ("/ALIAS"): it is
// the target's "/", but to the agent it is an entry of the read-only
// virtual root.
func (loc location) isAliasDir() bool {
	return loc.Alias != "" && loc.Path == "/"
}

// checkPath refuses what no sane client sends and some targets would
// misread: NUL (which ends a C string early, so the target would act on a
// shorter path than the one decided; OpenSSH's sftp-server ends the session
// on one), other control bytes (which forge lines in logs and approval
// pages), and paths longer than MaxPathLen.
func checkPath(p string) error {
	if len(p) > MaxPathLen {
		return fmt.Errorf("sftpgate: path longer than %d bytes", MaxPathLen)
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; c < 0x20 || c == 0x7f {
			return fmt.Errorf("sftpgate: path contains control byte %#02x at offset %d", c, i)
		}
	}
	return nil
}

// mapPath maps a path of the virtual root to the location it means. A
// relative path starts at "/", the virtual root's start directory.
//
// The path is cleaned as a whole, in the agent's view, before it is split
// into alias and target path, so ".." can never climb out of an alias:
// "/web/../other/x" is "/other/x" on alias "other", and that is what the
// Decider sees and the target is sent.
//
// mapPath is pure: same input, same output.
func mapPath(p string) (location, error) {
	if err := checkPath(p); err != nil {
		return location{}, err
	}
	p = path.Clean("/" + p)
	if len(p) > MaxPathLen {
		return location{}, fmt.Errorf("sftpgate: path longer than %d bytes", MaxPathLen)
	}
	if p == "/" {
		return location{}, nil
	}
	alias, rest, _ := strings.Cut(p[1:], "/")
	return location{Alias: alias, Path: "/" + rest}, nil
}

// virtualPath is the inverse of mapPath: the path in the agent's view of a
// path on loc's target.
func virtualPath(loc location) string {
	switch {
	case loc.Alias == "":
		return "/"
	case loc.Path == "/" || loc.Path == "":
		return "/" + loc.Alias
	default:
		return "/" + loc.Alias + loc.Path
	}
}

// mapLinkTarget maps the target of a new symbolic link on alias to what the
// link should hold on the target. A relative target is kept as sent: the
// target's kernel resolves it from the link's directory, on the target, so
// it cannot reach another alias whatever its "..". An absolute target is
// mapped like any path and must lie on the link's own alias: a link on one
// target cannot point at another.
func mapLinkTarget(alias, target string) (string, error) {
	if err := checkPath(target); err != nil {
		return "", err
	}
	if target == "" {
		return "", fmt.Errorf("sftpgate: empty symlink target")
	}
	if !path.IsAbs(target) {
		return target, nil
	}
	loc, err := mapPath(target)
	if err != nil {
		return "", err
	}
	if loc.Alias != alias {
		return "", fmt.Errorf("sftpgate: a symlink on %s cannot point at %s", alias, target)
	}
	return loc.Path, nil
}

// agentLinkTarget is how a symbolic link's content on alias's target reads
// in the virtual root: an absolute content is moved under "/ALIAS" so that
// the agent can follow it; a relative one is as stored.
func agentLinkTarget(alias, content string) string {
	if !path.IsAbs(content) {
		return content
	}
	return virtualPath(location{Alias: alias, Path: path.Clean(content)})
}

// VirtualPath is where path p on alias's target lies in the virtual root
// ("/ALIAS/p"), for a message to the agent that names a path of an Op in
// its own view. A relative p (a symbolic link's content) is returned as
// it is: the target resolves it from the link's directory.
func VirtualPath(alias, p string) string {
	if !path.IsAbs(p) {
		return p
	}
	return virtualPath(location{Alias: alias, Path: path.Clean(p)})
}
