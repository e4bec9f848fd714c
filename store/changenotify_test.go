package store

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// askChange stores a pending change request by alice (adm_alice) that
// loosens connection web, living for lifetime.
func askChange(t *testing.T, s *Store, lifetime time.Duration) ChangeRequest {
	t.Helper()
	c, err := s.CreateChangeRequest(context.Background(), Unaudited(), ChangeRequest{Kind: "conn-update",
		Summary: "conn update web: env production -> staging", Before: "env=production", After: "env=staging",
		Payload: []byte(`{"env":"staging"}`), RequestedBy: "alice", RequestedByID: "adm_alice", RequestedVia: "cli",
		ConnectionAlias: "web"}, lifetime)
	if err != nil {
		t.Fatalf("CreateChangeRequest: %v", err)
	}
	return c
}

// TestChangeRequestsQueueNotifications: a new change request queues a
// pending notification for each channel subscribed to pending, and its
// decision a decided one for each subscribed to decided, in the same
// transactions, as an operation's request does; the rows name the change,
// not an approval. A refused decision and an expired change's late one
// queue nothing.
func TestChangeRequestsQueueNotifications(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		ctx := context.Background()
		s, clock, _ := openDecidingStore(t)
		mustCreateChannel(t, s, NewNotifyChannel{Name: "both", URL: notifyURL, OnPending: true, OnDecided: true})
		mustCreateChannel(t, s, NewNotifyChannel{Name: "pend", URL: notifyURL, OnPending: true})
		mustCreateChannel(t, s, NewNotifyChannel{Name: "dec", URL: notifyURL, OnDecided: true})

		c := askChange(t, s, 10*time.Minute)
		if got, want := outboxOf(t, s, c.ID), []string{"pending both", "pending pend"}; !slices.Equal(got, want) {
			t.Errorf("after the request: got %v; want %v", got, want)
		}
		ns, err := s.NotificationsOf(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range ns {
			if n.ChangeID != c.ID || n.ApprovalID != "" || n.Subject() != c.ID || n.State != NotificationQueued ||
				!n.DueAt.Equal(clock.Now()) || !n.GiveUpAt.Equal(c.ExpiresAt) {
				t.Errorf("%s: change %q, approval %q, state %s, due %v, give up %v; want change %s, no approval, queued, due now, give up at expiry %v",
					n.Channel, n.ChangeID, n.ApprovalID, n.State, n.DueAt, n.GiveUpAt, c.ID, c.ExpiresAt)
			}
		}

		// alice asked: her own decision is refused and queues nothing.
		if _, err := s.DecideChangeRequest(ctx, Unaudited(), c.ID, ChangeDecision{AdminID: "adm_alice", Name: "alice", Approve: true}); !errors.Is(err, ErrSameRequester) {
			t.Fatalf("alice decides her own change: got %v; want ErrSameRequester", err)
		}
		if got := outboxOf(t, s, c.ID); len(got) != 2 {
			t.Errorf("after a refused decision: got %v; want still the two pending", got)
		}

		clock.Advance(time.Second)
		if _, err := s.DecideChangeRequest(ctx, Unaudited(), c.ID, ChangeDecision{AdminID: "adm_bob", Name: "bob", Approve: true}); err != nil {
			t.Fatalf("bob approves: %v", err)
		}
		want := []string{"decided both", "decided dec", "pending both", "pending pend"}
		if got := outboxOf(t, s, c.ID); !slices.Equal(got, want) {
			t.Errorf("after the decision: got %v; want %v", got, want)
		}
		ns, _ = s.NotificationsOf(ctx, c.ID)
		for _, n := range ns {
			if n.Event == NotifyDecided && !n.GiveUpAt.Equal(clock.Now().Add(NotifyDecidedWindow)) {
				t.Errorf("decided for %s gives up at %v; want the decision plus %v", n.Channel, n.GiveUpAt, NotifyDecidedWindow)
			}
		}

		// A denial queues too.
		d := askChange(t, s, 10*time.Minute)
		if _, err := s.DecideChangeRequest(ctx, Unaudited(), d.ID, ChangeDecision{AdminID: "adm_bob", Name: "bob", Reason: "not today"}); err != nil {
			t.Fatal(err)
		}
		if got := outboxOf(t, s, d.ID); !slices.Equal(got, want) {
			t.Errorf("denied: got %v; want %v", got, want)
		}

		// An expired change's late decision is refused and queues nothing.
		e := askChange(t, s, time.Minute)
		clock.Advance(2 * time.Minute)
		if _, err := s.DecideChangeRequest(ctx, Unaudited(), e.ID, ChangeDecision{AdminID: "adm_bob", Name: "bob", Approve: true}); !errors.Is(err, ErrChangeDecided) {
			t.Fatalf("late decision: got %v; want ErrChangeDecided", err)
		}
		if got := outboxOf(t, s, e.ID); !slices.Equal(got, []string{"pending both", "pending pend"}) {
			t.Errorf("expired: got %v; want only the pending events", got)
		}

		// An operation's rows and a change's stay apart.
		agent, _ := mustCreateAgent(t, s, "bot")
		conn, _ := mustCreateConnection(t, s, "web", EnvProduction)
		a := askApproval(t, s, agent, conn, "touch /x", 1)
		for _, n := range mustNotifications(t, s, a.ID) {
			if n.ApprovalID != a.ID || n.ChangeID != "" || n.Subject() != a.ID {
				t.Errorf("operation's row: approval %q, change %q; want approval %s and no change", n.ApprovalID, n.ChangeID, a.ID)
			}
		}
		if got := outboxOf(t, s, c.ID); !slices.Equal(got, want) {
			t.Errorf("the change's rows after an operation's request: got %v; want %v", got, want)
		}
	})
}

func mustNotifications(t *testing.T, s *Store, id string) []Notification {
	t.Helper()
	ns, err := s.NotificationsOf(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if len(ns) == 0 {
		t.Fatalf("no notifications about %s", id)
	}
	return ns
}

// TestChangeNotificationLifecycle: a change's row is claimed and finished
// like an approval's, is given up at the change's expiry with a message
// that says so, and goes when its change request is deleted.
func TestChangeNotificationLifecycle(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		ctx := context.Background()
		s, clock, _ := openDecidingStore(t)
		mustCreateChannel(t, s, NewNotifyChannel{Name: "ops", URL: notifyURL, OnPending: true})
		c := askChange(t, s, time.Minute)

		got, err := s.ClaimNotifications(ctx, "claim-1", time.Minute, 1)
		if err != nil || len(got) != 1 {
			t.Fatalf("claim: got %d rows, %v; want 1", len(got), err)
		}
		if got[0].ChangeID != c.ID || got[0].ApprovalID != "" {
			t.Errorf("claimed row about change %q, approval %q; want change %s", got[0].ChangeID, got[0].ApprovalID, c.ID)
		}
		if ok, err := s.FinishNotification(ctx, got[0], "claim-1", NotifyOutcome{State: NotificationDelivered, Status: 200}); !ok || err != nil {
			t.Fatalf("finish: %v, %v; want recorded", ok, err)
		}

		late := askChange(t, s, time.Minute)
		clock.Advance(time.Minute)
		gone, err := s.ExpireNotifications(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(gone) != 1 || gone[0].ChangeID != late.ID || gone[0].State != NotificationFailed ||
			!strings.Contains(gone[0].LastError, "the change request expired") {
			t.Fatalf("expired = %+v; want the queued row of %s, failed because the change request expired", gone, late.ID)
		}

		if _, err := s.db.ExecContext(ctx, `DELETE FROM change_requests WHERE id = ?`, c.ID); err != nil {
			t.Fatal(err)
		}
		if ns, err := s.NotificationsOf(ctx, c.ID); err != nil || len(ns) != 0 {
			t.Errorf("after the change request was deleted: %d rows, %v; want none", len(ns), err)
		}
	})
}

// TestOutboxRowIsAboutOneRequest: the schema refuses an outbox row about
// neither an approval nor a change, and one about both.
func TestOutboxRowIsAboutOneRequest(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		ctx := context.Background()
		s, _, _ := openDecidingStore(t)
		ch := mustCreateChannel(t, s, NewNotifyChannel{Name: "ops", URL: notifyURL, OnPending: true})
		agent, _ := mustCreateAgent(t, s, "bot")
		conn, _ := mustCreateConnection(t, s, "web", EnvDev)
		a := askApproval(t, s, agent, conn, "touch /x", 1)
		c := askChange(t, s, time.Minute)
		tests := []struct {
			name             string
			approval, change any
			event            string
			wantRefused      bool
		}{
			{"neither", nil, nil, "pending", true},
			{"both", a.ID, c.ID, "pending", true},
			{"a bound summary on a change", nil, c.ID, "bound", true},
			{"an approval", a.ID, nil, "pending", false},
			{"a change", nil, c.ID, "decided", false},
		}
		for i, tt := range tests {
			t.Run(strings.ReplaceAll(tt.name, " ", "_"), func(t *testing.T) {
				_, err := s.db.ExecContext(ctx, `INSERT INTO notify_outbox (id, channel_id, approval_id, change_id, event,
					state, due_at, give_up_at, created_at, modified_at) VALUES (?, ?, ?, ?, ?, 'queued', '', '', '', '')`,
					"ntf_check"+string(rune('a'+i)), ch.ID, tt.approval, tt.change, tt.event)
				if refused := err != nil; refused != tt.wantRefused {
					t.Errorf("insert: got error %v; want refused %v", err, tt.wantRefused)
				}
			})
		}
	})
}

// TestMigration0014KeepsOutbox: outbox rows queued before change requests
// could be notified survive the migration with every field, are still
// claimable, and the migrated table takes a change's rows.
func TestMigration0014KeepsOutbox(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		ctx := context.Background()
		db, ref := migratedTo(t, 13)
		for _, q := range []struct {
			sql  string
			args []any
		}{
			{`INSERT INTO agents (id, name, created_at, modified_at) VALUES ('agt_a', 'bot', '', '')`, nil},
			{`INSERT INTO connections (id, alias, host, port, target_user, sealed_key, host_keys, env, created_at, modified_at)
				VALUES ('con_a', 'web', 'h', 22, 'u', ?, '', 'production', '', '')`, []any{[]byte{0}}},
			{`INSERT INTO approvals (id, agent_id, connection_id, class, kind, operation, operation_sha256, approvals_needed,
				status, expires_at, created_at, modified_at) VALUES ('apr_a', 'agt_a', 'con_a', 'write', 'exec', 'touch /x', ?, 1,
				'pending', '2030-01-01T00:00:00.000000000Z', '', '')`, []any{strings.Repeat("0", 64)}},
			{`INSERT INTO notify_channels (id, name, format, sealed_url, url_shown, on_pending, on_decided, created_at, modified_at)
				VALUES ('chn_a', 'ops', 'json', ?, 'https://h/…', 1, 1, '', '')`, []any{[]byte{0}}},
			{`INSERT INTO notify_outbox (id, channel_id, approval_id, event, state, attempts, due_at, give_up_at, last_status,
				last_error, created_at, modified_at, done_at, bound_scope, bound_waiting) VALUES ('ntf_a', 'chn_a', 'apr_a',
				'bound', 'failed', 3, '2026-01-01T00:00:00.000000000Z', '2030-01-01T00:00:00.000000000Z', 503, 'HTTP 503',
				'2026-01-01T00:00:00.000000000Z', '2026-01-01T00:00:00.000000000Z', '2026-01-01T00:00:00.000000000Z', 'agent', 10)`, nil},
			{`INSERT INTO notify_outbox (id, channel_id, approval_id, event, state, due_at, give_up_at, created_at, modified_at)
				VALUES ('ntf_b', 'chn_a', 'apr_a', 'pending', 'queued', '2026-01-01T00:00:00.000000000Z',
				'2030-01-01T00:00:00.000000000Z', '2026-01-01T00:00:01.000000000Z', '2026-01-01T00:00:01.000000000Z')`, nil},
		} {
			if _, err := db.ExecContext(ctx, q.sql, q.args...); err != nil {
				t.Fatalf("seed at version 13: %v\n%s", err, q.sql)
			}
		}
		db.Close()

		s, err := openRef(ctx, ref, Options{Now: func() time.Time { return time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC) }})
		if err != nil {
			t.Fatalf("open and migrate: %v", err)
		}
		defer s.Close()
		ns, err := s.NotificationsOf(ctx, "apr_a")
		if err != nil {
			t.Fatal(err)
		}
		if len(ns) != 2 {
			t.Fatalf("after the migration: %d rows about apr_a; want 2", len(ns))
		}
		a, b := ns[0], ns[1]
		if a.ID != "ntf_a" || a.Channel != "ops" || a.ApprovalID != "apr_a" || a.ChangeID != "" || a.Event != NotifyBound ||
			a.State != NotificationFailed || a.Attempts != 3 || a.LastStatus != 503 || a.LastError != "HTTP 503" ||
			a.BoundScope != BoundAgent || a.BoundWaiting != 10 || a.DoneAt.IsZero() {
			t.Errorf("ntf_a after the migration = %+v; want the bound summary as stored", a)
		}
		if b.ID != "ntf_b" || b.ApprovalID != "apr_a" || b.Event != NotifyPending || b.State != NotificationQueued {
			t.Errorf("ntf_b after the migration = %+v; want the queued pending row", b)
		}
		claimed, err := s.ClaimNotifications(ctx, "claim-1", time.Minute, 10)
		if err != nil || len(claimed) != 1 || claimed[0].ID != "ntf_b" {
			t.Errorf("claim after the migration: %v, %v; want ntf_b", claimed, err)
		}
		if _, err := s.db.ExecContext(ctx, `INSERT INTO change_requests (id, kind, summary, before_text, after_text, payload,
			requested_by, requested_by_id, requested_via, status, expires_at, created_at, modified_at)
			VALUES ('chg_a', 'grant', 's', 'b', 'a', ?, 'alice', '', 'cli', 'pending', '', '', '')`, []byte{0}); err != nil {
			t.Fatal(err)
		}
		if err := s.inTx(ctx, func(tx *sql.Tx) error {
			return queueChangeNotifications(ctx, tx, ChangeRequest{ID: "chg_a"}, NotifyPending, s.nowUTC())
		}); err != nil {
			t.Fatalf("queue a change's notification after the migration: %v", err)
		}
		if got := outboxOf(t, s, "chg_a"); !slices.Equal(got, []string{"pending ops"}) {
			t.Errorf("change's rows after the migration: got %v; want [pending ops]", got)
		}
	})
}

// migratedTo is a new database of the test's dialect migrated to version
// and open without a Store, for a test to seed rows the next migration
// must keep; ref opens it as a Store (which migrates the rest) afterwards.
func migratedTo(t *testing.T, version int) (db *sql.DB, ref string) {
	t.Helper()
	d := testDialect(t)
	if d == dialectPostgres {
		// An empty database: newTestDatabase's is migrated already.
		ref = testPG.Get(t).NewDatabase(t)
	} else {
		ref = newTestDatabase(t)
	}
	db = openRawForMigration(t, d, ref)
	if _, err := migrate(context.Background(), db, d, version); err != nil {
		t.Fatalf("migrate to %d: %v", version, err)
	}
	return db, ref
}

// openRawForMigration opens ref without migrating it.
func openRawForMigration(t *testing.T, d dialect, ref string) *sql.DB {
	t.Helper()
	ctx := context.Background()
	if d == dialectSQLite {
		db, err := openDB(ref, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
	cfg, err := parsePostgresURL(ref, 0)
	if err != nil {
		t.Fatal(err)
	}
	db, err := openPostgresDB(ctx, cfg, ref, 0)
	if err != nil {
		t.Fatal(err)
	}
	return db
}
