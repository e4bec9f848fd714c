package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

func journalRow(op string) AuditRow {
	return AuditRow{AgentID: "agt_x", AgentName: "bot", ConnectionID: "con_x", ConnectionAlias: "web",
		Class: "write", Kind: "exec", Decision: "allowed", Operation: op}
}

// TestReplicaJournal: a journal row belongs to the replica that wrote it;
// another replica records it as interrupted only once the owner's lease ran
// out, never its own and never a live replica's (unless All); a replica
// whose lease ran out cannot journal until renewed, and finds out that it
// was taken for dead; the audit row of an operation recovered while it ran
// says so.
func TestReplicaJournal(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		ctx := context.Background()
		s, clock, _ := openTestStore(t)
		const lease = time.Minute
		r1, err := s.RegisterReplica(ctx, "host1", 1, lease)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := s.RegisterReplica(ctx, "host2", 2, lease)
		if err != nil {
			t.Fatal(err)
		}
		id1, err := s.BeginInflight(ctx, r1.ID, journalRow("one"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.BeginInflight(ctx, r2.ID, journalRow("two")); err != nil {
			t.Fatal(err)
		}
		if _, err := s.BeginInflight(ctx, "", journalRow("nobody's")); err != nil {
			t.Fatal(err)
		}
		recover := func(self string, all bool) []string {
			t.Helper()
			before, _ := s.ListAudit(ctx, AuditFilter{})
			if _, err := s.RecoverInflight(ctx, testChain, "interrupted", RecoverOptions{Self: self, All: all}); err != nil {
				t.Fatal(err)
			}
			after, _ := s.ListAudit(ctx, AuditFilter{})
			var ops []string
			for _, r := range after[len(before):] {
				if r.Decision != "failed" || r.Reason != "interrupted" {
					t.Errorf("recovered row %d: decision %q reason %q; want failed, interrupted", r.Seq, r.Decision, r.Reason)
				}
				ops = append(ops, r.Operation)
			}
			return ops
		}
		if got := recover(r2.ID, false); strings.Join(got, ",") != "nobody's" {
			t.Errorf("r2 recovers with r1 alive: got %q; want only the row without an owner", got)
		}

		clock.Advance(lease + time.Second) // both leases run out
		if _, err := s.BeginInflight(ctx, r1.ID, journalRow("late")); !errors.Is(err, ErrLeaseLapsed) {
			t.Errorf("BeginInflight with a lapsed lease: got %v; want ErrLeaseLapsed", err)
		}
		if renewed, err := s.RenewReplica(ctx, r2, lease); err != nil || !renewed {
			t.Fatalf("RenewReplica(r2): got %v, %v; want true", renewed, err)
		}
		if got := recover(r2.ID, false); strings.Join(got, ",") != "one" {
			t.Errorf("r2 recovers with r1 dead: got %q; want r1's row only (never its own)", got)
		}
		reps, err := s.ListReplicas(ctx)
		if err != nil || len(reps) != 1 || reps[0].ID != r2.ID {
			t.Errorf("replicas after the recovery: got %v, %v; want only r2 (r1 pruned)", reps, err)
		}
		// r1 was only slow: it renews, learns it was taken for dead, and
		// its operation's end is recorded with a note.
		if renewed, err := s.RenewReplica(ctx, r1, lease); err != nil || renewed {
			t.Errorf("RenewReplica(r1) after being pruned: got %v, %v; want false, nil", renewed, err)
		}
		row, err := s.FinishInflight(ctx, id1, journalRow("one"), testChain)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(row.Reason, inflightGoneNote) {
			t.Errorf("finishing a recovered operation: reason %q; want the note %q", row.Reason, inflightGoneNote)
		}
		if _, err := s.BeginInflight(ctx, r1.ID, journalRow("after renewal")); err != nil {
			t.Errorf("BeginInflight after renewal: %v", err)
		}
		// All (SQLite's one serve at start) takes the live r2's row too,
		// but not its own.
		if got := recover(r1.ID, true); strings.Join(got, ",") != "two" {
			t.Errorf("r1 recovers with All: got %q; want r2's row", got)
		}
	})
}

// TestConcurrentRecovery: replicas recovering the same dead replica's
// journal at once record each operation exactly once, in one chain.
func TestConcurrentRecovery(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		ctx := context.Background()
		s, clock, ref := openTestStore(t)
		other, err := openRef(ctx, ref, Options{Now: clock.Now, MasterKey: testMasterKey()})
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		const lease = time.Minute
		dead, err := s.RegisterReplica(ctx, "gone", 1, lease)
		if err != nil {
			t.Fatal(err)
		}
		const n = 30
		for i := range n {
			if _, err := s.BeginInflight(ctx, dead.ID, journalRow(fmt.Sprint("op", i))); err != nil {
				t.Fatal(err)
			}
		}
		clock.Advance(2 * lease)
		var wg sync.WaitGroup
		counts := make([]int, 4)
		for i := range counts {
			st := s
			if i%2 == 1 {
				st = other
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				k, err := st.RecoverInflight(ctx, testChain, "interrupted", RecoverOptions{Self: fmt.Sprint("rep_", i)})
				if err != nil {
					t.Errorf("recovery %d: %v", i, err)
				}
				counts[i] = k
			}()
		}
		wg.Wait()
		total := 0
		for _, k := range counts {
			total += k
		}
		rows, err := s.ListAudit(ctx, AuditFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if total != n || len(rows) != n {
			t.Errorf("recovered %d (by %v), %d audit rows; want %d and %d", total, counts, len(rows), n, n)
		}
		seen := map[string]bool{}
		prev := make([]byte, 32)
		for i, r := range rows {
			if seen[r.Operation] {
				t.Errorf("operation %s recorded twice", r.Operation)
			}
			seen[r.Operation] = true
			if r.Seq != int64(i+1) || string(r.Hash) != string(testChain(prev, &r)) {
				t.Errorf("row %d: seq %d or hash breaks the chain", i, r.Seq)
			}
			prev = r.Hash
		}
	})
}
