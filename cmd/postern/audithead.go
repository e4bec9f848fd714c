package main

import (
	"context"
	"encoding/hex"
	"time"

	"github.com/rs/zerolog"

	"github.com/postern/postern/metrics"
	"github.com/postern/postern/policy"
)

// defaultAuditHeadInterval is how often serve publishes the audit head.
// The chain cannot show rows removed from its end; a head kept elsewhere
// can, for every row older than it. Fifteen minutes bounds what could go
// unnoticed to the rows of a quarter of an hour (and the head at shutdown
// covers a stop), for one cheap query by primary key.
const defaultAuditHeadInterval = 15 * time.Minute

// auditHeadFinalTimeout bounds the publish at shutdown, which runs after
// serve's context has ended: a database that does not answer must not hold
// the exit.
const auditHeadFinalTimeout = 5 * time.Second

// Why a head was published: the log line's "trigger" field.
const (
	headAtStart    = "start"
	headAtInterval = "interval"
	headAtShutdown = "shutdown"
)

// headSource is what the publisher reads and where it queues the head for
// notification channels; *store.Store implements it.
type headSource interface {
	AuditHead(ctx context.Context) (seq int64, hash []byte, err error)
	QueueAuditHead(ctx context.Context, head string, giveUp time.Time) (int, error)
}

// headPublisher publishes the audit log's head (the newest row's seq and
// hash) to the log, an info line "audit head" with seq, hash and head
// (SEQ:HASH, as `postern audit verify --from` takes it), to the
// postern_audit_head_* gauges, and to the notification channels that
// subscribe to audit.head (queued in the outbox, delivered and signed by
// the dispatcher like every other event), for the operator to keep outside
// postern (docs/deploy.md, Keeping the audit head elsewhere).
type headPublisher struct {
	src      headSource
	log      zerolog.Logger
	metrics  *metrics.Metrics // none if nil
	interval time.Duration    // between publishes; > 0
}

// run publishes the head at once and then every interval, until ctx ends.
// Its caller owns it: it waits for run to return and then calls
// publishFinal, once the sessions have ended and written their rows.
func (p *headPublisher) run(ctx context.Context) {
	p.publish(ctx, headAtStart)
	every(ctx, p.interval, func() { p.publish(ctx, headAtInterval) })
}

// every calls fn every interval until ctx ends, and not once it has: the
// loop of serve's periodic work (the audit head, the recording sweep).
func every(ctx context.Context, interval time.Duration, fn func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if ctx.Err() != nil {
				return
			}
			fn()
		}
	}
}

// publishFinal publishes the head at shutdown, within
// auditHeadFinalTimeout, with ctx's values but not its end.
func (p *headPublisher) publishFinal(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), auditHeadFinalTimeout)
	defer cancel()
	p.publish(ctx, headAtShutdown)
}

// publish reads the head and publishes it. A failure is logged, not
// returned: the next interval tries again, and serve goes on serving.
func (p *headPublisher) publish(ctx context.Context, trigger string) {
	seq, hash, err := p.src.AuditHead(ctx)
	if err != nil {
		p.log.Error().Err(err).Str("trigger", trigger).Msg("audit head not published")
		return
	}
	h := policy.Head{Seq: seq, Hash: hash}
	hashHex := hex.EncodeToString(hash)
	p.metrics.AuditHead(seq, hashHex, time.Now())
	p.log.Info().Int64("seq", seq).Str("hash", hashHex).Str("head", h.String()).Str("trigger", trigger).Msg("audit head")
	// A head not delivered by the next publish is superseded by it; the
	// one published at shutdown waits as long for the next start.
	if _, err := p.src.QueueAuditHead(ctx, h.String(), time.Now().Add(p.interval)); err != nil {
		p.log.Error().Err(err).Str("head", h.String()).Str("trigger", trigger).Msg("audit head not queued for notification channels")
	}
}
