package bastion

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/postern/postern/policy"
	"github.com/postern/postern/recipes"
	"github.com/postern/postern/shellclass"
	"github.com/postern/postern/store"
	"golang.org/x/crypto/ssh"
)

// Exit statuses postern itself gives an agent (the target's own statuses
// pass through unchanged).
const (
	// ExitRefused: denied, expired, or the agent gave up waiting; nothing
	// ran. 126 is the shell's "cannot execute".
	ExitRefused = 126
	// ExitUsage: unknown alias or bad usage.
	ExitUsage = 2
	// ExitUnreachable: the target could not be reached or was lost, as
	// OpenSSH's own ssh reports.
	ExitUnreachable = 255
)

// maxSessionEnv bounds the variables one session keeps for its command.
// Names are allowlisted, but LC_ takes any suffix: without a bound, an agent
// sending env requests in a loop before its exec grew the session without
// limit. OpenSSH's client sends a handful.
const maxSessionEnv = 32

// sessionState is what an agent's session asked for before its command.
type sessionState struct {
	env    []envVar
	ptyReq []byte
	// agentReason is the agent's POSTERN_REASON: what it says the command
	// is for. It goes to the admin and the audit log, never the target.
	agentReason string
	// live is the session in the registry a lock ends sessions by
	// (locks.go).
	live *liveSession
}

// reasonEnv is the variable an agent sets (ssh -o SetEnv or SendEnv) to
// tell the admin why it runs a command.
const reasonEnv = "POSTERN_REASON"

// maxReasonEnv bounds the POSTERN_REASON kept from the wire; policy cuts
// what it shows and audits shorter still (policy.MaxAgentReason).
const maxReasonEnv = 4 << 10

// setEnv keeps e for the command: a name sent again replaces its value, a
// new name is kept while fewer than maxSessionEnv are. It reports whether
// e was kept.
func (st *sessionState) setEnv(e envVar) bool {
	for i := range st.env {
		if st.env[i].Name == e.Name {
			st.env[i] = e
			return true
		}
	}
	if len(st.env) >= maxSessionEnv {
		return false
	}
	st.env = append(st.env, e)
	return true
}

// session serves one session channel: it collects env and pty requests,
// then runs the exec or shell request. One command per session, as OpenSSH.
func (s *Server) session(ac *agentConn, nch ssh.NewChannel) {
	ch, reqs, err := nch.Accept()
	if err != nil {
		return
	}
	var st sessionState
	st.live = s.addLive(ac)
	defer s.removeLive(st.live)
	for {
		var req *ssh.Request
		var ok bool
		select {
		case req, ok = <-reqs:
		case <-ac.ctx.Done():
			ch.Close()
			return
		}
		if !ok {
			ch.Close()
			return
		}
		switch req.Type {
		case "env":
			e, err := parseEnv(req.Payload)
			if err == nil && e.Name == reasonEnv {
				st.agentReason = e.Value
				if len(st.agentReason) > maxReasonEnv {
					st.agentReason = st.agentReason[:maxReasonEnv]
				}
				replyIf(req, true)
				continue
			}
			replyIf(req, err == nil && envAllowed(e.Name) && st.setEnv(e))
		case "pty-req":
			if _, _, err := parsePtyReq(req.Payload); err != nil {
				replyIf(req, false)
				continue
			}
			st.ptyReq = append([]byte(nil), req.Payload...)
			replyIf(req, true)
		case "window-change":
			// Before the command starts there is nothing to resize; the
			// pty-req carries the size.
			replyIf(req, false)
		case "x11-req":
			s.refuse(ac, "X11 forwarding")
			replyIf(req, false)
		case "auth-agent-req@openssh.com":
			s.refuse(ac, "agent forwarding")
			replyIf(req, false)
		case "subsystem":
			name, _ := parseSubsystem(req.Payload)
			if name == "sftp" {
				replyIf(req, true)
				ok, wait := s.limits.allow(ac.agentID, s.cfg.CommandWait)
				if !ok {
					go discard(reqs)
					s.refuseRateLimited(ac, ch, policy.SFTP, "sftp session", false, wait, s.cfg.Now())
					return
				}
				if wait > 0 && !s.holdBack(ac, ch, wait, "for your turn under the rate limit") {
					go discard(reqs)
					return
				}
				s.serveSFTP(ac, ch, reqs, st.agentReason, st.live)
				return
			}
			s.refuse(ac, "subsystem "+printable(name))
			replyIf(req, false)
			fmt.Fprintf(ch.Stderr(), "postern: subsystem %q is not served\r\n", printable(name))
			exitWith(ch, ExitUsage)
			return
		case "shell":
			replyIf(req, true)
			s.run(ac, ch, reqs, st, "", true)
			return
		case "exec":
			cmd, err := parseExec(req.Payload)
			if err != nil {
				replyIf(req, false)
				continue
			}
			replyIf(req, true)
			s.run(ac, ch, reqs, st, cmd, false)
			return
		default:
			replyIf(req, false)
		}
	}
}

func replyIf(req *ssh.Request, ok bool) {
	if req.WantReply {
		_ = req.Reply(ok, nil)
	}
}

// exitWith ends a session that postern answered itself: exit-status, then
// EOF, then close.
func exitWith(ch ssh.Channel, code uint32) {
	_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{code}))
	_ = ch.CloseWrite()
	_ = ch.Close()
}

// route resolves a session with the agent connection's cached grants,
// reading them again when the cache cannot answer (an alias it does not
// know, or the help listing, which must be current). The cache only routes:
// policy.Decide checks the grant again for every operation, so a revoked
// grant is refused even while it is cached.
func (s *Server) route(ac *agentConn, cmd string, shell bool) (route, string, uint32, bool, error) {
	grants, cached := ac.cachedGrants()
	if cached {
		if r, _, _, ok := resolve(ac.user, cmd, shell, grants); ok {
			return r, "", 0, true, nil
		}
	}
	grants, err := s.cfg.Store.GrantsForAgent(ac.ctx, ac.agentID)
	if err != nil {
		return route{}, "", 0, false, err
	}
	ac.setGrants(grants)
	r, msg, code, ok := resolve(ac.user, cmd, shell, grants)
	if !ok && code == 0 {
		// The help: the limits are this server's settings.
		msg += "\nLimits: " + s.limitsText() + ".\n"
	}
	return r, msg, code, ok, nil
}

// route is where a session goes: a grant of the agent and the command for
// the target.
type route struct {
	grant   store.Grant
	command string
	shell   bool // interactive: no command
	// pty: the session asked for a terminal. Set by the session, not by
	// resolve.
	pty bool
	// script: command is a script the agent sent on stdin, with no
	// command and no terminal; the target's shell reads it from stdin.
	// Set by the session.
	script bool
}

// resolve picks the connection. If the SSH user name is an alias the agent
// holds a grant for, the whole command goes there; otherwise the first word
// of the command is the alias. ok is false when there is nothing to run
// (help) or the alias is unknown; msg then says what to print and code the
// exit status.
func resolve(user, cmd string, shell bool, grants []store.Grant) (r route, msg string, code uint32, ok bool) {
	byAlias := map[string]store.Grant{}
	for _, g := range grants {
		byAlias[g.Alias] = g
	}
	if g, found := byAlias[user]; found {
		return route{grant: g, command: cmd, shell: shell || strings.TrimSpace(cmd) == ""}, "", 0, true
	}
	trimmed := strings.TrimLeft(cmd, " \t\r\n")
	if shell || trimmed == "" || trimmed == "help" || trimmed == "--help" || trimmed == "-h" {
		return route{}, helpText(grants), 0, false
	}
	alias, rest := trimmed, ""
	if i := strings.IndexAny(trimmed, " \t\r\n"); i >= 0 {
		alias, rest = trimmed[:i], strings.TrimLeft(trimmed[i:], " \t\r\n")
	}
	g, found := byAlias[alias]
	if !found {
		// An alias without a grant answers exactly like one that does not
		// exist: nothing tells an agent which aliases are there.
		return route{}, fmt.Sprintf("postern: unknown alias %q; run `ssh bastion help` for yours\n", printable(alias)), ExitUsage, false
	}
	return route{grant: g, command: rest, shell: rest == ""}, "", 0, true
}

// helpText lists the agent's aliases with their environment and rules.
func helpText(grants []store.Grant) string {
	var b strings.Builder
	b.WriteString("postern: SSH bastion. Usage:\n")
	b.WriteString("  ssh bastion ALIAS COMMAND      run COMMAND on ALIAS\n")
	b.WriteString("  ssh ALIAS@bastion COMMAND      the same; git, rsync and scp use this form\n")
	b.WriteString("Exit status: the command's own; 126 denied, expired or rate limited (nothing ran); 2 unknown alias; 255 target unreachable.\n\n")
	if len(grants) == 0 {
		b.WriteString("You have no connections.\n")
		return b.String()
	}
	sorted := append([]store.Grant(nil), grants...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Alias < sorted[j].Alias })
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ALIAS\tENV\tREAD\tWRITE\tDESTRUCTIVE")
	for _, g := range sorted {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", g.Alias, g.Env, g.Rules.Read, g.Rules.Write, g.Rules.Destructive)
	}
	tw.Flush()
	return b.String()
}

// endReason is the audit reason of a command that ran: how it ended when
// the exit status does not say it all. The audit row has a column for the
// exit status only, so a signal is written here ("ended by signal PIPE"),
// with what the agent did that led to it.
func endReason(res relayResult) string {
	var parts []string
	if res.AgentGone {
		parts = append(parts, "the agent went away while the command ran")
	}
	if res.EOW {
		parts = append(parts, "the agent stopped reading the output (eow@openssh.com)")
	}
	if res.ExitSignal != "" {
		parts = append(parts, "ended by signal "+res.ExitSignal)
	}
	return strings.Join(parts, "; ")
}

// admitCommand applies the agent's limits before a command is routed and
// decided: over the command rate it waits for the command's turn up to
// CommandWait and refuses the session past it (stderr line, ExitRefused, a
// denied audit row, and no step in the denial streak: a limit is not a
// denial); after RepeatDeniedStreak identical
// denials it makes the agent wait, saying so on stderr. It reports whether
// the command goes on; if not, it has ended ch.
func (s *Server) admitCommand(ac *agentConn, ch ssh.Channel, kind policy.Kind, cmd string, shell bool, key string, start time.Time) bool {
	ok, wait := s.limits.allow(ac.agentID, s.cfg.CommandWait)
	if !ok {
		s.refuseRateLimited(ac, ch, kind, cmd, shell, wait, start)
		return false
	}
	if wait > 0 && !s.holdBack(ac, ch, wait, "for your turn under the rate limit") {
		return false
	}
	delay, streak := s.limits.penalty(ac.agentID, key)
	if delay <= 0 {
		return true
	}
	fmt.Fprintf(ch.Stderr(), "postern: this request was denied %d times in a row; slowing you down: waiting %v before deciding it again (change the request or ask an admin for a grant)\r\n", streak, delay)
	s.log.Info().Str("conn_id", ac.id).Str("agent_id", ac.agentID).Int("streak", streak).Dur("delay", delay).Msg("repeated denied request slowed down")
	return s.holdBack(ac, ch, delay, "")
}

// holdBack makes a command wait d before it goes on: its turn under the
// rate (saying nothing: the agent sees a slower server) or the slow-down
// of a repeated denial. It reports false, having ended ch, when the agent
// left or postern is stopping first: nothing was decided or ran.
func (s *Server) holdBack(ac *agentConn, ch ssh.Channel, d time.Duration, what string) bool {
	waitCtx, stop := context.WithCancel(ac.ctx)
	defer stop()
	defer context.AfterFunc(s.waits, stop)()
	if err := s.sleep(waitCtx, d); err != nil {
		fmt.Fprintf(ch.Stderr(), "postern: stopped waiting%s; nothing ran\r\n", strings.TrimRight(" "+what, " "))
		exitWith(ch, ExitRefused)
		return false
	}
	return true
}

// refuseRateLimited ends a session its agent started over the command rate:
// one line on stderr, ExitRefused, and a denied audit row with reason "rate
// limited". The row names the alias and class when the connection's cached
// grants route the command (read once per connection, as for any command).
func (s *Server) refuseRateLimited(ac *agentConn, ch ssh.Channel, kind policy.Kind, cmd string, shell bool, retry time.Duration, start time.Time) {
	fmt.Fprintf(ch.Stderr(), "postern: rate limited (a limit, not a denial): %s; nothing ran; retry in %v\r\n",
		s.limitsText(), retry.Round(time.Millisecond))
	s.log.Info().Str("conn_id", ac.id).Str("agent_id", ac.agentID).Str("decision", string(policy.Denied)).Msg("rate limited")
	rec := policy.Record{AgentID: ac.agentID, AgentName: ac.agentName, SourceAddr: ac.source, SessionID: ac.session, Class: policy.Read, Kind: kind,
		Outcome: policy.Denied, Reason: "rate limited", Operation: cmd}
	if kind == policy.Exec {
		r := route{command: cmd, shell: shell}
		if rr, _, _, found, err := s.route(ac, cmd, shell); err == nil && found {
			r = rr
			rec.ConnectionID, rec.ConnectionAlias, rec.Operation = rr.grant.ConnectionID, rr.grant.Alias, opText(rr)
		}
		rec.Class, _ = s.classify(r, nil)
	}
	s.audit(rec, start)
	exitWith(ch, ExitRefused)
}

// authorize decides op with the policy, waiting for an approval on ask
// (the wait ends early when postern shuts down; the request stays pending
// for a retry). While it waits, the agent reads one line on stderr: what
// waits, its class and reasons, the approval id, how to decide it, and when
// it expires. It returns the audit record to complete.
//
// waiting, when not nil, is called once the operation starts to wait for
// an approval, before the agent is told.
func (s *Server) authorize(ctx context.Context, op policy.Operation, stderr io.Writer, reasons string, waiting func()) (policy.Authorization, policy.Record, error) {
	// The reasons go with an approval request, for the admin who decides.
	op.Reasons = reasons
	waitCtx, stopWait := context.WithCancel(ctx)
	defer stopWait()
	defer context.AfterFunc(s.waits, stopWait)()
	auth, err := s.cfg.Policy.Authorize(waitCtx, op, func(a policy.Approval) {
		if waiting != nil {
			waiting()
		}
		what := reasons
		if op.TerminalLife > 0 {
			what += fmt.Sprintf("; once approved, the session runs at most %v", op.TerminalLife)
		}
		fmt.Fprintf(stderr, "postern: waiting for approval %s: %s on %s: %s; %s; expires %s\r\n",
			a.ID, op.Class, op.ConnectionAlias, what, s.cfg.ApproveHint(a.ID), a.ExpiresAt.UTC().Format(time.RFC3339))
		s.log.Info().Str("agent_id", op.AgentID).Str("alias", op.ConnectionAlias).Str("class", string(op.Class)).
			Str("decision", "asked").Str("approval", a.ID).Msg("waiting for approval")
		if s.waiting != nil {
			s.waiting(a)
		}
	})
	rec := auth.Record(op)
	if auth.Approval != nil {
		rec.ApprovalID = auth.Approval.ID
	}
	return auth, rec, err
}

// classify returns the operation's class and the reasons in one line.
func (s *Server) classify(r route, conn *store.Connection) (policy.Class, string) {
	c, why, _ := s.classifyExec(r, conn)
	return c, why
}

// classifyExec returns the operation's class, the reasons in one line, and,
// when the classifier refused the command outright (shellclass's
// Unreviewable: too long, a NUL byte, nested too deep), why nobody can
// review it: such a command is denied, never sent to a person.
//
// The connection's recipe (the one it was made from, else the one whose
// host pattern matches most specifically) gives the shell dialect and its
// rules; with none, the built-in bash rules apply.
func (s *Server) classifyExec(r route, conn *store.Connection) (class policy.Class, reasons, refusal string) {
	if r.shell {
		return policy.Destructive, "an interactive shell cannot be classified", ""
	}
	if r.pty {
		// On a terminal a command's pager (git log, journalctl, less
		// behind dpkg -l) or prompt takes keystrokes, and a pager's
		// `!cmd` runs a shell command: whatever the command, the session
		// is an interactive shell, and what runs in it cannot be known
		// ahead. It is decided as one: destructive, shown with its
		// command, never scoped, bounded in time once approved.
		return policy.Destructive, "on a terminal the command's pager or prompts run what is typed: an interactive shell", ""
	}
	if s.classifyOverride != nil {
		return s.classifyOverride(r.command), "classified by the test's classifier", ""
	}
	res := shellclass.Classify(r.command, s.recipeFor(conn).Options())
	c, err := policy.ParseClass(res.Class.String())
	if err != nil {
		return policy.Destructive, "unknown class", ""
	}
	if res.Unreviewable {
		refusal = "the classifier refused the command outright"
		if len(res.Reasons) > 0 {
			refusal += " (" + res.Reasons[0].Why + ")"
		}
	}
	var whys []string
	for _, rs := range res.Reasons {
		whys = append(whys, rs.Why)
		if len(whys) == 3 {
			break
		}
	}
	if len(whys) == 0 {
		return c, "read-only command", refusal
	}
	return c, strings.Join(whys, "; "), refusal
}

// recipeFor returns the recipe of conn, or nil for the built-in rules.
func (s *Server) recipeFor(conn *store.Connection) *recipes.Recipe {
	if conn == nil {
		return nil
	}
	r, err := s.recipes.ForConnection(conn.Recipe, conn.Host)
	if err != nil {
		// Made with another catalog: classify as for a host no recipe
		// claims, and say so in the log.
		s.log.Warn().Str("alias", conn.Alias).Err(err).Msg("recipe unknown; classifying with the built-in rules")
		return nil
	}
	return r
}

// opText is the operation as audited and approved.
func opText(r route) string {
	if r.shell {
		return "(interactive shell)"
	}
	return r.command
}

func (s *Server) unreachable(ch ssh.Channel, alias string, err error) {
	var hk *HostKeyChangedError
	var ue *UnreachableError
	switch {
	case errors.As(err, &hk):
		fmt.Fprintf(ch.Stderr(), "postern: host key of %s changed; refusing to connect (an admin must re-pin it)\r\n", alias)
	case errors.As(err, &ue):
		// Its own message already says "ALIAS unreachable"; say it once.
		fmt.Fprintf(ch.Stderr(), "postern: %s unreachable: %v\r\n", alias, ue.Err)
	default:
		fmt.Fprintf(ch.Stderr(), "postern: %s unreachable: %v\r\n", alias, err)
	}
	exitWith(ch, ExitUnreachable)
}

// audit writes rec's row and returns its seq (0 when it failed), which a
// recording of the operation names.
func (s *Server) audit(rec policy.Record, start time.Time) int64 {
	rec.Duration = s.cfg.Now().Sub(start)
	seq, err := s.cfg.Policy.Audit(s.ctx, rec)
	if err != nil {
		s.log.Error().Err(err).Msg("audit failed")
	}
	if s.audited != nil {
		s.audited(rec)
	}
	return seq
}

// denialReason is what the agent reads after "denied": policy's reason,
// which for an admin's denial already names the admin ("approval apr_…
// was denied by alice: not now"), so it is not named twice.
func denialReason(err error) string {
	var de *policy.DeniedError
	if errors.As(err, &de) && de.Reason != "" {
		return de.Reason
	}
	return err.Error()
}

// discard answers the agent's requests on a session postern is ending.
func discard(reqs <-chan *ssh.Request) {
	for req := range reqs {
		replyIf(req, false)
	}
}

// crlf turns \n into \r\n when the agent has a pty, where a bare \n would
// not return the cursor.
func crlf(s string, pty bool) string {
	if !pty {
		return s
	}
	return strings.ReplaceAll(s, "\n", "\r\n")
}

// printable quotes control bytes so that a hostile name cannot drive the
// agent's terminal.
func printable(s string) string {
	if len(s) > 200 {
		s = s[:200]
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, s)
}

// maxHeldRequests bounds the requests kept while a session waits; beyond
// it (and for window changes, all but the newest) they are answered no.
const maxHeldRequests = 32

// heldRequests drains a session's requests while it waits for a decision,
// keeping the newest window change and the first few others, and hands
// them, then the rest, to whoever takes over the session (relay).
type heldRequests struct {
	in   <-chan *ssh.Request
	stop chan struct{}
	done chan struct{}
	// held and closed are written by the holding goroutine only, and read
	// after done is closed.
	held   []*ssh.Request
	closed bool
	// out is created by release; nil before.
	out chan *ssh.Request
}

func holdRequests(in <-chan *ssh.Request) *heldRequests {
	h := &heldRequests{in: in, stop: make(chan struct{}), done: make(chan struct{})}
	go h.hold()
	return h
}

func (h *heldRequests) hold() {
	defer close(h.done)
	for {
		select {
		case <-h.stop:
			return
		case req, ok := <-h.in:
			if !ok {
				h.closed = true
				return
			}
			if req.Type == "window-change" {
				for i, old := range h.held {
					if old.Type == "window-change" {
						h.held = append(h.held[:i], h.held[i+1:]...)
						break
					}
				}
			}
			if len(h.held) >= maxHeldRequests {
				replyIf(req, false)
				continue
			}
			h.held = append(h.held, req)
		}
	}
}

// release stops holding and returns a channel that yields the held
// requests, then the session's further ones, and closes with the session.
// Only the first call stops the holder; later calls return the same
// channel.
func (h *heldRequests) release() <-chan *ssh.Request {
	if h.out != nil {
		return h.out
	}
	close(h.stop)
	<-h.done
	h.out = make(chan *ssh.Request)
	go func() {
		defer close(h.out)
		for _, r := range h.held {
			h.out <- r
		}
		if h.closed {
			return
		}
		for r := range h.in {
			h.out <- r
		}
	}()
	return h.out
}
