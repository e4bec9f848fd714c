// Package shellclass decides which class an exec command string is: read,
// write or destructive. It reads the string the way the target's shell will
// (mvdan.cc/sh parses it; the whole tree is walked, nested shell strings
// included) and, when it cannot be sure, fails toward the higher class: a read
// that can write, or a write that can destroy, is a security bug, while the
// other way round is only an annoyance.
//
// The rules, the list of places where bash evaluates text as code, and the
// read allowlist with the reason for each accepted option are in
// docs/classification.md. The tables are plain data in tables_*.go, so that
// a reviewer can check them without reading the walker: tables_read.go (the
// read allowlist), tables_destructive.go, tables_wrappers.go,
// tables_builtins.go (shells, interpreters, builtins), tables_tools.go and
// tables_git.go (the option lists of the tools with handlers).
//
// The code that reads them, file by file: class.go (the API's types:
// classes, results and their reasons, dialects, options, recipe hooks),
// prepare.go (a first pass over the string: the variables, arrays,
// aliases and name bindings it makes), classify.go (the walk of the tree,
// redirections and assignments), fds.go (descriptors that /dev/stdout and
// /dev/fd/N open again), devices.go (every path a word may name, device
// files), command.go (one simple command), words.go (a word's value after
// quote removal, when it is known), getopt.go (option tables read the way
// each tool family's parser reads them), builtins.go and shellvars.go (the
// builtins and variables bash evaluates), progvars.go (program-valued
// variables, exported functions, hash -p and BASH_CMDS), destructive.go
// (the destructive table's matches), wrappers.go (commands that run other
// commands), tools.go, tools_git.go, tools_ops.go and tools_progs.go (the
// tools with handlers), interp.go (inline interpreter code), sed.go (sed
// scripts that only print), checks.go (the rules of read entries an option
// table cannot say).
//
// The package is pure: no I/O, no package-level mutable state (the parsed
// option tables are cached once each, read-only after), and Classify is
// safe for concurrent use. Its tests run the read rows of the corpus under
// real bash in a sandbox (bash_test.go), and commands generated from the
// read entries' tables under strace in a read-only sandbox: none may make
// a call that changes state (oracle_test.go).
package shellclass
