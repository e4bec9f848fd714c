package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base32"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// DefaultBusyTimeout is how long a statement waits for another connection or
// process that holds the write lock before failing with SQLITE_BUSY. Writes
// are short, so five seconds only runs out when something is stuck.
const DefaultBusyTimeout = 5 * time.Second

// Options configure Open. The zero value is usable: real clock, default busy
// timeout, and no master key (sealed secrets then fail with ErrNoMasterKey).
type Options struct {
	Now         func() time.Time // time.Now if nil; results are stored in UTC
	MasterKey   []byte           // 32 bytes, or nil for none; see Dir.Open
	BusyTimeout time.Duration    // DefaultBusyTimeout if zero
	// MaxConns bounds the database connections the Store opens at once
	// (DefaultMaxConns if zero; negative: no bound, for the benchmark that
	// measured the default).
	MaxConns int
	// Logger receives what the store notices on its own, such as the loss
	// of PostgreSQL's notification connection; nothing is logged if nil.
	Logger *zerolog.Logger
	// SecretFiles names more files of the data directory that Dir.Open
	// and Dir.Init keep from group and others (CheckModes): the web
	// page's TLS key.
	SecretFiles []string

	// masterKeyErr explains why MasterKey is nil when Dir.Open could not load
	// it, so that the error at the first sealed secret names the file.
	masterKeyErr error
}

// Store is the open database. It is safe for concurrent use. Close it when
// done; a Store holds one dedicated connection for DataVersion.
type Store struct {
	db      *sql.DB
	dialect dialect
	now     func() time.Time

	// sealer is nil when there is no usable master key; keyErr says why.
	sealer *sealer
	keyErr error

	// dvMu protects dvConn. PRAGMA data_version is per connection, so every
	// DataVersion call must use this one connection, one call at a time.
	// SQLite only.
	dvMu   sync.Mutex
	dvConn *sql.Conn

	// audits appends audit rows in groups (auditbatch.go).
	audits auditBatcher

	// migratedFrom is the schema version the database had when opened.
	migratedFrom int

	// watch follows PostgreSQL's notifications of changed approvals
	// (pgwatch.go); nil on SQLite.
	watch *pgWatch

	// stmts caches the prepared statements of the read paths.
	stmts stmtCache

	// writeSem (capacity 1) queues this process's write transactions. SQLite
	// does not queue writers: its busy handler sleeps and retries, and under
	// steady contention from hundreds of sessions some waiters lose for
	// longer than the busy timeout, which failed decisions and lost audit
	// rows (TestLoad200Agents). Queued here, a write waits for its turn in
	// order, and the busy timeout counts only waits for other processes.
	writeSem chan struct{}
}

// lockWrite takes this process's write turn, or gives up when ctx ends.
func (s *Store) lockWrite(ctx context.Context) error {
	select {
	case s.writeSem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("store: waiting to write: %w", ctx.Err())
	}
}

func (s *Store) unlockWrite() { <-s.writeSem }

// Open opens (creating if needed) the SQLite database at path and migrates it
// to the newest schema. Most callers want Dir.Open, which also loads the
// master key.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	db, err := openDB(path, opts.BusyTimeout, opts.MaxConns)
	if err != nil {
		return nil, err
	}
	from, err := migrate(ctx, db, dialectSQLite, -1)
	if err != nil {
		db.Close()
		return nil, err
	}
	s := newStore(db, dialectSQLite, opts)
	s.migratedFrom = from
	if err := s.loadMasterKey(ctx, opts); err != nil {
		db.Close()
		return nil, err
	}
	s.dvConn, err = db.Conn(ctx)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	return s, nil
}

// newStore is the Store over an open, migrated db.
func newStore(db *sql.DB, d dialect, opts Options) *Store {
	s := &Store{db: db, dialect: d, now: opts.Now, stmts: stmtCache{db: db}, writeSem: make(chan struct{}, 1)}
	if s.now == nil {
		s.now = time.Now
	}
	return s
}

// Postgres reports whether the store runs on PostgreSQL (OpenPostgres),
// where several processes may serve one database, rather than on SQLite.
func (s *Store) Postgres() bool { return s.dialect == dialectPostgres }

// openDB opens the database without migrating it. Every pooled connection
// gets the pragmas through the DSN.
func openDB(path string, busy time.Duration, maxConns int) (*sql.DB, error) {
	if path == "" {
		return nil, errors.New("store: empty database path")
	}
	if strings.ContainsRune(path, '?') {
		// The driver splits the DSN at the first '?'.
		return nil, fmt.Errorf("store: database path %q contains '?'", path)
	}
	if busy <= 0 {
		busy = DefaultBusyTimeout
	}
	// SQLite would create the file 0644 less the umask, and its -wal and
	// -shm files after it (filemode.go).
	if _, err := createFileExcl(path, noContent); err != nil {
		return nil, fmt.Errorf("store: create %s: %w", path, err)
	}
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "foreign_keys(1)")
	// NORMAL is durable across application crashes in WAL mode and loses at
	// most the last transactions on power loss; FULL would fsync every audit
	// row.
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	if err := db.Ping(); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	// database/sql keeps 2 idle connections by default. The bastion's
	// per-command path (route, decide, audit) and the policy watcher's
	// dedicated connection use more at once, so connections were closed
	// and reopened (and their statements prepared again) on every
	// command: about 0.2 ms each. Keep enough idle.
	boundPool(db, maxConns, DefaultMaxConns)
	return db, nil
}

// boundPool sets db's connection bound: maxConns, def when 0, none when
// negative (then unboundedIdleConns stay idle). The idle connections equal
// the bound, so that a busy moment does not close and reopen them.
func boundPool(db *sql.DB, maxConns, def int) {
	if maxConns == 0 {
		maxConns = def
	}
	if maxConns > 0 {
		db.SetMaxOpenConns(maxConns)
		db.SetMaxIdleConns(maxConns)
		return
	}
	db.SetMaxIdleConns(unboundedIdleConns)
}

// DefaultMaxConns bounds the SQLite connections one Store opens. SQLite has
// one writer at a time (this process queues its writes on writeSem), and a
// read on a connection takes tens of microseconds, so many connections buy
// nothing: unbounded, 200 agent sessions starting at once opened 168 of
// them, each a file descriptor with its own page cache. TestLoad200Agents
// and BenchmarkLoad200Agents (bench/RESULTS.md, "Database connections")
// measured no loss of throughput at this bound. One connection is kept for
// DataVersion.
const DefaultMaxConns = 8

// unboundedIdleConns is the idle connections kept when MaxConns is
// negative.
const unboundedIdleConns = 16

// Stats reports the database pool: how many connections are open and in
// use, and how often and how long callers waited for one.
func (s *Store) Stats() sql.DBStats { return s.db.Stats() }

// Ping runs one round trip to the database (SELECT 1 on a pooled
// connection), for health checks: an open pool says nothing of a database
// that stopped answering.
func (s *Store) Ping(ctx context.Context) error {
	var one int
	if err := s.db.QueryRowContext(ctx, `SELECT 1`).Scan(&one); err != nil {
		return fmt.Errorf("store: ping: %w", err)
	}
	return nil
}

// Close releases the database.
func (s *Store) Close() error {
	s.audits.stop()
	if s.watch != nil {
		s.watch.close()
	}
	s.stmts.close()
	s.dvMu.Lock()
	if s.dvConn != nil {
		s.dvConn.Close()
		s.dvConn = nil
	}
	s.dvMu.Unlock()
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("store: close: %w", err)
	}
	return nil
}

// DataVersion returns a number that changes when another connection or
// process may have changed the approvals, so a poller can tell cheaply
// whether anything may have changed (an approval decided by the admin CLI,
// for example) without scanning a table.
//
// On SQLite it is PRAGMA data_version as seen by a connection reserved for
// it: it changes whenever another connection or process commits to the
// database (commits made through this Store's other connections count as
// "another connection" too). On PostgreSQL it counts the notifications of
// changed approvals that the database sends (pgwatch.go); while the
// notification connection is down it changes on every call, so that a
// poller reads the approvals every time: polling is the fallback.
func (s *Store) DataVersion(ctx context.Context) (int64, error) {
	if s.watch != nil {
		return s.watch.version(), nil
	}
	s.dvMu.Lock()
	defer s.dvMu.Unlock()
	if s.dvConn == nil {
		return 0, errors.New("store: data version: store is closed")
	}
	var v int64
	if err := s.dvConn.QueryRowContext(ctx, "PRAGMA data_version").Scan(&v); err != nil {
		return 0, fmt.Errorf("store: data version: %w", err)
	}
	return v, nil
}

// Changed returns a channel that is closed at the next change to the
// approvals that DataVersion would report, so that a watcher wakes at once
// instead of at its next poll. It is nil on SQLite, whose changes are only
// seen by polling DataVersion.
func (s *Store) Changed() <-chan struct{} {
	if s.watch == nil {
		return nil
	}
	return s.watch.changed()
}

// Listening reports whether the store hears of changes as they are made:
// on PostgreSQL, whether the notification connection listens (the first
// call starts it; Changed is closed when it starts listening); on SQLite,
// which has no such connection, always false.
func (s *Store) Listening() bool {
	return s.watch != nil && s.watch.listening()
}

// inTx runs fn in one transaction and commits if fn returns nil. The
// transaction holds the database's write lock from its start: on SQLite it
// begins IMMEDIATE (see the package doc); on PostgreSQL it first takes the
// advisory transaction lock pgLockWrite, which every replica's write
// transactions take, so that a transaction that reads and then writes (the
// audit chain's last row, an open approval request) sees no other write
// between the two, on this process or another, exactly as on SQLite. The
// wait is bounded by the busy timeout (lock_timeout on PostgreSQL). ctx's
// pending audit row (an Audit argument) is appended in the same transaction.
func (s *Store) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	if err := s.lockWrite(ctx); err != nil {
		return err
	}
	defer s.unlockWrite()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: begin: %w", err)
	}
	if s.dialect == dialectPostgres {
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(?)`, pgLockWrite); err != nil {
			tx.Rollback()
			return fmt.Errorf("store: take the write lock: %w", err)
		}
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	markStored, err := s.appendPendingAudit(ctx, tx)
	if err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: commit: %w", err)
	}
	markStored()
	return nil
}

// nowUTC is the injected clock in UTC.
func (s *Store) nowUTC() time.Time { return s.now().UTC() }

// timeLayout is RFC 3339 with a fixed nine-digit fraction, so that stored
// times sort correctly as text.
const timeLayout = "2006-01-02T15:04:05.000000000Z07:00"

// formatTime is how every time is stored. The zero time is stored as "".
func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(timeLayout)
}

// parseTime reads a time written by formatTime; "" is the zero time.
func parseTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("store: bad stored time %q: %w", s, err)
	}
	return t.UTC(), nil
}

// idEncoding is lower-case base32 without padding: ids stay readable and
// safe in URLs, shell arguments and file names.
var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// newID returns prefix + "_" + 16 random base32 characters (80 bits), for
// example "agt_k3j5x7q2m4n6p8r1".
func newID(prefix string) string {
	var b [10]byte
	rand.Read(b[:]) // never returns an error (Go 1.24+)
	return prefix + "_" + idEncoding.EncodeToString(b[:])
}

// NewSessionID returns a new id for an agent's SSH connection, in the form
// of the record ids ("ses_" and 16 random base32 characters): the audit
// rows of one connection carry it (AuditRow.SessionID). Ids of connections
// never repeat, across replicas too.
func NewSessionID() string { return newID("ses") }

// Prefixes of record ids, one per table.
const (
	prefixAgent      = "agt"
	prefixAgentKey   = "key"
	prefixConnection = "con"
	prefixGrant      = "gra"
)
