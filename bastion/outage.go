package bastion

import (
	"context"
	"errors"
	"net"
	"sync/atomic"

	"golang.org/x/crypto/ssh"

	"github.com/postern/postern/store"
)

// OutageBanner is what an agent reads when postern cannot reach its
// database to look up the agent's key: an outage, said as one, instead of
// "Permission denied (publickey)", which sends the agent's operator after
// a key that is fine.
const OutageBanner = "postern: temporarily unavailable (the database cannot be reached); try again\r\n"

// errUnavailable marks an authentication refused because the database
// could not be asked.
var errUnavailable = errors.New("bastion: the database cannot be reached")

// unavailable reports whether a key lookup failed for want of the
// database: any error but "no such key" and the server's own stop.
func unavailable(err error) bool {
	return err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, context.Canceled)
}

// outageConn is the connection of one handshake, which closes itself right
// after its next write once armed. x/crypto/ssh writes a BannerError's
// banner and then the authentication failure; closing after the banner
// ends the handshake there, so that the client shows the banner and
// "Connection closed" and exits 255, as for any lost connection, and not
// "Permission denied", and does not offer its other keys to a server that
// cannot check them.
type outageConn struct {
	net.Conn
	armed atomic.Bool
}

func (c *outageConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if c.armed.Load() {
		c.Conn.Close()
	}
	return n, err
}

// outageGuard wraps an authentication callback of the handshake on oc: a
// refusal for want of the database becomes the outage banner, written
// once, after which the connection closes.
func (s *Server) outageGuard(oc *outageConn, source string, err error) error {
	if !errors.Is(err, errUnavailable) {
		return err
	}
	if oc.armed.Swap(true) {
		return err
	}
	s.log.Warn().Str("source", source).Err(err).Msg("agent refused: temporarily unavailable, the database cannot be reached")
	return &ssh.BannerError{Err: err, Message: OutageBanner}
}
