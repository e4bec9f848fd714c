package bastion

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/postern/postern/policy"
	"github.com/postern/postern/sftpgate"
	"github.com/postern/postern/store"
	"golang.org/x/crypto/ssh"
)

// serveSFTP serves the sftp subsystem: the virtual root of the agent's
// aliases, or one alias's own tree when the SSH user name is that alias.
// A clean end sends exit-status 0, which scp and sftp expect.
//
// agentReason is the session's POSTERN_REASON, shown with each operation
// the gate asks an admin about and kept in its audit row.
func (s *Server) serveSFTP(ac *agentConn, ch ssh.Channel, reqs <-chan *ssh.Request, agentReason string, live *liveSession) {
	// The session's requests end when the agent closes the channel: the
	// gate then stops, even while a request waits for an approval and the
	// agent's packets are not being read. A lock ends it too (live.wait).
	ctx, stop := context.WithCancel(live.wait)
	defer stop()
	go func() {
		discard(reqs)
		stop()
	}()
	grants, err := s.cfg.Store.GrantsForAgent(ctx, ac.agentID)
	if err != nil {
		fmt.Fprintf(ch.Stderr(), "postern: cannot read your grants; try again\r\n")
		exitWith(ch, ExitUnreachable)
		return
	}
	ac.setGrants(grants)
	cfg := sftpgate.Config{Logger: s.log, Stderr: ch.Stderr(), Metrics: s.cfg.Metrics, Now: s.cfg.Now}
	for _, g := range grants {
		if g.Alias == ac.user {
			cfg.Fixed = g.Alias
		}
		cfg.Aliases = append(cfg.Aliases, g.Alias)
	}
	if cfg.Fixed != "" {
		cfg.Aliases = []string{cfg.Fixed}
	}
	sort.Strings(cfg.Aliases)
	virtual := cfg.Fixed == ""
	rides := &sftpRides{writes: map[string]*sftpRide{}}
	if s.sftpConfig != nil {
		s.sftpConfig(&cfg)
	}
	cfg.Decide = func(ctx context.Context, op sftpgate.Op) (sftpgate.Finish, error) {
		if g, ok := grantFor(ac, op.Alias); ok {
			live.reach(g.ConnectionID)
		}
		fin, how, err := s.decideSFTP(ctx, ac, ch, op, agentReason, virtual)
		if err != nil || !ridable(op) {
			return fin, err
		}
		// A change may ride on this write until its row is written.
		done := rides.add(op, how)
		return func(o sftpgate.Outcome) {
			done()
			fin(o)
		}, nil
	}
	cfg.Ride = func(ctx context.Context, write, op sftpgate.Op) bool {
		how, ok := rides.how(write)
		return ok && s.stillAllows(ctx, ac, write, how)
	}
	cfg.Refused = func(op sftpgate.Op, reason string) { s.auditSFTPRefusal(ac, op, reason, agentReason) }
	if virtual {
		cfg.Granted = func(ctx context.Context) ([]string, error) {
			grants, err := s.cfg.Store.GrantsForAgent(ctx, ac.agentID)
			if err != nil {
				return nil, err
			}
			ac.setGrants(grants)
			aliases := make([]string, 0, len(grants))
			for _, g := range grants {
				aliases = append(aliases, g.Alias)
			}
			return aliases, nil
		}
	}
	cfg.Dial = func(ctx context.Context, alias string) (*sftpgate.Upstream, error) {
		if g, ok := grantFor(ac, alias); ok {
			live.reach(g.ConnectionID)
		}
		return s.dialSFTP(ctx, ac, alias)
	}
	log := s.log.With().Str("conn_id", ac.id).Str("agent_id", ac.agentID).Str("view", cfg.Fixed).Logger()
	log.Info().Msg("sftp session")
	start := s.cfg.Now()
	err = sftpgate.Serve(ctx, ch, cfg)
	var de *sftpgate.DialError
	switch {
	case live.ended() != "":
		// A lock (or the agent disabled or removed) ended the session:
		// the gate has closed the channel and the target's sessions, as
		// the agent's disconnect would.
		s.endedSFTP(ac, live, cfg.Fixed, agentReason, start)
	case err == nil:
		exitWith(ch, 0)
	case errors.As(err, &de):
		// The fixed view's target, dialed before anything is served:
		// said as for an exec.
		s.unreachable(ch, de.Alias, de.Err)
	default:
		// The gate has told the agent why on stderr, and closed the
		// channel if it had to.
		log.Info().Err(err).Msg("sftp session ended with an error")
		exitWith(ch, 1)
	}
}

// decideSFTP decides and audits one SFTP operation like an exec command. On
// an allow it returns the function that writes the audit row once the
// target has answered (for a file's open, once its handle is closed, with
// the bytes read and written through it), with the target's status code as
// the row's exit status, and how the operation was let through
// (policy.Allowed by the rule, policy.Approved by an admin or a scope). Its refusals name the
// paths in the agent's own view (virtual: the virtual root's "/ALIAS/...");
// one for an alias the agent holds no grant for wraps
// sftpgate.ErrNoSuchAlias, which the gate answers as for a missing path.
func (s *Server) decideSFTP(ctx context.Context, ac *agentConn, ch ssh.Channel, op sftpgate.Op, agentReason string, virtual bool) (sftpgate.Finish, policy.Outcome, error) {
	start := s.cfg.Now()
	noSuchAlias := fmt.Errorf("postern: no such connection %q: %w", op.Alias, sftpgate.ErrNoSuchAlias)
	g, ok := grantFor(ac, op.Alias)
	if !ok {
		return nil, "", noSuchAlias
	}
	conn, err := ac.connection(ctx, s.cfg.Store, g.ConnectionID)
	if err != nil {
		return nil, "", noSuchAlias
	}
	text := sftpText(op)
	said := text // as the agent is told
	if virtual {
		said = sftpText(inVirtualRoot(op))
	}
	authorize := func() (policy.Record, error) {
		pop := policy.Operation{
			AgentID:              ac.agentID,
			ConnectionID:         conn.ID,
			ConnectionAlias:      conn.Alias,
			ConnectionModifiedAt: conn.ModifiedAt,
			Class:                op.Class,
			Kind:                 policy.SFTP,
			Text:                 text,
			AgentReason:          agentReason,
			SourceAddr:           ac.source,
			SessionID:            ac.session,
		}
		_, rec, err := s.authorize(ctx, pop, ch.Stderr(), text, nil)
		return rec, err
	}
	rec, err := authorize()
	if errors.Is(err, policy.ErrConnectionChanged) {
		// A kept copy of the row that has changed: decide once more with
		// the stored row.
		ac.forgetConnection(conn.ID)
		if conn, err = ac.connection(ctx, s.cfg.Store, g.ConnectionID); err == nil {
			rec, err = authorize()
		}
	}
	if err != nil {
		rec.Reason = err.Error()
		s.audit(rec, start)
		switch {
		case errors.Is(err, policy.ErrExpired):
			return nil, "", fmt.Errorf("postern: approval expired: %s %s", op.Class, said)
		case errors.Is(err, policy.ErrDenied):
			var de *policy.DeniedError
			if errors.As(err, &de) && de.NoGrant {
				return nil, "", noSuchAlias
			}
			return nil, "", fmt.Errorf("postern: denied: %s %s: %s", op.Class, said, denialReason(err))
		}
		return nil, "", fmt.Errorf("postern: refused: %s %s", op.Class, said)
	}
	return func(o sftpgate.Outcome) {
		if o.Answered {
			status := int(o.Status)
			rec.ExitStatus = &status
			rec.Reason = o.Message
		} else {
			rec.Reason = "no answer from the target: " + o.Message
		}
		if len(o.Rode) > 0 {
			// What rode on this write after its open, each with the
			// target's answer: the row is the record of all of it.
			rode := "then " + strings.Join(o.Rode, "; then ")
			if rec.Reason != "" {
				rode = rec.Reason + "; " + rode
			}
			rec.Reason = rode
		}
		if t := o.Transfer; t != nil {
			// A file's open: its row is written when the handle is
			// closed, with what went through it, and its duration is
			// how long the handle was open (not counting the
			// decision, which may have waited for an approver, nor
			// the wait for what may ride on a write after its close).
			rec.BytesIn, rec.BytesOut = t.Written, t.Read
			start = s.cfg.Now().Add(-t.Held)
		}
		s.audit(rec, start)
	}, rec.Outcome, nil
}

// inVirtualRoot is op with its paths as the agent names them in the
// virtual root ("/ALIAS/PATH"), for what the agent is told.
func inVirtualRoot(op sftpgate.Op) sftpgate.Op {
	paths := make([]string, len(op.Paths))
	for i, p := range op.Paths {
		paths[i] = sftpgate.VirtualPath(op.Alias, p)
	}
	op.Paths = paths
	return op
}

// ridable reports whether a change may ride on op (docs/sftp.md): an open
// for writing.
func ridable(op sftpgate.Op) bool {
	return op.Method == "put" || op.Method == "open"
}

// sftpRides keeps, for each write of one SFTP session that a change may
// ride on, how its rule let it through, until the write's row is written.
type sftpRides struct {
	// mu guards writes.
	mu     sync.Mutex
	writes map[string]*sftpRide // by rideKey
}

// sftpRide is how a write was let through, for the writes of one alias and
// text whose rows are not written yet.
type sftpRide struct {
	how policy.Outcome // the latest's
	n   int
}

func rideKey(op sftpgate.Op) string { return op.Alias + "\x00" + sftpText(op) }

// add keeps how write was let through; done forgets it, once its row is
// written.
func (r *sftpRides) add(write sftpgate.Op, how policy.Outcome) (done func()) {
	key := rideKey(write)
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.writes[key]
	if w == nil {
		w = &sftpRide{}
		r.writes[key] = w
	}
	w.how = how
	w.n++
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if w.n--; w.n == 0 {
			delete(r.writes, key)
		}
	}
}

// how returns how write was let through, if its row is still to write.
func (r *sftpRides) how(write sftpgate.Op) (policy.Outcome, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.writes[rideKey(write)]
	if w == nil {
		return "", false
	}
	return w.how, true
}

// stillAllows reports whether the rule that let write through (how:
// policy.Allowed by an allow rule, policy.Approved under an ask rule)
// would let it through the same way now, without asking anyone: a change
// that rides on it (a chmod right after the upload) needs no decision of
// its own. A rule changed since, to deny, to ask or to allow, is a no, and
// so is anything that cannot be read: the change is then decided as any
// other.
func (s *Server) stillAllows(ctx context.Context, ac *agentConn, write sftpgate.Op, how policy.Outcome) bool {
	g, ok := grantFor(ac, write.Alias)
	if !ok {
		return false
	}
	conn, err := ac.connection(ctx, s.cfg.Store, g.ConnectionID)
	if err != nil {
		return false
	}
	d := s.cfg.Policy.Decide(ctx, policy.Operation{
		AgentID:              ac.agentID,
		ConnectionID:         conn.ID,
		ConnectionAlias:      conn.Alias,
		ConnectionModifiedAt: conn.ModifiedAt,
		Class:                write.Class,
		Kind:                 policy.SFTP,
		Text:                 sftpText(write),
	})
	if d.Err != nil || d.NoGrant {
		return false
	}
	switch how {
	case policy.Allowed:
		return d.Rule == policy.Allow && d.Scope == nil
	case policy.Approved:
		return d.Rule == policy.Ask || (d.Rule == policy.Allow && d.Scope != nil)
	}
	return false
}

// auditSFTPRefusal writes the denied row of an SFTP operation the gate
// refused itself (a change in the virtual root, an operation across two
// aliases): like every refusal, it is in the agent's audit trail.
func (s *Server) auditSFTPRefusal(ac *agentConn, op sftpgate.Op, reason, agentReason string) {
	rec := policy.Record{AgentID: ac.agentID, AgentName: ac.agentName, SourceAddr: ac.source, SessionID: ac.session, AgentReason: agentReason,
		Class: op.Class, Kind: policy.SFTP, Outcome: policy.Denied, Operation: sftpText(op),
		Reason: strings.TrimPrefix(reason, "sftpgate: ")}
	if g, ok := grantFor(ac, op.Alias); ok {
		rec.ConnectionID, rec.ConnectionAlias = g.ConnectionID, g.Alias
	}
	s.log.Debug().Str("conn_id", ac.id).Str("agent_id", ac.agentID).Str("decision", string(policy.Denied)).Msg("sftp operation refused by the gate")
	s.audit(rec, s.cfg.Now())
}

// sftpText is an SFTP operation as approved and audited: the method, its
// quoted paths, and what else it sets.
func sftpText(op sftpgate.Op) string {
	var b strings.Builder
	b.WriteString("sftp ")
	b.WriteString(op.Method)
	for _, p := range op.Paths {
		b.WriteByte(' ')
		b.WriteString(strconv.Quote(p))
	}
	if op.Detail != "" {
		b.WriteString(" (")
		b.WriteString(op.Detail)
		b.WriteByte(')')
	}
	return b.String()
}

// dialSFTP opens the sftp subsystem on a pooled upstream connection and
// hands its raw stream to the gate.
func (s *Server) dialSFTP(ctx context.Context, ac *agentConn, alias string) (*sftpgate.Upstream, error) {
	g, ok := grantFor(ac, alias)
	if !ok {
		return nil, fmt.Errorf("bastion: no such connection %q", alias)
	}
	conn, err := ac.connection(ctx, s.cfg.Store, g.ConnectionID)
	if err != nil {
		return nil, fmt.Errorf("bastion: no such connection %q", alias)
	}
	up, err := s.pool.Open(ctx, conn)
	if err != nil {
		return nil, err
	}
	go ssh.DiscardRequests(up.Requests)
	ok, err = up.Channel.SendRequest("subsystem", true, ssh.Marshal(struct{ Name string }{"sftp"}))
	if err != nil || !ok {
		up.Close()
		return nil, fmt.Errorf("bastion: %s refused the sftp subsystem", alias)
	}
	return &sftpgate.Upstream{Conn: up.Channel, Stderr: up.Channel.Stderr(), Close: up.Close}, nil
}

// grantFor reports whether the agent connection's grants include alias.
func grantFor(ac *agentConn, alias string) (store.Grant, bool) {
	grants, _ := ac.cachedGrants()
	for _, g := range grants {
		if g.Alias == alias {
			return g, true
		}
	}
	return store.Grant{}, false
}

// endedSFTP audits an SFTP session that postern ended for a lock, or for its
// agent disabled or removed: the row says so, with the session's time.
func (s *Server) endedSFTP(ac *agentConn, live *liveSession, fixed, agentReason string, start time.Time) {
	why := live.ended()
	s.log.Info().Str("conn_id", ac.id).Str("agent_id", ac.agentID).Str("why", why).Msg("sftp session ended by postern")
	rec := policy.Record{AgentID: ac.agentID, AgentName: ac.agentName, SourceAddr: ac.source, SessionID: ac.session, Class: policy.Read,
		Kind: policy.SFTP, Outcome: policy.Failed, Operation: "sftp session", AgentReason: agentReason,
		Reason: "ended by postern: " + why}
	if fixed != "" {
		rec.ConnectionAlias = fixed
		if g, ok := grantFor(ac, fixed); ok {
			rec.ConnectionID = g.ConnectionID
		}
	}
	s.audit(rec, start)
}
