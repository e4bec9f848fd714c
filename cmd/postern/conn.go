package main

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/postern/postern/internal/hostkeyscan"
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
	cmd.AddCommand(
		newConnAddCmd(data),
		newConnListCmd(data),
		newConnRemoveCmd(data),
		newConnCheckCmd(data),
	)
	return cmd
}

// connAddFlags are the flags of conn add.
type connAddFlags struct {
	host        string
	port        int
	user        string
	keyFile     string
	hostKeys    []string
	acceptNew   bool
	env         string
	recipe      string
	scanTimeout time.Duration
	noCheck     bool
}

func newConnAddCmd(data *dataFlag) *cobra.Command {
	var f connAddFlags
	cmd := &cobra.Command{
		Use:   "add ALIAS --host H --user U --key-file FILE (--host-key LINE | --accept-new-host-key)",
		Short: "Register a target: its address, user, private key and pinned host key",
		Long: `add registers a connection that agents reach as ALIAS. The private key
(--key-file, - for stdin) is sealed with the master key and never shown
again; it must not need a passphrase. The target's host key is pinned from
--host-key (a known_hosts line or a bare public key; repeat for several
keys) or, with --accept-new-host-key, fetched from the target now and
printed so that you can compare its fingerprint.

After adding it, postern proves the key: it connects with the sealed key
and the pinned host key and runs the recipe's harmless read (see
postern conn check), recording ok or rejected. --no-check skips that, for
a target not reachable yet.`,
		Args: exactArgs(1, "the connection ALIAS"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runConnAdd(cmd, data, args[0], f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.host, "host", "", "target host name or address (required)")
	fl.IntVar(&f.port, "port", store.DefaultSSHPort, "target SSH port")
	fl.StringVar(&f.user, "user", "", "user on the target (required)")
	fl.StringVar(&f.keyFile, "key-file", "", "private key file for the target, - for stdin (required)")
	fl.StringArrayVar(&f.hostKeys, "host-key", nil, "pinned host key: a known_hosts line or public key (repeatable)")
	fl.BoolVar(&f.acceptNew, "accept-new-host-key", false, "fetch the target's host key now and pin it")
	fl.StringVar(&f.env, "env", string(store.EnvDev), "environment: dev, test, staging or production")
	fl.StringVar(&f.recipe, "recipe", "", "recipe key; empty lets the host pick the recipe when the bastion connects")
	fl.DurationVar(&f.scanTimeout, "scan-timeout", hostkeyscan.DefaultTimeout, "how long --accept-new-host-key waits for the target")
	fl.BoolVar(&f.noCheck, "no-check", false, "do not connect to prove the key after adding the connection")
	return cmd
}

func runConnAdd(cmd *cobra.Command, data *dataFlag, alias string, f connAddFlags) error {
	ctx := cmd.Context()
	// Check everything that can be checked before dialing the target, so
	// that a typo costs no network round trip and nothing is half done.
	if err := store.ValidateName("connection", alias); err != nil {
		return storeErr(err)
	}
	if f.host == "" {
		return usagef("conn add: --host is required")
	}
	if f.user == "" {
		return usagef("conn add: --user is required")
	}
	if f.port < 1 || f.port > 65535 {
		return usagef("conn add: --port %d is out of range 1-65535", f.port)
	}
	env, err := store.ParseEnv(f.env)
	if err != nil {
		return storeErr(err)
	}
	cat, err := recipes.Load()
	if err != nil {
		return err
	}
	if f.recipe != "" && cat.Get(f.recipe) == nil {
		return usagef("conn add: unknown recipe %q; see postern recipes list", f.recipe)
	}
	switch {
	case len(f.hostKeys) > 0 && f.acceptNew:
		return usagef("conn add: give --host-key or --accept-new-host-key, not both")
	case len(f.hostKeys) == 0 && !f.acceptNew:
		return usagef("conn add: the target's host key must be pinned: give --host-key 'KNOWN_HOSTS LINE' or --accept-new-host-key")
	}
	for _, l := range f.hostKeys {
		if _, _, err := store.ParseHostKeyLine(l); err != nil {
			return storeErr(err)
		}
	}
	key, err := readInput(cmd, f.keyFile, "private key file (--key-file)")
	if err != nil {
		return err
	}
	defer clear(key)
	if err := store.CheckPrivateKey(key); err != nil {
		return storeErr(err)
	}

	s, err := data.open(ctx)
	if err != nil {
		return storeErr(err)
	}
	defer s.Close()
	if err := s.CheckMasterKey(); err != nil {
		return err
	}
	if _, err := s.ConnectionByAlias(ctx, alias); err == nil {
		return storeErr(&store.ConflictError{Kind: "connection", Value: alias})
	} else if !errors.Is(err, store.ErrNotFound) {
		return err
	}

	addr := net.JoinHostPort(f.host, strconv.Itoa(f.port))
	hostKeys := f.hostKeys
	if f.acceptNew {
		pub, err := hostkeyscan.Scan(ctx, addr, hostkeyscan.Options{Timeout: f.scanTimeout})
		if err != nil {
			return fmt.Errorf("conn add: fetch host key: %w", err)
		}
		hostKeys = []string{knownhosts.Line([]string{knownhosts.Normalize(addr)}, pub)}
		fmt.Fprintf(cmd.OutOrStdout(), "host key of %s: %s %s\n", addr, pub.Type(), ssh.FingerprintSHA256(pub))
	}

	c, err := s.CreateConnection(ctx, store.NewConnection{
		Alias: alias, Host: f.host, Port: f.port, User: f.user, PrivateKey: key,
		HostKeys: hostKeys, Recipe: f.recipe, Env: env,
	})
	if err != nil {
		return storeErr(err)
	}
	pins, _ := c.PinnedKeys()
	var fps []string
	for _, p := range pins {
		fps = append(fps, ssh.FingerprintSHA256(p))
	}
	fmt.Fprintf(cmd.OutOrStdout(), "added connection %s (%s): %s@%s, env %s, pinned %s\n",
		c.Alias, c.ID, c.User, c.Addr(), c.Env, strings.Join(fps, ", "))
	if !f.noCheck {
		checkNewConnection(cmd, s, cat, c)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "next: postern grant AGENT %s\n", c.Alias)
	return nil
}

// checkNewConnection proves a new connection's key and records the result.
// The connection stays added whatever the check says: a rejected key is
// marked rejected with the target's message, and a result that proves
// nothing (unreachable, timeout) changes nothing.
func checkNewConnection(cmd *cobra.Command, s *store.Store, cat *recipes.Catalog, c *store.Connection) {
	kc, err := checkConnectionKey(cmd.Context(), s, cat, c.Alias, 0)
	switch {
	case err != nil && kc.Result.Status == "":
		fmt.Fprintf(cmd.OutOrStdout(), "key check: skipped: %v\n", err)
	case err != nil:
		fmt.Fprintf(cmd.OutOrStdout(), "%v\n", err)
	default:
		fmt.Fprintf(cmd.OutOrStdout(), "key check: %s: %s\n", kc.Result.Status, kc.Result.Message)
	}
}

// connJSON is a connection in `conn list -o json`. It has no field for the
// private key, sealed or not.
type connJSON struct {
	ID           string   `json:"id"`
	Alias        string   `json:"alias"`
	Host         string   `json:"host"`
	Port         int      `json:"port"`
	User         string   `json:"user"`
	Env          string   `json:"env"`
	Recipe       string   `json:"recipe"`
	HostKeys     []string `json:"host_keys"`
	HostKeyFPs   []string `json:"host_key_fingerprints"`
	KeyStatus    string   `json:"key_status"`
	KeyMessage   string   `json:"key_message"`
	KeyCheckedAt string   `json:"key_checked_at"`
	CreatedAt    string   `json:"created_at"`
	ModifiedAt   string   `json:"modified_at"`
}

func newConnListCmd(data *dataFlag) *cobra.Command {
	return newListCmd(data, listSpec[store.Connection]{
		short: "List connections with their key status and last check",
		read:  (*store.Store).ListConnections,
		json: func(c store.Connection) any {
			return connJSON{
				ID: c.ID, Alias: c.Alias, Host: c.Host, Port: c.Port, User: c.User,
				Env: string(c.Env), Recipe: c.Recipe, HostKeys: c.HostKeys, HostKeyFPs: hostKeyFPs(&c),
				KeyStatus: string(c.KeyStatus), KeyMessage: c.KeyMessage, KeyCheckedAt: timeJSON(c.KeyCheckedAt),
				CreatedAt: timeJSON(c.CreatedAt), ModifiedAt: timeJSON(c.ModifiedAt),
			}
		},
		empty:  "no connections; add one with: postern conn add ALIAS --host H --user U --key-file FILE --accept-new-host-key",
		header: []string{"ALIAS", "TARGET", "ENV", "RECIPE", "KEY", "LAST CHECK", "HOST KEY"},
		rows: func(c store.Connection) [][]string {
			recipe := c.Recipe
			if recipe == "" {
				recipe = "-"
			}
			status := string(c.KeyStatus)
			if c.KeyMessage != "" {
				status += " (" + oneLineText(c.KeyMessage, 40) + ")"
			}
			return [][]string{{c.Alias, c.User + "@" + c.Addr(), string(c.Env), recipe,
				status, timeText(c.KeyCheckedAt), strings.Join(hostKeyFPs(&c), ",")}}
		},
	})
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

// oneLineText folds whitespace and cuts s to n runes for a table cell.
func oneLineText(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func newConnRemoveCmd(data *dataFlag) *cobra.Command {
	return &cobra.Command{
		Use:   "remove ALIAS",
		Short: "Delete a connection with its sealed key and grants (audit rows stay)",
		Args:  exactArgs(1, "the connection ALIAS"),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := data.open(cmd.Context())
			if err != nil {
				return storeErr(err)
			}
			defer s.Close()
			if err := s.RemoveConnection(cmd.Context(), args[0]); err != nil {
				return storeErr(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "removed connection %s\n", args[0])
			return nil
		},
	}
}
