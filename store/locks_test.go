package store

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestLocks: a lock holds in PolicyFacts (agent lock for every connection,
// connection lock for every agent) until removed or past its end on the
// store's clock; locking again replaces it; the pending requests of what is
// locked are denied with the lock's words, others stay pending.
func TestLocks(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		ctx := context.Background()
		s, clock, _ := openTestStore(t)
		bot, _ := mustCreateAgent(t, s, "bot")
		other, _ := mustCreateAgent(t, s, "other")
		web, _ := mustCreateConnection(t, s, "web", EnvDev)
		db, _ := mustCreateConnection(t, s, "db", EnvDev)
		for _, a := range []string{"bot", "other"} {
			for _, c := range []string{"web", "db"} {
				if _, err := s.SetGrant(ctx, Unaudited(), a, c, DefaultRules()); err != nil {
					t.Fatal(err)
				}
			}
		}
		ask := func(agentID, connID string) Approval {
			t.Helper()
			a, _, err := s.RequestApproval(ctx, Approval{AgentID: agentID, ConnectionID: connID, Class: "write", Kind: "exec",
				Operation: "touch /x" + agentID + connID, OperationSHA256: strings.Repeat("a", 64), ApprovalsNeeded: 1}, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			return a
		}
		botWeb, otherDB, otherWeb := ask(bot.ID, web.ID), ask(other.ID, db.ID), ask(other.ID, web.ID)
		locked := func(agentID, connID string) string {
			t.Helper()
			f, err := s.PolicyFacts(ctx, agentID, connID, "")
			if err != nil {
				t.Fatal(err)
			}
			if f.Lock == nil {
				return ""
			}
			return f.Lock.Words()
		}

		l, err := s.SetLock(ctx, Unaudited(), LockInput{Kind: LockAgent, Name: "bot", Reason: "incident 7", CreatedBy: "alice", For: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := l.Words(), "agent bot is locked until "+clock.Now().Add(time.Hour).UTC().Format(time.RFC3339)+": incident 7"; got != want {
			t.Errorf("Words() = %q; want %q", got, want)
		}
		if _, err := s.SetLock(ctx, Unaudited(), LockInput{Kind: LockConnection, Name: "db", CreatedBy: "alice"}); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			agent, conn string
			want        string
		}{
			{bot.ID, web.ID, "agent bot is locked"},
			{bot.ID, db.ID, "is locked"},
			{other.ID, db.ID, "connection db is locked"},
			{other.ID, web.ID, ""},
		} {
			if got := locked(tc.agent, tc.conn); (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("lock of %s on %s = %q; want %q", tc.agent, tc.conn, got, tc.want)
			}
		}
		for _, tc := range []struct {
			id, want string
		}{{botWeb.ID, ApprovalDenied}, {otherDB.ID, ApprovalDenied}, {otherWeb.ID, ApprovalPending}} {
			a, err := s.GetApproval(ctx, tc.id)
			if err != nil {
				t.Fatal(err)
			}
			if a.Status != tc.want {
				t.Errorf("request %s: status %s; want %s", tc.id, a.Status, tc.want)
			}
		}
		if got, err := s.ActiveLocks(ctx); err != nil || len(got) != 2 {
			t.Fatalf("ActiveLocks = %v, %v; want 2", got, err)
		}

		// Locking again replaces the lock.
		if _, err := s.SetLock(ctx, Unaudited(), LockInput{Kind: LockConnection, Name: "db", Reason: "again", CreatedBy: "bob"}); err != nil {
			t.Fatal(err)
		}
		if got := locked(other.ID, db.ID); got != "connection db is locked: again" {
			t.Errorf("after locking again: %q; want the new lock", got)
		}
		// Removed: served again.
		if _, err := s.RemoveLock(ctx, Unaudited(), LockConnection, "db"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.RemoveLock(ctx, Unaudited(), LockConnection, "db"); !errors.Is(err, ErrNotFound) {
			t.Errorf("second RemoveLock: %v; want ErrNotFound", err)
		}
		if got := locked(other.ID, db.ID); got != "" {
			t.Errorf("after unlock: %q; want no lock", got)
		}
		// Expired: served again, and gone from the list.
		clock.Advance(time.Hour)
		if got := locked(bot.ID, web.ID); got != "" {
			t.Errorf("at the lock's end: %q; want no lock", got)
		}
		if got, err := s.ActiveLocks(ctx); err != nil || len(got) != 0 {
			t.Errorf("ActiveLocks at the end = %v, %v; want none", got, err)
		}

		states, err := s.AgentStates(ctx, []string{bot.ID, "agt_gone"})
		if err != nil {
			t.Fatal(err)
		}
		if d, ok := states[bot.ID]; !ok || d {
			t.Errorf("AgentStates[bot] = %v, %v; want enabled", d, ok)
		}
		if _, ok := states["agt_gone"]; ok {
			t.Errorf("AgentStates has an agent that does not exist")
		}

		for _, in := range []LockInput{
			{Kind: "grant", Name: "bot"},
			{Kind: LockAgent, Name: "bot", For: -time.Second},
			{Kind: LockAgent, Name: "bot", Reason: strings.Repeat("x", MaxLockReason+1)},
		} {
			if _, err := s.SetLock(ctx, Unaudited(), in); !errors.Is(err, ErrInvalid) {
				t.Errorf("SetLock(%+v): %v; want ErrInvalid", in, err)
			}
		}
		if _, err := s.SetLock(ctx, Unaudited(), LockInput{Kind: LockAgent, Name: "nobody"}); !errors.Is(err, ErrNotFound) {
			t.Errorf("SetLock(nobody): %v; want ErrNotFound", err)
		}
	})
}

// TestLockGoesWithItsTarget: removing a locked agent or connection removes
// its lock in the same transaction, as its grants go. Left behind, the lock
// would be listed on every door as holding, with no name any door could
// unlock it by (manage resolves the name first), and an agent or
// connection made later under the name would show as locked while it is
// not.
func TestLockGoesWithItsTarget(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		ctx := context.Background()
		s, _, _ := openTestStore(t)
		mustCreateAgent(t, s, "bot")
		mustCreateAgent(t, s, "other")
		mustCreateConnection(t, s, "web", EnvDev)
		mustCreateConnection(t, s, "db", EnvDev)
		for _, in := range []LockInput{
			{Kind: LockAgent, Name: "bot"}, {Kind: LockAgent, Name: "other"},
			{Kind: LockConnection, Name: "web"}, {Kind: LockConnection, Name: "db"},
		} {
			in.CreatedBy = "alice"
			if _, err := s.SetLock(ctx, Unaudited(), in); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.RemoveAgent(ctx, Unaudited(), "bot"); err != nil {
			t.Fatal(err)
		}
		if err := s.RemoveConnection(ctx, Unaudited(), "web"); err != nil {
			t.Fatal(err)
		}
		locks, err := s.ActiveLocks(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, l := range locks {
			got = append(got, l.Kind+" "+l.TargetName)
		}
		slices.Sort(got)
		if want := []string{"agent other", "connection db"}; strings.Join(got, ", ") != strings.Join(want, ", ") {
			t.Errorf("ActiveLocks after removing agent bot and connection web = %q; want %q", got, want)
		}
	})
}
