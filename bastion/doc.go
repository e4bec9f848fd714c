// Package bastion is the SSH server agents talk to. It authenticates an
// agent by its registered public key (identity is taken only after the
// signature is verified), routes each session to a connection by the SSH
// user name or the first word of the command, classifies the command with
// shellclass, decides with policy (waiting for an admin on ask), and relays
// allowed work over a pooled upstream SSH connection that uses the sealed
// key, which the agent never sees. Every outcome is audited.
//
// Files by concern:
//
//   - server.go: the listener, the handshake and authentication, the
//     Server's life (Serve, Shutdown), channels and global requests.
//   - admission.go: which unauthenticated connections may run their
//     handshake, so that a flood cannot keep agents out.
//   - negotiate.go: postern's pick of the agent leg's cipher from the
//     client's KEXINIT, and the algorithm orders of both legs.
//   - ratelimit.go: the per-agent command rate and the slow-down after
//     repeated denials.
//   - session.go: session channel requests, routing, classification and the
//     decision.
//   - exec.go: an exec or shell session in named phases (admit, route,
//     classify, decide, relay), each ending the session itself when it
//     refuses.
//   - openahead.go: the upstream channel opened while the policy decides,
//     which runs nothing unless the decision allows.
//   - relay.go: the byte-exact channel relay between agent and target.
//   - record.go: a recorded session's output (connections whose Record
//     setting covers it), kept as the relay passes it on and stored
//     sealed with the operation's audit seq.
//   - requests.go: the payloads of session channel requests, parsed and
//     built.
//   - sftp.go: the sftp subsystem, sftpgate with the policy as its Decider,
//     auditing each operation with the target's status.
//   - upstream.go: the per-connection pool of upstream SSH clients.
//   - batchconn.go: the upstream connection's writes joined into one
//     system call while the previous one is in the kernel.
//   - locks.go: the registry of live sessions, and the watch that ends
//     those a lock, a disabled or a removed agent forbids.
//   - errors.go: ErrServerClosed.
package bastion
