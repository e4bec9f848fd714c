// Package readsandbox builds the commands that run an agent's read command
// on a target with the whole filesystem read-only, and the probe that finds
// which way a target can do it.
//
// The classifier (shellclass) calls a command read when it finds no way for
// it to write; a rule it lacks, or an option of a read program it does not
// know, makes that verdict wrong, and on a connection whose rule is
// write=deny the read verdict was then the only thing between an agent and
// a write. The sandbox is the second line: a read command runs in a mount
// namespace of its own in which every mount is read-only and /dev holds only
// the harmless devices, so that a wrong verdict cannot become a write to a
// file. The user, working directory, environment, network and processes
// stay the target's own, so that reads (ps, ss, journalctl, git log) see
// what they would see directly.
//
// Two mechanisms, most capable first: bubblewrap (bwrap) where it is
// installed, and util-linux's unshare with mount(8) where it is not. Wrap
// builds the command string sent to the target's sshd in place of the
// agent's; Probe and ParseProbe find which mechanism works on a target (run
// `true` in it, and prove that a write inside it fails). What the sandbox
// does not stop, and how a command's output can differ inside it, is in
// docs/read-sandbox.md.
//
// The package is pure: it builds strings and reads probe output. It holds no
// state and imports nothing of postern's.
package readsandbox
