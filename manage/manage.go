package manage

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/postern/postern/internal/hostkeyscan"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/recipes"
	"github.com/postern/postern/store"
)

// Config configures New.
type Config struct {
	Store   *store.Store     // required
	Catalog *recipes.Catalog // required: the recipe of a connection's key check
	// Checker runs key checks; recipes.Checker{} (net.Dialer,
	// recipes.DefaultCheckTimeout) if nil.
	Checker KeyChecker
	// ScanHostKey fetches a target's host key for accept-new-host-key;
	// hostkeyscan.Scan if nil.
	ScanHostKey func(ctx context.Context, addr string) (ssh.PublicKey, error)
	// Prober finds a target's read sandbox: SSHProber{} if nil, unless
	// Checker is set: a caller that fakes the key check (a test) probes
	// nothing unless it gives a Prober too, since probing the real target
	// of a fake check would dial what the fake did not.
	Prober SandboxProber
	// ChangeLifetime is how long a change that waits for a second admin
	// waits (DefaultChangeLifetime if zero).
	ChangeLifetime time.Duration
}

// KeyChecker proves a connection's key; recipes.Checker is the real one,
// and tests give a fake.
type KeyChecker interface {
	Check(ctx context.Context, t recipes.Target, signer ssh.Signer, r *recipes.Recipe) recipes.Result
}

// Manager makes admins' changes. It is safe for concurrent use.
type Manager struct {
	st   *store.Store
	cat  *recipes.Catalog
	chk  KeyChecker
	scan func(ctx context.Context, addr string) (ssh.PublicKey, error)
	// prober finds a target's read sandbox (sandbox.go).
	prober SandboxProber
	// changeLife is how long a change request waits (changes.go).
	changeLife time.Duration
}

// New checks cfg and builds a Manager.
func New(cfg Config) (*Manager, error) {
	if cfg.Store == nil || cfg.Catalog == nil {
		return nil, errors.New("manage: Config needs Store and Catalog")
	}
	m := &Manager{st: cfg.Store, cat: cfg.Catalog, chk: cfg.Checker, scan: cfg.ScanHostKey, prober: cfg.Prober,
		changeLife: cfg.ChangeLifetime}
	if m.changeLife <= 0 {
		m.changeLife = DefaultChangeLifetime
	}
	switch {
	case m.prober == nil && cfg.Checker != nil:
		m.prober = noProber{}
	case m.prober == nil:
		m.prober = SSHProber{}
	}
	if m.chk == nil {
		m.chk = recipes.Checker{}
	}
	if m.scan == nil {
		m.scan = func(ctx context.Context, addr string) (ssh.PublicKey, error) {
			return hostkeyscan.Scan(ctx, addr, hostkeyscan.Options{})
		}
	}
	return m, nil
}

// Store is the store the manager changes, for callers that also read.
func (m *Manager) Store() *store.Store { return m.st }

// Catalog is the recipe catalog key checks use.
func (m *Manager) Catalog() *recipes.Catalog { return m.cat }

// audited is the audit argument of the store write that makes change c,
// and the pending row to read back.
func audited(c policy.Change) (store.Audit, *store.PendingAudit) {
	p := policy.ChangeAudit(c)
	return store.Audited(p), p
}

// checkAudited makes sure a change that was stored was audited too:
// store.Audited makes anything else impossible unless the store method
// made no write transaction, which would be a bug here.
func checkAudited(p *store.PendingAudit, what string) error {
	if p.Stored() == nil {
		return fmt.Errorf("manage: %s: the change was made but not audited", what)
	}
	return nil
}
