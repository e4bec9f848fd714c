package manage

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/postern/postern/policy"
	"github.com/postern/postern/readsandbox"
	"github.com/postern/postern/recipes"
	"github.com/postern/postern/shellclass"
	"github.com/postern/postern/store"
)

// SandboxProber finds which read sandbox works on a target (package
// readsandbox); SSHProber is the real one, and tests give a fake.
type SandboxProber interface {
	Probe(ctx context.Context, t recipes.Target, signer ssh.Signer) store.SandboxProbe
}

// DefaultProbeTimeout bounds a whole probe: dial, handshake, and the probe
// command, which starts each mechanism once (unshare's several process
// starts included). A target that is up answers in a second or two.
const DefaultProbeTimeout = 30 * time.Second

// maxProbeOutput bounds what is kept of the probe's output: it is a few
// lines, and the target could send more.
const maxProbeOutput = 16 << 10

// SSHProber probes a target over SSH with the connection's key, accepting
// only its pinned host keys. The zero value dials with net.Dialer.
type SSHProber struct {
	// Dial opens the TCP connection; net.Dialer.DialContext if nil.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Timeout bounds the whole probe; DefaultProbeTimeout if zero.
	Timeout time.Duration
}

// Probe runs readsandbox's probe on t's login shell and says what it
// found. A probe that cannot run (no connection, a refused key, a host key
// that is not pinned) finds nothing and leaves the target unprobed, saying
// why: it proves nothing about the target's sandbox.
func (p SSHProber) Probe(ctx context.Context, t recipes.Target, signer ssh.Signer) store.SandboxProbe {
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = DefaultProbeTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	unprobed := func(format string, args ...any) store.SandboxProbe {
		return store.SandboxProbe{Found: store.SandboxUnprobed, Message: "not probed: " + fmt.Sprintf(format, args...)}
	}
	token, err := probeToken()
	if err != nil {
		return unprobed("%v", err)
	}
	command, err := readsandbox.Probe(token)
	if err != nil {
		return unprobed("%v", err)
	}
	dial := p.Dial
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	nc, err := dial(ctx, "tcp", t.Addr)
	if err != nil {
		return unprobed("cannot reach %s: %v", t.Addr, err)
	}
	// Closing the connection when the context ends unblocks the handshake
	// and the session alike; the deadline covers a dialer that ignores ctx.
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	defer stop()
	defer nc.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	hostKeys := t.HostKeys
	if hostKeys == nil {
		return unprobed("no host key is pinned")
	}
	c, chans, reqs, err := ssh.NewClientConn(nc, t.Addr, &ssh.ClientConfig{
		User: t.User, Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)}, HostKeyCallback: hostKeys,
	})
	if err != nil {
		return unprobed("handshake with %s: %v", t.Addr, err)
	}
	client := ssh.NewClient(c, chans, reqs)
	defer client.Close()
	sess, err := client.NewSession()
	if err != nil {
		return unprobed("no session: %v", err)
	}
	defer sess.Close()
	var out probeOutput
	sess.Stdout, sess.Stderr = &out, &out
	err = sess.Run(command)
	var exit *ssh.ExitError
	switch {
	case ctx.Err() != nil:
		return unprobed("the probe did not finish within %v", timeout)
	case err != nil && !errors.As(err, &exit):
		return unprobed("the probe failed: %v", err)
	}
	res := readsandbox.ParseProbe(out.String())
	found := store.SandboxNone
	switch res.Found {
	case readsandbox.Bwrap:
		found = store.SandboxBwrap
	case readsandbox.Unshare:
		found = store.SandboxUnshare
	}
	return store.SandboxProbe{Found: found, Message: res.Summary()}
}

// probeToken names the probe's files (readsandbox.Probe).
func probeToken() (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("manage: probe token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// probeOutput keeps the first maxProbeOutput bytes of stdout and stderr
// together. The session writes them from two goroutines, hence the mutex.
type probeOutput struct {
	// mu protects b.
	mu sync.Mutex
	b  strings.Builder
}

func (o *probeOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if room := maxProbeOutput - o.b.Len(); room > 0 {
		o.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (o *probeOutput) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}

// probe finds the read sandbox of c's target, unless its recipe says the
// target has no shell (network gear, git hosting), where there is none to
// wrap a command in.
func (m *Manager) probe(ctx context.Context, c *candidate, timeout time.Duration) (store.SandboxProbe, error) {
	r, err := m.cat.ForConnection(c.recipe, c.host)
	if err != nil {
		return store.SandboxProbe{}, fmt.Errorf("manage: sandbox probe of %s: %w", c.alias, err)
	}
	if r != nil && r.Shell == shellclass.None {
		return store.SandboxProbe{Found: store.SandboxNone, Message: "the target has no shell (recipe " + r.Key + ")"}, nil
	}
	pinned := store.Connection{Alias: c.alias, HostKeys: c.pins}
	hostKeys, err := pinned.HostKeyCallback()
	if err != nil {
		return store.SandboxProbe{}, err
	}
	prober := m.prober
	if sp, ok := prober.(SSHProber); ok && timeout > 0 {
		sp.Timeout = max(timeout, sp.Timeout)
		prober = sp
	}
	return prober.Probe(ctx, recipes.Target{Name: c.alias, Addr: c.addr(), User: c.user, HostKeys: hostKeys}, c.signer), nil
}

// probeText is a probe's outcome in one line, for the audit row and the
// CLI: the mechanism, or none and why.
func probeText(p store.SandboxProbe) string {
	switch p.Found {
	case store.SandboxBwrap, store.SandboxUnshare:
		return string(p.Found)
	}
	if p.Message == "" {
		return string(p.Found)
	}
	return string(p.Found) + " (" + p.Message + ")"
}

// checkReadSandbox checks a read sandbox setting and its reason before
// anything is dialed; the store checks them again when it writes.
func checkReadSandbox(alias string, rs store.ReadSandbox, reason string) error {
	if _, err := store.ParseReadSandbox(string(rs)); err != nil {
		return err
	}
	switch reason = strings.TrimSpace(reason); {
	case rs == store.ReadSandboxOff && reason == "":
		return store.Invalidf("connection %s: say why the read sandbox is off (what it breaks on the target)", alias)
	case rs != store.ReadSandboxOff && reason != "":
		return store.Invalidf("connection %s: a reason goes with read sandbox off only", alias)
	}
	// The reason is shown to every admin (the page, the CLI, warnings,
	// the audit log): the rules of a denial's reason, in the layer every
	// door uses, CLI, page, REST and apply alike.
	return policy.CheckAdminText("read sandbox reason", reason, store.MaxSandboxReason)
}

// readSandboxText is a setting for the audit row: "require", or "off
// (REASON)".
func readSandboxText(rs store.ReadSandbox, reason string) string {
	if rs == store.ReadSandboxOff {
		return "off (" + strings.TrimSpace(reason) + ")"
	}
	return string(rs)
}

// probeAfter probes c's target once its key check passed, and keeps the
// outcome in res.
func (m *Manager) probeAfter(ctx context.Context, c *candidate, res *ConnectionResult, timeout time.Duration) (*store.SandboxProbe, error) {
	p, err := m.probe(ctx, c, timeout)
	if err != nil {
		return nil, err
	}
	res.Probed, res.Probe = true, p
	return &p, nil
}

// probeForEdit is the probe an edit records: a new one when the target
// was dialed and its key passed (what the sandbox depends on may have
// changed), or when the setting becomes auto or require (so that what it
// uses is current); none that forgets the old one when the target changed
// without a check; nil to keep what is recorded. A probe that could not run
// on an unchanged target keeps the recorded outcome.
func (m *Manager) probeForEdit(ctx context.Context, c *candidate, res *ConnectionResult, e ConnectionEdit, opts CheckOptions, dialed bool, check *store.KeyCheck) (*store.SandboxProbe, error) {
	switch {
	case dialed && check != nil && check.Status == store.KeyOK:
		return m.probeAfter(ctx, c, res, opts.Timeout)
	case dialed:
		return &store.SandboxProbe{Found: store.SandboxUnprobed}, nil
	case e.ReadSandbox != nil && *e.ReadSandbox != store.ReadSandboxOff && !opts.NoCheck:
		p, err := m.probeAfter(ctx, c, res, opts.Timeout)
		if err != nil || p.Found == store.SandboxUnprobed {
			return nil, err
		}
		return p, nil
	}
	return nil, nil
}

// noProber is the prober of a Manager whose key checks are faked: it
// probes nothing.
type noProber struct{}

func (noProber) Probe(context.Context, recipes.Target, ssh.Signer) store.SandboxProbe {
	return store.SandboxProbe{Found: store.SandboxUnprobed, Message: "not probed: key checks are faked"}
}
