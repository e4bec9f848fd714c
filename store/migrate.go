package store

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
)

// migrationFiles are the schema steps, applied in file name order. Names are
// NNNN_what.sql with NNNN = 0001, 0002, ... and no gaps: the number is the
// schema version the step produces. A released file is never edited; a
// change to the schema is a new file.
//
// migrations/*.sql are SQLite's steps and migrations/postgres/*.sql
// PostgreSQL's: the same steps with the same names, each written in its
// database's SQL (BIGINT for INTEGER, BYTEA for BLOB, TEXT COLLATE "C" so
// that text compares byte by byte as in SQLite, no STRICT). Flags stay
// integers on both, so that the queries are shared. TestMigrationsParity
// checks that the steps match and that the schemas they make have the same
// tables, columns and indexes.
//
//go:embed migrations/*.sql migrations/postgres/*.sql
var migrationFiles embed.FS

// migrationDir is where d's steps are.
func migrationDir(d dialect) string {
	if d == dialectPostgres {
		return "migrations/postgres"
	}
	return "migrations"
}

// migration is one embedded schema step.
type migration struct {
	version int
	name    string // file name, for schema_version and errors
	sql     string
}

// migrations lists SQLite's embedded steps in order and checks their
// numbering.
func migrations() ([]migration, error) { return dialectMigrations(dialectSQLite) }

// dialectMigrations lists d's embedded steps in order and checks their
// numbering.
func dialectMigrations(d dialect) ([]migration, error) {
	names, err := fs.Glob(migrationFiles, migrationDir(d)+"/*.sql")
	if err != nil {
		return nil, fmt.Errorf("store: migrations: %w", err)
	}
	sort.Strings(names)
	var ms []migration
	for i, n := range names {
		base := path.Base(n)
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v != i+1 {
			return nil, fmt.Errorf("store: migration %s: want a name starting %04d_", base, i+1)
		}
		b, err := migrationFiles.ReadFile(n)
		if err != nil {
			return nil, fmt.Errorf("store: migration %s: %w", base, err)
		}
		ms = append(ms, migration{version: v, name: base, sql: string(b)})
	}
	return ms, nil
}

// SchemaVersion is the schema version this build of postern migrates to.
func SchemaVersion() int {
	ms, err := migrations()
	if err != nil {
		return 0
	}
	return len(ms)
}

// schemaVersionTable is the DDL of the table of applied steps, per dialect.
var schemaVersionTable = map[dialect]string{
	dialectSQLite: `CREATE TABLE IF NOT EXISTS schema_version (
		version    INTEGER PRIMARY KEY,
		name       TEXT NOT NULL,
		applied_at TEXT NOT NULL
	) STRICT`,
	dialectPostgres: `CREATE TABLE IF NOT EXISTS schema_version (
		version    BIGINT PRIMARY KEY,
		name       TEXT COLLATE "C" NOT NULL,
		applied_at TEXT COLLATE "C" NOT NULL
	)`,
}

// migrate brings db to schema version limit (all embedded steps if limit < 0).
// Each step runs in its own transaction that holds the database's write lock
// (IMMEDIATE on SQLite, the advisory lock pgLockMigrate on PostgreSQL) and
// first re-reads the current version, so two processes starting at once
// apply each step once. PostgreSQL's DDL is transactional: a step that fails
// leaves nothing behind.
//
// It returns the version the database had before.
func migrate(ctx context.Context, db *sql.DB, d dialect, limit int) (int, error) {
	ms, err := dialectMigrations(d)
	if err != nil {
		return 0, err
	}
	if limit < 0 || limit > len(ms) {
		limit = len(ms)
	}
	if err := inMigrationTx(ctx, db, d, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, schemaVersionTable[d])
		return err
	}); err != nil {
		return 0, fmt.Errorf("store: create schema_version: %w", err)
	}
	cur, err := currentVersion(ctx, db)
	if err != nil {
		return 0, err
	}
	if cur > len(ms) {
		return cur, fmt.Errorf("store: database schema version %d is newer than this postern (%d); use a newer postern", cur, len(ms))
	}
	for _, m := range ms[:limit] {
		if m.version <= cur {
			continue
		}
		if err := applyMigration(ctx, db, d, m); err != nil {
			return cur, err
		}
	}
	return cur, nil
}

func currentVersion(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}) (int, error) {
	var v int
	if err := q.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_version`).Scan(&v); err != nil {
		return 0, fmt.Errorf("store: read schema version: %w", err)
	}
	return v, nil
}

// inMigrationTx runs fn in a transaction that holds the database's write
// lock for migrations, and commits if fn returns nil.
func inMigrationTx(ctx context.Context, db *sql.DB, d dialect, fn func(tx *sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if d == dialectPostgres {
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(?)`, pgLockMigrate); err != nil {
			return err
		}
	}
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

func applyMigration(ctx context.Context, db *sql.DB, d dialect, m migration) error {
	err := inMigrationTx(ctx, db, d, func(tx *sql.Tx) error {
		cur, err := currentVersion(ctx, tx)
		if err != nil {
			return err
		}
		if cur >= m.version {
			return nil // another process got here first
		}
		if _, err := tx.ExecContext(ctx, m.sql); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO schema_version (version, name, applied_at) VALUES (?, ?, ?)`,
			m.version, m.name, formatTime(time.Now()))
		return err
	})
	if err != nil {
		return fmt.Errorf("store: migration %s: %w", m.name, err)
	}
	return nil
}
