package store

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// TestAuditHead: the head is the newest row's seq and stored hash, and
// seq 0 with 32 zero bytes for an empty log.
func TestAuditHead(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		s, _, _ := openTestStore(t)
		ctx := context.Background()
		seq, hash, err := s.AuditHead(ctx)
		if err != nil || seq != 0 || !bytes.Equal(hash, make([]byte, 32)) {
			t.Fatalf("AuditHead of an empty log: got %d, %x, %v; want 0 and 32 zero bytes", seq, hash, err)
		}
		var last AuditRow
		for range 3 {
			if last, err = s.AppendAudit(ctx, AuditRow{Kind: "exec", Operation: "uptime"}, testChain); err != nil {
				t.Fatal(err)
			}
		}
		seq, hash, err = s.AuditHead(ctx)
		if err != nil || seq != 3 || !bytes.Equal(hash, last.Hash) {
			t.Errorf("AuditHead after 3 rows: got %d, %x, %v; want 3, %x", seq, hash, err, last.Hash)
		}
	})
}

// TestListAuditAfter: a page is the rows after a seq, at or after a time,
// oldest first, at most n.
func TestListAuditAfter(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		s, _, _ := openTestStore(t)
		ctx := context.Background()
		start := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
		// Row 4's time is before row 3's: an operation audited when it
		// ended carries the time it was decided.
		for _, minutes := range []int{0, 1, 5, 2, 6} {
			if _, err := s.AppendAudit(ctx, AuditRow{Kind: "exec", Operation: "uptime",
				Time: start.Add(time.Duration(minutes) * time.Minute)}, testChain); err != nil {
				t.Fatal(err)
			}
		}
		tests := []struct {
			name  string
			after int64
			since time.Time
			n     int
			want  []int64
		}{
			{"first page", 0, time.Time{}, 2, []int64{1, 2}},
			{"next page", 2, time.Time{}, 2, []int64{3, 4}},
			{"last page, short", 4, time.Time{}, 2, []int64{5}},
			{"after the end", 5, time.Time{}, 2, nil},
			{"since a time", 0, start.Add(2 * time.Minute), 10, []int64{3, 4, 5}},
			{"since a time, after a seq", 3, start.Add(2 * time.Minute), 10, []int64{4, 5}},
			{"since a time at a row's time", 0, start.Add(5 * time.Minute), 10, []int64{3, 5}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				rows, err := s.ListAuditAfter(ctx, tt.after, tt.since, tt.n)
				if err != nil {
					t.Fatal(err)
				}
				var got []int64
				for _, r := range rows {
					got = append(got, r.Seq)
				}
				if !slices.Equal(got, tt.want) {
					t.Errorf("ListAuditAfter(%d, %v, %d): got seqs %v; want %v", tt.after, tt.since, tt.n, got, tt.want)
				}
			})
		}
		if _, err := s.ListAuditAfter(ctx, 0, time.Time{}, 0); !errors.Is(err, ErrInvalid) {
			t.Errorf("ListAuditAfter with n 0: got %v; want ErrInvalid", err)
		}
	})
}
