package policy

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/postern/postern/store"
)

// fillAudit writes n rows through the engine.
func fillAudit(t *testing.T, te *testEnv, n int) {
	t.Helper()
	for i := range n {
		exit := i % 3
		_, err := te.eng.Audit(context.Background(), Record{
			AgentID: te.agent.ID, AgentName: "bot", ConnectionID: "con_x", ConnectionAlias: "web",
			Class: Read, Kind: Exec, Outcome: Allowed, Operation: fmt.Sprintf("cat /var/log/app.%d", i),
			ExitStatus: &exit, Duration: time.Duration(i) * time.Millisecond, BytesIn: int64(i), BytesOut: int64(10 * i),
			AgentReason: fmt.Sprintf("check log %d", i), SourceAddr: "127.0.0.1:4000",
			SessionID: fmt.Sprintf("ses_test%d", i/3),
		})
		if err != nil {
			t.Fatalf("Audit: %v", err)
		}
	}
}

func TestAuditChain(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		tests := []struct {
			name    string
			tamper  []string // SQL run against the database
			wantSeq int64    // stored seq of the first broken row; 0 = intact
			wantPos int64
		}{
			{name: "intact"},
			{name: "edited operation", tamper: []string{`UPDATE audit SET operation = 'rm -rf /' WHERE seq = 3`}, wantSeq: 3, wantPos: 3},
			{name: "edited decision", tamper: []string{`UPDATE audit SET decision = 'denied' WHERE seq = 5`}, wantSeq: 5, wantPos: 5},
			{name: "edited exit status", tamper: []string{`UPDATE audit SET exit_status = NULL WHERE seq = 2`}, wantSeq: 2, wantPos: 2},
			{name: "edited time", tamper: []string{`UPDATE audit SET time = '2020-01-01T00:00:00.000000000Z' WHERE seq = 4`}, wantSeq: 4, wantPos: 4},
			{name: "deleted row", tamper: []string{`DELETE FROM audit WHERE seq = 3`}, wantSeq: 4, wantPos: 3},
			{name: "deleted first row", tamper: []string{`DELETE FROM audit WHERE seq = 1`}, wantSeq: 2, wantPos: 1},
			{name: "deleted and renumbered", tamper: []string{
				`DELETE FROM audit WHERE seq = 3`,
				`UPDATE audit SET seq = seq - 1 WHERE seq > 3`,
			}, wantSeq: 3, wantPos: 3},
			{name: "reordered rows", tamper: []string{
				`UPDATE audit SET seq = -2 WHERE seq = 2`,
				`UPDATE audit SET seq = 2 WHERE seq = 3`,
				`UPDATE audit SET seq = 3 WHERE seq = -2`,
			}, wantSeq: 2, wantPos: 2},
			{name: "edited agent reason", tamper: []string{`UPDATE audit SET agent_reason = 'routine' WHERE seq = 2`}, wantSeq: 2, wantPos: 2},
			{name: "edited source address", tamper: []string{`UPDATE audit SET source_addr = '10.9.9.9:1' WHERE seq = 6`}, wantSeq: 6, wantPos: 6},
			{name: "edited session id", tamper: []string{`UPDATE audit SET session_id = 'ses_other' WHERE seq = 4`}, wantSeq: 4, wantPos: 4},
			{name: "session id removed", tamper: []string{`UPDATE audit SET session_id = '' WHERE seq = 5`}, wantSeq: 5, wantPos: 5},
			{name: "downgraded chain version", tamper: []string{`UPDATE audit SET chain_version = 1, agent_reason = '', source_addr = '', session_id = '' WHERE seq = 3`}, wantSeq: 3, wantPos: 3},
			{name: "downgraded to version 2", tamper: []string{`UPDATE audit SET chain_version = 2, session_id = '' WHERE seq = 2`}, wantSeq: 2, wantPos: 2},
			{name: "hash recomputed for edited row only", tamper: []string{
				`UPDATE audit SET hash = (SELECT hash FROM audit WHERE seq = 5) WHERE seq = 4`,
			}, wantSeq: 4, wantPos: 4},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				te := newTestEnv(t, nil, Options{})
				fillAudit(t, te, 6)
				for _, q := range tt.tamper {
					te.exec(q)
				}
				res, err := Verify(context.Background(), te.st)
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				if tt.wantSeq == 0 {
					if res.Broken != nil {
						t.Fatalf("Broken = %v; want intact", res.Broken)
					}
					if res.Rows != 6 || len(res.Head) != 64 {
						t.Errorf("Rows, Head = %d, %q; want 6 and a hex hash", res.Rows, res.Head)
					}
					return
				}
				if res.Broken == nil {
					t.Fatalf("Broken = nil; want row %d", tt.wantSeq)
				}
				if res.Broken.Seq != tt.wantSeq || res.Broken.Position != tt.wantPos {
					t.Errorf("Broken = %v; want seq %d at position %d", res.Broken, tt.wantSeq, tt.wantPos)
				}
			})
		}
	})
}

// TestAuditChainAcrossVersions: rows written before the agent's reason and
// address were kept (chain version 1) and rows after (version 2) make one
// chain; a version 1 row given either field does not verify.
func TestAuditChainAcrossVersions(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		te := newTestEnv(t, nil, Options{})
		for i := range 2 {
			if _, err := te.st.AppendAudit(context.Background(), store.AuditRow{AgentID: te.agent.ID, AgentName: "bot",
				Class: "read", Kind: "exec", Decision: "allowed", Operation: fmt.Sprintf("uptime %d", i), ChainVersion: 1}, ChainHash); err != nil {
				t.Fatal(err)
			}
		}
		fillAudit(t, te, 3)
		res, err := Verify(context.Background(), te.st)
		if err != nil || res.Broken != nil || res.Rows != 5 {
			t.Fatalf("Verify of a mixed chain = %+v, %v; want 5 intact rows", res, err)
		}
		te.exec(`UPDATE audit SET agent_reason = 'added later' WHERE seq = 1`)
		res, err = Verify(context.Background(), te.st)
		if err != nil || res.Broken == nil || res.Broken.Seq != 1 || !strings.Contains(res.Broken.Reason, "version 1") {
			t.Fatalf("Verify after giving a version 1 row a reason = %+v, %v; want broken at 1", res.Broken, err)
		}
	})
}

// TestAuditChainV2ToV3: rows written before session ids were kept (chain
// version 2) and rows after (version 3) make one chain; a version 1 or 2
// row given a session id does not verify, even with its hash recomputed
// under its own version (the version's encoding has no place for it).
func TestAuditChainV2ToV3(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		for _, tt := range []struct {
			name    string
			version int
			tamper  bool
			wantBrk int64 // seq of the first broken row; 0 = intact
		}{
			{name: "v1 and v3 intact", version: 1},
			{name: "v2 and v3 intact", version: 2},
			{name: "v2 with a session id", version: 2, tamper: true, wantBrk: 2},
			{name: "v1 with a session id", version: 1, tamper: true, wantBrk: 2},
		} {
			t.Run(tt.name, func(t *testing.T) {
				te := newTestEnv(t, nil, Options{})
				for i := range 2 {
					row := store.AuditRow{AgentID: te.agent.ID, AgentName: "bot", Class: "read", Kind: "exec",
						Decision: "allowed", Operation: fmt.Sprintf("uptime %d", i), ChainVersion: tt.version}
					if tt.tamper && i == 1 {
						// Written as if the field had been there: the hash
						// matches the row under its version's encoding,
						// which does not cover the session id.
						row.SessionID = "ses_added"
					}
					if _, err := te.st.AppendAudit(context.Background(), row, ChainHash); err != nil {
						t.Fatal(err)
					}
				}
				fillAudit(t, te, 3)
				res, err := Verify(context.Background(), te.st)
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case tt.wantBrk == 0 && (res.Broken != nil || res.Rows != 5):
					t.Fatalf("Verify = %+v; want 5 intact rows", res)
				case tt.wantBrk != 0 && (res.Broken == nil || res.Broken.Seq != tt.wantBrk || !strings.Contains(res.Broken.Reason, "session id")):
					t.Fatalf("Verify broken = %v; want row %d, for its session id", res.Broken, tt.wantBrk)
				}
				rows, err := te.st.ListAudit(context.Background(), store.AuditFilter{})
				if err != nil {
					t.Fatal(err)
				}
				if got := rows[4]; got.ChainVersion != 3 || got.SessionID == "" {
					t.Errorf("new row version %d, session %q; want 3 and a session id", got.ChainVersion, got.SessionID)
				}
			})
		}
	})
}

// TestAuditRecordCarriesAgentFacts: the agent's stated reason (redacted
// and cut) and address reach the audit row.
func TestAuditRecordCarriesAgentFacts(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		te := newTestEnv(t, nil, Options{})
		c := te.conn("web", store.EnvDev, Rules{Read: Allow, Write: Allow, Destructive: Deny})
		op := te.op(c, Write, "touch /x")
		op.AgentReason = "deploy with PASSWORD=hunter2 " + strings.Repeat("x", 2*MaxAgentReason)
		op.SourceAddr = "127.0.0.1:55001"
		op.SessionID = "ses_facts"
		auth, err := te.eng.Authorize(context.Background(), op, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := te.eng.Audit(context.Background(), auth.Record(op)); err != nil {
			t.Fatal(err)
		}
		rows, err := te.st.ListAudit(context.Background(), store.AuditFilter{})
		if err != nil || len(rows) != 1 {
			t.Fatalf("ListAudit = %d rows, %v; want 1", len(rows), err)
		}
		r := rows[0]
		if strings.Contains(r.AgentReason, "hunter2") || len(r.AgentReason) > MaxAgentReason+len("…") ||
			!strings.HasPrefix(r.AgentReason, "deploy with") || r.SourceAddr != op.SourceAddr || r.ChainVersion != 3 ||
			r.SessionID != op.SessionID {
			t.Errorf("audit row reason %q (%d bytes), source %q, session %q, version %d; want redacted, cut at %d, the address, %q, version 3",
				r.AgentReason, len(r.AgentReason), r.SourceAddr, r.SessionID, r.ChainVersion, MaxAgentReason, op.SessionID)
		}
	})
}

func TestAuditEmptyChain(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		te := newTestEnv(t, nil, Options{})
		res, err := Verify(context.Background(), te.st)
		if err != nil || res.Broken != nil || res.Rows != 0 {
			t.Errorf("Verify(empty) = %+v, %v; want 0 rows, intact", res, err)
		}
	})
}

// TestAuditConcurrentAppends writes from two stores (as two processes would)
// and many goroutines at once; the chain must come out whole.
func TestAuditConcurrentAppends(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		te := newTestEnv(t, nil, Options{})
		other, err := te.storeDir().Open(context.Background(), store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		otherEng, err := New(Options{Store: other})
		if err != nil {
			t.Fatal(err)
		}
		defer otherEng.Close()
		var wg sync.WaitGroup
		errs := make(chan error, 200)
		for i := range 20 {
			e := te.eng
			if i%2 == 1 {
				e = otherEng
			}
			wg.Go(func() {
				for j := range 10 {
					if _, err := e.Audit(context.Background(), Record{AgentName: "bot", Class: Read, Kind: Exec,
						Outcome: Allowed, Operation: fmt.Sprintf("echo %d.%d", i, j)}); err != nil {
						errs <- err
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("Audit: %v", err)
		}
		res, err := Verify(context.Background(), te.st)
		if err != nil || res.Broken != nil || res.Rows != 200 {
			t.Fatalf("Verify = rows %d, broken %v, err %v; want 200 intact", res.Rows, res.Broken, err)
		}
	})
}

// TestAuditRecord checks what a row keeps: the redacted operation, the
// approval and its deciders, the exit status, duration and byte counts.
func TestAuditRecord(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		te := newTestEnv(t, nil, Options{})
		c := te.conn("web", store.EnvDev, askAll)
		ctx := context.Background()
		op := te.op(c, Write, "mysql -uroot -pHunter2xyz -e 'update t set x=1'")
		a, done := authorizeAsync(t, ctx, te.eng, op)
		if strings.Contains(a.Operation, "Hunter2xyz") {
			t.Error("approval request stores the password")
		}
		if _, err := te.eng.Approve(ctx, a.ID, te.admin("alice"), Scope{}); err != nil {
			t.Fatal(err)
		}
		r := result(t, done)
		rec := r.auth.Record(op)
		exit := 3
		rec.ExitStatus, rec.Duration, rec.BytesIn, rec.BytesOut = &exit, 1500*time.Millisecond, 12, 3456
		seq, err := te.eng.Audit(ctx, rec)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := te.st.ListAudit(ctx, store.AuditFilter{Agent: "bot", Connection: "web"})
		if err != nil || len(rows) != 1 {
			t.Fatalf("ListAudit = %d rows, %v; want 1", len(rows), err)
		}
		got := rows[0]
		if got.Seq != seq || got.Decision != "approved" || got.ApprovalID != a.ID ||
			strings.Join(got.Deciders, ",") != "alice" || got.ExitStatus == nil || *got.ExitStatus != 3 ||
			got.Duration != 1500*time.Millisecond || got.BytesIn != 12 || got.BytesOut != 3456 ||
			got.Class != "write" || got.Kind != "exec" || got.AgentName != "bot" || got.ConnectionAlias != "web" {
			t.Errorf("row = %+v; want the approved operation's record", got)
		}
		if strings.Contains(got.Operation, "Hunter2xyz") || !strings.Contains(got.Operation, "-p"+Redacted) {
			t.Errorf("operation = %q; want the password redacted", got.Operation)
		}
		// Filters.
		for _, f := range []store.AuditFilter{{Agent: "nobody"}, {Connection: "db"}, {Since: time.Now().Add(time.Hour)}} {
			if rows, err := te.st.ListAudit(ctx, f); err != nil || len(rows) != 0 {
				t.Errorf("ListAudit(%+v) = %d rows, %v; want 0", f, len(rows), err)
			}
		}
	})
}
