package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Tests of what the web page and the REST API keep (admins.go): admin
// accounts, their sessions, console tokens and idempotent answers; and of
// the audit filters the API's audit list uses.

// hash64 is a fake 64-digit token hash, distinct per seed.
func hash64(seed string) string {
	return fmt.Sprintf("%x", sha256.Sum256([]byte(seed)))
}

func TestAdmins(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		s, _, _ := openTestStore(t)
		ctx := context.Background()
		bob, err := s.CreateAdmin(ctx, Unaudited(), "bob", "$argon2id$bob", RoleOwner)
		if err != nil {
			t.Fatalf("CreateAdmin(bob): %v", err)
		}
		if bob.ID == "" || !strings.HasPrefix(bob.ID, "adm_") || bob.Disabled || bob.PasswordHash != "$argon2id$bob" {
			t.Errorf("admin = %+v; want an adm_ id, enabled, the hash as given", bob)
		}
		if _, err := s.CreateAdmin(ctx, Unaudited(), "alice", "$argon2id$alice", RoleOwner); err != nil {
			t.Fatal(err)
		}

		refusals := []struct {
			name, admin, hash string
			want              error
		}{
			{"taken name", "bob", "$argon2id$x", ErrDuplicate},
			{"taken name in another case", "BOB", "$argon2id$x", ErrDuplicate},
			{"bad name", "bob smith", "$argon2id$x", ErrInvalid},
			{"empty name", "", "$argon2id$x", ErrInvalid},
			{"empty hash", "carol", "", ErrInvalid},
		}
		for _, tt := range refusals {
			t.Run(tt.name, func(t *testing.T) {
				if _, err := s.CreateAdmin(ctx, Unaudited(), tt.admin, tt.hash, RoleOwner); !errors.Is(err, tt.want) {
					t.Errorf("CreateAdmin(%q, %q) = %v; want %v", tt.admin, tt.hash, err, tt.want)
				}
			})
		}

		all, err := s.ListAdmins(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, a := range all {
			names = append(names, a.Name)
		}
		if !slices.Equal(names, []string{"alice", "bob"}) {
			t.Errorf("ListAdmins = %v; want [alice bob]", names)
		}
		if _, err := s.AdminByName(ctx, "nobody"); !errors.Is(err, ErrNotFound) {
			t.Errorf("AdminByName(nobody) = %v; want ErrNotFound", err)
		}
		for _, name := range []string{"bob", "Bob", "BOB", bob.ID} {
			got, err := s.ResolveAdmin(ctx, name)
			if err != nil || got.ID != bob.ID {
				t.Errorf("ResolveAdmin(%q) = %+v, %v; want bob (%s)", name, got, err, bob.ID)
			}
		}
		if _, err := s.ResolveAdmin(ctx, "nobody"); !errors.Is(err, ErrNotFound) {
			t.Errorf("ResolveAdmin(nobody) = %v; want ErrNotFound", err)
		}
	})
}

// TestResolveAdminAmbiguous: two admins whose names differ only in case
// (possible in a database made before names were unique that way) are never
// guessed between.
func TestResolveAdminAmbiguous(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		s, _, _ := openTestStore(t)
		ctx := context.Background()
		if _, err := s.CreateAdmin(ctx, Unaudited(), "carol", "$argon2id$c", RoleOwner); err != nil {
			t.Fatal(err)
		}
		if _, err := s.db.ExecContext(ctx, `INSERT INTO admins (id, name, password_hash, created_at, modified_at)
		VALUES ('adm_legacy', 'Carol', 'h', '', '')`); err != nil {
			t.Fatal(err)
		}
		if got, err := s.ResolveAdmin(ctx, "CAROL"); !errors.Is(err, ErrInvalid) {
			t.Errorf("ResolveAdmin(CAROL) = %+v, %v; want ErrInvalid (ambiguous)", got, err)
		}
		if got, err := s.ResolveAdmin(ctx, "Carol"); err != nil || got.ID != "adm_legacy" {
			t.Errorf("ResolveAdmin(Carol) = %+v, %v; want the exact match adm_legacy", got, err)
		}
	})
}

// TestSetAdminPasswordEndsSessions: a password change replaces the hash
// and logs the admin out everywhere.
func TestSetAdminPasswordEndsSessions(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		s, clock, _ := openTestStore(t)
		ctx := context.Background()
		bob, err := s.CreateAdmin(ctx, Unaudited(), "bob", "$argon2id$old", RoleOwner)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.CreateAdminSession(ctx, bob.ID, hash64("s1"), "csrf1", clock.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Second)
		got, err := s.SetAdminPassword(ctx, Unaudited(), "bob", "$argon2id$new")
		if err != nil {
			t.Fatalf("SetAdminPassword: %v", err)
		}
		if got.PasswordHash != "$argon2id$new" || !got.ModifiedAt.After(bob.ModifiedAt) {
			t.Errorf("after SetAdminPassword: hash %q, modified %v; want the new hash and a later modified_at", got.PasswordHash, got.ModifiedAt)
		}
		if _, err := s.AdminSessionByToken(ctx, hash64("s1")); !errors.Is(err, ErrNotFound) {
			t.Errorf("session after a password change: %v; want ErrNotFound", err)
		}
		if _, err := s.SetAdminPassword(ctx, Unaudited(), "nobody", "$argon2id$x"); !errors.Is(err, ErrNotFound) {
			t.Errorf("SetAdminPassword(nobody) = %v; want ErrNotFound", err)
		}
		if _, err := s.SetAdminPassword(ctx, Unaudited(), "bob", ""); !errors.Is(err, ErrInvalid) {
			t.Errorf("SetAdminPassword with an empty hash = %v; want ErrInvalid", err)
		}
	})
}

func TestAdminSessions(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		s, clock, _ := openTestStore(t)
		ctx := context.Background()
		bob, err := s.CreateAdmin(ctx, Unaudited(), "bob", "$argon2id$bob", RoleOwner)
		if err != nil {
			t.Fatal(err)
		}
		expires := clock.Now().Add(time.Hour)
		sess, err := s.CreateAdminSession(ctx, bob.ID, hash64("bob-1"), "csrf-bob", expires)
		if err != nil {
			t.Fatalf("CreateAdminSession: %v", err)
		}
		if sess.AdminName != "bob" || sess.AdminID != bob.ID || sess.CSRFToken != "csrf-bob" || !sess.ExpiresAt.Equal(expires) ||
			!strings.HasPrefix(sess.ID, "ses_") {
			t.Errorf("session = %+v; want bob's, with its CSRF token and expiry", sess)
		}

		bad := []struct {
			name, hash, csrf string
		}{
			{"short hash", "abc", "csrf"},
			{"no CSRF token", hash64("x"), ""},
		}
		for _, tt := range bad {
			t.Run(tt.name, func(t *testing.T) {
				if _, err := s.CreateAdminSession(ctx, bob.ID, tt.hash, tt.csrf, expires); !errors.Is(err, ErrInvalid) {
					t.Errorf("CreateAdminSession = %v; want ErrInvalid", err)
				}
			})
		}
		if _, err := s.CreateAdminSession(ctx, "adm_nosuch", hash64("ghost"), "csrf", expires); err == nil {
			t.Error("CreateAdminSession for an unknown admin succeeded; want an error")
		}

		// Expiry: good until the instant it expires.
		clock.Advance(time.Hour - time.Second)
		if _, err := s.AdminSessionByToken(ctx, hash64("bob-1")); err != nil {
			t.Errorf("session a second before expiry: %v; want it found", err)
		}
		clock.Advance(time.Second)
		if _, err := s.AdminSessionByToken(ctx, hash64("bob-1")); !errors.Is(err, ErrNotFound) {
			t.Errorf("session at expiry: %v; want ErrNotFound", err)
		}

		// A disabled admin's sessions stop working; enabled again, they work.
		if _, err := s.CreateAdminSession(ctx, bob.ID, hash64("bob-2"), "csrf", clock.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		setDisabled := func(v int) {
			t.Helper()
			if _, err := s.db.Exec(`UPDATE admins SET disabled = ? WHERE id = ?`, v, bob.ID); err != nil {
				t.Fatal(err)
			}
		}
		setDisabled(1)
		if _, err := s.AdminSessionByToken(ctx, hash64("bob-2")); !errors.Is(err, ErrNotFound) {
			t.Errorf("session of a disabled admin: %v; want ErrNotFound", err)
		}
		setDisabled(0)
		if _, err := s.AdminSessionByToken(ctx, hash64("bob-2")); err != nil {
			t.Errorf("session after enabling the admin again: %v; want it found", err)
		}

		// Logout.
		if err := s.DeleteAdminSession(ctx, hash64("bob-2")); err != nil {
			t.Fatalf("DeleteAdminSession: %v", err)
		}
		if _, err := s.AdminSessionByToken(ctx, hash64("bob-2")); !errors.Is(err, ErrNotFound) {
			t.Errorf("session after logout: %v; want ErrNotFound", err)
		}
		if err := s.DeleteAdminSession(ctx, hash64("never")); err != nil {
			t.Errorf("DeleteAdminSession of an unknown session = %v; want nil", err)
		}
	})
}

func TestConsoleTokens(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		s, clock, _ := openTestStore(t)
		ctx := context.Background()
		alice, err := s.CreateAdmin(ctx, Unaudited(), "alice", "$argon2id$a", RoleOwner)
		if err != nil {
			t.Fatal(err)
		}
		ci, err := s.CreateConsoleToken(ctx, Unaudited(), "ci", hash64("ci"), alice.ID, "")
		if err != nil {
			t.Fatalf("CreateConsoleToken: %v", err)
		}
		if !strings.HasPrefix(ci.ID, "tok_") || ci.TokenSHA256 != hash64("ci") || !ci.LastUsedAt.IsZero() ||
			ci.AdminID != alice.ID || ci.AdminName != "alice" {
			t.Errorf("token = %+v; want a tok_ id, the hash, never used, alice's", ci)
		}
		if _, err := s.CreateConsoleToken(ctx, Unaudited(), "auto", hash64("auto"), alice.ID, ""); err != nil {
			t.Fatal(err)
		}
		refusals := []struct {
			name, token, hash, admin string
			want                     error
		}{
			{"taken name", "ci", hash64("other"), alice.ID, ErrDuplicate},
			{"bad name", "c i", hash64("other"), alice.ID, ErrInvalid},
			{"short hash", "short", "abcd", alice.ID, ErrInvalid},
			{"no admin", "orphan", hash64("orphan"), "", ErrInvalid},
			{"unknown admin", "ghost", hash64("ghost"), "adm_nosuch", ErrNotFound},
		}
		for _, tt := range refusals {
			t.Run(tt.name, func(t *testing.T) {
				if _, err := s.CreateConsoleToken(ctx, Unaudited(), tt.token, tt.hash, tt.admin, ""); !errors.Is(err, tt.want) {
					t.Errorf("CreateConsoleToken(%q) = %v; want %v", tt.token, err, tt.want)
				}
			})
		}
		if _, err := s.CreateConsoleToken(ctx, Unaudited(), "copy", hash64("ci"), alice.ID, ""); err == nil {
			t.Error("a second token with the same hash was stored; want an error")
		}

		clock.Advance(time.Minute)
		got, err := s.ConsoleTokenByHash(ctx, hash64("ci"))
		if err != nil {
			t.Fatalf("ConsoleTokenByHash: %v", err)
		}
		if got.ID != ci.ID || !got.LastUsedAt.Equal(clock.Now()) {
			t.Errorf("token by hash = %+v; want %s used at %v", got, ci.ID, clock.Now())
		}
		list, err := s.ListConsoleTokens(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 2 || list[0].Name != "auto" || list[1].Name != "ci" || !list[1].LastUsedAt.Equal(clock.Now()) ||
			!list[0].LastUsedAt.IsZero() {
			t.Errorf("ListConsoleTokens = %+v; want auto (never used), ci (used now)", list)
		}
		if _, err := s.ConsoleTokenByHash(ctx, hash64("nosuch")); !errors.Is(err, ErrNotFound) {
			t.Errorf("ConsoleTokenByHash(unknown) = %v; want ErrNotFound", err)
		}
		// A token made before tokens had owners is assigned later.
		if _, err := s.db.ExecContext(ctx, `INSERT INTO console_tokens (id, name, token_sha256, created_at, modified_at)
		VALUES ('tok_old', 'old', ?, '', '')`, hash64("old")); err != nil {
			t.Fatal(err)
		}
		if old, err := s.ConsoleTokenByHash(ctx, hash64("old")); err != nil || old.AdminID != "" {
			t.Errorf("legacy token = %+v, %v; want no admin", old, err)
		}
		if old, err := s.AssignConsoleToken(ctx, Unaudited(), "old", alice.ID); err != nil || old.AdminID != alice.ID || old.AdminName != "alice" {
			t.Errorf("AssignConsoleToken = %+v, %v; want alice's", old, err)
		}
		if _, err := s.AssignConsoleToken(ctx, Unaudited(), "nosuch", alice.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("AssignConsoleToken(unknown token) = %v; want ErrNotFound", err)
		}
		if _, err := s.AssignConsoleToken(ctx, Unaudited(), "old", "adm_nosuch"); !errors.Is(err, ErrNotFound) {
			t.Errorf("AssignConsoleToken(unknown admin) = %v; want ErrNotFound", err)
		}
		if err := s.RemoveConsoleToken(ctx, Unaudited(), "old"); err != nil {
			t.Fatal(err)
		}
		if err := s.RemoveConsoleToken(ctx, Unaudited(), "ci"); err != nil {
			t.Fatalf("RemoveConsoleToken: %v", err)
		}
		if _, err := s.ConsoleTokenByHash(ctx, hash64("ci")); !errors.Is(err, ErrNotFound) {
			t.Errorf("removed token by hash = %v; want ErrNotFound", err)
		}
		if err := s.RemoveConsoleToken(ctx, Unaudited(), "ci"); !errors.Is(err, ErrNotFound) {
			t.Errorf("RemoveConsoleToken twice = %v; want ErrNotFound", err)
		}
	})
}

func TestIdempotentResponses(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		s, _, _ := openTestStore(t)
		ctx := context.Background()
		if _, err := s.IdempotentResponse(ctx, "token:a", "k1"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("IdempotentResponse before any = %v; want ErrNotFound", err)
		}
		first := IdempotentResponse{RequestSHA256: hash64("req-1"), Status: 200, Body: []byte(`{"data":1}` + "\x00\xff")}
		kept, stored, err := s.PutIdempotentResponse(ctx, "token:a", "k1", first)
		if err != nil || !stored || kept.Status != 200 {
			t.Fatalf("first Put = %+v, %v, %v; want it stored", kept, stored, err)
		}
		// A second answer for the same key loses to the first: the caller
		// gets the first to send instead.
		second := IdempotentResponse{RequestSHA256: hash64("req-2"), Status: 409, Body: []byte(`{"error":{}}`)}
		kept, stored, err = s.PutIdempotentResponse(ctx, "token:a", "k1", second)
		if err != nil || stored {
			t.Fatalf("second Put = %v, %v; want not stored", stored, err)
		}
		if kept.Status != 200 || kept.RequestSHA256 != first.RequestSHA256 || !bytes.Equal(kept.Body, first.Body) {
			t.Errorf("second Put returned %+v; want the first answer", kept)
		}
		got, err := s.IdempotentResponse(ctx, "token:a", "k1")
		if err != nil || got.Status != 200 || !bytes.Equal(got.Body, first.Body) || got.CreatedAt.IsZero() {
			t.Errorf("IdempotentResponse = %+v, %v; want the first answer with its time", got, err)
		}
		// Keys are per principal.
		if _, stored, err := s.PutIdempotentResponse(ctx, "token:b", "k1", second); err != nil || !stored {
			t.Errorf("same key, other principal: stored %v, %v; want stored", stored, err)
		}
		if got, err := s.IdempotentResponse(ctx, "token:b", "k1"); err != nil || got.Status != 409 {
			t.Errorf("other principal's answer = %+v, %v; want its own 409", got, err)
		}
	})
}

// TestIdempotentResponsesRace: of concurrent Puts for one key exactly one
// is stored, and every caller gets that one back.
func TestIdempotentResponsesRace(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		s, _, _ := openTestStore(t)
		ctx := context.Background()
		const n = 8
		type result struct {
			kept   *IdempotentResponse
			stored bool
			err    error
		}
		results := make(chan result, n)
		for i := range n {
			go func() {
				r := IdempotentResponse{RequestSHA256: hash64("req"), Status: 200 + i, Body: []byte(strconv.Itoa(i))}
				kept, stored, err := s.PutIdempotentResponse(ctx, "token:a", "race", r)
				results <- result{kept, stored, err}
			}()
		}
		winners := 0
		var statuses []int
		for range n {
			r := <-results
			if r.err != nil {
				t.Fatalf("Put: %v", r.err)
			}
			if r.stored {
				winners++
			}
			statuses = append(statuses, r.kept.Status)
		}
		if winners != 1 {
			t.Errorf("%d Puts stored; want exactly 1", winners)
		}
		if slices.Min(statuses) != slices.Max(statuses) {
			t.Errorf("callers got statuses %v; want all the same, the stored one", statuses)
		}
	})
}

func TestDeleteExpiredWebRecords(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		s, clock, _ := openTestStore(t)
		ctx := context.Background()
		bob, err := s.CreateAdmin(ctx, Unaudited(), "bob", "$argon2id$bob", RoleOwner)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.CreateAdminSession(ctx, bob.ID, hash64("short"), "c", clock.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.CreateAdminSession(ctx, bob.ID, hash64("long"), "c", clock.Now().Add(48*time.Hour)); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.PutIdempotentResponse(ctx, "token:a", "old", IdempotentResponse{RequestSHA256: "x", Status: 200, Body: []byte("{}")}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(23 * time.Hour)
		if _, _, err := s.PutIdempotentResponse(ctx, "token:a", "new", IdempotentResponse{RequestSHA256: "y", Status: 200, Body: []byte("{}")}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(2 * time.Hour) // "old" is 25 hours old, "new" 2

		n, err := s.DeleteExpiredWebRecords(ctx, 24*time.Hour)
		if err != nil {
			t.Fatalf("DeleteExpiredWebRecords: %v", err)
		}
		if n != 2 {
			t.Errorf("DeleteExpiredWebRecords removed %d rows; want 2 (the expired session, the old answer)", n)
		}
		if _, err := s.AdminSessionByToken(ctx, hash64("long")); err != nil {
			t.Errorf("live session: %v; want kept", err)
		}
		if _, err := s.IdempotentResponse(ctx, "token:a", "old"); !errors.Is(err, ErrNotFound) {
			t.Errorf("old answer: %v; want removed", err)
		}
		if _, err := s.IdempotentResponse(ctx, "token:a", "new"); err != nil {
			t.Errorf("new answer: %v; want kept", err)
		}
		var left int
		if err := s.db.QueryRow(`SELECT count(*) FROM admin_sessions`).Scan(&left); err != nil || left != 1 {
			t.Errorf("sessions left %d, %v; want 1", left, err)
		}
		if n, err := s.DeleteExpiredWebRecords(ctx, 24*time.Hour); err != nil || n != 0 {
			t.Errorf("second run removed %d, %v; want 0", n, err)
		}
	})
}

// TestListAuditFilters covers every AuditFilter field, alone and together,
// and the BeforeSeq/Limit paging the REST API's audit list is built on.
func TestListAuditFilters(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		s, clock, _ := openTestStore(t)
		ctx := context.Background()
		start := clock.Now()
		rows := []struct {
			agent, alias, class, kind, decision string
		}{
			{"bot", "web", "read", "exec", "allowed"},      // 1
			{"bot", "db", "write", "exec", "approved"},     // 2
			{"ci", "web", "destructive", "sftp", "denied"}, // 3
			{"bot", "web", "read", "sftp", "allowed"},      // 4
			{"ci", "db", "destructive", "exec", "expired"}, // 5
			{"bot", "db", "write", "exec", "denied"},       // 6
			{"ci", "web", "read", "exec", "failed"},        // 7
			{"bot", "web", "destructive", "exec", "asked"}, // 8
		}
		for _, r := range rows {
			if _, err := s.AppendAudit(ctx, AuditRow{AgentID: "agt_" + r.agent, AgentName: r.agent,
				ConnectionID: "con_" + r.alias, ConnectionAlias: r.alias, Class: r.class, Kind: r.kind,
				Decision: r.decision, Operation: "x"}, testChain); err != nil {
				t.Fatal(err)
			}
			clock.Advance(time.Minute)
		}
		at := func(m int) time.Time { return start.Add(time.Duration(m) * time.Minute) }
		checkListAudit(t, s, []auditFilterCase{
			{"all", AuditFilter{}, []int64{1, 2, 3, 4, 5, 6, 7, 8}},
			{"agent by name", AuditFilter{Agent: "ci"}, []int64{3, 5, 7}},
			{"agent by id", AuditFilter{Agent: "agt_ci"}, []int64{3, 5, 7}},
			{"connection by alias", AuditFilter{Connection: "db"}, []int64{2, 5, 6}},
			{"connection by id", AuditFilter{Connection: "con_db"}, []int64{2, 5, 6}},
			{"class", AuditFilter{Class: "destructive"}, []int64{3, 5, 8}},
			{"kind", AuditFilter{Kind: "sftp"}, []int64{3, 4}},
			{"decision", AuditFilter{Decision: "denied"}, []int64{3, 6}},
			{"since is inclusive", AuditFilter{Since: at(5)}, []int64{6, 7, 8}},
			{"until is exclusive", AuditFilter{Until: at(2)}, []int64{1, 2}},
			{"since and until", AuditFilter{Since: at(2), Until: at(4)}, []int64{3, 4}},
			{"before seq", AuditFilter{BeforeSeq: 4}, []int64{1, 2, 3}},
			{"limit keeps the newest", AuditFilter{Limit: 3}, []int64{6, 7, 8}},
			{"a page of older rows", AuditFilter{BeforeSeq: 6, Limit: 2}, []int64{4, 5}},
			{"filters with paging", AuditFilter{Agent: "bot", Class: "write", BeforeSeq: 8, Limit: 5}, []int64{2, 6}},
			{"all fields", AuditFilter{Agent: "bot", Connection: "web", Class: "read", Kind: "sftp", Decision: "allowed",
				Since: at(0), Until: at(8), BeforeSeq: 5, Limit: 10}, []int64{4}},
			{"nothing matches", AuditFilter{Agent: "bot", Decision: "expired"}, nil},
		})
	})
}
