package bastion

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/pkg/sftp"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/sftpgate"
	"github.com/postern/postern/store"
	"golang.org/x/crypto/ssh"
)

// upstreamSFTPPacket is the data size of one upstream SFTP read or write:
// OpenSSH's sftp-server accepts messages up to 256 KiB and announces
// 261120 bytes (256 KiB less 1 KiB of headers) as its read and write limit
// (limits@openssh.com); the largest packet halves the round trips of
// pkg/sftp's 32 KiB default.
const upstreamSFTPPacket = 255 << 10

// serveSFTP serves the sftp subsystem: the virtual root of the agent's
// aliases, or one alias's own tree when the SSH user name is that alias.
// A clean end sends exit-status 0, which scp and sftp expect.
func (s *Server) serveSFTP(ac *agentConn, ch ssh.Channel, reqs <-chan *ssh.Request) {
	go discard(reqs)
	ctx := ac.ctx
	grants, err := s.cfg.Store.GrantsForAgent(ctx, ac.agentID)
	if err != nil {
		fmt.Fprintf(ch.Stderr(), "postern: cannot read your grants; try again\r\n")
		exitWith(ch, ExitUnreachable)
		return
	}
	ac.setGrants(grants)
	cfg := sftpgate.Config{Logger: s.log, Stderr: ch.Stderr()}
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
	cfg.Decide = func(ctx context.Context, op sftpgate.Op) error { return s.decideSFTP(ctx, ac, ch, op) }
	cfg.Dial = func(ctx context.Context, alias string) (*sftpgate.Upstream, error) { return s.dialSFTP(ctx, ac, alias) }
	log := s.log.With().Str("conn_id", ac.id).Str("agent_id", ac.agentID).Str("view", cfg.Fixed).Logger()
	log.Info().Msg("sftp session")
	if err := sftpgate.Serve(ctx, ch, cfg); err != nil {
		log.Info().Err(err).Msg("sftp session ended with an error")
		fmt.Fprintf(ch.Stderr(), "postern: sftp: %v\r\n", err)
		exitWith(ch, 1)
		return
	}
	exitWith(ch, 0)
}

// decideSFTP decides and audits one SFTP operation like an exec command.
func (s *Server) decideSFTP(ctx context.Context, ac *agentConn, ch ssh.Channel, op sftpgate.Op) error {
	start := s.cfg.Now()
	conn, err := s.cfg.Store.ConnectionByAlias(ctx, op.Alias)
	if err != nil {
		return fmt.Errorf("postern: no such connection %q", op.Alias)
	}
	pop := policy.Operation{
		AgentID:         ac.agentID,
		ConnectionID:    conn.ID,
		ConnectionAlias: conn.Alias,
		Class:           op.Class,
		Kind:            policy.SFTP,
		Text:            sftpText(op),
	}
	_, rec, err := s.authorize(ctx, pop, ch.Stderr(), pop.Text, nil)
	if err != nil {
		rec.Reason = err.Error()
		s.audit(rec, start)
		switch {
		case errors.Is(err, policy.ErrExpired):
			return fmt.Errorf("postern: approval expired: %s %s", op.Class, pop.Text)
		case errors.Is(err, policy.ErrDenied):
			var de *policy.DeniedError
			if errors.As(err, &de) && de.NoGrant {
				return fmt.Errorf("postern: no such connection %q", op.Alias)
			}
			return fmt.Errorf("postern: denied: %s %s: %s", op.Class, pop.Text, denialReason(err))
		}
		return fmt.Errorf("postern: refused: %s %s", op.Class, pop.Text)
	}
	s.audit(rec, start)
	return nil
}

// sftpText is an SFTP operation as approved and audited: the method and its
// quoted paths.
func sftpText(op sftpgate.Op) string {
	var b strings.Builder
	b.WriteString("sftp ")
	b.WriteString(strings.ToLower(op.Method))
	for _, p := range op.Paths {
		b.WriteByte(' ')
		b.WriteString(strconv.Quote(p))
	}
	return b.String()
}

// dialSFTP opens an SFTP session on a pooled upstream connection.
func (s *Server) dialSFTP(ctx context.Context, ac *agentConn, alias string) (*sftpgate.Upstream, error) {
	if _, ok := grantFor(ac, alias); !ok {
		return nil, fmt.Errorf("postern: no such connection %q", alias)
	}
	conn, err := s.cfg.Store.ConnectionByAlias(ctx, alias)
	if err != nil {
		return nil, fmt.Errorf("postern: no such connection %q", alias)
	}
	up, err := s.pool.Open(ctx, conn)
	if err != nil {
		var hk *HostKeyChangedError
		if errors.As(err, &hk) {
			return nil, fmt.Errorf("postern: host key of %s changed; refusing to connect", alias)
		}
		return nil, fmt.Errorf("postern: %s unreachable: %w", alias, err)
	}
	go ssh.DiscardRequests(up.Requests)
	ok, err := up.Channel.SendRequest("subsystem", true, ssh.Marshal(struct{ Name string }{"sftp"}))
	if err != nil || !ok {
		up.Close()
		return nil, fmt.Errorf("postern: %s refused the sftp subsystem", alias)
	}
	client, err := sftp.NewClientPipe(up.Channel, up.Channel,
		sftp.UseConcurrentReads(true), sftp.UseConcurrentWrites(true),
		sftp.MaxPacketUnchecked(upstreamSFTPPacket))
	if err != nil {
		up.Close()
		return nil, fmt.Errorf("postern: %s sftp: %w", alias, err)
	}
	return &sftpgate.Upstream{Client: client, Close: func() error {
		cerr := client.Close()
		if err := up.Close(); err != nil && cerr == nil {
			cerr = err
		}
		return cerr
	}}, nil
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
