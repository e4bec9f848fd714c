package main

import (
	"context"
	"errors"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/postern/postern/internal/hostkeyscan"
	"github.com/postern/postern/internal/usererr"
	"github.com/postern/postern/manage"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/recipes"
	"github.com/postern/postern/store"
)

// cliActor is who the admin CLI's changes are audited as: the OS user
// running it. The CLI asks for no password: whoever can read the data
// directory (the database and the master key) can do anything anyway
// (SECURITY.md), so the audit row says which account it was.
func cliActor(via string) policy.Actor {
	name := osUserName()
	if name == "" {
		name = "unknown"
	}
	return policy.Actor{Name: "cli:" + name, Via: via}
}

// withManager opens the store and a manager of admin changes over it for
// one command, and closes the store after fn.
func withManager(ctx context.Context, data *dataFlag, fn func(*manage.Manager) error) error {
	s, err := data.open(ctx)
	if err != nil {
		return storeErr(err)
	}
	defer s.Close()
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
	if errors.As(err, &refused) {
		return usageError{userError{refused}}
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
