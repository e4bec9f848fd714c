package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// requestWithin asks for a write of agent on conn under limits.
func requestWithin(s *Store, agent *Agent, conn *Connection, text string, limits PendingLimits) (Approval, RequestOutcome, error) {
	sum := sha256.Sum256([]byte(text))
	return s.RequestApprovalWithin(context.Background(), Approval{AgentID: agent.ID, ConnectionID: conn.ID,
		Class: "write", Kind: "exec", Operation: text, OperationSHA256: hex.EncodeToString(sum[:]),
		ApprovalsNeeded: 1}, 2*time.Minute, limits)
}

// mustRequestWithin is requestWithin that fails t unless a new request was
// stored.
func mustRequestWithin(t *testing.T, s *Store, agent *Agent, conn *Connection, text string, limits PendingLimits) Approval {
	t.Helper()
	a, outcome, err := requestWithin(s, agent, conn, text, limits)
	if err != nil || outcome != RequestCreated {
		t.Fatalf("request %q: outcome %v, %v; want a new request", text, outcome, err)
	}
	return a
}

// mustRefuse fails t unless a request of agent on conn is refused by the
// bound of scope, and returns the refusal.
func mustRefuse(t *testing.T, s *Store, agent *Agent, conn *Connection, text string, limits PendingLimits, scope string) *PendingBoundError {
	t.Helper()
	_, outcome, err := requestWithin(s, agent, conn, text, limits)
	var be *PendingBoundError
	if !errors.As(err, &be) || !errors.Is(err, ErrTooManyPending) || be.Scope != scope {
		t.Fatalf("request %q: outcome %v, %v; want refused by the %s bound", text, outcome, err, scope)
	}
	return be
}

// pendingOf counts the pending requests of agent.
func pendingOf(t *testing.T, s *Store, agentID string) int {
	t.Helper()
	list, err := s.ListApprovals(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, a := range list {
		if a.AgentID == agentID {
			n++
		}
	}
	return n
}

// boundSummaries lists the outbox's bound summaries.
func boundSummaries(t *testing.T, s *Store) []Notification {
	t.Helper()
	all, err := s.ListNotifications(context.Background(), 10000)
	if err != nil {
		t.Fatal(err)
	}
	var out []Notification
	for _, n := range all {
		if n.Event == NotifyBound {
			out = append(out, n)
		}
	}
	return out
}

// TestPendingBoundConcurrent: 200 requests of one agent at once, under a
// bound of 10, store exactly 10; the others are refused by the agent's
// bound, one of them (the episode's first) with the summary. Another
// agent is still let in.
func TestPendingBoundConcurrent(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		s, _, _ := openDecidingStore(t)
		bot, _ := mustCreateAgent(t, s, "bot")
		other, _ := mustCreateAgent(t, s, "other")
		conn, _ := mustCreateConnection(t, s, "web", EnvDev)
		mustCreateChannel(t, s, NewNotifyChannel{Name: "ops", URL: notifyURL, OnPending: true})
		limits := PendingLimits{PerAgent: 10, PerConnection: 50}

		const n = 200
		var wg sync.WaitGroup
		errs := make([]error, n)
		outcomes := make([]RequestOutcome, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, outcomes[i], errs[i] = requestWithin(s, bot, conn, fmt.Sprintf("touch /tmp/f%d", i), limits)
			}()
		}
		wg.Wait()
		created, refused, summaries := 0, 0, 0
		for i, err := range errs {
			var be *PendingBoundError
			switch {
			case err == nil && outcomes[i] == RequestCreated:
				created++
			case errors.As(err, &be) && be.Scope == BoundAgent && be.Waiting == 10 && be.Limit == 10:
				refused++
				if be.Summary {
					summaries++
				}
			default:
				t.Errorf("request %d: outcome %v, %v; want created or refused by the agent's bound of 10", i, outcomes[i], err)
			}
		}
		if created != 10 || refused != n-10 || summaries != 1 {
			t.Errorf("created %d, refused %d (%d with the summary); want 10, %d, 1", created, refused, summaries, n-10)
		}
		if got := pendingOf(t, s, bot.ID); got != 10 {
			t.Errorf("bot has %d pending requests; want 10", got)
		}
		if got := boundSummaries(t, s); len(got) != 1 || got[0].BoundScope != BoundAgent || got[0].BoundWaiting != 10 {
			t.Errorf("bound summaries %+v; want one, of the agent, 10 waiting", got)
		}
		mustRequestWithin(t, s, other, conn, "touch /tmp/other", limits)
	})
}

// TestPendingBoundPerConnection: the connection's bound counts the
// requests of every agent on it, and leaves other connections alone.
func TestPendingBoundPerConnection(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		s, _, _ := openDecidingStore(t)
		web, _ := mustCreateConnection(t, s, "web", EnvDev)
		db, _ := mustCreateConnection(t, s, "db", EnvDev)
		limits := PendingLimits{PerAgent: 10, PerConnection: 3}
		var agents []*Agent
		for i := range 4 {
			a, _ := mustCreateAgent(t, s, fmt.Sprintf("bot%d", i))
			agents = append(agents, a)
		}
		for i := range 3 {
			mustRequestWithin(t, s, agents[i], web, "touch /x", limits)
		}
		for i, a := range agents {
			be := mustRefuse(t, s, a, web, fmt.Sprintf("touch /y%d", i), limits, BoundConnection)
			if be.SubjectID != web.ID || be.Waiting != 3 || be.Limit != 3 {
				t.Errorf("refusal of %s: %+v; want connection %s, 3 waiting, bound 3", a.Name, be, web.ID)
			}
		}
		mustRequestWithin(t, s, agents[3], db, "touch /x", limits)
	})
}

// TestPendingBoundFreesPlaces: a request that is approved, denied or
// expires no longer counts; a retry of a waiting request is not a new
// one and is never refused.
func TestPendingBoundFreesPlaces(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		ctx := context.Background()
		s, clock, _ := openDecidingStore(t)
		bot, _ := mustCreateAgent(t, s, "bot")
		conn, _ := mustCreateConnection(t, s, "web", EnvDev)
		limits := PendingLimits{PerAgent: 2}
		alice := Decider{AdminID: "adm_alice", Name: "alice"}
		a := mustRequestWithin(t, s, bot, conn, "touch /a", limits)
		b := mustRequestWithin(t, s, bot, conn, "touch /b", limits)
		mustRefuse(t, s, bot, conn, "touch /c", limits, BoundAgent)
		if _, outcome, err := requestWithin(s, bot, conn, "touch /a", limits); err != nil || outcome != RequestPending {
			t.Errorf("retry of a waiting request: outcome %v, %v; want RequestPending", outcome, err)
		}

		steps := []struct {
			name string
			free func(t *testing.T)
		}{
			{"denied", func(t *testing.T) {
				if _, _, err := s.DecideApproval(ctx, Decision{ID: a.ID, By: alice, Reason: "no"}); err != nil {
					t.Fatal(err)
				}
			}},
			{"approved", func(t *testing.T) {
				if _, _, err := s.DecideApproval(ctx, Decision{ID: b.ID, Approve: true, By: alice}); err != nil {
					t.Fatal(err)
				}
			}},
			{"expired", func(t *testing.T) {
				// Every request waiting now expires, unmarked: the count
				// goes by the expiry, not by the status alone.
				clock.Advance(3 * time.Minute)
			}},
		}
		for i, step := range steps {
			t.Run(step.name, func(t *testing.T) {
				step.free(t)
				mustRequestWithin(t, s, bot, conn, fmt.Sprintf("touch /after-%d", i), limits)
				if step.name == "expired" {
					mustRequestWithin(t, s, bot, conn, "touch /after-expired-2", limits)
				}
				mustRefuse(t, s, bot, conn, fmt.Sprintf("touch /refused-%d", i), limits, BoundAgent)
			})
		}
	})
}

// TestPendingBoundSummaryPerEpisode: the summary is queued once per
// episode, for the channels that subscribe to pending, on the newest
// waiting request; refusals while the queue has not drained, whichever
// store (replica) makes them, queue nothing more; a queue seen empty
// ends the episode, and the next refusal begins another.
func TestPendingBoundSummaryPerEpisode(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		ctx := context.Background()
		s, clock, ref := openDecidingStore(t)
		replica, err := openRef(ctx, ref, Options{Now: clock.Now, MasterKey: testMasterKey()})
		if err != nil {
			t.Fatal(err)
		}
		defer replica.Close()
		bot, _ := mustCreateAgent(t, s, "bot")
		conn, _ := mustCreateConnection(t, s, "web", EnvDev)
		mustCreateChannel(t, s, NewNotifyChannel{Name: "both", URL: notifyURL, OnPending: true, OnDecided: true})
		mustCreateChannel(t, s, NewNotifyChannel{Name: "pend", URL: notifyURL, OnPending: true})
		mustCreateChannel(t, s, NewNotifyChannel{Name: "dec", URL: notifyURL, OnDecided: true})
		limits := PendingLimits{PerAgent: 2}
		alice := Decider{AdminID: "adm_alice", Name: "alice"}

		first := mustRequestWithin(t, s, bot, conn, "touch /1", limits)
		clock.Advance(time.Millisecond)
		second := mustRequestWithin(t, s, bot, conn, "touch /2", limits)
		// Refusals from both stores at once: one summary.
		var wg sync.WaitGroup
		var mu sync.Mutex
		withSummary := 0
		for i := range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				st := s
				if i%2 == 1 {
					st = replica
				}
				_, _, err := requestWithin(st, bot, conn, fmt.Sprintf("touch /r%d", i), limits)
				var be *PendingBoundError
				if !errors.As(err, &be) {
					t.Errorf("refusal %d: %v; want a PendingBoundError", i, err)
					return
				}
				if be.Summary {
					mu.Lock()
					withSummary++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		got := boundSummaries(t, s)
		if withSummary != 1 || len(got) != 2 {
			t.Fatalf("%d refusals with the summary, outbox %+v; want 1, and one summary for each of both and pend", withSummary, got)
		}
		for _, n := range got {
			if n.Channel == "dec" || n.ApprovalID != second.ID || n.BoundScope != BoundAgent || n.BoundWaiting != 2 ||
				!n.GiveUpAt.Equal(second.ExpiresAt) {
				t.Errorf("summary %+v; want on channel both or pend, about %s (the newest), agent, 2 waiting, giving up at %v",
					n, second.ID, second.ExpiresAt)
			}
		}
		if eps, err := s.pendingBoundEpisodes(ctx); err != nil || len(eps) != 1 || eps[0].SubjectID != bot.ID {
			t.Errorf("episodes %+v, %v; want the bot's", eps, err)
		}

		// A place frees and fills again: the same episode.
		if _, _, err := s.DecideApproval(ctx, Decision{ID: first.ID, By: alice}); err != nil {
			t.Fatal(err)
		}
		third := mustRequestWithin(t, s, bot, conn, "touch /3", limits)
		if be := mustRefuse(t, replica, bot, conn, "touch /4", limits, BoundAgent); be.Summary {
			t.Errorf("refusal in the same episode: %+v; want no summary", be)
		}
		if got := boundSummaries(t, s); len(got) != 2 {
			t.Errorf("after a refill: %d summaries; want still 2", len(got))
		}

		// The queue drains: the next request ends the episode, and the
		// next flood is a new one.
		for _, a := range []Approval{second, third} {
			if _, _, err := s.DecideApproval(ctx, Decision{ID: a.ID, Approve: true, By: alice}); err != nil {
				t.Fatal(err)
			}
		}
		mustRequestWithin(t, s, bot, conn, "touch /5", limits)
		if eps, err := s.pendingBoundEpisodes(ctx); err != nil || len(eps) != 0 {
			t.Errorf("episodes after the queue drained %+v, %v; want none", eps, err)
		}
		mustRequestWithin(t, replica, bot, conn, "touch /6", limits)
		if be := mustRefuse(t, replica, bot, conn, "touch /7", limits, BoundAgent); !be.Summary {
			t.Errorf("first refusal of a new episode: %+v; want the summary", be)
		}
		if got := boundSummaries(t, s); len(got) != 4 {
			t.Errorf("after a second episode: %d summaries; want 4 (two channels, two episodes)", len(got))
		}
	})
}

// TestPendingBoundInvalid: a negative bound is refused before anything is
// read or written.
func TestPendingBoundInvalid(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		s, _, _ := openDecidingStore(t)
		bot, _ := mustCreateAgent(t, s, "bot")
		conn, _ := mustCreateConnection(t, s, "web", EnvDev)
		for _, l := range []PendingLimits{{PerAgent: -1}, {PerConnection: -1}} {
			if _, _, err := requestWithin(s, bot, conn, "touch /x", l); !errors.Is(err, ErrInvalid) {
				t.Errorf("limits %+v: %v; want ErrInvalid", l, err)
			}
		}
	})
}

// pendingBoundEpisodes lists the open episodes of the bounds: for each
// agent or connection whose bound refused a request and whose queue has
// not been seen empty since, when the episode began.
func (s *Store) pendingBoundEpisodes(ctx context.Context) ([]pendingBoundEpisode, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT scope, subject_id, started_at FROM pending_bounds ORDER BY started_at, scope, subject_id`)
	return collect(rows, err, "list pending bound episodes", func(r rowScanner) (pendingBoundEpisode, error) {
		var e pendingBoundEpisode
		var started string
		if err := r.Scan(&e.Scope, &e.SubjectID, &started); err != nil {
			return pendingBoundEpisode{}, err
		}
		var err error
		e.StartedAt, err = parseTime(started)
		return e, err
	})
}

// pendingBoundEpisode is one open episode of a bound.
type pendingBoundEpisode struct {
	Scope     string // BoundAgent or BoundConnection
	SubjectID string
	StartedAt time.Time
}
