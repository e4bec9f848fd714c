package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/postern/postern/internal/demotarget"
	"github.com/postern/postern/manage"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/recipes"
	"github.com/postern/postern/store"
	"github.com/postern/postern/web"
)

// Names the demo uses, inside its own data directory.
const (
	defaultDemoDir    = "./postern-demo"
	demoAgent         = "demo-agent"
	demoAlias         = "demo"
	demoAgentKeyFile  = "agent_ed25519"                // the agent's private key; .pub beside it
	demoKnownHosts    = "known_hosts"                  // pins the bastion for the printed ssh lines
	demoTargetKeyFile = "demo_target_host_ed25519_key" // kept so the pin survives restarts
	demoTargetRoot    = "target-root"                  // the demo target's scratch directory
	demoAdmin         = "admin"                        // the web page's admin
)

// demoRules are the demo grant's rules: reads run at once, and everything
// else waits for an admin, which is the flow the demo is there to show.
func demoRules() store.Rules {
	return store.Rules{Read: store.RuleAllow, Write: store.RuleAsk, Destructive: store.RuleAsk}
}

func newDemoCmd() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run a bastion with a demo target and print the ssh lines to try",
		Long: `demo shows postern with nothing installed beyond Go. It sets up a data
directory (re-used on the next run), an agent key pair, an in-process demo
target (an SSH server that runs commands with /bin/sh inside DIR/` + demoTargetRoot + `),
the connection "` + demoAlias + `" to it with read=allow, write=ask, destructive=ask,
and serves the bastion and, on --http-listen (default ` + defaultDemoHTTPListen + `), the admin web
page with a self-signed certificate, for the admin "` + demoAdmin + `" whose password is
generated anew each run. It prints the ssh commands to try, the web page's
address, the admin's password and the certificate's fingerprint, and how to
approve. Each run moves the connection to the demo target's new port and
sets the demo grant back to these rules. Ctrl-C stops the bastion and the
demo target.

The demo data directory is its own: ` + envData + ` and ` + envMasterKeyFile + `
are not used.`,
		Args: exactArgs(0, "no arguments"),
	}
	cmd.Flags().StringVar(&dir, "dir", defaultDemoDir, "demo data directory (created if missing)")
	flags := addServeFlags(cmd)
	wflags := addWebFlags(cmd, defaultDemoHTTPListen)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		log, err := flags.check(cmd)
		if err != nil {
			return err
		}
		publicURL, err := wflags.check(cmd)
		if err != nil {
			return err
		}
		if dir == "" {
			return usagef("%s: --dir must not be empty", cmdPath(cmd))
		}
		abs, err := filepath.Abs(dir)
		if err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		ctx, stop := signalContext(cmd.Context())
		defer stop()
		return runDemo(ctx, demoParams{
			Dir:         abs,
			Listen:      flags.listen,
			Web:         wflags,
			PublicURL:   publicURL,
			ApprovalTTL: flags.approvalTTL,
			Limits:      flags.limits,
			Out:         cmd.OutOrStdout(),
			Logger:      log,
			Self:        selfCommand(),
		})
	}
	return cmd
}

// demoParams is the input of runDemo.
type demoParams struct {
	Dir         string    // absolute demo data directory
	Listen      string    // bastion address
	Web         *webFlags // the web page's flags; its listen "" serves none
	PublicURL   string    // checked --public-url, "" to follow the listener
	ApprovalTTL time.Duration
	Limits      limitFlags
	Out         io.Writer // where the instructions go
	Logger      zerolog.Logger
	Self        string // how to run postern again, for the approve line
}

// runDemo sets the demo up, prints the instructions and serves until ctx
// ends. Everything it starts is stopped before it returns: the bastion, the
// demo target, then the store.
func runDemo(ctx context.Context, p demoParams) error {
	log := p.Logger
	// The data directory's lock first, when the directory exists: an
	// earlier demo (or a serve) still running on it is named by its pid
	// before its ports are tried. A directory that does not exist has no
	// holder: listening comes first then, so that a port in use fails
	// before anything is created.
	d := store.Dir{Path: p.Dir}
	var lock *store.DirLock
	takeLock := func() error {
		l, err := d.Lock()
		if err != nil {
			return lockErr("demo", d, err)
		}
		lock = l
		return nil
	}
	if _, err := os.Stat(p.Dir); err == nil {
		if err := takeLock(); err != nil {
			return err
		}
	}
	defer func() { lock.Unlock() }()
	ln, err := net.Listen("tcp", p.Listen)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	var webLn net.Listener
	serving := false // once runBastion has them, the listeners are runBastion's to close
	defer func() {
		if !serving {
			ln.Close()
			if webLn != nil {
				webLn.Close()
			}
		}
	}()
	if p.Web.listen != "" {
		if webLn, err = net.Listen("tcp", p.Web.listen); err != nil {
			return fmt.Errorf("demo: web: %w", err)
		}
	}
	if lock == nil {
		if err := os.MkdirAll(p.Dir, 0o700); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		if err := takeLock(); err != nil {
			return err
		}
	}
	if _, err := d.Init(ctx, store.Options{}); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	st, err := d.Open(ctx, store.Options{})
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	defer closeStore(st, log)

	// The demo's set-up is made as any admin's change, through manage,
	// each with its audit row, by the OS account that ran the demo.
	cat, err := recipes.Load()
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	m, err := newManager(st, cat, 0)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	by := osActor("demo")

	agentKeyPath := filepath.Join(p.Dir, demoAgentKeyFile)
	agentKey, err := loadOrCreateKey(agentKeyPath, demoAgent+"@postern-demo", true)
	if err != nil {
		return fmt.Errorf("demo: agent key: %w", err)
	}
	if err := ensureDemoAgent(ctx, m, by, agentKey.PublicKey()); err != nil {
		return fmt.Errorf("demo: %w", err)
	}

	// The connection's key: the sealed one from an earlier run, or a new
	// one that lives only in memory until CreateConnection seals it.
	conn, err := st.ConnectionByAlias(ctx, demoAlias)
	var connKeyPEM []byte
	var connPub ssh.PublicKey
	switch {
	case errors.Is(err, store.ErrNotFound):
		conn = nil
		signer, pemBytes, err := newEd25519Key("postern demo connection")
		if err != nil {
			return fmt.Errorf("demo: connection key: %w", err)
		}
		connKeyPEM, connPub = pemBytes, signer.PublicKey()
	case err != nil:
		return fmt.Errorf("demo: %w", err)
	default:
		signer, err := st.ConnectionSigner(ctx, conn.ID)
		if err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		connPub = signer.PublicKey()
	}

	targetKey, err := loadOrCreateKey(filepath.Join(p.Dir, demoTargetKeyFile), "postern demo target", false)
	if err != nil {
		return fmt.Errorf("demo: demo target host key: %w", err)
	}
	target, err := demotarget.Start(demotarget.Config{
		Dir:           filepath.Join(p.Dir, demoTargetRoot),
		AuthorizedKey: connPub,
		HostKey:       targetKey,
		Logger:        log,
		// README promises commands confined to target-root; where
		// bubblewrap cannot run, the target warns that they are not.
		Confine: true,
	})
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	defer func() {
		if err := target.Close(); err != nil {
			log.Error().Err(err).Msg("close demo target")
		}
	}()

	if err := ensureDemoConnection(ctx, m, by, conn, connKeyPEM, target); err != nil {
		return fmt.Errorf("demo: connection %s: %w", demoAlias, err)
	}
	clear(connKeyPEM)
	// The grant is made once: an admin's later change of its rules (or
	// its revocation and a new grant) is theirs to keep, not the next
	// run's to undo.
	if _, err := st.GrantByNames(ctx, demoAgent, demoAlias); errors.Is(err, store.ErrNotFound) {
		r := demoRules()
		if _, err := m.SetGrant(ctx, by, demoAgent, demoAlias, manage.RulesChange{Read: &r.Read, Write: &r.Write, Destructive: &r.Destructive}); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
	} else if err != nil {
		return fmt.Errorf("demo: %w", err)
	}

	hostKey, err := d.HostKey()
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	host, port := dialableAddr(ln.Addr().(*net.TCPAddr))
	khPath := filepath.Join(p.Dir, demoKnownHosts)
	khLine := knownhosts.Line([]string{knownhosts.Normalize(net.JoinHostPort(host, strconv.Itoa(port)))}, hostKey.PublicKey())
	if err := os.WriteFile(khPath, []byte(khLine+"\n"), 0o644); err != nil {
		return fmt.Errorf("demo: %w", err)
	}

	in := demoInstructions{
		Dir: p.Dir, Host: host, Port: port, KeyPath: agentKeyPath, KnownHosts: khPath,
		HostKey: ssh.FingerprintSHA256(hostKey.PublicKey()), Target: target, Self: p.Self,
	}
	hint := cliApproveHint
	var wp *webParams
	// The admin decides on the page and with the CLI (--as admin), so it
	// exists with or without the page; its password is shown only with it.
	password, err := ensureDemoAdmin(ctx, m, by)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if webLn != nil {
		if wp, err = loadWeb(webLn, p.Web, p.PublicURL, p.Dir, time.Now()); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		in.AdminPassword = password
		in.WebURL, in.CertFingerprint = wp.URL, wp.Cert.Fingerprint
		hint = webApproveHint(wp.URL)
	}
	printDemoInstructions(p.Out, in)
	serving = true
	return runBastion(ctx, bastionParams{
		Store:       st,
		HostKey:     hostKey,
		Listener:    ln,
		Web:         wp,
		ApprovalTTL: p.ApprovalTTL,
		ApproveHint: hint,
		Logger:      log,
		DataDir:     p.Dir,
		Database:    filepath.Join(p.Dir, store.DatabaseFile),
		Limits:      p.Limits,
	})
}

// demoInstructions is what printDemoInstructions shows.
type demoInstructions struct {
	Dir, Host  string
	Port       int
	KeyPath    string
	KnownHosts string
	HostKey    string // fingerprint
	Target     *demotarget.Target
	Self       string
	// The web page; WebURL "" when it is off.
	WebURL          string
	CertFingerprint string
	AdminPassword   string // of demoAdmin, new each run
}

// printDemoInstructions prints the exact commands to try. Tests parse the
// "bastion", "web page" and "admin" lines and the ssh lines, so their shape
// is part of the contract.
func printDemoInstructions(w io.Writer, in demoInstructions) {
	sshCmd := fmt.Sprintf("ssh -i %s -o IdentitiesOnly=yes -o UserKnownHostsFile=%s -p %d",
		shellQuote(in.KeyPath), shellQuote(in.KnownHosts), in.Port)
	r := demoRules()
	fmt.Fprintf(w, "postern demo is running\n")
	fmt.Fprintf(w, "  bastion      %s  (host key %s)\n", net.JoinHostPort(in.Host, strconv.Itoa(in.Port)), in.HostKey)
	fmt.Fprintf(w, "  demo target  %s  runs commands with /bin/sh in %s\n", in.Target.Addr(), in.Target.Dir())
	fmt.Fprintf(w, "  agent        %s, key %s\n", demoAgent, in.KeyPath)
	fmt.Fprintf(w, "  grant        %s on %s: read=%s write=%s destructive=%s\n", demoAgent, demoAlias, r.Read, r.Write, r.Destructive)
	if in.WebURL != "" {
		fmt.Fprintf(w, "  web page     %s  (self-signed; certificate SHA-256 %s)\n", in.WebURL, in.CertFingerprint)
		fmt.Fprintf(w, "  admin        %s  password %s  (shown only now; a new one each run)\n", demoAdmin, in.AdminPassword)
	}
	fmt.Fprintf(w, "\nTry, from another terminal:\n")
	fmt.Fprintf(w, "  %s %s %s uptime\n", sshCmd, in.Host, demoAlias)
	fmt.Fprintf(w, "  %s %s@%s 'ls -la'\n", sshCmd, demoAlias, in.Host)
	fmt.Fprintf(w, "  %s %s %s 'echo hi > note.txt'    # waits: approve with\n", sshCmd, in.Host, demoAlias)
	fmt.Fprintf(w, "  %s approvals approve ID --as %s --data %s\n", in.Self, demoAdmin, shellQuote(in.Dir))
	if in.WebURL != "" {
		fmt.Fprintf(w, "  # or log in at %s and approve it there\n", in.WebURL)
	}
	fmt.Fprintf(w, "  %s %s    # lists your connections and their rules\n", sshCmd, in.Host)
	fmt.Fprintf(w, "\nCtrl-C stops the bastion and the demo target.\n")
}

// dialableAddr is where a client on this machine reaches a listener: an
// unspecified listen address (0.0.0.0, ::) is reached on loopback.
func dialableAddr(a *net.TCPAddr) (string, int) {
	switch {
	case a.IP == nil || (a.IP.IsUnspecified() && a.IP.To4() != nil):
		return "127.0.0.1", a.Port
	case a.IP.IsUnspecified():
		return "::1", a.Port
	}
	return a.IP.String(), a.Port
}

// shellQuote quotes s for a POSIX shell when it needs it, so that the
// printed lines can be pasted even when the demo directory has spaces.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+=:@,", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// selfCommand is how the admin runs postern again, for the approve line:
// "go run ./cmd/postern" when this binary was built by go run (it lives in
// the go-build cache), otherwise the command it was started as.
func selfCommand() string {
	exe, err := os.Executable()
	if err == nil && strings.Contains(exe, string(filepath.Separator)+"go-build") {
		return "go run ./cmd/postern"
	}
	if len(os.Args) > 0 && os.Args[0] != "" {
		return shellQuote(os.Args[0])
	}
	return "postern"
}

// currentUserName is the OS user the demo target's commands run as, which
// is the target user of the demo connection.
func currentUserName() string {
	if n := osUserName(); n != "" && !strings.ContainsAny(n, " \t\r\n@:/") {
		return n
	}
	return "demo"
}

// ensureDemoAgent registers demo-agent with key, or gives an existing
// demo-agent the key (a deleted key file makes a new one) and enables it.
func ensureDemoAgent(ctx context.Context, m *manage.Manager, by policy.Actor, key ssh.PublicKey) error {
	line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key))) + " " + demoAgent + "@postern-demo"
	a, err := m.Store().AgentByName(ctx, demoAgent)
	if errors.Is(err, store.ErrNotFound) {
		_, err = m.AddAgent(ctx, by, demoAgent, []string{line})
		return err
	}
	if err != nil {
		return err
	}
	fp := ssh.FingerprintSHA256(key)
	has := false
	for _, k := range a.Keys {
		has = has || k.Fingerprint == fp
	}
	if !has {
		if _, err := m.AddAgentKey(ctx, by, demoAgent, line); err != nil {
			return err
		}
	}
	if a.Disabled {
		if _, err := m.SetAgentDisabled(ctx, by, demoAgent, false); err != nil {
			return err
		}
	}
	return nil
}

// ensureDemoConnection creates the demo connection with keyPEM (conn nil:
// the first run), or points it at the demo target's address, which is new
// each run. The key check is not run: the demo target is started by this
// process a moment before and accepts exactly that key.
func ensureDemoConnection(ctx context.Context, m *manage.Manager, by policy.Actor, conn *store.Connection, keyPEM []byte, target *demotarget.Target) error {
	pin := []string{target.KnownHostsLine()}
	opts := manage.CheckOptions{NoCheck: true}
	if conn == nil {
		_, err := m.AddConnection(ctx, by, manage.ConnectionSpec{
			Alias: demoAlias, Host: target.Host(), Port: target.Port(), User: currentUserName(),
			PrivateKey: keyPEM, HostKeys: pin, Env: store.EnvDev,
		}, opts)
		return err
	}
	host, port := target.Host(), target.Port()
	e := manage.ConnectionEdit{Host: &host, Port: &port}
	if !slices.Equal(conn.HostKeys, pin) {
		e.HostKeys = pin
	}
	if host == conn.Host && port == conn.Port && e.HostKeys == nil {
		return nil
	}
	_, err := m.UpdateConnection(ctx, by, demoAlias, e, opts)
	return err
}

// newEd25519Key makes a key pair and its unencrypted OpenSSH PEM file.
func newEd25519Key(comment string) (ssh.Signer, []byte, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	block, err := ssh.MarshalPrivateKey(priv, comment)
	if err != nil {
		return nil, nil, err
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return nil, nil, err
	}
	return signer, pem.EncodeToMemory(block), nil
}

// loadOrCreateKey reads the private key at path, or creates it (mode 0600)
// with, when withPub, its public half at path.pub, as ssh-keygen would. An
// existing key file gets mode 0600 back, since ssh refuses a key others can
// read. Errors name the file, never its content.
func loadOrCreateKey(path, comment string, withPub bool) (ssh.Signer, error) {
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		signer, err := ssh.ParsePrivateKey(b)
		clear(b)
		if err != nil {
			return nil, fmt.Errorf("%s is not an unencrypted private key (remove it to make a new one)", path)
		}
		if err := os.Chmod(path, 0o600); err != nil {
			return nil, err
		}
		if withPub {
			err = writePublicKey(path+".pub", signer.PublicKey(), comment)
		}
		return signer, err
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	signer, pemBytes, err := newEd25519Key(comment)
	if err != nil {
		return nil, err
	}
	defer clear(pemBytes)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	_, err = f.Write(pemBytes)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return nil, err
	}
	if withPub {
		if err := writePublicKey(path+".pub", signer.PublicKey(), comment); err != nil {
			return nil, err
		}
	}
	return signer, nil
}

// writePublicKey writes key in authorized_keys form (mode 0644).
func writePublicKey(path string, key ssh.PublicKey, comment string) error {
	line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key))) + " " + comment + "\n"
	return os.WriteFile(path, []byte(line), 0o644)
}

// ensureDemoAdmin gives the demo's admin a new generated password, creating
// the admin on the first run, and returns the password to print. A new one
// each run means no password outlives the run that showed it.
func ensureDemoAdmin(ctx context.Context, m *manage.Manager, by policy.Actor) (string, error) {
	pw := newPassword()
	hash, err := web.HashPassword(pw)
	if err != nil {
		return "", err
	}
	_, err = m.SetAdminPassword(ctx, by, demoAdmin, hash)
	if errors.Is(err, store.ErrNotFound) {
		_, err = m.AddAdmin(ctx, by, demoAdmin, hash, store.RoleOwner)
	}
	if err != nil {
		return "", err
	}
	return pw, nil
}
