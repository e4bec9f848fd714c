// Package sftpgate serves the sftp subsystem on an agent's session: every
// SFTP operation is classified (read, write, destructive as design.md §2
// says), decided by the caller's Decider (policy, which may wait for an
// admin), and relayed to the target over an upstream SFTP client the caller
// dials. Two views: a virtual root listing one directory per alias the agent
// holds a grant for (`sftp bastion`), or one target's own tree starting in
// its user's home (`sftp ALIAS@bastion`).
package sftpgate
