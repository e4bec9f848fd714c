package shellclass

import (
	"fmt"
	"strings"
)

// Class orders what an operation can do: Read < Write < Destructive. The zero
// value is Read, so a fresh accumulator starts at the bottom and only rises.
type Class uint8

const (
	// Read provably changes nothing.
	Read Class = iota
	// Write is anything not provably read and not destructive; the default.
	Write
	// Destructive removes or irreversibly destroys data, or ends running work.
	Destructive
)

// String returns "read", "write" or "destructive".
func (c Class) String() string {
	switch c {
	case Read:
		return "read"
	case Write:
		return "write"
	case Destructive:
		return "destructive"
	}
	return fmt.Sprintf("Class(%d)", uint8(c))
}

// MarshalText encodes the class as its name, for JSON and logs.
func (c Class) MarshalText() ([]byte, error) {
	if c > Destructive {
		return nil, fmt.Errorf("shellclass: invalid class %d", uint8(c))
	}
	return []byte(c.String()), nil
}

// UnmarshalText accepts the names String returns.
func (c *Class) UnmarshalText(b []byte) error {
	v, err := ParseClass(string(b))
	if err != nil {
		return err
	}
	*c = v
	return nil
}

// ParseClass parses "read", "write" or "destructive" (case-insensitive).
func ParseClass(s string) (Class, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "read":
		return Read, nil
	case "write":
		return Write, nil
	case "destructive":
		return Destructive, nil
	}
	return Read, fmt.Errorf("shellclass: unknown class %q (want read, write or destructive)", s)
}

// Reason explains one part of the command that raised the class.
type Reason struct {
	// Span is the text of the part, as written in the string that was parsed
	// (for a nested sh -c or eval string, the nested text).
	Span string `json:"span"`
	// Offset is the byte offset in the top-level command of the span, or of
	// the top-level word that carried the nested string the span is in.
	Offset int `json:"offset"`
	// Class is the class this part raised the command to.
	Class Class `json:"class"`
	// Why says in plain words why, for the admin deciding an approval and the
	// agent reading a denial.
	Why string `json:"why"`
}

// Result is the class of a whole command string and the parts that set it.
type Result struct {
	Class Class `json:"class"`
	// Reasons holds the parts whose class equals Class, in source order. It is
	// empty for a read result: nothing raised it.
	Reasons []Reason `json:"reasons"`
	// Unreviewable is set when the classifier refused the string without
	// reading it whole: a NUL byte, longer than MaxLength, nested deeper
	// than MaxDepth, more re-parsing than the work limit allows, or a
	// failure of the classifier itself. Class is then Destructive, and
	// nobody could review the command either: the bastion denies it
	// instead of asking a person.
	Unreviewable bool `json:"unreviewable,omitempty"`
}

// Dialect is the shell that will run the string on the target.
type Dialect uint8

const (
	// Bash is the default: sshd runs `$SHELL -c STRING` and most targets'
	// login shell is bash.
	Bash Dialect = iota
	// POSIX is a plain POSIX sh (dash, ash, BusyBox).
	POSIX
	// None is a target without a shell (network gear, git hosting): the
	// string is not shell code, nothing in it is read by the built-in
	// rules, and only a recipe's exact read commands make it read.
	None
)

// String returns "bash", "posix" or "none".
func (d Dialect) String() string {
	switch d {
	case POSIX:
		return "posix"
	case None:
		return "none"
	}
	return "bash"
}

// ParseDialect parses "bash" or "posix" ("sh", "dash" and "ash" are posix).
func ParseDialect(s string) (Dialect, error) {
	switch strings.ToLower(s) {
	case "bash", "":
		return Bash, nil
	case "posix", "sh", "dash", "ash":
		return POSIX, nil
	case "none":
		return None, nil
	}
	return Bash, fmt.Errorf("shellclass: unknown shell dialect %q (want bash, posix or none)", s)
}

// Defaults for Options fields left zero.
const (
	// DefaultMaxLength bounds the command string: an agent has no need for a
	// longer one and the work per byte stays bounded.
	DefaultMaxLength = 64 << 10
	// DefaultMaxDepth bounds nesting: substitutions, subshells, blocks and
	// strings re-parsed for eval, sh -c, aliases and the like each count one.
	DefaultMaxDepth = 48
)

// Hook lets a recipe adjust classification for one kind of target
// (docs/classification.md, Recipes). A hook can never lower a destructive command, and never
// make anything destructive: Classify clamps what it says.
type Hook interface {
	// ExactRead reports whether argv, the literal words of a command string
	// that is exactly one simple command, is one of the target's exact read
	// commands (such as `show version` on network gear). It is asked only when
	// the whole string is unambiguous: one command, every word literal, no
	// redirection, assignment or substitution, and not destructive.
	ExactRead(argv []string) bool
	// Raise is asked about every simple command whose words are all literal,
	// after wrappers are peeled. Returning ok raises that command to Write
	// with the given reason.
	Raise(argv []string) (why string, ok bool)
}

// Options tune one classification. The zero value is bash with the default
// limits and no hook.
type Options struct {
	Dialect   Dialect
	MaxLength int // bytes; DefaultMaxLength if zero
	MaxDepth  int // nesting levels; DefaultMaxDepth if zero
	Hook      Hook
	// Terminal is set when the session has a pty. Tools that page or
	// prompt only on a terminal (systemctl status, journalctl, git log,
	// dmesg -H) then need their --no-pager option to be read: a pager
	// runs commands (less's !cmd). Without a terminal they print and
	// exit.
	Terminal bool
}

func (o Options) maxLength() int {
	if o.MaxLength <= 0 {
		return DefaultMaxLength
	}
	return o.MaxLength
}

func (o Options) maxDepth() int {
	if o.MaxDepth <= 0 {
		return DefaultMaxDepth
	}
	return o.MaxDepth
}
