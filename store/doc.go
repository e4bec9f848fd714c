// Package store keeps everything postern remembers in one database — SQLite
// in the data directory, or PostgreSQL for several replicas — and one data
// directory: agents and their public keys, connections with their sealed
// private keys and pinned host keys, grants, approvals and audit rows, and
// the replicas serving the database with the journal of their running
// operations, and the locks on agents and connections (locks.go).
//
// The package owns the schema and the queries; deciding what a grant means is
// the job of package policy, which is built on top of this one.
//
// # Database
//
// The database is opened with modernc.org/sqlite (pure Go, so the binary
// needs no C toolchain) in WAL mode, with a busy timeout and foreign keys on.
// Those settings are passed as DSN parameters rather than executed once after
// Open, because database/sql pools connections and a PRAGMA run on one
// connection does not reach the others. Transactions begin IMMEDIATE so that a
// read-then-write transaction never fails half-way with SQLITE_BUSY when a
// second process (the admin CLI) writes at the same time; it waits for the
// busy timeout instead.
//
// PostgreSQL (OpenPostgres, Dir.DatabaseURL) runs the same queries through
// pgx's database/sql driver behind a connector that rewrites ? as $n
// (postgres.go). A write transaction takes an advisory transaction lock
// first, PostgreSQL's counterpart of BEGIN IMMEDIATE, so that every
// read-then-write transaction is serialized across replicas as it is across
// processes on SQLite; lock_timeout is the busy timeout. Changes to
// approvals are announced with NOTIFY by a trigger and followed on a
// connection of the store's own (pgwatch.go).
//
// The schema is a list of forward-only migrations embedded from
// migrations/*.sql (PostgreSQL's: migrations/postgres/*.sql, the same
// steps) and applied in file name order, each in its own
// transaction together with its row in schema_version. There are no down
// migrations: a released database is only ever moved forward, and a binary
// that finds a database newer than itself refuses to touch it.
//
// # Time and ids
//
// Every record has a random, prefixed id (agt_, key_, con_, gra_, ...) that
// never changes, and created_at and modified_at in UTC. Times are stored as
// fixed-width RFC 3339 text with nanoseconds (see formatTime) so that they
// sort as text and stay readable in the sqlite3 shell. The clock is
// Options.Now, injected so that tests control it.
//
// # Sealed secrets
//
// A connection's private key is sealed with XChaCha20-Poly1305 under the
// master key, with the connection id as associated data so that a sealed key
// copied onto another row does not open. The master key lives in a file of
// the data directory (or the file named by POSTERN_MASTER_KEY_FILE) and never
// in the database, so a copy of postern.db alone reveals no server key.
//
// # Errors
//
// Errors start with "store: " and wrap one of the sentinels ErrNotFound,
// ErrDuplicate, ErrInvalid, ErrNoMasterKey or ErrWrongMasterKey when a
// caller may want to branch on them; the admin CLI maps the first three to
// exit status 2. Where the words after the prefix are meant for the person
// who typed the input (a name not found or taken, input refused), they are
// a *usererr.Error in the chain, which the doors show instead of stripping
// the prefix; other errors (SQL, files, keys) are logged, not shown.
//
// # Conventions for code in this package
//
// Queries that change more than one row run in s.inTx. New ids come from
// newID, times go through s.now, formatTime and parseTime. Package-level
// state is limited to constants and the embedded migrations.
package store
