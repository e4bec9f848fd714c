package store

import (
	"strings"
	"testing"

	"github.com/postern/postern/internal/testwait"
)

// TestCheckWritable: an open store takes a write and is left as it was; a
// connection that may not write (SQLite's query_only, PostgreSQL's
// read-only transactions: what a read-only file or a standby looks like)
// and a closed store fail the check.
func TestCheckWritable(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		tests := []struct {
			name    string
			prepare func(t *testing.T, s *Store)
			wantErr string // a word of the error; "" for none
		}{
			{"open", func(*testing.T, *Store) {}, ""},
			{"read-only", func(t *testing.T, s *Store) {
				// One pooled connection (SQLite keeps another for
				// DataVersion, outside the pool), set to refuse writes.
				s.db.SetMaxOpenConns(1 + btoi(s.dvConn != nil))
				s.db.SetMaxIdleConns(1)
				q := "PRAGMA query_only = ON"
				if s.Postgres() {
					q = "SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY"
				}
				if _, err := s.db.Exec(q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}, "read"},
			{"closed", func(t *testing.T, s *Store) { s.Close() }, "closed"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				s, _, _ := openTestStore(t)
				ctx := testwait.Context(t)
				before, err := s.DataVersion(ctx)
				if err != nil {
					t.Fatal(err)
				}
				tt.prepare(t, s)
				err = s.CheckWritable(ctx)
				switch {
				case tt.wantErr == "" && err != nil:
					t.Fatalf("CheckWritable = %v; want nil", err)
				case tt.wantErr != "" && (err == nil || !strings.Contains(strings.ToLower(err.Error()), tt.wantErr)):
					t.Fatalf("CheckWritable = %v; want an error saying %q", err, tt.wantErr)
				case tt.wantErr != "":
					return
				}
				// Nothing was committed: no other connection saw a change.
				if after, err := s.DataVersion(ctx); err != nil || (!s.Postgres() && after != before) {
					t.Errorf("data version %d after the check, %v; want %d (nothing written)", after, err, before)
				}
			})
		}
	})
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
