package bastion

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

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
func (s *Server) serveSFTP(ac *agentConn, ch ssh.Channel, reqs <-chan *ssh.Request, agentReason string) {
	// The session's requests end when the agent closes the channel: the
	// gate then stops, even while a request waits for an approval and the
	// agent's packets are not being read.
	ctx, stop := context.WithCancel(ac.ctx)
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
	cfg := sftpgate.Config{Logger: s.log, Stderr: ch.Stderr(), Metrics: s.cfg.Metrics}
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
	if s.sftpConfig != nil {
		s.sftpConfig(&cfg)
	}
	cfg.Decide = func(ctx context.Context, op sftpgate.Op) (sftpgate.Finish, error) {
		return s.decideSFTP(ctx, ac, ch, op, agentReason)
	}
	cfg.Dial = func(ctx context.Context, alias string) (*sftpgate.Upstream, error) { return s.dialSFTP(ctx, ac, alias) }
	log := s.log.With().Str("conn_id", ac.id).Str("agent_id", ac.agentID).Str("view", cfg.Fixed).Logger()
	log.Info().Msg("sftp session")
	err = sftpgate.Serve(ctx, ch, cfg)
	var de *sftpgate.DialError
	switch {
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
// target has answered, with the target's status code as the row's exit
// status.
func (s *Server) decideSFTP(ctx context.Context, ac *agentConn, ch ssh.Channel, op sftpgate.Op, agentReason string) (sftpgate.Finish, error) {
	start := s.cfg.Now()
	g, ok := grantFor(ac, op.Alias)
	if !ok {
		return nil, fmt.Errorf("postern: no such connection %q", op.Alias)
	}
	conn, err := ac.connection(ctx, s.cfg.Store, g.ConnectionID)
	if err != nil {
		return nil, fmt.Errorf("postern: no such connection %q", op.Alias)
	}
	text := sftpText(op)
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
			return nil, fmt.Errorf("postern: approval expired: %s %s", op.Class, text)
		case errors.Is(err, policy.ErrDenied):
			var de *policy.DeniedError
			if errors.As(err, &de) && de.NoGrant {
				return nil, fmt.Errorf("postern: no such connection %q", op.Alias)
			}
			return nil, fmt.Errorf("postern: denied: %s %s: %s", op.Class, text, denialReason(err))
		}
		return nil, fmt.Errorf("postern: refused: %s %s", op.Class, text)
	}
	return func(o sftpgate.Outcome) {
		if o.Answered {
			status := int(o.Status)
			rec.ExitStatus = &status
			rec.Reason = o.Message
		} else {
			rec.Reason = "no answer from the target: " + o.Message
		}
		s.audit(rec, start)
	}, nil
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
