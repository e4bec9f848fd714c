package main

import (
	"context"
	"fmt"
	"time"

	"github.com/postern/postern/recipes"
	"github.com/postern/postern/store"
)

// keyCheck is one key check's outcome: the connection as stored after it,
// the recipe used and whether the result was recorded.
type keyCheck struct {
	Conn     *store.Connection
	Recipe   string // the recipe's key, "" for none
	Result   recipes.Result
	Recorded bool // false for an unknown result: the stored status was left alone
}

// checkConnectionKey proves the named connection's key with its recipe's
// harmless read and records ok or rejected. conn check, conn add and the web
// page's Re-check button all call it, so that the three cannot drift apart
// in which recipe they use or what they record. A zero timeout means
// recipes.DefaultCheckTimeout. The error is for what stopped the check from
// running at all (unknown alias, unreadable key, the database); a check
// that ran and proved nothing is a Result with StatusUnknown.
func checkConnectionKey(ctx context.Context, s *store.Store, cat *recipes.Catalog, alias string, timeout time.Duration) (keyCheck, error) {
	c, err := s.ConnectionByAlias(ctx, alias)
	if err != nil {
		return keyCheck{}, err
	}
	r, err := cat.ForConnection(c.Recipe, c.Host)
	if err != nil {
		return keyCheck{}, fmt.Errorf("key check: connection %s: %w", c.Alias, err)
	}
	signer, err := s.ConnectionSigner(ctx, c.ID)
	if err != nil {
		return keyCheck{}, err
	}
	kc := keyCheck{Conn: c}
	if r != nil {
		kc.Recipe = r.Key
	}
	hostKeys, err := c.HostKeyCallback()
	if err != nil {
		return keyCheck{}, fmt.Errorf("key check: connection %s: %w", c.Alias, err)
	}
	target := recipes.Target{Addr: c.Addr(), User: c.User, HostKeys: hostKeys}
	kc.Result = recipes.Checker{Timeout: timeout}.Check(ctx, target, signer, r)
	if kc.Result.Proved() {
		status := store.KeyRejected
		if kc.Result.Status == recipes.StatusOK {
			status = store.KeyOK
		}
		if kc.Conn, err = s.SetKeyStatus(ctx, c.Alias, status, kc.Result.Message); err != nil {
			return kc, fmt.Errorf("key check: %s: %s, not recorded: %w", c.Alias, kc.Result.Status, err)
		}
		kc.Recorded = true
	}
	return kc, nil
}
