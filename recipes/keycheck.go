package recipes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
)

// Status is what a key check proved.
type Status string

// Key check outcomes. Only OK and Rejected prove something about the key;
// the others say why nothing was proved, each in its own words, because an
// admin fixes each differently (start the target, re-pin its host key, give
// the account the right to run the read).
const (
	StatusOK              Status = "ok"                // the target accepted the key (and ran the read)
	StatusRejected        Status = "rejected"          // the target refused the key
	StatusUnreachable     Status = "unreachable"       // no connection, no handshake, or a timeout before authentication
	StatusHostKeyMismatch Status = "host_key_mismatch" // the target presented a host key that is not pinned
	StatusUnproved        Status = "unproved"          // the key was accepted but the read failed or timed out
)

// Result is the outcome of one key check.
type Result struct {
	Status Status
	// Message says what happened in words for the admin: for a rejected key
	// the target's own words (its banner and the authentication error), for
	// an unknown result why nothing was proved.
	Message string
}

// Proved reports whether the check proved something about the key: it is
// accepted or refused.
func (r Result) Proved() bool { return r.Status == StatusOK || r.Status == StatusRejected }

// Target is what a key check needs of a connection: where it is, as whom,
// and which host keys it accepts (the pinned ones).
type Target struct {
	Name     string // the connection's alias; for fakes and logs, the check does not use it
	Addr     string // host:port
	User     string
	HostKeys ssh.HostKeyCallback
	// Pinned are the SHA256 fingerprints of the keys HostKeys accepts, for
	// the message of a mismatch; the callback's error is used without them.
	Pinned []string
}

// DefaultCheckTimeout bounds a whole key check: dial, handshake,
// authentication and the read. A target that is up answers in a second or
// two; one that takes longer proves nothing either way.
const DefaultCheckTimeout = 15 * time.Second

// maxCheckOutput bounds what is kept of the read's output for the message;
// the output itself proves nothing, the exit status does.
const maxCheckOutput = 4 << 10

// Checker runs key checks. The zero value dials with net.Dialer and the
// default timeout.
type Checker struct {
	// Dial opens the TCP connection; net.Dialer.DialContext if nil. Tests
	// and the bastion's upstream pool pass their own.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Timeout bounds the whole check; DefaultCheckTimeout if zero.
	Timeout time.Duration
}

// Check runs a key check with the zero Checker.
func Check(ctx context.Context, t Target, signer ssh.Signer, r *Recipe) Result {
	return Checker{}.Check(ctx, t, signer, r)
}

// Check connects to t with signer, accepting only t's host keys, and
// proves the key: with the recipe's harmless read, or for a
// recipe whose key check is auth_only by authentication alone (git hosting
// answers every session with a greeting and exit status 1, so running
// anything proves no more). Without a recipe, `true` is run: every shell
// has it and it changes nothing.
func (k Checker) Check(ctx context.Context, t Target, signer ssh.Signer, r *Recipe) Result {
	timeout := k.timeout()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client, res := k.connect(ctx, t, signer, timeout)
	if client == nil {
		return res
	}
	defer client.Close()

	if r != nil && r.KeyCheck.AuthOnly {
		return Result{StatusOK, "the target accepted the key (authentication only)"}
	}
	command := "true"
	if r != nil {
		command = r.KeyCheck.Command
	}
	return runRead(ctx, client, command, timeout)
}

func (k Checker) timeout() time.Duration {
	if k.Timeout <= 0 {
		return DefaultCheckTimeout
	}
	return k.Timeout
}

// Run connects to t with signer as Check does and runs command, for a
// change postern makes on the target itself (installing a rotated key's
// line in authorized_keys). It answers nil only when the command exited 0;
// a command that failed is an error with its output on one line (what the
// admin needs to mend the target), a connection that failed one with the
// check's status and message.
func (k Checker) Run(ctx context.Context, t Target, signer ssh.Signer, command string) error {
	timeout := k.timeout()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client, res := k.connect(ctx, t, signer, timeout)
	if client == nil {
		return fmt.Errorf("recipes: %s: %s", strings.ReplaceAll(string(res.Status), "_", " "), res.Message)
	}
	defer client.Close()
	sess, err := client.NewSession()
	if err != nil {
		return fmt.Errorf("recipes: open a session: %w", err)
	}
	defer sess.Close()
	var out limitedBuffer
	sess.Stdout, sess.Stderr = &out, &out
	if err := sess.Run(command); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("recipes: the command did not finish %s", ended(ctx, timeout))
		}
		return fmt.Errorf("recipes: the command failed: %w: %s", err, oneLine(out.String()))
	}
	return nil
}

// connect dials t and authenticates with signer, accepting only t's host
// keys; a nil client comes with the Result that says why. The connection
// closes when ctx ends.
func (k Checker) connect(ctx context.Context, t Target, signer ssh.Signer, timeout time.Duration) (*ssh.Client, Result) {
	// A host key the target presents that t does not accept proves nothing
	// about the key, and the admin must look: the callback's own error is
	// the message.
	var hostKeyErr error
	hostKeys := func(host string, remote net.Addr, key ssh.PublicKey) error {
		if t.HostKeys == nil {
			hostKeyErr = errors.New("no host key is pinned")
			return hostKeyErr
		}
		if err := t.HostKeys(host, remote, key); err != nil {
			hostKeyErr = err
			if len(t.Pinned) > 0 {
				hostKeyErr = fmt.Errorf("the target presented %s %s; pinned: %s",
					key.Type(), ssh.FingerprintSHA256(key), strings.Join(t.Pinned, ", "))
			}
			return hostKeyErr
		}
		return nil
	}
	dial := k.Dial
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	addr := t.Addr
	nc, err := dial(ctx, "tcp", addr)
	if err != nil {
		return nil, Result{StatusUnreachable, fmt.Sprintf("cannot reach %s: %v", addr, err)}
	}
	// Closing the connection when the context ends unblocks the handshake
	// and the session alike (a dialer that ignored ctx and returned late
	// has its connection closed at once: the func runs on registration
	// when ctx is already done). This is the only thing that cuts the
	// connection, and it runs after ctx is done, so that a cut is always
	// seen as ctx's end. A deadline on the connection as well used to
	// fire a moment before the context's own timer: the read then ended
	// with "remote command exited without exit status" while ctx.Err()
	// was still nil, and a timeout was reported as the target's fault.
	stop := context.AfterFunc(ctx, func() { nc.Close() })

	var banner strings.Builder
	cfg := &ssh.ClientConfig{
		User:            t.User,
		Auth:            []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: hostKeys,
		BannerCallback: func(msg string) error {
			if banner.Len() < maxCheckOutput {
				banner.WriteString(msg)
			}
			return nil
		},
	}
	c, chans, reqs, err := ssh.NewClientConn(nc, addr, cfg)
	if err != nil {
		stop()
		nc.Close()
		switch {
		case hostKeyErr != nil:
			return nil, Result{StatusHostKeyMismatch, hostKeyErr.Error()}
		case ctx.Err() != nil:
			return nil, Result{StatusUnreachable, fmt.Sprintf("%s did not finish the handshake %s", addr, ended(ctx, timeout))}
		case isAuthFailure(err):
			return nil, Result{StatusRejected, rejectedMessage(banner.String(), err)}
		}
		return nil, Result{StatusUnreachable, fmt.Sprintf("handshake with %s: %v", addr, err)}
	}
	return ssh.NewClient(c, chans, reqs), Result{}
}

// runRead runs the check's read. Authentication has already succeeded, but
// a read that fails proves nothing about the key's use (a restricted
// account, a missing permission), so only exit status 0 is ok.
func runRead(ctx context.Context, client *ssh.Client, command string, timeout time.Duration) Result {
	sess, err := client.NewSession()
	if err != nil {
		return Result{StatusUnproved, fmt.Sprintf("the key was accepted but no session opened: %v", err)}
	}
	defer sess.Close()
	var out limitedBuffer
	sess.Stdout, sess.Stderr = &out, &out
	err = sess.Run(command)
	var exit *ssh.ExitError
	switch {
	case err == nil:
		return Result{StatusOK, fmt.Sprintf("the target accepted the key and ran %q", command)}
	case ctx.Err() != nil:
		return Result{StatusUnproved, fmt.Sprintf("the key was accepted but %q did not finish %s", command, ended(ctx, timeout))}
	case errors.As(err, &exit):
		return Result{StatusUnproved, fmt.Sprintf("the key was accepted but %q exited with status %d: %s",
			command, exit.ExitStatus(), oneLine(out.String()))}
	}
	return Result{StatusUnproved, fmt.Sprintf("the key was accepted but %q failed: %v", command, err)}
}

// ended says why ctx ended, to follow "did not finish": within the
// check's bound, or before its caller cancelled it.
func ended(ctx context.Context, timeout time.Duration) string {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Sprintf("within %v", timeout)
	}
	return "before the check was cancelled"
}

// isAuthFailure tells a refused key from other handshake errors. x/crypto
// has no typed error for it, so the text it has used since 2014 is matched;
// a disconnect with "no more authentication methods" is the same refusal
// from the server's side.
func isAuthFailure(err error) bool {
	s := err.Error()
	return strings.Contains(s, "ssh: unable to authenticate") ||
		strings.Contains(s, "reason 14:") // SSH_DISCONNECT_NO_MORE_AUTH_METHODS_AVAILABLE
}

// rejectedMessage keeps the target's words: its banner, if it sent one, and
// the authentication error.
func rejectedMessage(banner string, err error) string {
	msg := "the target refused the key: " + strings.TrimPrefix(err.Error(), "ssh: handshake failed: ")
	if b := oneLine(banner); b != "" {
		msg = b + " (" + msg + ")"
	}
	return msg
}

// oneLine folds text to one trimmed line of bounded length for a stored
// message.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	const max = 300
	if len(s) > max {
		s = s[:max] + "…"
	}
	return s
}

// limitedBuffer keeps the first maxCheckOutput bytes written and discards
// the rest, so a chatty read cannot grow memory. The session writes stdout
// and stderr from two goroutines, hence the mutex.
type limitedBuffer struct {
	// mu protects buf.
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := maxCheckOutput - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (b *limitedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

var _ io.Writer = (*limitedBuffer)(nil)
