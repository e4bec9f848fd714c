package store

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// schemaDump describes a database's schema and version rows in a form that
// two databases can be compared by: every object's SQL (whitespace folded)
// and the schema_version rows without their times.
func schemaDump(t *testing.T, db *sql.DB) string {
	t.Helper()
	ctx := context.Background()
	var b strings.Builder
	rows, err := db.QueryContext(ctx, `SELECT type, name, tbl_name, COALESCE(sql, '') FROM sqlite_schema ORDER BY type, name`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var typ, name, tbl, text string
		if err := rows.Scan(&typ, &name, &tbl, &text); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %s on %s: %s\n", typ, name, tbl, strings.Join(strings.Fields(text), " "))
	}
	rows.Close()
	rows, err = db.QueryContext(ctx, `SELECT version, name FROM schema_version ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var v int
		var name string
		if err := rows.Scan(&v, &name); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "version %d %s\n", v, name)
	}
	rows.Close()
	return b.String()
}

// TestMigrateFromEveryVersion builds a database at each earlier schema
// version (by applying only the first n migrations), opens it with Open, and
// checks that the result equals a database migrated from nothing. New
// migration files are covered without editing the test.
func TestMigrateFromEveryVersion(t *testing.T) {
	ctx := context.Background()
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) == 0 {
		t.Fatal("no embedded migrations")
	}
	freshPath := filepath.Join(t.TempDir(), "fresh.db")
	fresh, err := Open(ctx, freshPath, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := schemaDump(t, fresh.db)
	fresh.Close()
	if got := strings.Count(want, "\nversion "); got != len(ms) {
		t.Fatalf("fresh database has %d version rows; want %d\n%s", got, len(ms), want)
	}

	for n := 0; n <= len(ms); n++ {
		t.Run(fmt.Sprintf("from_%d", n), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "old.db")
			db, err := openDB(path, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := migrate(ctx, db, dialectSQLite, n); err != nil {
				t.Fatalf("migrate to %d: %v", n, err)
			}
			if v, err := currentVersion(ctx, db); err != nil || v != n {
				t.Fatalf("version after migrating to %d: got %d, %v; want %d", n, v, err, n)
			}
			db.Close()

			s, err := Open(ctx, path, Options{})
			if err != nil {
				t.Fatalf("Open at version %d: %v", n, err)
			}
			defer s.Close()
			if got := schemaDump(t, s.db); got != want {
				t.Errorf("schema migrated from version %d differs from a fresh one\ngot:\n%s\nwant:\n%s", n, got, want)
			}
		})
	}
}

func TestMigrateTwiceIsNoOp(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "db")
	for i := 0; i < 2; i++ {
		s, err := Open(ctx, path, Options{})
		if err != nil {
			t.Fatalf("Open #%d: %v", i+1, err)
		}
		v, err := currentVersion(ctx, s.db)
		s.Close()
		if err != nil || v != SchemaVersion() {
			t.Fatalf("Open #%d: version got %d, %v; want %d", i+1, v, err, SchemaVersion())
		}
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "db")
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.ExecContext(ctx, `INSERT INTO schema_version (version, name, applied_at) VALUES (9999, '9999_future.sql', '')`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err = Open(ctx, path, Options{})
	if err == nil || !strings.Contains(err.Error(), "newer than this postern") {
		t.Fatalf("Open of a newer database: got %v; want a 'newer than this postern' error", err)
	}
}

func TestPragmasOnEveryConnection(t *testing.T) {
	ctx := context.Background()
	s, _, _ := openTestStore(t)
	// Hold several connections at once so that the pool must open new ones.
	var conns []*sql.Conn
	for i := 0; i < 4; i++ {
		c, err := s.db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for i, c := range conns {
		var fk, busy int
		var mode string
		if err := c.QueryRowContext(ctx, `PRAGMA foreign_keys`).Scan(&fk); err != nil {
			t.Fatal(err)
		}
		if err := c.QueryRowContext(ctx, `PRAGMA busy_timeout`).Scan(&busy); err != nil {
			t.Fatal(err)
		}
		if err := c.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil {
			t.Fatal(err)
		}
		if fk != 1 || busy != int(DefaultBusyTimeout.Milliseconds()) || mode != "wal" {
			t.Errorf("conn %d: got foreign_keys=%d busy_timeout=%d journal_mode=%s; want 1 %d wal",
				i, fk, busy, mode, DefaultBusyTimeout.Milliseconds())
		}
		c.Close()
	}
}
