package store

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// auditQueryRows appends the rows of the query tests: two sessions of the
// agent bot and one of ci, and a row without a session (an admin's
// change), a minute apart, with operations and reasons to search.
func auditQueryRows(t *testing.T, s *Store, advance func()) {
	t.Helper()
	for _, r := range []struct{ agent, alias, session, op, reason string }{
		{"bot", "web", "ses_a", "uptime", ""},                        // 1
		{"bot", "db", "ses_a", "cat /etc/HOSTNAME", ""},              // 2
		{"ci", "web", "ses_c", "rm -rf /tmp/x_1", "denied by rule"},  // 3
		{"bot", "web", "ses_b", "echo 100%", ""},                     // 4
		{"", "", "", "grant bot web", "via the page"},                // 5
		{"bot", "web", "ses_a", "ls", "approval APR_1 reached 100%"}, // 6
		{"ci", "web", "ses_c", "rmxrf", ""},                          // 7
	} {
		if _, err := s.AppendAudit(context.Background(), AuditRow{AgentName: r.agent, AgentID: "agt_" + r.agent,
			ConnectionAlias: r.alias, ConnectionID: "con_" + r.alias, SessionID: r.session, Class: "read", Kind: "exec",
			Decision: "allowed", Operation: r.op, Reason: r.reason, ChainVersion: 3}, testChain); err != nil {
			t.Fatal(err)
		}
		advance()
	}
}

// auditFilterCase is a filter and the seqs ListAudit must return for it.
type auditFilterCase struct {
	name string
	f    AuditFilter
	want []int64
}

// checkListAudit runs each case as a subtest.
func checkListAudit(t *testing.T, s *Store, cases []auditFilterCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.ListAudit(context.Background(), tt.f)
			if err != nil {
				t.Fatal(err)
			}
			var seqs []int64
			for _, r := range got {
				seqs = append(seqs, r.Seq)
			}
			if !slices.Equal(seqs, tt.want) {
				t.Errorf("ListAudit(%+v) = %v; want %v", tt.f, seqs, tt.want)
			}
		})
	}
}

// TestListAuditSearchAndSessions covers the session filter, the text
// search (case, LIKE's wildcards taken as text) and paging both ways.
func TestListAuditSearchAndSessions(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		s, clock, _ := openTestStore(t)
		ctx := context.Background()
		auditQueryRows(t, s, func() { clock.Advance(time.Minute) })
		checkListAudit(t, s, []auditFilterCase{
			{"session", AuditFilter{Session: "ses_a"}, []int64{1, 2, 6}},
			{"session and connection", AuditFilter{Session: "ses_a", Connection: "web"}, []int64{1, 6}},
			{"search an operation, any case", AuditFilter{Search: "hostname"}, []int64{2}},
			{"search a reason", AuditFilter{Search: "Via The"}, []int64{5}},
			{"search % as text", AuditFilter{Search: "100%"}, []int64{4, 6}},
			{"search _ as text", AuditFilter{Search: "x_1"}, []int64{3}},
			{"search - not a pattern", AuditFilter{Search: "rm -rf"}, []int64{3}},
			{"search nothing", AuditFilter{Search: "zzz"}, nil},
			{"after seq, the oldest", AuditFilter{AfterSeq: 2, Limit: 2, Oldest: true}, []int64{3, 4}},
			{"after seq, the newest", AuditFilter{AfterSeq: 2, Limit: 2}, []int64{6, 7}},
			{"after and before", AuditFilter{AfterSeq: 2, BeforeSeq: 6}, []int64{3, 4, 5}},
			{"session paged", AuditFilter{Session: "ses_a", BeforeSeq: 6, Limit: 1}, []int64{2}},
		})
		rows, err := s.ListAudit(ctx, AuditFilter{Session: "ses_b"})
		if err != nil || len(rows) != 1 || rows[0].SessionID != "ses_b" {
			t.Fatalf("ListAudit(ses_b) = %+v, %v; want one row with its session id", rows, err)
		}
	})
}

// TestListAuditSessions: one line per session, the most recently active
// first, with agent, connections, first and last time and count; paged by
// the newest row's seq; filters narrow the rows counted.
func TestListAuditSessions(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		s, clock, _ := openTestStore(t)
		ctx := context.Background()
		start := clock.Now()
		auditQueryRows(t, s, func() { clock.Advance(time.Minute) })
		at := func(m int) time.Time { return start.Add(time.Duration(m) * time.Minute) }
		line := func(v AuditSession) string {
			return strings.Join([]string{v.ID, v.AgentName, strings.Join(v.Aliases, "+"),
				strconv.Itoa(int(v.First.Sub(start) / time.Minute)), strconv.Itoa(int(v.Last.Sub(start) / time.Minute)),
				strconv.FormatInt(v.Rows, 10), strconv.FormatInt(v.LastSeq, 10)}, " ")
		}
		for _, tt := range []struct {
			name string
			f    AuditFilter
			want []string
		}{
			{"all", AuditFilter{}, []string{"ses_c ci web 2 6 2 7", "ses_a bot db+web 0 5 3 6", "ses_b bot web 3 3 1 4"}},
			{"a page", AuditFilter{Limit: 2}, []string{"ses_c ci web 2 6 2 7", "ses_a bot db+web 0 5 3 6"}},
			{"the next page", AuditFilter{BeforeSeq: 6, Limit: 2}, []string{"ses_b bot web 3 3 1 4"}},
			{"agent", AuditFilter{Agent: "bot"}, []string{"ses_a bot db+web 0 5 3 6", "ses_b bot web 3 3 1 4"}},
			{"time range", AuditFilter{Since: at(1), Until: at(4)}, []string{"ses_b bot web 3 3 1 4", "ses_c ci web 2 2 1 3", "ses_a bot db 1 1 1 2"}},
			{"search", AuditFilter{Search: "100%"}, []string{"ses_a bot web 5 5 1 6", "ses_b bot web 3 3 1 4"}},
			{"none", AuditFilter{Agent: "nobody"}, nil},
		} {
			t.Run(tt.name, func(t *testing.T) {
				got, err := s.ListAuditSessions(ctx, tt.f)
				if err != nil {
					t.Fatal(err)
				}
				var lines []string
				for _, v := range got {
					lines = append(lines, line(v))
				}
				if !slices.Equal(lines, tt.want) {
					t.Errorf("ListAuditSessions(%+v) =\n%s\nwant\n%s", tt.f, strings.Join(lines, "\n"), strings.Join(tt.want, "\n"))
				}
			})
		}
	})
}

// TestListAuditUsesIndex: on SQLite, a page filtered by session, agent or
// connection reads that filter's index in seq order, not the whole table.
func TestListAuditUsesIndex(t *testing.T) {
	s, _, _ := openTestStore(t)
	for _, tt := range []struct {
		name, where, want string
	}{
		{"session", `session_id = ?`, "audit_session"},
		{"agent", `(agent_name = ? OR agent_id = ?)`, "audit_agent"},
		{"connection", `(connection_alias = ? OR connection_id = ?)`, "audit_connection"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := []any{"x"}
			if strings.Contains(tt.where, "OR") {
				args = append(args, "x")
			}
			rows, err := s.db.Query(`EXPLAIN QUERY PLAN SELECT `+auditColumns+` FROM audit WHERE `+tt.where+
				` AND seq < 100 ORDER BY seq DESC LIMIT 100`, args...)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var plan []string
			for rows.Next() {
				var id, parent, notused int
				var detail string
				if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
					t.Fatal(err)
				}
				plan = append(plan, detail)
			}
			text := strings.Join(plan, "; ")
			if !strings.Contains(text, "INDEX "+tt.want) {
				t.Errorf("plan %q; want it to use %s", text, tt.want)
			}
		})
	}
}

// TestMigration0015KeepsAudit: rows written before session ids survive
// the migration with every field and hash, and the migrated table takes
// version 3 rows with a session id.
func TestMigration0015KeepsAudit(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		ctx := context.Background()
		db, ref := migratedTo(t, 14)
		if _, err := db.ExecContext(ctx, `INSERT INTO audit (seq, time, agent_id, agent_name, connection_id,
			connection_alias, class, kind, decision, reason, approval_id, deciders, operation, exit_status, duration_ns,
			bytes_in, bytes_out, hash, chain_version, agent_reason, source_addr) VALUES (1, '2026-01-01T00:00:00.000000000Z',
			'agt_a', 'bot', 'con_a', 'web', 'read', 'exec', 'allowed', 'r', 'apr_x', 'alice,bob', 'uptime', 0, 5, 6, 7, ?, 2,
			'why', '127.0.0.1:1')`, []byte("hash-1")); err != nil {
			t.Fatalf("seed at version 14: %v", err)
		}
		db.Close()
		s, err := openRef(ctx, ref, Options{})
		if err != nil {
			t.Fatalf("open and migrate: %v", err)
		}
		defer s.Close()
		rows, err := s.ListAudit(ctx, AuditFilter{})
		if err != nil || len(rows) != 1 {
			t.Fatalf("after the migration: %d rows, %v; want 1", len(rows), err)
		}
		r := rows[0]
		if r.Seq != 1 || r.AgentName != "bot" || r.ConnectionAlias != "web" || r.ApprovalID != "apr_x" ||
			strings.Join(r.Deciders, ",") != "alice,bob" || r.ExitStatus == nil || *r.ExitStatus != 0 || r.Duration != 5 ||
			r.BytesIn != 6 || r.BytesOut != 7 || string(r.Hash) != "hash-1" || r.ChainVersion != 2 || r.AgentReason != "why" ||
			r.SourceAddr != "127.0.0.1:1" || r.SessionID != "" {
			t.Errorf("row after the migration = %+v; want it as stored, without a session", r)
		}
		stored, err := s.AppendAudit(ctx, AuditRow{Kind: "exec", Operation: "ls", SessionID: "ses_x", ChainVersion: 3}, testChain)
		if err != nil {
			t.Fatalf("append a version 3 row: %v", err)
		}
		if got, err := s.ListAudit(ctx, AuditFilter{Session: "ses_x"}); err != nil || len(got) != 1 || got[0].Seq != stored.Seq || got[0].ChainVersion != 3 {
			t.Errorf("the version 3 row: %+v, %v; want seq %d, version 3", got, err, stored.Seq)
		}
		if _, err := s.db.ExecContext(ctx, `UPDATE audit SET chain_version = 4 WHERE seq = 1`); err == nil {
			t.Errorf("chain version 4 was taken; want the CHECK to refuse it")
		}
	})
}
