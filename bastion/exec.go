package bastion

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
	"golang.org/x/crypto/ssh"
)

// execRun is one exec or shell request on its way through the phases of
// run: admit, route, classify, decide, relay, each of which ends the
// session itself (stderr line, exit status, audit row) when the command
// goes no further, and one cleanup.
type execRun struct {
	s      *Server
	ac     *agentConn
	ch     ssh.Channel
	stderr io.Writer
	st     sessionState
	cmd    string
	shell  bool
	key    string // requestKey: what the repeated-denial streak compares
	start  time.Time

	// held takes the agent's requests off x/crypto's queue at once: left
	// there during an approval wait, more than its 16 slots of them (window
	// changes) would stall every channel of the agent's connection. relay
	// takes them over; cleanup discards them on every other way out.
	held    *heldRequests
	relayed bool

	// Set by route.
	r    route
	conn *store.Connection
	// Set by classify.
	class   policy.Class
	reasons string
	// refusal, when set, is why the command is refused without a decision:
	// nobody can review it (see classifyExec).
	refusal string
	// run is how the command runs on the target: in the read sandbox or
	// not, or refused because the connection requires it (readsandbox.go).
	run readRun
	// Set by decide.
	auth policy.Authorization
	rec  policy.Record
	// ahead is the upstream channel opened while the policy decides, when
	// the grant allows the class (see openAhead); relay takes it, cleanup
	// abandons it on every other way out.
	ahead *openAhead
}

// run routes, classifies, decides and relays one command (or an
// interactive shell), and audits the outcome. It owns ch and closes it.
func (s *Server) run(ac *agentConn, ch ssh.Channel, reqs <-chan *ssh.Request, st sessionState, cmd string, shell bool) {
	x := &execRun{s: s, ac: ac, ch: ch, stderr: ch.Stderr(), st: st, cmd: cmd, shell: shell,
		key: requestKey(ac.user, cmd, shell), start: s.cfg.Now(), held: holdRequests(reqs)}
	defer x.cleanup()
	if !s.admitCommand(ac, ch, policy.Exec, cmd, shell, x.key, x.start) {
		return
	}
	if !x.route() || !x.decide() {
		return
	}
	x.relay()
}

// cleanup releases what the phases that ran did not hand on.
func (x *execRun) cleanup() {
	x.abandonAhead()
	if !x.relayed {
		go discard(x.held.release())
	}
}

func (x *execRun) abandonAhead() {
	if x.ahead != nil {
		x.ahead.abandon()
		x.ahead = nil
	}
}

// record is the audit record of an operation refused before any decision,
// with what postern knows of the agent.
func (x *execRun) record(class policy.Class, reason string) policy.Record {
	return policy.Record{AgentID: x.ac.agentID, AgentName: x.ac.agentName, Class: class, Kind: policy.Exec,
		Outcome: policy.Denied, Reason: reason, Operation: x.cmd, AgentReason: x.st.agentReason, SourceAddr: x.ac.source,
		SessionID: x.ac.session}
}

// route finds the connection: the help listing and an unknown alias end
// here, as does a shell without a terminal, which nobody could review.
func (x *execRun) route() bool {
	s, ac := x.s, x.ac
	r, msg, code, ok, err := s.route(ac, x.cmd, x.shell)
	if err != nil {
		fmt.Fprintf(x.stderr, "postern: cannot read your grants; try again\r\n")
		s.log.Error().Err(err).Str("conn_id", ac.id).Msg("grants")
		exitWith(x.ch, ExitUnreachable)
		return false
	}
	if ok && r.shell && x.st.ptyReq == nil && !x.shell && strings.TrimSpace(x.cmd) == "" {
		// An exec of a blank command to ALIAS@bastion: the target would
		// run `$SHELL -c ''` and read nothing; usage, as it always was.
		r, msg, code, ok = route{}, "postern: no command given for "+r.grant.Alias+": give the command, as in\n  ssh bastion "+r.grant.Alias+" COMMAND\n", ExitUsage, false
	}
	if ok && r.shell && x.st.ptyReq == nil {
		// A shell request without a terminal (`ssh -T alias@bastion <
		// script.sh`): the target's shell would run the script that
		// arrives on stdin. postern reads it to its end first and
		// decides it as a whole, as a command.
		script, err := readScript(x.ch, DefaultMaxScript, DefaultScriptWait)
		if err != nil {
			fmt.Fprintf(x.stderr, "postern: refused: %s\r\n", err.Error())
			s.audit(x.record(policy.Write, err.Error()), x.start)
			exitWith(x.ch, ExitRefused)
			return false
		}
		r.command, r.shell, r.script = script, false, true
		x.cmd = script
	}
	if !ok {
		s.limits.record(ac.agentID, x.key, code != 0)
		if code == 0 {
			_, _ = io.WriteString(x.ch, crlf(msg, x.st.ptyReq != nil))
		} else {
			_, _ = io.WriteString(x.stderr, crlf(msg, x.st.ptyReq != nil))
			// An unknown alias is an outcome too: audit what was asked,
			// under the agent's name, so that its audit trail shows it.
			class, _, _ := s.classifyExec(route{command: x.cmd, shell: x.shell}, nil)
			s.audit(x.record(class, strings.TrimSpace(strings.TrimPrefix(msg, "postern: "))), x.start)
		}
		exitWith(x.ch, code)
		return false
	}
	conn, err := ac.connection(ac.ctx, s.cfg.Store, r.grant.ConnectionID)
	if err != nil {
		fmt.Fprintf(x.stderr, "postern: unknown alias %q\r\n", r.grant.Alias)
		exitWith(x.ch, ExitUsage)
		return false
	}
	r.pty = x.st.ptyReq != nil
	x.r, x.conn = r, conn
	x.st.live.reach(conn.ID)
	return true
}

// decide classifies the command and has the policy decide it, waiting for
// an approval on ask. A connection row kept from an earlier session that
// has changed since is read again, and the command classified and decided
// again, once (a row that changes again meanwhile refuses the command).
func (x *execRun) decide() bool {
	err := x.decideOnce()
	if errors.Is(err, policy.ErrConnectionChanged) {
		x.abandonAhead()
		x.ac.forgetConnection(x.conn.ID)
		if fresh, ferr := x.ac.connection(x.ac.ctx, x.s.cfg.Store, x.conn.ID); ferr == nil {
			x.conn = fresh
			err = x.decideOnce()
		}
	}
	if err != nil {
		x.refused(err)
		return false
	}
	x.s.log.Info().Str("conn_id", x.ac.id).Str("agent_id", x.ac.agentID).Str("alias", x.conn.Alias).
		Str("class", string(x.class)).Str("decision", string(x.auth.Outcome)).Str("read_sandbox", string(x.run.sandbox)).Msg("allowed")
	x.s.limits.record(x.ac.agentID, x.key, false)
	x.rec.Reason = joinReason(x.rec.Reason, x.run.note)
	if x.class == policy.Read {
		x.s.cfg.Metrics.ReadCommand(x.run.sandboxLabel())
	}
	return true
}

// decideOnce classifies with the current connection row and decides.
func (x *execRun) decideOnce() error {
	s := x.s
	x.class, x.reasons, x.refusal = s.classifyExec(x.r, x.conn)
	op := policy.Operation{
		AgentID:              x.ac.agentID,
		ConnectionID:         x.conn.ID,
		ConnectionAlias:      x.conn.Alias,
		ConnectionModifiedAt: x.conn.ModifiedAt,
		Class:                x.class,
		Kind:                 policy.Exec,
		Text:                 opText(x.r),
		AgentReason:          x.st.agentReason,
		SourceAddr:           x.ac.source,
		SessionID:            x.ac.session,
	}
	if x.r.pty || x.r.shell {
		op.TerminalLife = s.cfg.TerminalLife
	}
	if x.refusal != "" {
		x.rec = x.record(x.class, x.refusal)
		x.rec.ConnectionID, x.rec.ConnectionAlias, x.rec.Operation = x.conn.ID, x.conn.Alias, op.Text
		return &policy.DeniedError{Reason: x.refusal}
	}
	if x.run = planReadRun(x.r, x.class, x.conn); x.run.refusal != "" {
		x.rec = x.record(x.class, x.run.refusal)
		x.rec.ConnectionID, x.rec.ConnectionAlias, x.rec.Operation = x.conn.ID, x.conn.Alias, op.Text
		// Refused before the policy, which would have seen a kept copy
		// of the row that has changed since: the refusal must be of the
		// stored row.
		if err := x.s.connectionCurrent(x.ac.ctx, x.conn); err != nil {
			return err
		}
		return &policy.DeniedError{Reason: x.run.refusal}
	}
	if allowedByGrant(x.r.grant, x.class) {
		x.ahead = s.startOpenAhead(x.ac.ctx, x.conn)
	}
	// If the grant changed to ask since it was cached, no channel is held
	// open for the target while an admin decides. The wait ends with the
	// agent's connection, or at a lock (live.wait).
	var err error
	x.auth, x.rec, err = s.authorize(x.st.live.wait, op, x.stderr, x.reasons, x.abandonAhead)
	return err
}

// refused ends a session whose command was not let through: one line on
// stderr saying why, the exit status, the audit row.
func (x *execRun) refused(err error) {
	s, conn, class := x.s, x.conn, x.class
	x.rec.Reason = err.Error()
	var de *policy.DeniedError
	code := uint32(ExitRefused)
	switch {
	case x.st.live.ended() != "":
		// A lock, or the agent disabled or removed, ended the wait.
		x.rec.Reason = "ended by postern: " + x.st.live.ended()
		fmt.Fprintf(x.stderr, "postern: refused, nothing ran: %s\r\n", x.st.live.ended())
	case x.refusal != "":
		x.rec.Reason = x.refusal
		fmt.Fprintf(x.stderr, "postern: refused, nothing ran: %s; nobody can review it\r\n", x.refusal)
	case x.run.refusal != "":
		x.rec.Reason = x.run.refusal
		s.cfg.Metrics.ReadCommand(x.run.sandboxLabel())
		fmt.Fprintf(x.stderr, "postern: refused, nothing ran: %s\r\n", x.run.refusal)
	case errors.As(err, &de) && de.NoGrant:
		s.limits.record(x.ac.agentID, x.key, true)
		fmt.Fprintf(x.stderr, "postern: unknown alias %q\r\n", conn.Alias)
		code = ExitUsage
	case errors.Is(err, policy.ErrExpired):
		fmt.Fprintf(x.stderr, "postern: approval expired, nothing ran: %s on %s (%s)\r\n", class, conn.Alias, x.reasons)
	case s.waits.Err() != nil && x.auth.Approval != nil:
		fmt.Fprintf(x.stderr, "postern: shutting down; nothing ran. Request %s stays pending: once it is approved, send the same command again\r\n", x.auth.Approval.ID)
	case errors.Is(err, policy.ErrDenied):
		s.limits.record(x.ac.agentID, x.key, true)
		fmt.Fprintf(x.stderr, "postern: denied, nothing ran: %s on %s (%s): %s\r\n", class, conn.Alias, x.reasons, denialReason(err))
	default:
		fmt.Fprintf(x.stderr, "postern: refused, nothing ran: %s on %s: %v\r\n", class, conn.Alias, err)
	}
	s.log.Info().Str("conn_id", x.ac.id).Str("agent_id", x.ac.agentID).Str("alias", conn.Alias).
		Str("class", string(class)).Str("decision", string(x.rec.Outcome)).Msg("refused")
	s.audit(x.rec, x.start)
	exitWith(x.ch, code)
}

// relay starts the command on the target and copies the session both ways
// until it ends, then records how it ended. A command that ended is
// audited before the agent learns its exit status (see relay's beforeExit);
// one cut short, after.
func (x *execRun) relay() {
	s, rec := x.s, &x.rec
	var up *UpstreamSession
	var err error
	if x.ahead != nil {
		up, err = x.ahead.take()
		x.ahead = nil
	} else {
		up, err = s.pool.Open(x.ac.ctx, x.conn)
	}
	if err == nil {
		defer up.Close()
		start := upstreamStart{Env: x.st.env, PtyReq: x.st.ptyReq, Command: x.run.command}
		if x.r.script && x.run.command == x.r.command {
			// As the target would: its user's shell reads the script
			// from stdin. (A read sandbox runs it with -c instead, in
			// its wrapper, with stdin at its end.)
			start.Command = ""
		}
		err = startUpstream(up.Channel, start)
	}
	if err != nil {
		s.unreachable(x.ch, x.conn.Alias, err)
		rec.Outcome, rec.Reason = policy.Failed, err.Error()
		s.audit(*rec, x.start)
		return
	}
	x.relayed = true
	rcd := x.startRecorder()
	// The relay runs under the server's context, not the agent
	// connection's: an agent that goes away is seen by relay on its
	// channel, and relay then waits for the target to report how the
	// command ended.
	audited := false
	r := &relay{down: x.ch, downReqs: x.held.release(), up: up.Channel, upReqs: up.Requests, waits: s.relayWaits, rec: rcd,
		stdinPrefix: x.scriptStdin(),
		beforeExit: func(res relayResult) {
			x.ended(res)
			seq := s.audit(*rec, x.start)
			// The output has been copied to its end: the recording is
			// stored before the agent learns the exit status, as the
			// audit row is.
			x.saveRecording(rcd, seq)
			audited = true
		}}
	ctx, life := x.life()
	res := r.run(ctx)
	lifeOver := errors.Is(ctx.Err(), context.DeadlineExceeded) && s.ctx.Err() == nil
	life()
	if audited {
		return
	}
	x.ended(res)
	switch {
	case x.st.live.ended() != "" && !res.AgentGone:
		// A lock, or the agent disabled or removed, ended the session:
		// as a disconnect does, like the end of a terminal's life below.
		fmt.Fprintf(x.stderr, "\r\npostern: %s; postern ended this session\r\n", x.st.live.ended())
		_ = x.ch.Close()
		rec.Reason = joinReason(rec.Reason, "ended by postern: "+x.st.live.ended())
	case lifeOver && !res.AgentGone:
		// The approved life of a session with a terminal ran out: postern
		// ends it as a disconnect does (no exit status; the target's
		// shell gets its hangup when the upstream channel closes).
		fmt.Fprintf(x.stderr, "\r\npostern: this session with a terminal was approved to run at most %v; that time is over and postern ended it\r\n", x.s.cfg.TerminalLife)
		_ = x.ch.Close()
		rec.Reason = joinReason(rec.Reason, fmt.Sprintf("ended by postern when its approved life of %v ran out", x.s.cfg.TerminalLife))
	case res.AgentGone:
		// Nobody is left to tell; the channel is closed already, and
		// closing it again only makes sure. With the end the target
		// reported, the row says allowed; without, failed.
		_ = x.ch.Close()
		if res.Err != nil {
			rec.Outcome, rec.Reason = policy.Failed, res.Err.Error()
		}
	case res.Err != nil:
		// The command was cut short (the target or its connection was
		// lost, or postern is closing): the row says failed, so that an
		// admin reading the audit does not take it for a run that ended.
		fmt.Fprintf(x.stderr, "postern: lost connection to %s: %v\r\n", x.conn.Alias, res.Err)
		exitWith(x.ch, ExitUnreachable)
		lost := ExitUnreachable
		rec.ExitStatus = &lost
		rec.Outcome, rec.Reason = policy.Failed, res.Err.Error()
	}
	x.saveRecording(rcd, s.audit(*rec, x.start))
}

// life returns the context the relay runs under: the server's, with a
// deadline for a session with a terminal that a person approved (it may
// run Config.TerminalLife, no longer), and its cancel func.
func (x *execRun) life() (context.Context, context.CancelFunc) {
	parent := x.st.live.ctx // the server's, ended at a lock too (locks.go)
	if (x.r.pty || x.r.shell) && x.auth.Approval != nil {
		return context.WithTimeout(parent, x.s.cfg.TerminalLife)
	}
	return context.WithCancel(parent)
}

// ended adds how the command ended to the audit record: byte counts, the
// exit status, and a signal or the agent's part in the end after whatever
// the reason already says (the scope the command ran under).
func (x *execRun) ended(res relayResult) {
	x.rec.BytesIn, x.rec.BytesOut = res.BytesIn, res.BytesOut
	if res.ExitStatus != nil {
		code := int(*res.ExitStatus)
		x.rec.ExitStatus = &code
	}
	if end := endReason(res); end != "" {
		if x.rec.Reason != "" {
			end = x.rec.Reason + "; " + end
		}
		x.rec.Reason = end
	}
}
