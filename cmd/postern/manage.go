package main

import (
	"context"
	"errors"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/crypto/ssh"

	"github.com/postern/postern/internal/hostkeyscan"
	"github.com/postern/postern/internal/usererr"
	"github.com/postern/postern/manage"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/recipes"
	"github.com/postern/postern/store"
)

// addAsFlag registers --as NAME on a group of configuration commands
// (persistent, default POSTERN_ADMIN): the registered admin the command
// acts as, whom the audit log names instead of the OS account. A
// subcommand with an --as of its own (approvals approve, token add) keeps
// its own, which means the same.
func addAsFlag(cmd *cobra.Command, data *dataFlag) {
	cmd.PersistentFlags().StringVar(&data.as, "as", os.Getenv(envAdmin),
		"the registered admin acting (env "+envAdmin+"), named in the audit log; without it, the OS user as cli:NAME")
}

// actor is who the CLI's changes are audited as: the admin --as named, or
// without --as the OS user running it, as cli:NAME. The CLI asks for no
// password: whoever can read the data directory (the database and the
// master key) can do anything anyway (SECURITY.md), so --as is what the
// operator says of themself, and the audit row records it; a name that is
// not a registered admin is refused (resolveAdmin), so that a typo does
// not become an audit row's author.
func (f *dataFlag) actor(via string) policy.Actor {
	if f.admin != "" {
		// The CLI vouches for no more than owner; the admin's role in
		// the store bounds it (manage reads it at the change).
		return policy.Actor{Name: f.admin, AdminID: f.adminID, Via: via, Role: store.RoleOwner}
	}
	return osActor(via)
}

// osActor is the OS account running postern as an actor, cli:NAME, for
// changes that no registered admin makes (the CLI without --as, the
// demo's set-up).
func osActor(via string) policy.Actor {
	name := osUserName()
	if name == "" {
		name = "unknown"
	}
	// Whoever runs the CLI on the server without --as holds the data
	// directory, database and master key, and could do anything anyway
	// (SECURITY.md): an owner, but no registered admin, so what loosens
	// production still waits for one.
	return policy.Actor{Name: "cli:" + name, Via: via, Role: store.RoleOwner}
}

// resolveAdmin finds the admin --as names in s (resolveAs: the name as
// the store matches it, a usage error when there is none or it is
// disabled). Without --as it does nothing.
func (f *dataFlag) resolveAdmin(ctx context.Context, s *store.Store) error {
	if strings.TrimSpace(f.as) == "" {
		return nil
	}
	by, err := resolveAs(ctx, s, f.as)
	if err != nil {
		return err
	}
	f.admin, f.adminID = by.Name, by.AdminID
	return nil
}

// withManager opens the store and a manager of admin changes over it for
// one command, and closes the store after fn.
func withManager(ctx context.Context, data *dataFlag, fn func(*manage.Manager) error) error {
	s, err := data.open(ctx)
	if err != nil {
		return storeErr(err)
	}
	defer s.Close()
	if err := data.resolveAdmin(ctx, s); err != nil {
		return err
	}
	cat, err := recipes.Load()
	if err != nil {
		return err
	}
	// The command's --timeout bounds each check (manage.CheckOptions).
	m, err := newManager(s, cat, 0)
	if err != nil {
		return err
	}
	return fn(m)
}

// newManager is the manager of admin changes over s, whose key checks take
// at most checkTimeout (recipes.DefaultCheckTimeout if zero) unless the
// change gives its own, and whose host key fetches take until the caller's
// deadline, else checkTimeout: hostkeyscan's own default (10 s) would cut a
// longer bound, such as conn add --accept-new-host-key --timeout 1m, short.
func newManager(s *store.Store, cat *recipes.Catalog, checkTimeout time.Duration) (*manage.Manager, error) {
	if checkTimeout <= 0 {
		checkTimeout = recipes.DefaultCheckTimeout
	}
	return manage.New(manage.Config{
		Store:   s,
		Catalog: cat,
		Checker: recipes.Checker{Timeout: checkTimeout},
		// Given explicitly: with a Checker and no Prober, manage probes
		// nothing (its rule for fakes).
		Prober: manage.SSHProber{Timeout: checkTimeout},
		ScanHostKey: func(ctx context.Context, addr string) (ssh.PublicKey, error) {
			timeout := checkTimeout
			if d, ok := ctx.Deadline(); ok {
				timeout = time.Until(d)
			}
			return hostkeyscan.Scan(ctx, addr, hostkeyscan.Options{Timeout: timeout})
		},
	})
}

// manageErr is storeErr for the manager's errors: input the admin got wrong
// exits 2, a change refused after its key check exits 1 with its reason.
func manageErr(err error) error {
	var ns *manage.NotStoredError
	if errors.As(err, &ns) {
		return errNotStored{ns}
	}
	var refused *manage.TokenRefusedError
	var role *manage.RoleError
	var held *manage.HeldError
	switch {
	case errors.As(err, &refused):
		return usageError{userError{refused}}
	case errors.As(err, &role):
		return usageError{userError{role}}
	case errors.As(err, &held):
		return heldNotice{held}
	case errors.Is(err, store.ErrForbidden), errors.Is(err, policy.ErrInvalidText):
		return usageError{userError{err}}
	}
	return storeErr(err)
}

// errNotStored is a change refused after its key check, in the manager's
// words for the admin and with the flag that overrides it.
type errNotStored struct{ e *manage.NotStoredError }

func (e errNotStored) Error() string {
	msg := usererr.Message(e.e, e.e.Error())
	if !e.e.Mismatch() {
		msg += " (--allow-unverified keeps a connection whose target is not ready yet)"
	}
	return msg
}

func (e errNotStored) Unwrap() error { return e.e }

// heldNotice is a change that was not made but waits for a second admin:
// not a failure, so run prints it on standard output and exits 0.
type heldNotice struct{ e *manage.HeldError }

func (h heldNotice) Error() string { return usererr.Message(h.e, h.e.Error()) }
func (h heldNotice) Unwrap() error { return h.e }
