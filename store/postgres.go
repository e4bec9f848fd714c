package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// PostgreSQL support.
//
// The store's queries are written once, in the SQL that SQLite and
// PostgreSQL share, with ? placeholders. On PostgreSQL the database/sql
// driver is pgx's (github.com/jackc/pgx/v5/stdlib) behind a thin connector
// (pgConnector) that rewrites each ? outside literals and comments as $1,
// $2, ... and sends Go bools as 0 and 1, because the schema keeps SQLite's
// integer flags (disabled, on_pending, ...) on both. What differs is kept
// in one place each: the migrations (migrations/postgres), how a write
// transaction takes the database's write lock (inTx), how errors are read
// (isUniqueViolation, Fault) and how a change made elsewhere is noticed
// (DataVersion, Changed; pgwatch.go).

// dialect is the SQL database a Store runs on.
type dialect int

const (
	dialectSQLite dialect = iota
	dialectPostgres
)

func (d dialect) String() string {
	if d == dialectPostgres {
		return "postgres"
	}
	return "sqlite"
}

// IsPostgresURL reports whether s names a PostgreSQL database
// (postgres://... or postgresql://...), the only kind of URL that
// --database takes.
func IsPostgresURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// RedactURL returns a database URL fit for logs and messages: the password,
// if the URL carries one, replaced by "xxxxx", and query parameters that may
// carry secrets (password, sslkey, sslpassword) dropped.
func RedactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		// Say nothing of a URL that does not parse: it may hold a password
		// in a place Parse could not find.
		return "(unparsable database URL)"
	}
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
	}
	q := u.Query()
	for k := range q {
		switch strings.ToLower(k) {
		case "password", "sslpassword", "sslkey":
			q.Set(k, "xxxxx")
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// pgLockWrite is the advisory lock key of the database's write lock on
// PostgreSQL ("postern" and 1 in ASCII): every write transaction of every
// replica takes it first (inTx), as every SQLite write transaction takes
// SQLite's one write lock (BEGIN IMMEDIATE). pgLockMigrate serializes
// migrations of processes starting at once.
const (
	pgLockWrite   int64 = 0x706f737465726e01
	pgLockMigrate int64 = 0x706f737465726e02
)

// ApplicationName is the application_name of postern's PostgreSQL sessions
// (pg_stat_activity); the notification listener's is ApplicationName +
// "-listen".
const ApplicationName = "postern"

// parsePostgresURL reads a PostgreSQL URL into pgx's configuration with
// postern's session settings: lock_timeout bounds every wait for a lock
// (the write lock above, a row lock) as SQLite's busy timeout does.
// Errors never quote the URL, which may carry a password.
func parsePostgresURL(raw string, busy time.Duration) (*pgx.ConnConfig, error) {
	if !IsPostgresURL(raw) {
		return nil, invalid("database URL must start with postgres:// or postgresql://")
	}
	cfg, err := pgx.ParseConfig(raw)
	if err != nil {
		// pgx redacts the password in its parse errors; say only what kind
		// of problem it was all the same.
		return nil, invalid("database URL %s does not parse: %s", RedactURL(raw), scrubURL(err.Error(), raw))
	}
	if busy <= 0 {
		busy = DefaultBusyTimeout
	}
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams["lock_timeout"] = strconv.FormatInt(busy.Milliseconds(), 10)
	if cfg.RuntimeParams["application_name"] == "" {
		cfg.RuntimeParams["application_name"] = ApplicationName
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = defaultConnectTimeout
	}
	return cfg, nil
}

// DefaultPostgresMaxConns bounds the PostgreSQL connections one Store (one
// replica) opens. A statement there is a network round trip, not a call
// into the process, so a connection is held longer than SQLite's and the
// 200-agent load over two replicas waited for one most of the run at
// SQLite's bound of 8 (bench/RESULTS.md, "Replicas": 237 commands/s at 8,
// 396 at 16, no better at 32 on the same 2 cores). Two replicas at 16 stay
// far below PostgreSQL's default max_connections of 100.
const DefaultPostgresMaxConns = 16

// defaultConnectTimeout bounds a connection attempt to PostgreSQL when the
// URL does not set connect_timeout.
const defaultConnectTimeout = 10 * time.Second

// scrubURL removes the password of raw from msg, in case a library error
// quotes it.
func scrubURL(msg, raw string) string {
	if u, err := url.Parse(raw); err == nil && u.User != nil {
		if pw, ok := u.User.Password(); ok && pw != "" {
			msg = strings.ReplaceAll(msg, pw, "xxxxx")
		}
	}
	return msg
}

// openPostgresDB opens a pool of connections to the database of cfg
// through pgConnector, and checks that it answers.
func openPostgresDB(ctx context.Context, cfg *pgx.ConnConfig, raw string, maxConns int) (*sql.DB, error) {
	db := sql.OpenDB(pgConnector{inner: stdlib.GetConnector(*cfg)})
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: open %s: %s", RedactURL(raw), scrubURL(err.Error(), raw))
	}
	boundPool(db, maxConns, DefaultPostgresMaxConns)
	return db, nil
}

// OpenPostgres opens (migrating as needed) the PostgreSQL database named by
// url (postgres://USER[:PASSWORD]@HOST[:PORT]/DB?...; pgx also reads
// PGPASSWORD and ~/.pgpass, which keep the password out of the URL). Several
// postern processes may open one database at once: they are replicas of one
// bastion. Most callers want Dir.Open, which also loads the master key.
func OpenPostgres(ctx context.Context, url string, opts Options) (*Store, error) {
	cfg, err := parsePostgresURL(url, opts.BusyTimeout)
	if err != nil {
		return nil, err
	}
	db, err := openPostgresDB(ctx, cfg, url, opts.MaxConns)
	if err != nil {
		return nil, err
	}
	from, err := migrate(ctx, db, dialectPostgres, -1)
	if err != nil {
		db.Close()
		return nil, err
	}
	s := newStore(db, dialectPostgres, opts)
	s.migratedFrom = from
	s.watch = newPGWatch(cfg, opts.Logger)
	idle := opts.MaxConns
	if idle == 0 {
		idle = DefaultPostgresMaxConns
	} else if idle < 0 {
		idle = unboundedIdleConns
	}
	s.watch.onDown = func() {
		db.SetMaxIdleConns(0) // closes the idle connections
		db.SetMaxIdleConns(idle)
	}
	if err := s.loadMasterKey(ctx, opts); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// pgConnector is pgx's database/sql connector with SQLite's placeholders:
// see the comment at the top of this file.
type pgConnector struct{ inner driver.Connector }

func (c pgConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &pgConn{Conn: conn.(*stdlib.Conn)}, nil
}

func (c pgConnector) Driver() driver.Driver { return c.inner.Driver() }

// pgConn is one pgx connection whose queries are rebound on their way in.
type pgConn struct{ *stdlib.Conn }

func (c *pgConn) Prepare(query string) (driver.Stmt, error) {
	return c.Conn.Prepare(rebind(query))
}

func (c *pgConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	return c.Conn.PrepareContext(ctx, rebind(query))
}

func (c *pgConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	return c.Conn.ExecContext(ctx, rebind(query), args)
}

func (c *pgConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	return c.Conn.QueryContext(ctx, rebind(query), args)
}

// CheckNamedValue sends a bool as 0 or 1: the schema's flags are integers
// on both databases, and pgx does not encode a bool into an integer.
// Everything else goes to pgx as it is.
func (c *pgConn) CheckNamedValue(nv *driver.NamedValue) error {
	if b, ok := nv.Value.(bool); ok {
		nv.Value = int64(0)
		if b {
			nv.Value = int64(1)
		}
	}
	return nil
}

// rebind rewrites the ? placeholders of q as $1, $2, ... in order. A ? in a
// string literal ('...'), a quoted identifier ("..."), a dollar-quoted body
// ($$...$$, $tag$...$tag$) or a comment (-- and /* */) is left alone, so
// PostgreSQL's own SQL (the migrations, a trigger's body) passes unchanged.
func rebind(q string) string {
	if !strings.Contains(q, "?") {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + 16)
	n := 0
	for i := 0; i < len(q); {
		switch c := q[i]; {
		case c == '\'' || c == '"':
			j := i + 1
			for j < len(q) {
				if q[j] == c {
					if j+1 < len(q) && q[j+1] == c { // a doubled quote
						j += 2
						continue
					}
					break
				}
				j++
			}
			j = min(j+1, len(q))
			b.WriteString(q[i:j])
			i = j
		case c == '-' && strings.HasPrefix(q[i:], "--"):
			j := strings.IndexByte(q[i:], '\n')
			if j < 0 {
				j = len(q) - i
			}
			b.WriteString(q[i : i+j])
			i += j
		case c == '/' && strings.HasPrefix(q[i:], "/*"):
			j := strings.Index(q[i+2:], "*/")
			end := len(q)
			if j >= 0 {
				end = i + 2 + j + 2
			}
			b.WriteString(q[i:end])
			i = end
		case c == '$':
			tag := dollarTag(q[i:])
			if tag == "" {
				b.WriteByte(c)
				i++
				continue
			}
			end := len(q)
			if j := strings.Index(q[i+len(tag):], tag); j >= 0 {
				end = i + len(tag) + j + len(tag)
			}
			b.WriteString(q[i:end])
			i = end
		case c == '?':
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			i++
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
}

// dollarTag returns the opening tag of a dollar-quoted string at the start
// of s ("$$" or "$name$"), or "" when s does not start one ($1 is a
// parameter, not a tag).
func dollarTag(s string) string {
	for j := 1; j < len(s); j++ {
		c := s[j]
		switch {
		case c == '$':
			return s[:j+1]
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80:
		case c >= '0' && c <= '9' && j > 1:
		default:
			return ""
		}
	}
	return ""
}

// errPGReadOnly and friends are the PostgreSQL error codes (SQLSTATE) that
// Fault and isUniqueViolation read.
const (
	pgUniqueViolation     = "23505"
	pgForeignKeyViolation = "23503"
	pgLockNotAvailable    = "55P03"
	pgDeadlockDetected    = "40P01"
	pgReadOnlyTx          = "25006"
	pgDiskFull            = "53100"
	pgOutOfMemory         = "53200"
	pgTooManyConnections  = "53300"
	pgIOError             = "58030"
	pgAdminShutdown       = "57P01"
	pgCrashShutdown       = "57P02"
	pgCannotConnectNow    = "57P03"
	pgQueryCanceled       = "57014"
)

// isConnectionLoss reports whether err says the database server could not
// be reached or the connection to it broke.
func isConnectionLoss(err error) bool {
	if errors.Is(err, driver.ErrBadConn) {
		return true
	}
	var ce interface{ SafeToRetry() bool }
	if errors.As(err, &ce) {
		// pgconn's network errors (connect, read and write failures).
		return true
	}
	s := err.Error()
	return strings.Contains(s, "failed to connect") || strings.Contains(s, "conn closed") ||
		strings.Contains(s, "connection refused") || strings.Contains(s, "unexpected EOF")
}

// OpenSQL opens the database ref names — an SQLite file or a PostgreSQL
// URL — without migrating it, as a *sql.DB that takes the store's SQL (?
// placeholders) on both: for tools and tests that read or change rows
// directly. The caller closes it.
func OpenSQL(ctx context.Context, ref string) (*sql.DB, error) {
	if !IsPostgresURL(ref) {
		return openDB(ref, 0, 0)
	}
	cfg, err := parsePostgresURL(ref, 0)
	if err != nil {
		return nil, err
	}
	return openPostgresDB(ctx, cfg, ref, 0)
}
