package bastion

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ssh"
)

// Bounds of the relay's waits.
const (
	// relayTeardownWait bounds how long relay waits, after it has closed
	// the channels, for the peers to acknowledge the close so that its
	// goroutines end. Honest peers answer at once; one that never answers
	// must not hold the session, and its goroutines end when its connection
	// does.
	relayTeardownWait = 5 * time.Second

	// relayBufferSize is the copy buffer of each direction: the largest
	// SSH data packet x/crypto sends (maxPacket), so one read fills one
	// packet.
	relayBufferSize = 32 << 10

	// relayGoneWait bounds how long relay waits, after the agent went away
	// mid-command and relay closed the upstream channel, for the target to
	// report how the command ended. sshd reports it after the close: the
	// command's pipes are closed, so it ends at its next write (SIGPIPE),
	// or at once by SIGHUP when it has a pty. One that neither writes nor
	// has a pty runs on, as it would after a direct client left; its end is
	// not waited for.
	relayGoneWait = 5 * time.Second
)

// upstreamStart is what startUpstream replays on a fresh upstream session
// channel: the agent's allowlisted environment, its pty request and its
// command.
type upstreamStart struct {
	Env     []envVar // allowlisted only; startUpstream drops any other name again
	PtyReq  []byte   // raw pty-req payload to replay, or nil
	Command string   // exec command; "" means "shell"
}

// startUpstream replays env and pty-req on up, then sends exec (or shell)
// with WantReply, and returns an error if the target refuses.
//
// env and pty-req go without WantReply, as OpenSSH's client sends them: the
// target handles a channel's requests in order, so the one round trip of the
// exec reply covers them all, and a target that cannot allocate a pty runs
// the command without one, as it would for a direct OpenSSH client.
//
// On error the caller closes up and drains its requests until they close:
// the upstream connection is pooled, and an unread request channel would
// block every session on it.
func startUpstream(up ssh.Channel, st upstreamStart) error {
	for _, e := range st.Env {
		// The caller filters already; checking again keeps a slip there
		// from reaching a target.
		if !envAllowed(e.Name) {
			continue
		}
		if _, err := up.SendRequest("env", false, ssh.Marshal(e)); err != nil {
			return fmt.Errorf("bastion: send env %s to target: %w", e.Name, err)
		}
	}
	if st.PtyReq != nil {
		if _, _, err := parsePtyReq(st.PtyReq); err != nil {
			return err
		}
		if _, err := up.SendRequest("pty-req", false, st.PtyReq); err != nil {
			return fmt.Errorf("bastion: send pty-req to target: %w", err)
		}
	}
	name, payload := "shell", []byte(nil)
	if st.Command != "" {
		name, payload = "exec", ssh.Marshal(execRequest{Command: st.Command})
	}
	ok, err := up.SendRequest(name, true, payload)
	if err != nil {
		return fmt.Errorf("bastion: send %s to target: %w", name, err)
	}
	if !ok {
		return fmt.Errorf("bastion: target refused %s", name)
	}
	return nil
}

// relayResult is how a relayed session ended.
type relayResult struct {
	ExitStatus *uint32 // nil if none (e.g. exit-signal)
	ExitSignal string  // signal name without SIG, "" if none
	// BytesIn is agent→target (stdin), BytesOut target→agent (stdout and
	// stderr), as written to the other side.
	BytesIn, BytesOut int64
	// EOW is set when the agent's client said it no longer writes the
	// command's output (eow@openssh.com: `| head -1` has exited) and relay
	// passed that on to the target.
	EOW bool
	// AgentGone is set when the agent closed the session channel or lost
	// its connection before the target's command ended. relay then closed
	// the upstream channel, as the target sees a direct client go, and
	// waited up to relayGoneWait for the command's end: ExitStatus or
	// ExitSignal if the target reported it, else Err. The agent is told
	// nothing; it is gone.
	AgentGone bool
	// Err is set when the session did not end with an exit status or
	// signal from the target: the target was lost, ctx ended, or the agent
	// went away and the target reported no end. Unless AgentGone, down is
	// then still open for the caller.
	Err error
}

// exitRequest is an exit-status or exit-signal request from the target,
// kept to be forwarded to the agent after the last byte of output.
type exitRequest struct {
	name    string
	payload []byte
}

// relay copies stdin (down→up) and stdout/stderr (up→down) byte-exactly until
// the upstream session ends; forwards window-change, signal and
// eow@openssh.com requests down→up; forwards exit-status and exit-signal
// up→down; bounded by ctx.
//
// What the agent does to its side reaches the target as it would from a
// direct client: EOF on stdin is sent on as EOF; eow@openssh.com (OpenSSH's
// client sends it when writing the output failed, `ssh bastion web yes |
// head -1`) is sent on, so that sshd closes the command's stdout and the
// command ends by SIGPIPE at its next write; and when the agent closes the
// channel or its connection ends, relay closes the upstream channel, so that
// sshd closes the command's pipes or hangs up its pty, as it does when a
// direct client goes.
//
// The contract with the caller:
//
//   - relay owns down's reads and downReqs, and up and upReqs, from the call
//     on. It answers false to agent requests other than those it forwards,
//     and drains both request channels until they close, so that neither
//     SSH connection's demultiplexer ever blocks on them (the upstream
//     connection is pooled and carries other sessions). downReqs closing
//     is how relay learns that the agent's channel is gone.
//   - When the target ends the session with exit-status or exit-signal,
//     relay waits until stdout and stderr have both been copied to the end
//     (output that OpenSSH sends after the exit status included), then sends
//     the agent the exit request(s) as received, then EOF, then close: the
//     frame order OpenSSH's client and tailscale's frameorder test expect.
//     It closes up and waits, at most relayTeardownWait, for both peers to
//     acknowledge; every goroutine it started has then ended (a peer that
//     never acknowledges keeps them until its connection closes). Err is
//     nil.
//   - When the agent goes away first (its channel closes, or a write to it
//     fails), relay closes up at once and waits at most relayGoneWait for
//     the target's exit-status or exit-signal, which it records but cannot
//     forward; AgentGone is set, and Err unless the end was reported. down
//     is closed already; the caller has nothing to tell the agent.
//   - Otherwise (the target closed the session or was lost without an exit
//     status, or ctx ended) relay closes up and returns Err with down still
//     open: the caller writes the reason to down.Stderr(), sends exit-status
//     255 and closes down. The goroutines reading down's stdin and requests
//     are still running then; they end when down closes, which is why the
//     caller must close it.
//
// relay never closes down's stdin side early: an agent that never sends EOF
// does not hold the session once the target's command has exited, because
// the end is decided by the target's side alone (ssh.Session's Wait hangs on
// exactly that).
//
// beforeExit, when not nil, is called with the result so far (exit status
// and byte counts) after the target's command ended and before the agent is
// told: the caller records the outcome there, so that an agent that saw its
// command end finds it in the audit log even if postern dies the next
// instant. It is not called when the agent has gone away.
func relay(ctx context.Context, down ssh.Channel, downReqs <-chan *ssh.Request, up ssh.Channel, upReqs <-chan *ssh.Request, beforeExit func(relayResult)) relayResult {
	var bytesIn, bytesOut atomic.Int64

	// Agent → target: stdin, then EOF; window-change, signal and eow
	// requests. x/crypto reads EOF both when the agent sends EOF and when
	// its channel closes; in the second case the close follows at once.
	stdinDone := make(chan struct{})
	go func() {
		defer close(stdinDone)
		buf := make([]byte, relayBufferSize)
		if _, err := io.CopyBuffer(countingWriter{up, &bytesIn}, down, buf); err == nil {
			// The agent sent EOF. An error here means the target's side is
			// already closed, which the main loop learns from upReqs.
			_ = up.CloseWrite()
		}
	}()
	var eowSent atomic.Bool
	agentReqsDone := make(chan struct{})
	go func() {
		defer close(agentReqsDone)
		forwardAgentRequests(downReqs, up, &eowSent)
	}()

	// Target → agent: stdout and stderr, concurrently, so that an unread
	// stderr never stalls stdout at the channel window (and vice versa).
	outErrs := make(chan error, 2)
	stdoutDone := make(chan struct{})
	go func() {
		defer close(stdoutDone)
		outErrs <- copyOutput(countingWriter{down, &bytesOut}, up)
	}()
	stderrDone := make(chan struct{})
	go func() {
		defer close(stderrDone)
		outErrs <- copyOutput(countingWriter{down.Stderr(), &bytesOut}, up.Stderr())
	}()

	var (
		res        relayResult
		exits      []exitRequest
		outputsEnd int              // output streams copied to their end (or cut off)
		reqs       = upReqs         // nil once closed, so select skips it
		agentReqs  = agentReqsDone  // nil once the agent is gone
		goneTimer  *time.Timer      // runs once the agent is gone
		goneWait   <-chan time.Time // goneTimer's channel, nil before
	)
	agentGone := func() {
		if res.AgentGone {
			return
		}
		if agentReqs != nil {
			// What the agent sent before its channel closed reaches the
			// target first, in the agent's order, as it would reach sshd
			// from a direct client: a ControlMaster whose client died
			// sends eow@openssh.com and then closes the channel. The
			// agent's requests end with its channel.
			wait := time.NewTimer(relayGoneWait)
			select {
			case <-agentReqsDone:
			case <-wait.C:
			}
			wait.Stop()
		}
		res.AgentGone, agentReqs = true, nil
		// What sshd sees when a direct client goes: the session channel
		// closes. It closes the command's pipes (or hangs up its pty) and
		// still reports the command's end, which is worth waiting for.
		_ = up.Close()
		goneTimer = time.NewTimer(relayGoneWait)
		goneWait = goneTimer.C
	}
	defer func() {
		if goneTimer != nil {
			goneTimer.Stop()
		}
	}()
	ended := func() bool {
		if res.AgentGone {
			return len(exits) > 0 || reqs == nil
		}
		return outputsEnd == 2 && (len(exits) > 0 || reqs == nil)
	}
loop:
	for !ended() {
		select {
		case req, ok := <-reqs:
			if !ok {
				reqs = nil
				continue
			}
			if ex, ok := exitFromTarget(req, &res); ok {
				exits = append(exits, ex)
				continue
			}
			if req.Type == "eow@openssh.com" && !res.AgentGone {
				// sshd's "end of write": the command no longer reads
				// stdin. Passing it on lets the agent's client stop sending.
				if _, err := down.SendRequest(req.Type, false, req.Payload); err != nil {
					agentGone()
				}
				continue
			}
			refuse(req)
		case err := <-outErrs:
			// A command may close its stdout and stderr and run on
			// (`exec >/dev/null 2>&1; sleep 60; exit 3`), so the end of
			// output is not the end of the session: wait for the exit
			// status. The wait is bounded by the upstream connection's
			// keepalives, which close a dead client and with it upReqs.
			outputsEnd++
			if err != nil {
				// Only a write to the agent fails: its channel is closed.
				agentGone()
			}
		case <-agentReqs:
			agentGone()
		case <-goneWait:
			break loop
		case <-ctx.Done():
			res.Err = fmt.Errorf("bastion: relay stopped: %w", ctx.Err())
			break loop
		}
	}
	res.EOW = eowSent.Load()
	switch {
	case res.Err != nil || len(exits) > 0:
	case res.AgentGone && reqs == nil:
		res.Err = errors.New("bastion: the agent went away while the command ran; the target closed the session without reporting the command's end")
	case res.AgentGone:
		res.Err = fmt.Errorf("bastion: the agent went away while the command ran; the target did not report the command's end within %v", relayGoneWait)
	default:
		res.Err = errors.New("bastion: target ended the session without an exit status (connection lost?)")
	}

	// The agent is told first: it should not wait for postern's cleanup
	// of the target's side.
	if res.Err == nil && !res.AgentGone {
		if beforeExit != nil {
			early := res
			early.BytesIn, early.BytesOut = bytesIn.Load(), bytesOut.Load()
			beforeExit(early)
		}
		for _, ex := range exits {
			// An agent that has gone away cannot be told; its goroutines
			// end with its connection, and the outcome stands.
			if _, err := down.SendRequest(ex.name, false, ex.payload); err != nil {
				break
			}
		}
		_ = down.CloseWrite()
		_ = down.Close()
	}

	// Whatever happened, this session's upstream channel is finished.
	// Closing it ends the target's side and, once the target answers, the
	// output copies, the stdin copy's writes and the request forwarding.
	// An error means it was closed already.
	_ = up.Close()
	upReqsDone := make(chan struct{})
	go func() {
		defer close(upReqsDone)
		if reqs == nil {
			return
		}
		for req := range reqs {
			refuse(req)
		}
	}()

	deadline := time.NewTimer(relayTeardownWait)
	defer deadline.Stop()
	switch {
	case res.Err == nil:
		waitAll(ctx, deadline.C, stdoutDone, stderrDone, upReqsDone, stdinDone, agentReqsDone)
	case res.AgentGone:
		// The agent's side is gone, so its goroutines end now. The target
		// has not closed its side (the command runs on, as after a direct
		// client left): the copies from it end when it does, or with the
		// upstream connection.
		waitAll(ctx, deadline.C, stdinDone, agentReqsDone)
	default:
		// down stays open for the caller, so the goroutines reading it
		// cannot end yet; those on the target's side can.
		waitAll(ctx, deadline.C, stdoutDone, stderrDone, upReqsDone)
	}
	res.BytesIn, res.BytesOut = bytesIn.Load(), bytesOut.Load()
	return res
}

// exitFromTarget recognises an exit-status or exit-signal request from the
// target, records it in res and returns it for forwarding. Only the first of
// each kind counts; a malformed one is refused like any unknown request.
func exitFromTarget(req *ssh.Request, res *relayResult) (exitRequest, bool) {
	switch req.Type {
	case "exit-status":
		st, err := parseExitStatus(req.Payload)
		if err != nil || res.ExitStatus != nil {
			return exitRequest{}, false
		}
		res.ExitStatus = &st
	case "exit-signal":
		sig, err := parseExitSignal(req.Payload)
		if err != nil || res.ExitSignal != "" || sig.Signal == "" {
			return exitRequest{}, false
		}
		res.ExitSignal = sig.Signal
	default:
		return exitRequest{}, false
	}
	if req.WantReply {
		// RFC 4254 sends both without a reply; a target asking for one gets
		// true, as OpenSSH's client would answer.
		_ = req.Reply(true, nil)
	}
	return exitRequest{name: req.Type, payload: append([]byte(nil), req.Payload...)}, true
}

// forwardAgentRequests passes the agent's window-change, signal and
// eow@openssh.com requests on to the target, as sent (a reply only if the
// agent wants one, and then the target's), and refuses everything else,
// until reqs closes. It sets eowSent once an eow has reached the target. It
// must drain reqs to the end: an unread request channel blocks the agent's
// whole connection.
func forwardAgentRequests(reqs <-chan *ssh.Request, up ssh.Channel, eowSent *atomic.Bool) {
	for req := range reqs {
		var err error
		switch req.Type {
		case "window-change":
			_, err = parseWindowChange(req.Payload)
		case "signal":
			_, err = parseSignal(req.Payload)
		case "eow@openssh.com":
			// OpenSSH's client sends it, without a reply, when writing the
			// command's output failed (its reader exited). sshd then
			// closes the command's stdout, which ends `yes` and `tail -f`
			// by SIGPIPE; refused, they ran until killed.
			err = parseEOW(req.Payload)
		default:
			err = fmt.Errorf("bastion: %s not allowed during a session", req.Type)
		}
		if err != nil {
			refuse(req)
			continue
		}
		ok, err := up.SendRequest(req.Type, req.WantReply, req.Payload)
		if err == nil && req.Type == "eow@openssh.com" {
			eowSent.Store(true)
		}
		if req.WantReply {
			// A failed reply means the agent's channel is closing, which
			// ends this loop when reqs closes.
			_ = req.Reply(ok && err == nil, nil)
		}
	}
}

// refuse answers false to a request that wants a reply. A failed reply means
// the channel is closing; the relay learns that from its reads.
func refuse(req *ssh.Request) {
	if req.WantReply {
		_ = req.Reply(false, nil)
	}
}

// copyOutput copies one of the target's output streams to the agent until
// the target's EOF. Only a failed write is an error: reads from an SSH
// channel end with io.EOF both on EOF and when the channel or its connection
// closes, and which of those it was is told by the exit status that does or
// does not arrive.
func copyOutput(dst io.Writer, src io.Reader) error {
	buf := make([]byte, relayBufferSize)
	for {
		n, rerr := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return fmt.Errorf("bastion: write to agent: %w", werr)
			}
		}
		if rerr != nil {
			return nil
		}
	}
}

// countingWriter counts the bytes written through it into n.
type countingWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	return n, err
}

// waitAll waits until every done channel is closed, ctx ends or timeout
// fires, whichever is first.
func waitAll(ctx context.Context, timeout <-chan time.Time, done ...<-chan struct{}) {
	for _, d := range done {
		select {
		case <-d:
		case <-timeout:
			return
		case <-ctx.Done():
			return
		}
	}
}
