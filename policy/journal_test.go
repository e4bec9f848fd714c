package policy

import (
	"context"
	"strings"
	"testing"

	"github.com/postern/postern/store"
)

// countInflight is how many journal rows the database holds.
func (te *testEnv) countInflight() int {
	te.t.Helper()
	var n int
	if err := te.sql().QueryRow(`SELECT count(*) FROM inflight`).Scan(&n); err != nil {
		te.t.Fatal(err)
	}
	return n
}

// TestJournalRecordsInterruptedOperations: an operation that is let through
// is journaled before it runs; auditing its end removes the journal row in
// the same step; one whose end was never audited (postern killed while it
// ran) is audited as failed at the next start, redacted, exactly once, and
// the chain verifies.
func TestJournalRecordsInterruptedOperations(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		te := newTestEnv(t, nil, Options{})
		ctx := context.Background()
		c := te.conn("web", store.EnvDev, Rules{Read: Allow, Write: Allow, Destructive: Deny})

		// One that ends normally.
		done := te.op(c, Read, "uptime")
		auth, err := te.eng.Authorize(ctx, done, nil)
		if err != nil {
			t.Fatalf("Authorize(uptime): %v", err)
		}
		if auth.InflightID == "" || te.countInflight() != 1 {
			t.Fatalf("after Authorize: got journal id %q and %d rows; want one row before the operation runs", auth.InflightID, te.countInflight())
		}
		rec := auth.Record(done)
		zero := 0
		rec.ExitStatus = &zero
		if _, err := te.eng.Audit(ctx, rec); err != nil {
			t.Fatal(err)
		}
		if n := te.countInflight(); n != 0 {
			t.Errorf("after Audit: got %d journal rows; want 0", n)
		}

		// One that is running when postern dies: its end is never audited.
		const secret = "hunter2-journal-secret"
		cut := te.op(c, Write, "PASSWORD="+secret+" ./deploy.sh")
		cut.SessionID = "ses_cut"
		if _, err := te.eng.Authorize(ctx, cut, nil); err != nil {
			t.Fatalf("Authorize(deploy): %v", err)
		}
		// A refused one writes no journal row.
		if _, err := te.eng.Authorize(ctx, te.op(c, Destructive, "rm -rf /srv"), nil); err == nil {
			t.Fatal("Authorize(rm): got nil error; want denied")
		}
		if n := te.countInflight(); n != 1 {
			t.Fatalf("before the restart: got %d journal rows; want 1 (the running deploy)", n)
		}
		var raw string
		if err := te.sql().QueryRow(`SELECT row FROM inflight`).Scan(&raw); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(raw, secret) {
			t.Errorf("journal row holds the secret; want the operation redacted as in the audit log")
		}

		te.restart()
		n, err := te.eng.RecoverInterrupted(ctx)
		if err != nil || n != 1 {
			t.Fatalf("RecoverInterrupted: got %d, %v; want 1, nil", n, err)
		}
		if n, err := te.eng.RecoverInterrupted(ctx); err != nil || n != 0 {
			t.Errorf("second RecoverInterrupted: got %d, %v; want 0, nil", n, err)
		}
		rows, err := te.st.ListAudit(ctx, store.AuditFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 2 {
			t.Fatalf("audit rows: got %d; want 2 (uptime allowed, deploy failed)", len(rows))
		}
		last := rows[1]
		if last.Decision != string(Failed) || last.Reason != InterruptedReason || last.ExitStatus != nil ||
			last.Class != string(Write) || last.ConnectionAlias != "web" || last.AgentName != "bot" || last.SessionID != "ses_cut" {
			t.Errorf("recovered row: got decision %q, reason %q, exit %v, class %q, alias %q, agent %q, session %q; want failed, %q, no exit, write, web, bot, ses_cut",
				last.Decision, last.Reason, last.ExitStatus, last.Class, last.ConnectionAlias, last.AgentName, last.SessionID, InterruptedReason)
		}
		if strings.Contains(last.Operation, secret) || !strings.Contains(last.Operation, "./deploy.sh") {
			t.Errorf("recovered operation: got %q; want the command with the secret redacted", last.Operation)
		}
		res, err := Verify(ctx, te.st)
		if err != nil || res.Broken != nil || res.Rows != 2 {
			t.Errorf("Verify after recovery: got %+v, %v; want an intact chain", res, err)
		}
	})
}

// TestJournalForApprovedOperations: an approved operation is journaled too,
// whether the agent waited for the decision or claimed it on a retry.
func TestJournalForApprovedOperations(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		te := newTestEnv(t, nil, Options{})
		ctx := context.Background()
		c := te.conn("web", store.EnvDev, Rules{Read: Allow, Write: Ask, Destructive: Deny})
		op := te.op(c, Write, "touch /srv/flag")
		waiting := make(chan Approval, 1)
		results := make(chan waitResult, 1)
		go func() {
			a, err := te.eng.Authorize(ctx, op, func(a Approval) { waiting <- a })
			results <- waitResult{a, err}
		}()
		a := <-waiting
		if n := te.countInflight(); n != 0 {
			t.Errorf("while waiting: got %d journal rows; want 0 (nothing runs yet)", n)
		}
		if _, err := te.eng.Approve(ctx, a.ID, te.admin("alice"), Scope{}); err != nil {
			t.Fatal(err)
		}
		r := <-results
		if r.err != nil || r.auth.InflightID == "" {
			t.Fatalf("approved Authorize: got journal id %q, %v; want a journal row and nil", r.auth.InflightID, r.err)
		}
		if _, err := te.eng.Audit(ctx, r.auth.Record(op)); err != nil {
			t.Fatal(err)
		}
		if n := te.countInflight(); n != 0 {
			t.Errorf("after Audit: got %d journal rows; want 0", n)
		}
	})
}
