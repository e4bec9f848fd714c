package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/postern/postern/auditsink"
	"github.com/postern/postern/metrics"
	"github.com/postern/postern/store"
)

// auditSinkFinalTimeout bounds the flush of the audit sinks at shutdown,
// which runs after serve's context has ended and the sessions have written
// their last rows: what is not delivered by then is shipped by the next
// run (or another replica), from the cursor.
const auditSinkFinalTimeout = 10 * time.Second

// parseAuditSinks reads the --audit-sink values.
func parseAuditSinks(values []string) ([]auditsink.Spec, error) {
	var specs []auditsink.Spec
	for _, v := range values {
		sp, err := auditsink.ParseSpec(v)
		if err != nil {
			return nil, err
		}
		specs = append(specs, sp)
	}
	if err := auditsink.CheckNames(specs); err != nil {
		return nil, err
	}
	return specs, nil
}

// auditSinks are serve's audit shippers, one per --audit-sink. runBastion
// owns them: run goes beside the servers and ends with them, and flush
// ships what the last sessions wrote, within auditSinkFinalTimeout.
type auditSinks struct {
	shippers []*auditsink.Shipper
	log      zerolog.Logger
}

// newAuditSinks builds the shippers of specs over st, as replica holder.
func newAuditSinks(specs []auditsink.Spec, st *store.Store, holder string, log zerolog.Logger, m *metrics.Metrics) (*auditSinks, error) {
	names := make([]string, len(specs))
	for i, sp := range specs {
		names[i] = sp.Name
	}
	sm, err := m.AuditSinks(names)
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	a := &auditSinks{log: log}
	for _, sp := range specs {
		sh, err := auditsink.New(auditsink.Options{
			Name: sp.Name, Sink: sp.NewSink(), Store: st, Holder: holder, Log: log, Metrics: sm,
			Exclusive: !st.Postgres(),
		})
		if err != nil {
			return nil, fmt.Errorf("serve: %w", err)
		}
		log.Info().Str("sink", sp.Name).Str("kind", sp.Kind).Msg("audit sink configured")
		a.shippers = append(a.shippers, sh)
	}
	return a, nil
}

// run runs every shipper until ctx ends and returns when all have.
func (a *auditSinks) run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, sh := range a.shippers {
		wg.Go(func() { sh.Run(ctx) })
	}
	wg.Wait()
}

// flush flushes every shipper at once, within auditSinkFinalTimeout, with
// ctx's values but not its end; run must have returned.
func (a *auditSinks) flush(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), auditSinkFinalTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, sh := range a.shippers {
		wg.Go(func() {
			if err := sh.Flush(ctx); err != nil {
				a.log.Warn().Err(err).Str("sink", sh.Name()).Msg("audit sink not flushed at shutdown; the next run ships the rest from the cursor")
			}
		})
	}
	wg.Wait()
}
