package store

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestAuditSinkLease: a new sink starts at cursor 0 and is claimed by the
// first holder; another holder cannot claim it while the lease runs, nor
// advance it; the cursor never moves back; after the lease runs out (or is
// released) the other holder claims it and resumes from the cursor, and
// the first learns it lost it; force takes a live lease.
func TestAuditSinkLease(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		ctx := context.Background()
		s, clock, _ := openTestStore(t)
		const lease = time.Minute
		claim := func(holder string, force bool, wantCursor int64, wantClaimed bool) {
			t.Helper()
			cur, ok, err := s.ClaimAuditSink(ctx, "sink", holder, lease, force)
			if err != nil {
				t.Fatal(err)
			}
			if ok != wantClaimed || (ok && cur != wantCursor) {
				t.Fatalf("claim by %s: got cursor %d claimed %v; want %d %v", holder, cur, ok, wantCursor, wantClaimed)
			}
		}
		claim("a", false, 0, true)
		claim("a", false, 0, true) // its own lease: renewed
		claim("b", false, 0, false)
		if err := s.AdvanceAuditSink(ctx, "sink", "a", 7, lease); err != nil {
			t.Fatal(err)
		}
		if err := s.AdvanceAuditSink(ctx, "sink", "a", 3, lease); err != nil {
			t.Fatal(err)
		}
		if err := s.AdvanceAuditSink(ctx, "sink", "b", 9, lease); !errors.Is(err, ErrAuditSinkLost) {
			t.Fatalf("advance by a non-holder: got %v; want ErrAuditSinkLost", err)
		}
		clock.Advance(lease - time.Second)
		claim("b", false, 0, false)
		clock.Advance(2 * time.Second)
		claim("b", false, 7, true) // a's lease ran out: b resumes at 7
		if err := s.AdvanceAuditSink(ctx, "sink", "a", 8, lease); !errors.Is(err, ErrAuditSinkLost) {
			t.Fatalf("advance by the old holder: got %v; want ErrAuditSinkLost", err)
		}
		if err := s.ReleaseAuditSink(ctx, "sink", "a"); err != nil { // not a's: left alone
			t.Fatal(err)
		}
		claim("a", false, 0, false)
		if err := s.ReleaseAuditSink(ctx, "sink", "b"); err != nil {
			t.Fatal(err)
		}
		claim("a", false, 7, true) // released: taken at once
		claim("c", true, 7, true)  // forced
		cs, err := s.AuditSinkCursors(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) != 1 || cs[0].Name != "sink" || cs[0].Seq != 7 || cs[0].Holder != "c" || !cs[0].LeaseExpires.Equal(clock.Now().Add(lease).UTC()) {
			t.Fatalf("cursors: got %+v; want sink at 7 held by c until %v", cs, clock.Now().Add(lease))
		}
		if _, _, err := s.ClaimAuditSink(ctx, "", "a", lease, false); !errors.Is(err, ErrInvalid) {
			t.Fatalf("claim without a name: got %v; want ErrInvalid", err)
		}
	})
}
