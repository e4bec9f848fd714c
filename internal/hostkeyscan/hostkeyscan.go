// Package hostkeyscan fetches the SSH host key a server presents, so that an
// admin can pin it (postern conn add --accept-new-host-key). It is
// ssh-keyscan for one host: it never authenticates, and it ends the
// handshake as soon as the key is known.
package hostkeyscan

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"golang.org/x/crypto/ssh"
)

// DefaultTimeout bounds the whole scan (dial and handshake) when the context
// has no earlier deadline. A live server answers in well under a second; ten
// seconds leaves room for a slow network without making a typo'd address
// hang the admin's terminal.
const DefaultTimeout = 10 * time.Second

// errGotKey aborts the handshake once the host key callback has the key.
var errGotKey = errors.New("hostkeyscan: host key captured")

// Options configure Scan.
type Options struct {
	Timeout time.Duration // DefaultTimeout if zero
	// Dial opens the TCP connection; (&net.Dialer{}).DialContext if nil.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// HostKeyAlgorithms restricts the key types offered; nil means the
	// x/crypto defaults (ed25519 is preferred by them).
	HostKeyAlgorithms []string
}

// Scan dials addr (host:port), runs the SSH handshake just far enough to
// receive the server's host key, and returns it.
func Scan(ctx context.Context, addr string, opts Options) (ssh.PublicKey, error) {
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	dial := opts.Dial
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	conn, err := dial(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("hostkeyscan: dial %s: %w", addr, err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	// Close the connection if the context ends first, so the handshake
	// cannot outlive the caller's patience even on a stuck server.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	var key ssh.PublicKey
	cfg := &ssh.ClientConfig{
		User: "postern-hostkeyscan",
		HostKeyCallback: func(_ string, _ net.Addr, k ssh.PublicKey) error {
			key = k
			return errGotKey
		},
		HostKeyAlgorithms: opts.HostKeyAlgorithms,
		Timeout:           timeout,
	}
	_, _, _, err = ssh.NewClientConn(conn, addr, cfg)
	if key != nil {
		return key, nil
	}
	// The connection's deadline and the context's are the same instant, so
	// either may report the timeout first.
	var ne net.Error
	if ctx.Err() != nil || errors.As(err, &ne) && ne.Timeout() {
		return nil, fmt.Errorf("hostkeyscan: %s: no host key within %v: %w", addr, timeout, context.DeadlineExceeded)
	}
	if err == nil {
		err = errors.New("handshake ended without a host key")
	}
	return nil, fmt.Errorf("hostkeyscan: %s: %w", addr, err)
}
