package policy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/postern/postern/store"
)

// DefaultReplicaLease is how long a replica's registration lasts without a
// heartbeat (ReplicaOptions.Lease). When a replica is killed, its running
// operations are audited as interrupted by another replica within about this
// long; a replica that cannot reach the database for this long refuses
// operations (its journal rows may be taken for interrupted ones) until its
// heartbeat gets through. Thirty seconds rides out a database failover or a
// long pause without flapping, and is far shorter than the time anyone looks
// for the audit row of an operation that was cut.
const DefaultReplicaLease = 30 * time.Second

// ReplicaOptions register an engine as one replica — one `postern serve` —
// of its database.
type ReplicaOptions struct {
	Host  string        // the host name, for `postern replicas` and logs
	PID   int           // the process id
	Lease time.Duration // DefaultReplicaLease if zero; renewed every third of it
	// Exclusive says that no other replica can be serving the database
	// (SQLite's data directory, which serve holds alone): RecoverInterrupted
	// then takes every journal row left behind at once, whoever wrote it,
	// instead of waiting for the lease of the run that died to run out.
	Exclusive bool
}

// replicaStore is implemented by *store.Store: the registry of replicas
// (store/migrations/0009_replicas.sql).
type replicaStore interface {
	RegisterReplica(ctx context.Context, host string, pid int, lease time.Duration) (store.Replica, error)
	RenewReplica(ctx context.Context, r store.Replica, lease time.Duration) (bool, error)
	RemoveReplica(ctx context.Context, id string) error
}

// replicaRemoveTimeout bounds the unregistration at Close.
const replicaRemoveTimeout = 5 * time.Second

// joinReplicas makes e a replica: it registers it and starts its heartbeat,
// which renews the lease and recovers the journal rows of replicas whose
// lease ran out. Called by New.
func (e *Engine) joinReplicas(opts ReplicaOptions) error {
	rs, ok := e.st.(replicaStore)
	if !ok || e.journal == nil {
		return errors.New("policy: the store keeps no replicas or no journal")
	}
	if opts.Lease <= 0 {
		opts.Lease = DefaultReplicaLease
	}
	ctx, cancel := context.WithTimeout(e.life, opts.Lease)
	defer cancel()
	r, err := rs.RegisterReplica(ctx, opts.Host, opts.PID, opts.Lease)
	if err != nil {
		return fmt.Errorf("policy: %w", err)
	}
	e.replica, e.replicaOpts, e.replicas = r, opts, rs
	e.log.Info().Str("replica", r.ID).Str("lease", opts.Lease.String()).Msg("registered as a replica of the database")
	e.watcherWG.Add(1)
	go e.heartbeat()
	return nil
}

// ReplicaID is the id this engine runs its operations under ("" when it is
// no replica).
func (e *Engine) ReplicaID() string { return e.replica.ID }

// heartbeat renews the lease every third of it and then recovers what dead
// replicas left behind, until Close. It is one of the goroutines Close
// waits for.
func (e *Engine) heartbeat() {
	defer e.watcherWG.Done()
	lease := e.replicaOpts.Lease
	t := time.NewTicker(lease / 3)
	defer t.Stop()
	for {
		select {
		case <-e.done:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(e.life, lease/3)
		e.beat(ctx)
		cancel()
	}
}

// beat is one heartbeat.
func (e *Engine) beat(ctx context.Context) {
	renewed, err := e.replicas.RenewReplica(ctx, e.replica, e.replicaOpts.Lease)
	switch {
	case err != nil:
		if ctx.Err() == nil || e.life.Err() == nil {
			e.log.Error().Err(err).Str("replica", e.replica.ID).
				Msg("cannot renew this replica's lease; operations are refused once it runs out")
		}
		return
	case !renewed:
		e.log.Error().Str("replica", e.replica.ID).
			Msg("this replica's lease had run out and was renewed late: operations it was running may have been audited as interrupted by another replica")
	}
	n, err := e.journal.RecoverInflight(ctx, ChainHash, InterruptedReason, store.RecoverOptions{Self: e.replica.ID})
	if err != nil {
		if e.life.Err() == nil {
			e.log.Error().Err(err).Msg("recovering the operations of stopped replicas")
		}
		return
	}
	if n > 0 {
		e.log.Warn().Int("operations", n).Msg("audited operations of a replica that stopped while they ran as failed")
	}
}

// unregister removes e's registration at Close.
func (e *Engine) unregister() {
	if e.replicas == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), replicaRemoveTimeout)
	defer cancel()
	if err := e.replicas.RemoveReplica(ctx, e.replica.ID); err != nil {
		e.log.Error().Err(err).Str("replica", e.replica.ID).Msg("unregistering the replica")
	}
}
