package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/crypto/ssh"

	"github.com/postern/postern/manage"
	"github.com/postern/postern/model"
	"github.com/postern/postern/recipes"
	"github.com/postern/postern/store"
)

func newConnCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "conn",
		Short: "Register and manage connections (the targets agents reach)",
		Args:  cobra.ArbitraryArgs,
		RunE:  groupRunE,
	}
	data := addDataFlag(cmd)
	addAsFlag(cmd, data)
	cmd.AddCommand(
		newConnAddCmd(data),
		newConnListCmd(data),
		newConnUpdateCmd(data),
		newConnPinCmd(data),
		newConnRotateKeyCmd(data),
		newConnCheckCmd(data),
		newConnRemoveCmd(data),
	)
	return cmd
}

// checkFlags are the flags of every command that runs a key check before
// storing a change.
type checkFlags struct {
	allowUnverified bool
	noCheck         bool
	timeout         time.Duration
	out             *outputFlag
}

func addCheckFlags(cmd *cobra.Command) *checkFlags {
	f := &checkFlags{}
	fl := cmd.Flags()
	fl.BoolVar(&f.allowUnverified, "allow-unverified", false,
		"keep the change when the key check is rejected, unreachable or unproved (a target not ready yet); never on a host key mismatch")
	fl.BoolVar(&f.noCheck, "no-check", false, "store without connecting to the target (the status becomes unchecked)")
	fl.DurationVar(&f.timeout, "timeout", recipes.DefaultCheckTimeout, "bound on the key check (and on fetching a host key)")
	f.out = addOutputFlag(cmd)
	return f
}

func (f *checkFlags) options(cmd *cobra.Command) (manage.CheckOptions, error) {
	if f.timeout <= 0 {
		return manage.CheckOptions{}, usagef("%s: --timeout must be positive", cmdPath(cmd))
	}
	return manage.CheckOptions{AllowUnverified: f.allowUnverified, NoCheck: f.noCheck, Timeout: f.timeout}, nil
}

// errNotProved makes a command exit 1 after its answer is printed, for a
// key check that did not prove the key, so that scripts can tell it from
// ok.
var errNotProved = errors.New("the key was not proved to work")

// reportConnection prints what a change or check of a connection did (as
// text, or with -o json as model.ConnectionResult) and returns the error
// the command exits with: the refusal when nothing was stored, errNotProved
// when the change was kept with a key not proved and unverified changes
// were not allowed, nil otherwise.
func reportConnection(cmd *cobra.Command, res manage.ConnectionResult, err error, f *checkFlags) error {
	var ns *manage.NotStoredError
	if err != nil && !errors.As(err, &ns) {
		return manageErr(err)
	}
	asJSON, jerr := f.out.json()
	if jerr != nil {
		return jerr
	}
	w := cmd.OutOrStdout()
	if asJSON {
		if werr := writeJSON(w, res.Model()); werr != nil {
			return werr
		}
	} else {
		printConnectionResult(w, res)
	}
	if res.Stored {
		warnReadSandbox(cmd, res)
	}
	switch {
	case err != nil:
		return manageErr(err)
	case res.Checked && res.Check.Status != recipes.StatusOK && res.Stored:
		fmt.Fprintf(cmd.ErrOrStderr(), "postern: warning: %s is stored but its key is not proved: %s\n",
			res.Conn.Alias, manage.CheckText(res.Check))
		if res.Generated {
			fmt.Fprintf(cmd.ErrOrStderr(), "postern: add the public key above to %s's authorized_keys on %s, then run: postern conn check %s\n",
				res.Conn.User, res.Conn.Host, res.Conn.Alias)
		}
		if !f.allowUnverified {
			return errNotProved
		}
	case f.noCheck && res.Stored:
		fmt.Fprintf(cmd.ErrOrStderr(), "postern: warning: %s was not checked (--no-check); run: postern conn check %s\n",
			res.Conn.Alias, res.Conn.Alias)
	}
	return nil
}

// printConnectionResult tells a person what happened, one fact a line.
func printConnectionResult(w io.Writer, res manage.ConnectionResult) {
	if k := res.ScannedHostKey; k != nil {
		fmt.Fprintf(w, "host key presented now: %s %s (compare it with the target's own)\n", k.Type(), ssh.FingerprintSHA256(k))
	}
	if p, c := res.Previous, res.Conn; p != nil && c != nil && res.Stored {
		if old, now := fingerprints(p), fingerprints(c); old != now {
			fmt.Fprintf(w, "host key: %s -> %s\n", old, now)
		}
	}
	if res.Generated && res.PublicKey != nil {
		alias := ""
		if res.Conn != nil {
			alias = res.Conn.Alias
		}
		fmt.Fprintf(w, "public key, for the target's authorized_keys (the private half is sealed and never shown):\n  %s\n",
			model.AuthorizedKeyLine(res.PublicKey, alias))
	}
	if res.Checked {
		fmt.Fprintf(w, "key check: %s\n", manage.CheckText(res.Check))
	}
	printReadSandbox(w, res)
	c := res.Conn
	switch {
	case c == nil:
		fmt.Fprintln(w, "nothing was stored")
	case res.Unchanged:
		fmt.Fprintf(w, "connection %s unchanged: host key %s is pinned already\n", c.Alias, fingerprints(c))
	case !res.Stored:
		fmt.Fprintf(w, "connection %s was not changed\n", c.Alias)
	case res.Previous == nil:
		fmt.Fprintf(w, "added connection %s (%s): %s@%s, env %s, pinned %s, key %s\n",
			c.Alias, c.ID, c.User, c.Addr(), c.Env, fingerprints(c), ssh.FingerprintSHA256(res.PublicKey))
		fmt.Fprintf(w, "next: postern grant AGENT %s\n", c.Alias)
	default:
		fmt.Fprintf(w, "updated connection %s (%s): %s@%s, env %s, pinned %s, key %s; its grants stay\n",
			c.Alias, c.ID, c.User, c.Addr(), c.Env, fingerprints(c), ssh.FingerprintSHA256(res.PublicKey))
	}
}

// fingerprints lists a connection's pinned host keys by fingerprint.
func fingerprints(c *store.Connection) string {
	return strings.Join(hostKeyFPs(c), ", ")
}

// connAddFlags are the flags of conn add.
type connAddFlags struct {
	host      string
	port      int
	user      string
	keyFile   string
	generate  bool
	hostKeys  []string
	acceptNew bool
	env       string
	recipe    string
	sandbox   readSandboxFlags
	record    string
	check     *checkFlags
}

func newConnAddCmd(data *dataFlag) *cobra.Command {
	var f connAddFlags
	cmd := &cobra.Command{
		Use:   "add ALIAS --host H --user U (--key-file FILE | --generate-key) (--host-key LINE | --accept-new-host-key)",
		Short: "Register a target: its address, user, key and pinned host key, proved by a key check",
		Long: `add registers a connection that agents reach as ALIAS. The private key
(--key-file, - for stdin) is sealed with the master key and never shown
again; it must not need a passphrase. With --generate-key postern makes an
ed25519 key pair itself, seals the private half and prints the public line
for the target's authorized_keys: no person ever holds the private key.

The target's host key is pinned from --host-key (a known_hosts line or a
bare public key; repeat for several keys) or, with --accept-new-host-key,
fetched from the target now and printed so that you can compare its
fingerprint.

Before anything is stored, postern proves the key: it connects with the
key and the pinned host key and runs the recipe's harmless read (see
postern conn check). ok stores the connection. A host key mismatch stores
nothing. Rejected, unreachable or unproved store nothing either, and exit
1, unless --allow-unverified (a target not set up yet: stored with the
status, a warning, exit 0). A generated key is stored whatever the target
says but a host key mismatch, since its public half must be installed
first; add exits 1 until the check passes unless --allow-unverified.
--no-check stores without connecting.

Once the key check passes, add probes the target for the read sandbox,
in which postern runs every command it lets through as read with the whole
filesystem read-only: bubblewrap if installed, else util-linux's unshare,
else none, and records what it found (conn list shows it). --read-sandbox
says what reads do with it: auto (the default) uses what the probe found
and runs reads on the classifier's verdict alone where it found none;
require refuses reads when no sandbox works (what production targets
should have); off never sandboxes, with --read-sandbox-reason saying what
it breaks.

--record says what of the connection's sessions postern records, sealed,
for admins to play back (postern recording): off (the default), exec (the
output of commands without a terminal) or all (also terminal sessions).
Recording has privacy costs: see SECURITY.md.`,
		Args: exactArgs(1, "the connection ALIAS"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runConnAdd(cmd, data, args[0], f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.host, "host", "", "target host name or address (required)")
	fl.IntVar(&f.port, "port", store.DefaultSSHPort, "target SSH port")
	fl.StringVar(&f.user, "user", "", "user on the target (required)")
	fl.StringVar(&f.keyFile, "key-file", "", "private key file for the target, - for stdin")
	fl.BoolVar(&f.generate, "generate-key", false, "make an ed25519 key pair here and print its public line")
	fl.StringArrayVar(&f.hostKeys, "host-key", nil, "pinned host key: a known_hosts line or public key (repeatable)")
	fl.BoolVar(&f.acceptNew, "accept-new-host-key", false, "fetch the target's host key now and pin it")
	fl.StringVar(&f.env, "env", string(store.EnvDev), "environment: dev, test, staging or production")
	fl.StringVar(&f.recipe, "recipe", "", "recipe key; empty lets the host pick the recipe when the bastion connects")
	f.sandbox.add(cmd, string(store.ReadSandboxAuto))
	addRecordFlag(cmd, &f.record, string(store.RecordOff))
	f.check = addCheckFlags(cmd)
	return cmd
}

func runConnAdd(cmd *cobra.Command, data *dataFlag, alias string, f connAddFlags) error {
	if f.host == "" {
		return usagef("conn add: --host is required")
	}
	if f.user == "" {
		return usagef("conn add: --user is required")
	}
	if f.port < 1 || f.port > 65535 {
		return usagef("conn add: --port %d is out of range 1-65535", f.port)
	}
	switch {
	case len(f.hostKeys) > 0 && f.acceptNew:
		return usagef("conn add: give --host-key or --accept-new-host-key, not both")
	case len(f.hostKeys) == 0 && !f.acceptNew:
		return usagef("conn add: the target's host key must be pinned: give --host-key 'KNOWN_HOSTS LINE' or --accept-new-host-key")
	case f.keyFile != "" && f.generate:
		return usagef("conn add: give --key-file or --generate-key, not both")
	case f.keyFile == "" && !f.generate:
		return usagef("conn add: give the target's private key with --key-file FILE, or --generate-key")
	}
	opts, err := f.check.options(cmd)
	if err != nil {
		return err
	}
	if _, err := f.check.out.json(); err != nil {
		return err
	}
	env, err := store.ParseEnv(f.env)
	if err != nil {
		return storeErr(err)
	}
	rs, err := store.ParseReadSandbox(f.sandbox.setting)
	if err != nil {
		return storeErr(err)
	}
	rec, err := store.ParseRecord(f.record)
	if err != nil {
		return storeErr(err)
	}
	spec := manage.ConnectionSpec{Alias: alias, Host: f.host, Port: f.port, User: f.user, Env: env, Recipe: f.recipe,
		HostKeys: f.hostKeys, AcceptNewHostKey: f.acceptNew, GenerateKey: f.generate,
		ReadSandbox: rs, ReadSandboxReason: f.sandbox.reason, Record: rec}
	if f.keyFile != "" {
		if spec.PrivateKey, err = readInput(cmd, f.keyFile, "private key file (--key-file)"); err != nil {
			return err
		}
		defer clear(spec.PrivateKey)
	}
	return withManager(cmd.Context(), data, func(m *manage.Manager) error {
		res, err := m.AddConnection(cmd.Context(), data.actor("cli"), spec, opts)
		if err != nil && !res.Checked {
			return manageErr(err)
		}
		return reportConnection(cmd, res, err, f.check)
	})
}

// connUpdateFlags are the flags of conn update.
type connUpdateFlags struct {
	host, user, env, recipe string
	port                    int
	sandbox                 readSandboxFlags
	record                  string
	check                   *checkFlags
}

func newConnUpdateCmd(data *dataFlag) *cobra.Command {
	var f connUpdateFlags
	cmd := &cobra.Command{
		Use:   "update ALIAS [--host H] [--port P] [--user U] [--env E] [--recipe R] [--read-sandbox auto|require|off] [--record off|exec|all]",
		Short: "Move or relabel a connection, keeping its id, key, pins and grants",
		Long: `update changes a connection in place: its id, sealed key, pinned host keys,
grants and approvals stay. A new host, port, user or recipe re-runs the key
check against the connection as changed, and is stored as conn add's
rules say (a host key mismatch stores nothing: the new address presents
another host key, so re-pin with postern conn pin). A new --env alone is
stored without connecting; moving to production is refused while a grant
allows destructive operations. A new --read-sandbox (auto or require)
probes the target for the read sandbox again, as a changed target does;
off needs --read-sandbox-reason. --record changes what is recorded (see
conn add); recording less on a production connection waits for a second
admin. The change is audited.`,
		Args: exactArgs(1, "the connection ALIAS"),
	}
	fl := cmd.Flags()
	fl.StringVar(&f.host, "host", "", "new target host name or address")
	fl.IntVar(&f.port, "port", 0, "new target SSH port")
	fl.StringVar(&f.user, "user", "", "new user on the target")
	fl.StringVar(&f.env, "env", "", "new environment: dev, test, staging or production")
	fl.StringVar(&f.recipe, "recipe", "", `new recipe key ("" with --recipe= for none)`)
	f.sandbox.add(cmd, "")
	addRecordFlag(cmd, &f.record, "")
	f.check = addCheckFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		var e manage.ConnectionEdit
		changed := cmd.Flags().Changed
		if changed("host") {
			e.Host = &f.host
		}
		if changed("port") {
			e.Port = &f.port
		}
		if changed("user") {
			e.User = &f.user
		}
		if changed("env") {
			env, err := store.ParseEnv(f.env)
			if err != nil {
				return storeErr(err)
			}
			e.Env = &env
		}
		if changed("recipe") {
			e.Recipe = &f.recipe
		}
		if changed("read-sandbox") {
			rs, err := store.ParseReadSandbox(f.sandbox.setting)
			if err != nil {
				return storeErr(err)
			}
			e.ReadSandbox = &rs
		}
		e.ReadSandboxReason = f.sandbox.reason
		if changed("record") {
			rec, err := store.ParseRecord(f.record)
			if err != nil {
				return storeErr(err)
			}
			e.Record = &rec
		}
		if e.Host == nil && e.Port == nil && e.User == nil && e.Env == nil && e.Recipe == nil && e.ReadSandbox == nil && e.Record == nil {
			return usagef("conn update: nothing to change: give --host, --port, --user, --env, --recipe, --read-sandbox or --record")
		}
		return runConnEdit(cmd, data, args[0], e, f.check)
	}
	return cmd
}

func newConnPinCmd(data *dataFlag) *cobra.Command {
	var hostKeys []string
	var acceptNew bool
	cmd := &cobra.Command{
		Use:   "pin ALIAS (--host-key LINE | --accept-new-host-key)",
		Short: "Re-pin a connection's host key (a rebuilt target), showing the old and new fingerprints",
		Long: `pin replaces the pinned host keys of a connection: with --host-key (a
known_hosts line or a bare public key, repeatable) or with
--accept-new-host-key, which fetches the key the target presents now and
prints its fingerprint to compare with the target's own. The key check then
runs against the new pin; the connection's id, key and grants stay, and the
change (old and new fingerprints) is audited.`,
		Args: exactArgs(1, "the connection ALIAS"),
	}
	cmd.Flags().StringArrayVar(&hostKeys, "host-key", nil, "pinned host key: a known_hosts line or public key (repeatable)")
	cmd.Flags().BoolVar(&acceptNew, "accept-new-host-key", false, "fetch the target's host key now and pin it")
	check := addCheckFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		switch {
		case len(hostKeys) > 0 && acceptNew:
			return usagef("conn pin: give --host-key or --accept-new-host-key, not both")
		case len(hostKeys) == 0 && !acceptNew:
			return usagef("conn pin: give --host-key 'KNOWN_HOSTS LINE' or --accept-new-host-key")
		}
		return runConnEdit(cmd, data, args[0], manage.ConnectionEdit{HostKeys: hostKeys, AcceptNewHostKey: acceptNew}, check)
	}
	return cmd
}

func newConnRotateKeyCmd(data *dataFlag) *cobra.Command {
	var keyFile string
	var generate, commit, abort, install bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "rotate-key ALIAS (--key-file FILE | --generate [--install] | --commit | --abort)",
		Short: "Rotate a connection's key in stages, keeping its id, pins and grants",
		Long: `rotate-key rotates the key postern authenticates to the target with, without
a moment in which the connection has no working key:

  --generate or --key-file FILE (- for stdin) stages the new key beside the
  current one and prints its line for the target's authorized_keys. Nothing
  switches: agents keep using the current key. Staging again replaces the
  staged key.
  conn check ALIAS then proves both keys.
  --commit proves the staged key against the target now and switches to
  it only if the target accepts it (exit 1 otherwise, nothing switched).
  Pooled upstream connections made with the old key take no new session.
  On a production connection the switch waits for a second admin.
  --abort drops the staged key.
  --generate --install does it all through the current key: appends the
  new line to the target user's ~/.ssh/authorized_keys (once), proves the
  new key, switches, and removes the old key's line there (if that fails,
  it says so and the line stays).

Staging, commit and abort are audited with the fingerprints; the private
key is never shown.`,
		Args: exactArgs(1, "the connection ALIAS"),
	}
	cmd.Flags().StringVar(&keyFile, "key-file", "", "stage this private key file, - for stdin")
	cmd.Flags().BoolVar(&generate, "generate", false, "stage an ed25519 key pair made here and print its public line")
	cmd.Flags().BoolVar(&install, "install", false, "with --generate: install the line through the current key, prove, switch and remove the old line")
	cmd.Flags().BoolVar(&commit, "commit", false, "switch to the staged key once the target accepts it")
	cmd.Flags().BoolVar(&abort, "abort", false, "drop the staged key")
	cmd.Flags().DurationVar(&timeout, "timeout", recipes.DefaultCheckTimeout, "bound on each key check and remote command")
	out := addOutputFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		n := 0
		for _, b := range []bool{keyFile != "", generate, commit, abort} {
			if b {
				n++
			}
		}
		switch {
		case n > 1:
			return usagef("conn rotate-key: give one of --key-file, --generate, --commit or --abort")
		case n == 0:
			return usagef("conn rotate-key: give --key-file FILE or --generate to stage a key, then --commit (or --abort)")
		case install && !generate:
			return usagef("conn rotate-key: --install goes with --generate")
		case timeout <= 0:
			return usagef("conn rotate-key: --timeout must be positive")
		}
		asJSON, err := out.json()
		if err != nil {
			return err
		}
		var key []byte
		if keyFile != "" {
			if key, err = readInput(cmd, keyFile, "private key file (--key-file)"); err != nil {
				return err
			}
			defer clear(key)
		}
		return withManager(cmd.Context(), data, func(m *manage.Manager) error {
			ctx, by, alias := cmd.Context(), data.actor("cli"), args[0]
			var res manage.ConnectionResult
			var err error
			switch {
			case commit:
				res, err = m.CommitStagedKey(ctx, by, alias, timeout)
			case abort:
				res, err = m.AbortStagedKey(ctx, by, alias)
			case install:
				res, err = m.InstallKey(ctx, by, alias, timeout)
			default:
				res, err = m.StageKey(ctx, by, alias, key, generate)
			}
			var nc *manage.NotCommittedError
			var held *manage.HeldError
			shown := res.Rotation != "" && (err == nil || errors.As(err, &nc) || errors.As(err, &held) || len(res.Steps) > 0)
			if shown {
				if asJSON {
					if werr := writeJSON(cmd.OutOrStdout(), res.Model()); werr != nil {
						return werr
					}
				} else {
					printRotation(cmd.OutOrStdout(), res)
				}
			}
			switch {
			case errors.As(err, &nc):
				return userError{err}
			case err != nil:
				return manageErr(err)
			}
			return nil
		})
	}
	return cmd
}

// printRotation tells a person what a rotate-key did, one fact a line.
func printRotation(w io.Writer, res manage.ConnectionResult) {
	for _, s := range res.Steps {
		fmt.Fprintf(w, "- %s\n", s)
	}
	c := res.Conn
	if res.StagedChecked {
		fmt.Fprintf(w, "staged key check: %s\n", manage.CheckText(res.StagedCheck))
	}
	switch res.Rotation {
	case manage.RotationStaged:
		fmt.Fprintf(w, "staged key %s for connection %s beside the current key %s; nothing switched yet\n",
			ssh.FingerprintSHA256(res.StagedPublicKey), c.Alias, ssh.FingerprintSHA256(res.PreviousPublicKey))
		fmt.Fprintf(w, "public key, for the target's authorized_keys (the private half is sealed and never shown):\n  %s\n",
			model.AuthorizedKeyLine(res.StagedPublicKey, c.Alias))
		fmt.Fprintf(w, "next: install it on %s@%s, then: postern conn check %s; postern conn rotate-key %s --commit\n",
			c.User, c.Host, c.Alias, c.Alias)
	case manage.RotationAborted:
		fmt.Fprintf(w, "dropped the staged key %s of connection %s; it keeps its key %s\n",
			ssh.FingerprintSHA256(res.StagedPublicKey), c.Alias, ssh.FingerprintSHA256(res.PublicKey))
	case manage.RotationCommitted, manage.RotationInstalled:
		if !res.Stored {
			fmt.Fprintf(w, "connection %s still uses its key %s\n", c.Alias, ssh.FingerprintSHA256(res.PreviousPublicKey))
			return
		}
		fmt.Fprintf(w, "connection %s switched to key %s (was %s); its grants stay\n",
			c.Alias, ssh.FingerprintSHA256(res.PublicKey), ssh.FingerprintSHA256(res.PreviousPublicKey))
		if res.Rotation == manage.RotationCommitted {
			fmt.Fprintf(w, "next: remove the old key's line (%s) from the target's authorized_keys\n", ssh.FingerprintSHA256(res.PreviousPublicKey))
		}
	}
}

// runConnEdit makes an edit of conn update, pin or rotate-key and reports it.
func runConnEdit(cmd *cobra.Command, data *dataFlag, alias string, e manage.ConnectionEdit, f *checkFlags) error {
	opts, err := f.options(cmd)
	if err != nil {
		return err
	}
	if _, err := f.out.json(); err != nil {
		return err
	}
	return withManager(cmd.Context(), data, func(m *manage.Manager) error {
		res, err := m.UpdateConnection(cmd.Context(), data.actor("cli"), alias, e, opts)
		if err != nil && !res.Checked {
			return manageErr(err)
		}
		return reportConnection(cmd, res, err, f)
	})
}

func newConnCheckCmd(data *dataFlag) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "check ALIAS",
		Short: "Prove a connection's key works: connect and run its recipe's harmless read",
		Long: `check connects to the target with the sealed key, accepting only the pinned
host key, and runs the recipe's harmless read (for git hosting, only
authenticates). The recipe is the connection's own, or else the one whose
host pattern claims the host; without one, check runs true.

The outcome is recorded and shown by conn list: ok, rejected (in the
target's words), unreachable, host key mismatch (with both fingerprints)
or unproved (the key was accepted but the read failed). When the key
works, check also probes the target for the read sandbox (see conn add)
and records what it found. When a key is staged for a rotation (conn
rotate-key), check proves it too and records its outcome beside it;
the exit status is the current key's. check exits 0 only for ok.`,
		Args: exactArgs(1, "the connection ALIAS"),
	}
	var timeout time.Duration
	cmd.Flags().DurationVar(&timeout, "timeout", recipes.DefaultCheckTimeout, "bound on the whole check")
	out := addOutputFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if _, err := out.json(); err != nil {
			return err
		}
		if timeout <= 0 {
			return usagef("conn check: --timeout must be positive")
		}
		return withManager(cmd.Context(), data, func(m *manage.Manager) error {
			if err := m.Store().CheckMasterKey(); err != nil {
				return err
			}
			res, err := m.CheckConnection(cmd.Context(), args[0], timeout)
			if err != nil {
				return manageErr(err)
			}
			if asJSON, _ := out.json(); asJSON {
				if err := writeJSON(cmd.OutOrStdout(), res.Model()); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n", res.Conn.Alias,
					manage.CheckText(res.Check))
				if res.StagedChecked {
					fmt.Fprintf(cmd.OutOrStdout(), "%s staged key %s: %s\n", res.Conn.Alias, ssh.FingerprintSHA256(res.StagedPublicKey),
						manage.CheckText(res.StagedCheck))
				}
				printReadSandbox(cmd.OutOrStdout(), res)
			}
			warnReadSandbox(cmd, res)
			if res.Check.Status != recipes.StatusOK {
				return errNotProved
			}
			return nil
		})
	}
	return cmd
}

// connRow is a connection with the public half of its key, for lists.
type connRow struct {
	store.Connection
	pub ssh.PublicKey // nil when the key cannot be opened (no master key)
}

// listConnections reads the connections with their public keys.
func listConnections(s *store.Store, ctx context.Context) ([]connRow, error) {
	cs, err := s.ListConnections(ctx)
	if err != nil {
		return nil, err
	}
	rows := make([]connRow, 0, len(cs))
	for _, c := range cs {
		pub, _ := s.ConnectionPublicKey(ctx, c.ID)
		rows = append(rows, connRow{Connection: c, pub: pub})
	}
	return rows, nil
}

func newConnListCmd(data *dataFlag) *cobra.Command {
	return newListCmd(data, listSpec[connRow]{
		short:  "List connections with their key status and last check",
		read:   listConnections,
		json:   func(c connRow) any { return model.ConnectionOf(c.Connection, c.pub) },
		empty:  "no connections; add one with: postern conn add ALIAS --host H --user U --key-file FILE --accept-new-host-key",
		header: []string{"ALIAS", "TARGET", "ENV", "RECIPE", "KEY", "LAST CHECK", "READS", "RECORD", "HOST KEY"},
		rows: func(c connRow) [][]string {
			recipe := c.Recipe
			if recipe == "" {
				recipe = "-"
			}
			return [][]string{{c.Alias, c.User + "@" + c.Addr(), string(c.Env), recipe,
				keyCell(c.Connection), timeText(c.KeyCheckedAt),
				model.ReadSandboxText(model.ReadSandboxOf(c.Connection)), model.ConnectionOf(c.Connection, nil).Record,
				strings.Join(hostKeyFPs(&c.Connection), ",")}}
		},
		warning: func(c connRow) string { return model.ReadSandboxOf(c.Connection).Warning },
	})
}

// keyCell is the KEY column: the last check's status, and a staged key's
// fingerprint and check when one is staged.
func keyCell(c store.Connection) string {
	s := model.StatusText(string(c.KeyStatus), c.KeyMessage, true)
	if k := c.Staged; k != nil {
		s += fmt.Sprintf(" (staged %s: %s)", k.Fingerprint(), model.StatusText(string(k.Check.Status), k.Check.Message, true))
	}
	return s
}

// hostKeyFPs lists the SHA256 fingerprints of a connection's pinned keys.
func hostKeyFPs(c *store.Connection) []string {
	fps := []string{}
	keys, err := c.PinnedKeys()
	if err != nil {
		return []string{"(unreadable pin)"}
	}
	for _, k := range keys {
		fps = append(fps, ssh.FingerprintSHA256(k))
	}
	return fps
}

func newConnRemoveCmd(data *dataFlag) *cobra.Command {
	return &cobra.Command{
		Use:   "remove ALIAS",
		Short: "Delete a connection with its sealed key and grants (audit rows stay)",
		Args:  exactArgs(1, "the connection ALIAS"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withManager(cmd.Context(), data, func(m *manage.Manager) error {
				if _, err := m.RemoveConnection(cmd.Context(), data.actor("cli"), args[0]); err != nil {
					return manageErr(err)
				}
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "removed connection %s\n", args[0])
				return err
			})
		},
	}
}
