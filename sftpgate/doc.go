// Package sftpgate serves the sftp subsystem on an agent's session as a
// packet-level proxy: it reads each SFTP packet from the agent, classifies
// it (read, write, destructive as docs/sftp.md says), asks the caller's
// Decider (policy, which may wait for an admin), and forwards that packet to
// the target as it is, and the target's answer back as it is. Nothing is
// buffered or re-marshalled: every write is acknowledged by the target's own
// status, in the order the agent sent it.
//
// Two views: one target's own tree (`sftp ALIAS@bastion`), a pass-through
// to one upstream session apart from decisions; or a virtual root listing
// one directory per alias the agent holds a grant for (`sftp bastion`),
// where the gate keeps one upstream session per alias, maps paths and
// handles between the agent's view and each target's, answers "/" itself,
// and carries out a copy-data between two aliases, which no target can.
package sftpgate
