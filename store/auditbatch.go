package store

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"
)

// Group commit of audit rows.
//
// Audit appends are serialized by the database's write lock (the chain
// needs the previous row), and each append commits: on PostgreSQL with
// synchronous commit, a WAL flush for every row, with the lock held, so one
// replica's sessions and every other replica's wait for each other's
// flushes in turn. The store therefore appends the rows that arrive while a
// commit is under way together, in the next transaction: one lock, one
// flush for all of them. A caller still returns only once its own row is
// committed (or failed), so "the audit row is written before the agent
// hears the command ended" holds as before; rows keep their arrival order.

// maxAuditBatch bounds the rows one transaction appends.
const maxAuditBatch = 128

// auditBatchTimeout bounds one batch's transaction: the wait for the write
// lock is bounded by the busy timeout already; this is a backstop.
const auditBatchTimeout = time.Minute

// auditReq is one row waiting to be appended.
type auditReq struct {
	ctx        context.Context // the caller's: a request whose ctx ended before its batch began is not appended
	row        AuditRow
	chain      ChainFunc
	inflightID string
	res        chan auditRes // buffered: the batcher never blocks on it
}

type auditRes struct {
	row AuditRow
	err error
}

// auditBatcher is the goroutine that appends the rows of appendAudit. It
// starts with the first row and ends with the Store (stop).
type auditBatcher struct {
	// mu guards started and stopped; reqs, quit and done are set once,
	// under it, when the goroutine starts.
	mu      sync.Mutex
	started bool
	stopped bool
	reqs    chan *auditReq
	quit    chan struct{}
	done    chan struct{}
}

// start starts the batcher of s unless it runs or was stopped; it reports
// whether it runs.
func (b *auditBatcher) start(s *Store) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return false
	}
	if !b.started {
		b.started = true
		b.reqs, b.quit, b.done = make(chan *auditReq), make(chan struct{}), make(chan struct{})
		go b.run(s)
	}
	return true
}

// stop ends the batcher, if it runs, and waits for it. Later rows are
// refused. It is safe to call more than once.
func (b *auditBatcher) stop() {
	b.mu.Lock()
	wasRunning := b.started && !b.stopped
	b.stopped = true
	b.mu.Unlock()
	if wasRunning {
		close(b.quit)
		<-b.done
	}
}

func (b *auditBatcher) run(s *Store) {
	defer close(b.done)
	for {
		var first *auditReq
		select {
		case first = <-b.reqs:
		case <-b.quit:
			return
		}
		batch := []*auditReq{first}
	more:
		for len(batch) < maxAuditBatch {
			select {
			case r := <-b.reqs:
				batch = append(batch, r)
			default:
				break more
			}
		}
		s.appendBatch(batch)
	}
}

// submit hands r to the batcher and waits for its outcome. Once handed
// over, r is waited for whatever happens to ctx, so that the caller never
// reports as failed a row that was appended.
func (b *auditBatcher) submit(s *Store, r *auditReq) (AuditRow, error) {
	if !b.start(s) {
		return AuditRow{}, fmt.Errorf("store: audit: store is closed")
	}
	select {
	case b.reqs <- r:
	case <-b.quit:
		return AuditRow{}, fmt.Errorf("store: audit: store is closed")
	case <-r.ctx.Done():
		return AuditRow{}, fmt.Errorf("store: audit: %w", r.ctx.Err())
	}
	out := <-r.res
	return out.row, out.err
}

// appendBatch appends batch's rows in one write transaction, in order,
// each with its journal row removed, and gives each request its outcome:
// its row as stored, or the error that rolled the whole batch back.
func (s *Store) appendBatch(batch []*auditReq) {
	live := batch[:0:0]
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.res <- auditRes{err: fmt.Errorf("store: audit: %w", err)}
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), auditBatchTimeout)
	defer cancel()
	rows := make([]AuditRow, len(live))
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		st, err := s.auditStmts(ctx)
		if err != nil {
			return fmt.Errorf("store: audit: %w", err)
		}
		for i, r := range live {
			row := r.row
			if r.inflightID != "" {
				gone, err := deleteInflight(ctx, tx, st.deleteInflight, r.inflightID)
				if err != nil {
					return err
				}
				if gone {
					row.Reason = joinReason(row.Reason, inflightGoneNote)
				}
			}
			if rows[i], err = appendAuditTx(ctx, tx, row, r.chain, st, s.nowUTC); err != nil {
				return err
			}
		}
		return nil
	})
	for i, r := range live {
		if err != nil {
			r.res <- auditRes{err: err}
		} else {
			r.res <- auditRes{row: rows[i]}
		}
	}
}

// auditStmts returns the audit append's statements from the cache.
func (s *Store) auditStmts(ctx context.Context) (auditStmts, error) {
	var st auditStmts
	var err error
	if st.last, err = s.stmts.get(ctx, lastAuditQuery); err != nil {
		return st, err
	}
	if st.insert, err = s.stmts.get(ctx, insertAuditStmt); err != nil {
		return st, err
	}
	st.deleteInflight, err = s.stmts.get(ctx, deleteInflightStmt)
	return st, err
}
