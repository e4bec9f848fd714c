package bastion

import (
	"bytes"
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
	// waited up to its waits.gone for the command's end: ExitStatus or
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

// relayWaits are the relay's bounds on its peers: relayTeardownWait and
// relayGoneWait in a Server. A test that must not trip one (a busy machine
// can delay any peer past a few seconds) sets it from its own deadline; a
// test of the bound sets it short.
type relayWaits struct {
	teardown time.Duration // relayTeardownWait
	gone     time.Duration // relayGoneWait
}

// relay copies stdin (down→up) and stdout/stderr (up→down) byte-exactly until
// the upstream session ends; forwards window-change, signal and
// eow@openssh.com requests down→up; forwards exit-status and exit-signal
// up→down. Its fields up to waits are the caller's; run does the work, once.
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
//     of run on. It answers false to agent requests other than those it
//     forwards, and drains both request channels until they close, so that
//     neither SSH connection's demultiplexer ever blocks on them (the
//     upstream connection is pooled and carries other sessions). downReqs
//     closing is how relay learns that the agent's channel is gone.
//   - When the target ends the session with exit-status or exit-signal,
//     relay waits until stdout and stderr have both been copied to the end
//     (output that OpenSSH sends after the exit status included), then sends
//     the agent the exit request(s) as received, then EOF, then close: the
//     frame order OpenSSH's client and tailscale's frameorder test expect.
//     It closes up and waits, at most waits.teardown, for both peers to
//     acknowledge; every goroutine it started has then ended (a peer that
//     never acknowledges keeps them until its connection closes). Err is
//     nil.
//   - When the agent goes away first (its channel closes, or a write to it
//     fails), relay closes up at once and waits at most waits.gone for the
//     target's exit-status or exit-signal, which it records but cannot
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
type relay struct {
	down     ssh.Channel
	downReqs <-chan *ssh.Request
	up       ssh.Channel
	upReqs   <-chan *ssh.Request
	// beforeExit, when not nil, is called with the result so far (exit
	// status and byte counts) after the target's command ended and before
	// the agent is told: the caller records the outcome there, so that an
	// agent that saw its command end finds it in the audit log even if
	// postern dies the next instant. It is not called when the agent has
	// gone away.
	beforeExit func(relayResult)
	waits      relayWaits
	// rec, when not nil, keeps the output the agent was sent (record.go).
	rec *recorder
	// stdinPrefix is sent to the target before the agent's stdin: a
	// script the session read from it already (script.go).
	stdinPrefix []byte

	// Written by the copying goroutines.
	bytesIn, bytesOut atomic.Int64
	eowSent           atomic.Bool
	outErrs           chan error // each output copy's end: nil, or a failed write to the agent

	// Closed as each goroutine ends.
	stdinDone, agentReqsDone, stdoutDone, stderrDone chan struct{}

	// The rest belongs to run's goroutine.
	res        relayResult
	exits      []exitRequest
	outputsEnd int                 // output streams copied to their end (or cut off)
	reqs       <-chan *ssh.Request // upReqs; nil once closed, so select skips it
	agentReqs  <-chan struct{}     // agentReqsDone; nil once the agent is gone
	goneTimer  *time.Timer         // runs once the agent is gone; nil before
}

// run relays until the session ends or ctx does, and reports how it ended.
func (r *relay) run(ctx context.Context) relayResult {
	r.start()
	defer func() {
		if r.goneTimer != nil {
			r.goneTimer.Stop()
		}
	}()
	r.loop(ctx)
	r.conclude()
	r.tellAgent()
	r.teardown(ctx)
	r.res.BytesIn, r.res.BytesOut = r.bytesIn.Load(), r.bytesOut.Load()
	return r.res
}

// start runs the copies and the forwarding of the agent's requests, each
// on a goroutine of its own.
func (r *relay) start() {
	r.reqs = r.upReqs
	r.outErrs = make(chan error, 2)
	r.stdinDone, r.agentReqsDone = make(chan struct{}), make(chan struct{})
	r.stdoutDone, r.stderrDone = make(chan struct{}), make(chan struct{})
	r.agentReqs = r.agentReqsDone

	// Agent → target: stdin, then EOF; window-change, signal and eow
	// requests. x/crypto reads EOF both when the agent sends EOF and when
	// its channel closes; in the second case the close follows at once.
	go func() {
		defer close(r.stdinDone)
		buf := make([]byte, relayBufferSize)
		var in io.Reader = r.down
		if r.stdinPrefix != nil {
			in = io.MultiReader(bytes.NewReader(r.stdinPrefix), r.down)
		}
		if _, err := io.CopyBuffer(countingWriter{r.up, &r.bytesIn}, in, buf); err == nil {
			// The agent sent EOF. An error here means the target's side is
			// already closed, which the main loop learns from upReqs.
			_ = r.up.CloseWrite()
		}
	}()
	go func() {
		defer close(r.agentReqsDone)
		forwardAgentRequests(r.downReqs, r.up, &r.eowSent)
	}()

	// Target → agent: stdout and stderr, concurrently, so that an unread
	// stderr never stalls stdout at the channel window (and vice versa).
	var stdout, stderr io.Writer = countingWriter{r.down, &r.bytesOut}, countingWriter{r.down.Stderr(), &r.bytesOut}
	if r.rec != nil {
		stdout, stderr = r.rec.stdout(stdout), r.rec.stderr(stderr)
	}
	go func() {
		defer close(r.stdoutDone)
		r.outErrs <- copyOutput(stdout, r.up)
	}()
	go func() {
		defer close(r.stderrDone)
		r.outErrs <- copyOutput(stderr, r.up.Stderr())
	}()
}

// loop handles the target's requests and the ends of the copies until the
// session has ended, the agent's absence has been waited out, or ctx ends.
func (r *relay) loop(ctx context.Context) {
	for !r.ended() {
		var goneWait <-chan time.Time
		if r.goneTimer != nil {
			goneWait = r.goneTimer.C
		}
		select {
		case req, ok := <-r.reqs:
			if !ok {
				r.reqs = nil
				continue
			}
			if ex, ok := exitFromTarget(req, &r.res); ok {
				r.exits = append(r.exits, ex)
				continue
			}
			if req.Type == "eow@openssh.com" && !r.res.AgentGone {
				// sshd's "end of write": the command no longer reads
				// stdin. Passing it on lets the agent's client stop sending.
				if _, err := r.down.SendRequest(req.Type, false, req.Payload); err != nil {
					r.agentGone()
				}
				continue
			}
			refuse(req)
		case err := <-r.outErrs:
			// A command may close its stdout and stderr and run on
			// (`exec >/dev/null 2>&1; sleep 60; exit 3`), so the end of
			// output is not the end of the session: wait for the exit
			// status. The wait is bounded by the upstream connection's
			// keepalives, which close a dead client and with it upReqs.
			r.outputsEnd++
			if err != nil {
				// Only a write to the agent fails: its channel is closed.
				r.agentGone()
			}
		case <-r.agentReqs:
			r.agentGone()
		case <-goneWait:
			return
		case <-ctx.Done():
			r.res.Err = fmt.Errorf("bastion: relay stopped: %w", ctx.Err())
			return
		}
	}
}

// ended reports whether the session is over: the target reported the
// command's end (or closed the session) and, while the agent is there, its
// output has been copied to the end.
func (r *relay) ended() bool {
	if r.res.AgentGone {
		return len(r.exits) > 0 || r.reqs == nil
	}
	return r.outputsEnd == 2 && (len(r.exits) > 0 || r.reqs == nil)
}

// agentGone handles the agent's leaving mid-command, once: relay closes
// the upstream channel, as the target sees a direct client go, and starts
// waiting for the command's end.
func (r *relay) agentGone() {
	if r.res.AgentGone {
		return
	}
	if r.agentReqs != nil {
		// What the agent sent before its channel closed reaches the
		// target first, in the agent's order, as it would reach sshd
		// from a direct client: a ControlMaster whose client died
		// sends eow@openssh.com and then closes the channel. The
		// agent's requests end with its channel.
		wait := time.NewTimer(r.waits.gone)
		select {
		case <-r.agentReqsDone:
		case <-wait.C:
		}
		wait.Stop()
	}
	r.res.AgentGone, r.agentReqs = true, nil
	// What sshd sees when a direct client goes: the session channel
	// closes. It closes the command's pipes (or hangs up its pty) and
	// still reports the command's end, which is worth waiting for.
	_ = r.up.Close()
	r.goneTimer = time.NewTimer(r.waits.gone)
}

// conclude sets the result's EOW and, where the session did not end with
// the target's report, its Err.
func (r *relay) conclude() {
	r.res.EOW = r.eowSent.Load()
	switch {
	case r.res.Err != nil || len(r.exits) > 0:
	case r.res.AgentGone && r.reqs == nil:
		r.res.Err = errors.New("bastion: the agent went away while the command ran; the target closed the session without reporting the command's end")
	case r.res.AgentGone:
		r.res.Err = fmt.Errorf("bastion: the agent went away while the command ran; the target did not report the command's end within %v", r.waits.gone)
	default:
		r.res.Err = errors.New("bastion: target ended the session without an exit status (connection lost?)")
	}
}

// tellAgent passes the command's end on to the agent, after beforeExit,
// when the session ended with the target's report and the agent is there.
// The agent is told before postern cleans up the target's side: it should
// not wait for that.
func (r *relay) tellAgent() {
	if r.res.Err != nil || r.res.AgentGone {
		return
	}
	if r.beforeExit != nil {
		early := r.res
		early.BytesIn, early.BytesOut = r.bytesIn.Load(), r.bytesOut.Load()
		r.beforeExit(early)
	}
	for _, ex := range r.exits {
		// An agent that has gone away cannot be told; its goroutines
		// end with its connection, and the outcome stands.
		if _, err := r.down.SendRequest(ex.name, false, ex.payload); err != nil {
			break
		}
	}
	_ = r.down.CloseWrite()
	_ = r.down.Close()
}

// teardown closes the upstream channel, drains the target's requests and
// waits, at most waits.teardown, for the goroutines that can end now.
func (r *relay) teardown(ctx context.Context) {
	// Whatever happened, this session's upstream channel is finished.
	// Closing it ends the target's side and, once the target answers, the
	// output copies, the stdin copy's writes and the request forwarding.
	// An error means it was closed already.
	_ = r.up.Close()
	upReqsDone := make(chan struct{})
	go func(reqs <-chan *ssh.Request) {
		defer close(upReqsDone)
		if reqs == nil {
			return
		}
		for req := range reqs {
			refuse(req)
		}
	}(r.reqs)

	var ends []<-chan struct{}
	switch {
	case r.res.Err == nil:
		ends = []<-chan struct{}{r.stdoutDone, r.stderrDone, upReqsDone, r.stdinDone, r.agentReqsDone}
	case r.res.AgentGone:
		// The agent's side is gone, so its goroutines end now. The target
		// has not closed its side (the command runs on, as after a direct
		// client left): the copies from it end when it does, or with the
		// upstream connection.
		ends = []<-chan struct{}{r.stdinDone, r.agentReqsDone}
	default:
		// down stays open for the caller, so the goroutines reading it
		// cannot end yet; those on the target's side can.
		ends = []<-chan struct{}{r.stdoutDone, r.stderrDone, upReqsDone}
	}
	waitAll(ctx, r.waits.teardown, ends)
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

// waitAll waits until every channel of ends is closed, ctx ends or timeout
// passes, whichever is first.
func waitAll(ctx context.Context, timeout time.Duration, ends []<-chan struct{}) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for _, end := range ends {
		select {
		case <-end:
		case <-deadline.C:
			return
		case <-ctx.Done():
			return
		}
	}
}
