package policy

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/postern/postern/internal/fakeclock"
	"github.com/postern/postern/internal/testwait"

	"github.com/postern/postern/store"
)

var askAll = Rules{Read: Ask, Write: Ask, Destructive: Ask}

func TestApproveWakesWaiter(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		te := newTestEnv(t, nil, Options{})
		c := te.conn("web", store.EnvDev, askAll)
		op := te.op(c, Write, "systemctl restart nginx")
		a, done := authorizeAsync(t, context.Background(), te.eng, op)
		if a.Status != store.ApprovalPending || a.OperationSHA256 != OperationHash(op.Text) || a.Kind != "exec" || a.Class != "write" {
			t.Fatalf("request = %+v; want pending, bound to the operation", a)
		}
		// The request is in the database before anything waits.
		if got, err := te.st.GetApproval(context.Background(), a.ID); err != nil || got.Status != store.ApprovalPending {
			t.Fatalf("GetApproval = %+v, %v; want pending", got, err)
		}
		start := time.Now()
		if _, err := te.eng.Approve(context.Background(), a.ID, te.admin("alice"), Scope{}); err != nil {
			t.Fatalf("Approve: %v", err)
		}
		r := result(t, done)
		t.Logf("in-process wake: %v", time.Since(start))
		if r.err != nil || r.auth.Outcome != Approved {
			t.Fatalf("Authorize = %s, %v; want approved", r.auth.Outcome, r.err)
		}
		if got := r.auth.Deciders(); !slices.Equal(got, []string{"alice"}) {
			t.Errorf("Deciders = %v; want [alice]", got)
		}
		if r.auth.Approval.ConsumedAt.IsZero() {
			t.Error("approval not consumed")
		}
	})
}

func TestDenyWakesWaiter(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		te := newTestEnv(t, nil, Options{})
		c := te.conn("web", store.EnvDev, askAll)
		op := te.op(c, Write, "touch /etc/motd")
		a, done := authorizeAsync(t, context.Background(), te.eng, op)
		if _, err := te.eng.Deny(context.Background(), a.ID, te.admin("alice"), "not now"); err != nil {
			t.Fatalf("Deny: %v", err)
		}
		r := result(t, done)
		var de *DeniedError
		if !errors.As(r.err, &de) || r.auth.Outcome != Denied || de.Reason != "approval "+a.ID+" was denied by alice: not now" {
			t.Fatalf("Authorize = %s, %v; want denied by alice", r.auth.Outcome, r.err)
		}
		rec := r.auth.Record(op)
		if rec.Outcome != Denied || rec.ApprovalID != a.ID || !slices.Equal(rec.Deciders, []string{"alice"}) {
			t.Errorf("Record = %+v; want denied, approval %s, deciders [alice]", rec, a.ID)
		}
	})
}

// TestPendingSurvivesRestart: a request made before a restart is still
// pending after it, and the same operation sent again waits on it (no
// duplicate) and is woken by its approval.
func TestPendingSurvivesRestart(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		te := newTestEnv(t, nil, Options{})
		c := te.conn("web", store.EnvDev, askAll)
		op := te.op(c, Write, "apt-get upgrade -y")
		ctx, cancel := context.WithCancel(context.Background())
		a, done := authorizeAsync(t, ctx, te.eng, op)
		cancel() // the agent disconnects
		if r := result(t, done); r.auth.Outcome != Asked || !errors.Is(r.err, context.Canceled) {
			t.Fatalf("Authorize after cancel = %s, %v; want asked, context.Canceled", r.auth.Outcome, r.err)
		}

		te.restart()

		list, err := te.eng.Approvals(context.Background(), false)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 1 || list[0].ID != a.ID || list[0].Status != store.ApprovalPending {
			t.Fatalf("pending after restart = %+v; want just %s", list, a.ID)
		}
		again, done := authorizeAsync(t, context.Background(), te.eng, op)
		if again.ID != a.ID {
			t.Fatalf("retry asked %s; want it to wait on %s", again.ID, a.ID)
		}
		if _, err := te.eng.Approve(context.Background(), a.ID, te.admin("alice"), Scope{}); err != nil {
			t.Fatal(err)
		}
		if r := result(t, done); r.err != nil || r.auth.Outcome != Approved || r.auth.Approval.ID != a.ID {
			t.Fatalf("retry = %s, %v; want approved via %s", r.auth.Outcome, r.err, a.ID)
		}
	})
}

// TestApprovedConsumedByRetryAfterRestart: an approval given after the agent
// left is used by its next identical attempt, even across a restart, once.
func TestApprovedConsumedByRetryAfterRestart(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		te := newTestEnv(t, nil, Options{})
		c := te.conn("web", store.EnvDev, askAll)
		op := te.op(c, Destructive, "rm -rf /srv/cache")
		ctx, cancel := context.WithCancel(context.Background())
		a, done := authorizeAsync(t, ctx, te.eng, op)
		cancel()
		result(t, done)
		if _, err := te.eng.Approve(context.Background(), a.ID, te.admin("alice"), Scope{}); err != nil {
			t.Fatal(err)
		}

		te.restart()

		auth, err := te.eng.Authorize(context.Background(), op, func(Approval) { t.Error("retry asked again") })
		if err != nil || auth.Outcome != Approved || auth.Approval.ID != a.ID {
			t.Fatalf("retry = %s, %v; want approved via %s", auth.Outcome, err, a.ID)
		}
		// A different operation does not use it, and neither does a second try.
		other := op
		other.Text = "rm -rf /srv"
		for _, o := range []Operation{other, op} {
			ctx, cancel := context.WithCancel(context.Background())
			b, done := authorizeAsync(t, ctx, te.eng, o)
			cancel()
			result(t, done)
			if b.ID == a.ID {
				t.Errorf("%q reused consumed approval %s", o.Text, a.ID)
			}
		}
	})
}

func TestExpiry(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		te := newTestEnv(t, nil, Options{ApprovalLifetime: 150 * time.Millisecond})
		c := te.conn("web", store.EnvDev, askAll)
		op := te.op(c, Write, "make install")
		a, done := authorizeAsync(t, context.Background(), te.eng, op)
		r := result(t, done)
		if !errors.Is(r.err, ErrExpired) || r.auth.Outcome != Expired {
			t.Fatalf("Authorize = %s, %v; want expired", r.auth.Outcome, r.err)
		}
		got, err := te.st.GetApproval(context.Background(), a.ID)
		if err != nil || got.Status != store.ApprovalExpired {
			t.Fatalf("stored status = %q, %v; want expired", got.Status, err)
		}
		if _, err := te.eng.Approve(context.Background(), a.ID, te.admin("alice"), Scope{}); !errors.Is(err, ErrAlreadyDecided) {
			t.Errorf("Approve after expiry: got %v; want ErrAlreadyDecided", err)
		}
	})
}

// TestExpiryWithClock drives expiry with the injected clock: an admin cannot
// approve an overdue request, and an approved one is not used by a retry
// after its lifetime.
func TestExpiryWithClock(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		clock := fakeclock.New()
		te := newTestEnv(t, clock.Now, Options{})
		c := te.conn("web", store.EnvDev, askAll)
		ctx := context.Background()

		opA := te.op(c, Write, "echo a > /tmp/a")
		a, _, err := te.st.RequestApproval(ctx, store.Approval{AgentID: te.agent.ID, ConnectionID: c.ID,
			Class: "write", Kind: "exec", Operation: opA.Text, OperationSHA256: OperationHash(opA.Text), ApprovalsNeeded: 1}, DefaultApprovalLifetime)
		if err != nil {
			t.Fatal(err)
		}
		clock.Advance(DefaultApprovalLifetime)
		if _, err := te.eng.Approve(ctx, a.ID, te.admin("alice"), Scope{}); !errors.Is(err, ErrExpired) {
			t.Errorf("Approve at expiry: got %v; want ErrExpired", err)
		}

		opB := te.op(c, Write, "echo b > /tmp/b")
		b, _, err := te.st.RequestApproval(ctx, store.Approval{AgentID: te.agent.ID, ConnectionID: c.ID,
			Class: "write", Kind: "exec", Operation: opB.Text, OperationSHA256: OperationHash(opB.Text), ApprovalsNeeded: 1}, DefaultApprovalLifetime)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := te.eng.Approve(ctx, b.ID, te.admin("alice"), Scope{}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(DefaultApprovalLifetime + time.Second)
		wctx, cancel := context.WithCancel(ctx)
		got, done := authorizeAsync(t, wctx, te.eng, opB)
		cancel()
		result(t, done)
		if got.ID == b.ID {
			t.Errorf("retry after expiry used approval %s; want a new request", b.ID)
		}
	})
}

// TestSingleUse: of many waiters on one approved request, one runs.
func TestSingleUse(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		te := newTestEnv(t, nil, Options{})
		c := te.conn("web", store.EnvDev, askAll)
		op := te.op(c, Write, "deploy.sh")
		a, first := authorizeAsync(t, context.Background(), te.eng, op)
		const n = 8
		results := make(chan error, n)
		var started sync.WaitGroup
		for range n {
			started.Add(1)
			go func() {
				started.Done()
				_, err := te.eng.Wait(context.Background(), a.ID)
				results <- err
			}()
		}
		started.Wait()
		if _, err := te.eng.Approve(context.Background(), a.ID, te.admin("alice"), Scope{}); err != nil {
			t.Fatal(err)
		}
		wins := 0
		if r := result(t, first); r.err == nil {
			wins++
		} else if !errors.Is(r.err, ErrAlreadyUsed) {
			t.Errorf("first waiter: got %v; want nil or ErrAlreadyUsed", r.err)
		}
		for range n {
			select {
			case err := <-results:
				if err == nil {
					wins++
				} else if !errors.Is(err, ErrAlreadyUsed) {
					t.Errorf("waiter: got %v; want nil or ErrAlreadyUsed", err)
				}
			case <-testwait.End(t):
				t.Fatal("waiter did not return")
			}
		}
		if wins != 1 {
			t.Errorf("%d waiters got to run the operation; want 1", wins)
		}
		if _, err := te.eng.Wait(context.Background(), a.ID); !errors.Is(err, ErrAlreadyUsed) {
			t.Errorf("Wait on a used approval: got %v; want ErrAlreadyUsed", err)
		}
	})
}

// TestTwoPersonRule runs in a synctest bubble: after the first approval,
// the waiter must keep waiting through the watcher's polls, and the
// bubble's fake clock lets those polls pass without waiting for them.
func TestTwoPersonRule(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		if onPostgres(t) {
			// The store's PostgreSQL connections are network I/O, which a
			// bubble cannot wait out: the final check of the deciders
			// still fails if the waiter returned after one approval.
			testTwoPersonRule(t, false)
			return
		}
		synctest.Test(t, func(t *testing.T) { testTwoPersonRule(t, true) })
	})
}

// testTwoPersonRule checks the rule; inBubble says it runs on a synctest
// clock, where it also checks that the waiter is still waiting between the
// two approvals.
func testTwoPersonRule(t *testing.T, inBubble bool) {
	te := newTestEnv(t, nil, Options{})
	c := te.conn("prod", store.EnvProduction, Rules{Read: Allow, Write: Allow, Destructive: Ask})
	op := te.op(c, Destructive, "DROP DATABASE shop")
	a, done := authorizeAsync(t, context.Background(), te.eng, op)
	if a.ApprovalsNeeded != 2 {
		t.Fatalf("ApprovalsNeeded = %d; want 2", a.ApprovalsNeeded)
	}
	ctx := context.Background()
	got, err := te.eng.Approve(ctx, a.ID, te.admin("alice"), Scope{})
	if err != nil || got.Status != store.ApprovalPending || got.FirstApprover != "alice" {
		t.Fatalf("first Approve = %+v, %v; want pending with first approver alice", got, err)
	}
	if inBubble {
		// Let the watcher poll a few times (on the fake clock) and
		// everything settle: the waiter is still waiting.
		time.Sleep(3 * DefaultPollInterval)
		synctest.Wait()
		select {
		case r := <-done:
			t.Fatalf("waiter returned after one approval: %s, %v", r.auth.Outcome, r.err)
		default:
		}
	}
	if _, err := te.eng.Approve(ctx, a.ID, te.admin("alice"), Scope{}); !errors.Is(err, ErrSameApprover) {
		t.Fatalf("alice again: got %v; want ErrSameApprover", err)
	}
	if _, err := te.eng.Approve(ctx, a.ID, te.admin("bob"), Scope{}); err != nil {
		t.Fatalf("bob: %v", err)
	}
	r := result(t, done)
	if r.err != nil || r.auth.Outcome != Approved {
		t.Fatalf("Authorize = %s, %v; want approved", r.auth.Outcome, r.err)
	}
	if got := r.auth.Deciders(); !slices.Equal(got, []string{"alice", "bob"}) {
		t.Errorf("Deciders = %v; want [alice bob]", got)
	}
	// A deny after one approval still wins.
	op2 := te.op(c, Destructive, "DROP TABLE t")
	b, done2 := authorizeAsync(t, ctx, te.eng, op2)
	if _, err := te.eng.Approve(ctx, b.ID, te.admin("alice"), Scope{}); err != nil {
		t.Fatal(err)
	}
	if _, err := te.eng.Deny(ctx, b.ID, te.admin("bob"), ""); err != nil {
		t.Fatal(err)
	}
	if r := result(t, done2); !errors.Is(r.err, ErrDenied) {
		t.Errorf("after approve+deny: got %v; want ErrDenied", r.err)
	}
}

// TestConcurrentDecisions races an approve against a deny on 100 requests;
// each must have exactly one winner, and the loser must be told.
func TestConcurrentDecisions(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		te := newTestEnv(t, nil, Options{})
		c := te.conn("web", store.EnvDev, askAll)
		ctx := context.Background()
		approvedWins := 0
		for i := range 100 {
			text := "job " + string(rune('a'+i%26)) + string(rune('a'+i/26))
			a, _, err := te.st.RequestApproval(ctx, store.Approval{AgentID: te.agent.ID, ConnectionID: c.ID,
				Class: "write", Kind: "exec", Operation: text, OperationSHA256: OperationHash(text), ApprovalsNeeded: 1}, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			gate := make(chan struct{})
			var approveErr, denyErr error
			wg.Add(2)
			go func() {
				defer wg.Done()
				<-gate
				_, approveErr = te.eng.Approve(ctx, a.ID, te.admin("alice"), Scope{})
			}()
			go func() {
				defer wg.Done()
				<-gate
				_, denyErr = te.eng.Deny(ctx, a.ID, te.admin("bob"), "race")
			}()
			close(gate)
			wg.Wait()
			if (approveErr == nil) == (denyErr == nil) {
				t.Fatalf("request %d: approve err %v, deny err %v; want exactly one nil", i, approveErr, denyErr)
			}
			loser := approveErr
			want := store.ApprovalDenied
			if approveErr == nil {
				loser, want = denyErr, store.ApprovalApproved
				approvedWins++
			}
			var ade *AlreadyDecidedError
			if !errors.As(loser, &ade) || !errors.Is(loser, ErrAlreadyDecided) || ade.Status != want {
				t.Fatalf("request %d: loser got %v; want AlreadyDecidedError with status %s", i, loser, want)
			}
			got, err := te.st.GetApproval(ctx, a.ID)
			if err != nil || got.Status != want {
				t.Fatalf("request %d: stored %q, %v; want %q", i, got.Status, err, want)
			}
		}
		t.Logf("approve won %d of 100 races", approvedWins)
	})
}

func TestCloseReleasesWaiters(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		te := newTestEnv(t, nil, Options{})
		c := te.conn("web", store.EnvDev, askAll)
		_, done := authorizeAsync(t, context.Background(), te.eng, te.op(c, Write, "sleep 1"))
		te.eng.Close()
		if r := result(t, done); !errors.Is(r.err, ErrClosed) || r.auth.Outcome != Asked {
			t.Errorf("after Close: %s, %v; want asked, ErrClosed", r.auth.Outcome, r.err)
		}
		if _, err := te.eng.Wait(context.Background(), "apr_x"); !errors.Is(err, ErrClosed) {
			t.Errorf("Wait after Close: got %v; want ErrClosed", err)
		}
	})
}

func TestDecideBadInput(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		te := newTestEnv(t, nil, Options{})
		ctx := context.Background()
		tests := []struct {
			name string
			id   string
			by   Decider
			want error
		}{
			{name: "unknown id", id: "apr_nope", by: te.admin("alice"), want: store.ErrNotFound},
			{name: "no admin name", id: "apr_nope", by: Decider{AdminID: "adm_x", Name: " "}, want: ErrInvalidAdmin},
			{name: "no admin id", id: "apr_nope", by: Decider{Name: "alice"}, want: ErrInvalidAdmin},
			{name: "comma in admin", id: "apr_nope", by: Decider{AdminID: "adm_x", Name: "a,b"}, want: ErrInvalidAdmin},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				_, err := te.eng.Approve(ctx, tt.id, tt.by, Scope{})
				if !errors.Is(err, tt.want) {
					t.Errorf("Approve = %v; want %v", err, tt.want)
				}
			})
		}
	})
}

// TestIdenticalRequestsShareOneApproval: the same operation asked for by
// several sessions at once makes one request, which all of them wait on.
func TestIdenticalRequestsShareOneApproval(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		te := newTestEnv(t, nil, Options{})
		c := te.conn("web", store.EnvDev, askAll)
		op := te.op(c, Write, "certbot renew")
		const n = 6
		ids := make(chan string, n)
		results := make(chan error, n)
		for range n {
			go func() {
				_, err := te.eng.Authorize(context.Background(), op, func(a Approval) { ids <- a.ID })
				results <- err
			}()
		}
		var first string
		for range n {
			select {
			case id := <-ids:
				if first == "" {
					first = id
				} else if id != first {
					t.Fatalf("requests %s and %s for one operation; want one", first, id)
				}
			case <-testwait.End(t):
				t.Fatal("not every session asked")
			}
		}
		list, err := te.eng.Approvals(context.Background(), true)
		if err != nil || len(list) != 1 {
			t.Fatalf("Approvals = %d rows, %v; want 1", len(list), err)
		}
		if _, err := te.eng.Approve(context.Background(), first, te.admin("alice"), Scope{}); err != nil {
			t.Fatal(err)
		}
		ran := 0
		for range n {
			if err := <-results; err == nil {
				ran++
			} else if !errors.Is(err, ErrAlreadyUsed) {
				t.Errorf("session: got %v; want nil or ErrAlreadyUsed", err)
			}
		}
		if ran != 1 {
			t.Errorf("%d sessions ran the operation; want 1", ran)
		}
	})
}

// countingStore records what the watcher asks the store.
type countingStore struct {
	*store.Store
	mu       sync.Mutex // guards asked and versions
	asked    [][]string // ids passed to each ApprovalStatuses call
	versions int        // DataVersion calls
	seen     []int64    // the distinct values DataVersion returned, in order
	// polled, if not nil, receives the count after each DataVersion call
	// (never blocking), so that a test waits for polls, not for time.
	polled chan int
}

func (s *countingStore) ApprovalStatuses(ctx context.Context, ids []string) (map[string]string, error) {
	s.mu.Lock()
	s.asked = append(s.asked, slices.Clone(ids))
	s.mu.Unlock()
	return s.Store.ApprovalStatuses(ctx, ids)
}

func (s *countingStore) DataVersion(ctx context.Context) (int64, error) {
	s.mu.Lock()
	s.versions++
	n := s.versions
	s.mu.Unlock()
	v, err := s.Store.DataVersion(ctx)
	s.mu.Lock()
	if err == nil && (len(s.seen) == 0 || s.seen[len(s.seen)-1] != v) {
		s.seen = append(s.seen, v)
	}
	s.mu.Unlock()
	if s.polled != nil {
		select {
		case s.polled <- n:
		default:
		}
	}
	return v, err
}

// TestWatcherReadsOnlyWaiters: after a change by another connection, the
// watcher re-reads the requests that have waiters, by id, and nothing else;
// with no change it reads nothing but data_version.
func TestWatcherReadsOnlyWaiters(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		te := newTestEnv(t, nil, Options{})
		c := te.conn("web", store.EnvDev, askAll)
		waitListening(t, te.st)
		cs := &countingStore{Store: te.st, polled: make(chan int, 1)}
		eng, err := New(Options{Store: cs, PollInterval: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer eng.Close()
		ctx := context.Background()
		// Requests nobody waits on.
		for _, text := range []string{"a", "b", "c"} {
			if _, _, err := te.st.RequestApproval(ctx, store.Approval{AgentID: te.agent.ID, ConnectionID: c.ID,
				Class: "write", Kind: "exec", Operation: text, OperationSHA256: OperationHash(text), ApprovalsNeeded: 1}, time.Minute); err != nil {
				t.Fatal(err)
			}
		}
		a, done := authorizeAsync(t, ctx, eng, te.op(c, Write, "waited on"))
		// Several idle polls: the waiter's own request made the first one see
		// a change; the next five see none.
		const idlePolls = 5
		for seen := 0; seen < idlePolls+1; {
			select {
			case <-cs.polled:
				seen++
			case <-testwait.End(t):
				t.Fatalf("the watcher polled %d times by the test's deadline at a 10ms interval; want polling", seen)
			}
		}
		cs.mu.Lock()
		idleReads, idleVersions := len(cs.asked), len(cs.seen)
		cs.mu.Unlock()
		// Decide through the other engine, as another process would.
		if _, err := te.eng.Approve(ctx, a.ID, te.admin("alice"), Scope{}); err != nil {
			t.Fatal(err)
		}
		if r := result(t, done); r.err != nil {
			t.Fatalf("waiter: %v", r.err)
		}
		cs.mu.Lock()
		defer cs.mu.Unlock()
		// One read per version seen: on SQLite the first poll's, on
		// PostgreSQL also one for the notification of the waiter's own new
		// request, which may arrive after the first poll.
		if idleReads > idleVersions {
			t.Errorf("watcher read approvals %d times while the data version took %d values; want at most one read per value", idleReads, idleVersions)
		}
		for _, ids := range cs.asked {
			if !slices.Equal(ids, []string{a.ID}) {
				t.Errorf("watcher read %v; want only the waited-on %s", ids, a.ID)
			}
		}
		if len(cs.asked) == 0 {
			t.Error("watcher never re-read the waited-on request")
		}
	})
}
