// Package shellclass decides which class an exec command string is: read,
// write or destructive. It reads the string the way the target's shell will
// (mvdan.cc/sh parses it; the whole tree is walked, nested shell strings
// included) and, when it cannot be sure, fails toward the higher class: a read
// that can write, or a write that can destroy, is a security bug, while the
// other way round is only an annoyance.
//
// The rules are ../shared/spec/classification.md. The command tables
// (read allowlist, destructive commands, wrappers, interpreters) are plain
// data in tables_*.go so that a reviewer can check them without reading the
// walker. The package is pure: no I/O, no package-level mutable state, and
// Classify is safe for concurrent use.
package shellclass
