// Package bastion is the SSH server agents talk to. It authenticates an
// agent by its registered public key (identity is taken only after the
// signature is verified), routes each session to a connection by the SSH
// user name or the first word of the command, classifies the command with
// shellclass, decides with policy (waiting for an admin on ask), and relays
// allowed work over a pooled upstream SSH connection that uses the sealed
// key, which the agent never sees. Every outcome is audited.
//
// Files by concern: server.go (listener, handshake, auth), negotiate.go
// (postern's pick of the agent leg's cipher from the client's KEXINIT, and
// the algorithm orders of both legs), admission.go
// (which unauthenticated connections may run their handshake, so that a
// flood cannot keep agents out), ratelimit.go (the per-agent command rate
// and the slow-down after repeated denials), session.go (session channel
// requests, routing, decisions), relay.go (the byte-exact channel relay),
// sftp.go (the sftp subsystem: sftpgate with the policy as its Decider,
// auditing each operation with the target's status), upstream.go (the
// per-connection client pool).
package bastion
