package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// notifyURL is a channel URL whose path is a token, as a Slack webhook's is.
const notifyURL = "https://hooks.example.com/services/T0/B0/Zq7tokenNotToBeShown"

func mustCreateChannel(t *testing.T, s *Store, nc NewNotifyChannel) *NotifyChannel {
	t.Helper()
	c, err := s.CreateNotifyChannel(context.Background(), Unaudited(), nc)
	if err != nil {
		t.Fatalf("CreateNotifyChannel(%s): %v", nc.Name, err)
	}
	return c
}

// askApproval stores a pending request of agent on conn.
func askApproval(t *testing.T, s *Store, agent *Agent, conn *Connection, text string, needed int) Approval {
	t.Helper()
	sum := sha256.Sum256([]byte(text))
	a, outcome, err := s.RequestApproval(context.Background(), Approval{AgentID: agent.ID, ConnectionID: conn.ID,
		Class: "write", Kind: "exec", Operation: text, OperationSHA256: hex.EncodeToString(sum[:]),
		ApprovalsNeeded: needed}, 2*time.Minute)
	if err != nil || outcome != RequestCreated {
		t.Fatalf("RequestApproval(%q): %v, outcome %v; want a new request", text, err, outcome)
	}
	return a
}

func TestNotifyChannels(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		ctx := context.Background()
		s, _, path := openDecidingStore(t)
		secret := []byte("hmac-secret-Zq7-do-not-show")
		c := mustCreateChannel(t, s, NewNotifyChannel{Name: "ops", URL: notifyURL, Secret: secret, OnPending: true})
		if c.Format != NotifyJSON || c.URLShown != "https://hooks.example.com/…" || !c.HasSecret ||
			!c.OnPending || c.OnDecided {
			t.Errorf("created channel = %+v; want json, URL shown as https://hooks.example.com/…, a secret, pending only", c)
		}
		mustCreateChannel(t, s, NewNotifyChannel{Name: "chat", URL: "https://chat.example.com:8443/x?token=abc",
			Format: NotifySlack, OnPending: true, OnDecided: true})

		list, err := s.ListNotifyChannels(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 2 || list[0].Name != "chat" || list[1].Name != "ops" || list[0].URLShown != "https://chat.example.com:8443/…" {
			t.Errorf("list = %+v; want chat (https://chat.example.com:8443/…) then ops", list)
		}
		byID, err := s.NotifyChannel(ctx, c.ID)
		if err != nil || byID.Name != "ops" {
			t.Errorf("NotifyChannel(id) = %+v, %v; want ops", byID, err)
		}
		target, err := s.NotifyChannelTarget(ctx, c.ID)
		if err != nil || target.URL != notifyURL || !bytes.Equal(target.Secret, secret) || target.Format != NotifyJSON {
			t.Errorf("NotifyChannelTarget = %q, secret %v, %v; want the URL and secret given", target.Name, target.Secret != nil, err)
		}

		// Neither the URL's token nor the secret is in the database file.
		for _, f := range []string{path, path + "-wal"} {
			b, err := os.ReadFile(f)
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Fatal(err)
			}
			for _, needle := range []string{"Zq7tokenNotToBeShown", string(secret), "token=abc"} {
				if bytes.Contains(b, []byte(needle)) {
					t.Errorf("%s holds a channel secret in the clear", f)
				}
			}
		}

		if _, err := s.CreateNotifyChannel(ctx, Unaudited(), NewNotifyChannel{Name: "ops", URL: notifyURL, OnPending: true}); !errors.Is(err, ErrDuplicate) {
			t.Errorf("second channel named ops: %v; want ErrDuplicate", err)
		}
		removed, err := s.RemoveNotifyChannel(ctx, Unaudited(), "ops")
		if err != nil || removed.ID != c.ID {
			t.Fatalf("RemoveNotifyChannel(ops) = %v, %v; want the channel", removed, err)
		}
		if _, err := s.RemoveNotifyChannel(ctx, Unaudited(), "ops"); !errors.Is(err, ErrNotFound) {
			t.Errorf("removing ops again: %v; want ErrNotFound", err)
		}
		if _, err := s.NotifyChannelTarget(ctx, c.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("target of a removed channel: %v; want ErrNotFound", err)
		}
	})
}

func TestNotifyChannelBadInput(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		s, _, _ := openDecidingStore(t)
		tests := []struct {
			name string
			nc   NewNotifyChannel
			want string
		}{
			{"bad name", NewNotifyChannel{Name: "a b", URL: notifyURL, OnPending: true}, "name"},
			{"empty url", NewNotifyChannel{Name: "x", OnPending: true}, "empty"},
			{"ftp", NewNotifyChannel{Name: "x", URL: "ftp://h/Zq7tokenNotToBeShown", OnPending: true}, "https://"},
			{"relative", NewNotifyChannel{Name: "x", URL: "/Zq7tokenNotToBeShown", OnPending: true}, "https://"},
			{"no host", NewNotifyChannel{Name: "x", URL: "https:///Zq7tokenNotToBeShown", OnPending: true}, "no host"},
			{"space", NewNotifyChannel{Name: "x", URL: "https://h/Zq7tokenNotToBeShown x", OnPending: true}, "spaces"},
			{"bad escape", NewNotifyChannel{Name: "x", URL: "https://h/%zzZq7tokenNotToBeShown", OnPending: true}, "parse"},
			{"fragment", NewNotifyChannel{Name: "x", URL: "https://h/p#Zq7tokenNotToBeShown", OnPending: true}, "fragment"},
			{"too long", NewNotifyChannel{Name: "x", URL: "https://h/" + strings.Repeat("Zq7tokenNotToBeShown", 200), OnPending: true}, "longer"},
			{"format", NewNotifyChannel{Name: "x", URL: notifyURL, Format: "xml", OnPending: true}, "format"},
			{"no events", NewNotifyChannel{Name: "x", URL: notifyURL}, "no event"},
			{"empty secret", NewNotifyChannel{Name: "x", URL: notifyURL, Secret: []byte{}, OnPending: true}, "empty"},
			{"long secret", NewNotifyChannel{Name: "x", URL: notifyURL, Secret: make([]byte, MaxNotifySecretLen+1), OnPending: true}, "longer"},
			{"slack secret", NewNotifyChannel{Name: "x", URL: notifyURL, Format: NotifySlack, Secret: []byte("s"), OnPending: true}, "slack"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				_, err := s.CreateNotifyChannel(context.Background(), Unaudited(), tt.nc)
				if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("got %v; want ErrInvalid mentioning %q", err, tt.want)
				}
				if strings.Contains(err.Error(), "Zq7token") {
					t.Errorf("error %q quotes the URL", err)
				}
			})
		}
		if list, _ := s.ListNotifyChannels(context.Background()); len(list) != 0 {
			t.Errorf("channels after refused input: %d; want none", len(list))
		}
	})
}

func TestParseNotifyEvents(t *testing.T) {
	tests := []struct {
		in      string
		want    NotifySubscriptions
		wantErr bool
	}{
		{"", NotifySubscriptions{Pending: true, Decided: true}, false},
		{"pending", NotifySubscriptions{Pending: true}, false},
		{"decided", NotifySubscriptions{Decided: true}, false},
		{"pending, decided", NotifySubscriptions{Pending: true, Decided: true}, false},
		{"audit.head", NotifySubscriptions{AuditHead: true}, false},
		{"decided,audit.head", NotifySubscriptions{Decided: true, AuditHead: true}, false},
		{"audit-head", NotifySubscriptions{}, true},
		{"expired", NotifySubscriptions{}, true},
		{"pending,", NotifySubscriptions{}, true},
	}
	for _, tt := range tests {
		got, err := ParseNotifyEvents(tt.in)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("ParseNotifyEvents(%q) = %+v, %v; want %+v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

// TestApprovalsQueueNotifications: creating a request queues a pending
// notification for each channel subscribed to pending, in the same
// transaction; a final decision queues a decided one; a retry that finds
// the request, and the first of two approvals, queue nothing.
func TestApprovalsQueueNotifications(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		ctx := context.Background()
		s, clock, _ := openDecidingStore(t)
		agent, _ := mustCreateAgent(t, s, "bot")
		conn, _ := mustCreateConnection(t, s, "web", EnvProduction)
		mustCreateChannel(t, s, NewNotifyChannel{Name: "both", URL: notifyURL, OnPending: true, OnDecided: true})
		mustCreateChannel(t, s, NewNotifyChannel{Name: "pend", URL: notifyURL, OnPending: true})
		mustCreateChannel(t, s, NewNotifyChannel{Name: "dec", URL: notifyURL, OnDecided: true})

		a := askApproval(t, s, agent, conn, "touch /x", 2)
		got := outboxOf(t, s, a.ID)
		if want := []string{"pending both", "pending pend"}; !slices.Equal(got, want) {
			t.Errorf("after the request: %v; want %v", got, want)
		}
		ns, _ := s.NotificationsOf(ctx, a.ID)
		for _, n := range ns {
			if n.State != NotificationQueued || !n.DueAt.Equal(clock.Now()) || !n.GiveUpAt.Equal(a.ExpiresAt) {
				t.Errorf("%s: state %s, due %v, give up %v; want queued, due now, give up at expiry %v",
					n.Channel, n.State, n.DueAt, n.GiveUpAt, a.ExpiresAt)
			}
		}
		sum := sha256.Sum256([]byte("touch /x"))
		if _, outcome, err := s.RequestApproval(ctx, Approval{AgentID: agent.ID, ConnectionID: conn.ID, Class: "write",
			Kind: "exec", Operation: "touch /x", OperationSHA256: hex.EncodeToString(sum[:]), ApprovalsNeeded: 2},
			time.Minute); err != nil || outcome != RequestPending {
			t.Fatalf("identical request: %v, %v; want RequestPending", outcome, err)
		}
		if _, outcome, err := s.DecideApproval(ctx, Decision{ID: a.ID, Approve: true, By: Decider{AdminID: "adm_alice", Name: "alice"}}); err != nil || outcome != DecideFirstApproval {
			t.Fatalf("first approval: %v, %v", outcome, err)
		}
		if got := outboxOf(t, s, a.ID); len(got) != 2 {
			t.Errorf("after a retry and a first approval: %v; want still the two pending", got)
		}
		clock.Advance(time.Second)
		if _, outcome, err := s.DecideApproval(ctx, Decision{ID: a.ID, Approve: true, By: Decider{AdminID: "adm_bob", Name: "bob"}}); err != nil || outcome != DecideApproved {
			t.Fatalf("second approval: %v, %v", outcome, err)
		}
		got = outboxOf(t, s, a.ID)
		if want := []string{"decided both", "decided dec", "pending both", "pending pend"}; !slices.Equal(got, want) {
			t.Errorf("after the decision: %v; want %v", got, want)
		}
		ns, _ = s.NotificationsOf(ctx, a.ID)
		for _, n := range ns {
			if n.Event == NotifyDecided && !n.GiveUpAt.Equal(clock.Now().Add(NotifyDecidedWindow)) {
				t.Errorf("decided for %s gives up at %v; want the decision plus %v", n.Channel, n.GiveUpAt, NotifyDecidedWindow)
			}
		}
		// A denial queues too; an expired request's late decision does not.
		b := askApproval(t, s, agent, conn, "touch /y", 1)
		if _, _, err := s.DecideApproval(ctx, Decision{ID: b.ID, Approve: false, By: Decider{AdminID: "adm_alice", Name: "alice"}, Reason: "no"}); err != nil {
			t.Fatal(err)
		}
		if got := outboxOf(t, s, b.ID); !slices.Equal(got, []string{"decided both", "decided dec", "pending both", "pending pend"}) {
			t.Errorf("denied: %v; want pending and decided events", got)
		}
		c := askApproval(t, s, agent, conn, "touch /z", 1)
		clock.Advance(3 * time.Minute)
		if _, outcome, _ := s.DecideApproval(ctx, Decision{ID: c.ID, Approve: true, By: Decider{AdminID: "adm_alice", Name: "alice"}}); outcome != DecideExpired {
			t.Fatalf("late decision: %v; want DecideExpired", outcome)
		}
		if got := outboxOf(t, s, c.ID); len(got) != 2 {
			t.Errorf("expired: %v; want only the pending events", got)
		}
	})
}

// outboxOf lists "event channel" of an approval's outbox rows, sorted.
func outboxOf(t *testing.T, s *Store, approvalID string) []string {
	t.Helper()
	ns, err := s.NotificationsOf(context.Background(), approvalID)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range ns {
		out = append(out, string(n.Event)+" "+n.Channel)
	}
	slices.Sort(out)
	return out
}

// TestClaimNotifications: a claim takes due rows once, whichever of two
// stores on one database asks; a finished row leaves the queue; a retry is
// due at its time; a lease that runs out frees the row, and the old
// claimant's late outcome is then refused.
func TestClaimNotifications(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		ctx := context.Background()
		s, clock, path := openDecidingStore(t)
		other, err := openRef(ctx, path, Options{Now: clock.Now, MasterKey: testMasterKey()})
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		agent, _ := mustCreateAgent(t, s, "bot")
		conn, _ := mustCreateConnection(t, s, "web", EnvDev)
		mustCreateChannel(t, s, NewNotifyChannel{Name: "ops", URL: notifyURL, OnPending: true})
		const n = 30
		for i := range n {
			askApproval(t, s, agent, conn, "touch /x"+string(rune('a'+i)), 1)
		}

		// Two stores claim at once, many times: every row goes to exactly one.
		var mu sync.Mutex
		seen := map[string]string{}
		var wg sync.WaitGroup
		for i, st := range []*Store{s, other, s, other} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				claim := "claim-" + string(rune('a'+i))
				for range 10 {
					got, err := st.ClaimNotifications(ctx, claim, time.Minute, 3)
					if err != nil {
						t.Errorf("claim: %v", err)
						return
					}
					mu.Lock()
					for _, nt := range got {
						if prev, ok := seen[nt.ID]; ok {
							t.Errorf("%s claimed by %s and %s", nt.ID, prev, claim)
						}
						seen[nt.ID] = claim
						if nt.Claim != claim || nt.State != NotificationSending || nt.Attempts != 1 {
							t.Errorf("claimed row = claim %s, state %s, attempts %d; want %s, sending, 1", nt.Claim, nt.State, nt.Attempts, claim)
						}
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if len(seen) != n {
			t.Fatalf("claimed %d rows; want all %d", len(seen), n)
		}
		if got, _ := s.ClaimNotifications(ctx, "late", time.Minute, 100); len(got) != 0 {
			t.Errorf("a claim while all are leased got %d rows; want none", len(got))
		}

		// Outcomes, with the claim that holds the row.
		ns, err := s.ListNotifications(ctx, 100)
		if err != nil {
			t.Fatal(err)
		}
		first, second, third := ns[0], ns[1], ns[2]
		if ok, err := s.FinishNotification(ctx, first, seen[first.ID], NotifyOutcome{State: NotificationDelivered, Status: 200}); !ok || err != nil {
			t.Fatalf("finish delivered: %v, %v", ok, err)
		}
		if ok, _ := s.FinishNotification(ctx, second, "not-the-claim", NotifyOutcome{State: NotificationDelivered}); ok {
			t.Error("finish with another claim succeeded; want refused")
		}
		retryAt := clock.Now().Add(5 * time.Second)
		if ok, err := s.FinishNotification(ctx, second, seen[second.ID], NotifyOutcome{State: NotificationQueued,
			RetryAt: retryAt, Status: 503, Error: "HTTP 503"}); !ok || err != nil {
			t.Fatalf("finish retry: %v, %v", ok, err)
		}
		ch, _ := s.NotifyChannel(ctx, "ops")
		if ch.LastDeliveryAt.IsZero() || ch.LastFailureAt.IsZero() || ch.LastError != "HTTP 503" || ch.Queued != n-1 {
			t.Errorf("channel = delivered %v, failed %v, error %q, queued %d; want both times, HTTP 503, %d queued",
				ch.LastDeliveryAt, ch.LastFailureAt, ch.LastError, ch.Queued, n-1)
		}
		if due, ok, _ := s.NextNotificationDue(ctx); !ok || !due.Equal(retryAt) {
			t.Errorf("next due = %v, %v; want the retry at %v", due, ok, retryAt)
		}
		clock.Advance(5 * time.Second)
		got, _ := s.ClaimNotifications(ctx, "retry", time.Minute, 100)
		if len(got) != 1 || got[0].ID != second.ID || got[0].Attempts != 2 {
			t.Fatalf("claim at the retry time = %d rows; want %s with attempt 2", len(got), second.ID)
		}

		// The leases run out: the rest are claimable again, and the first
		// claimant's outcome no longer counts.
		clock.Advance(time.Minute)
		again, _ := other.ClaimNotifications(ctx, "second-life", time.Minute, 100)
		if len(again) != n-1 {
			t.Errorf("after the leases ran out: claimed %d; want %d", len(again), n-1)
		}
		if ok, _ := s.FinishNotification(ctx, third, seen[third.ID], NotifyOutcome{State: NotificationDelivered}); ok {
			t.Error("a finish after the lease ran out and another claimed the row succeeded; want refused")
		}
	})
}

func TestExpireAndPruneNotifications(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		ctx := context.Background()
		s, clock, _ := openDecidingStore(t)
		agent, _ := mustCreateAgent(t, s, "bot")
		conn, _ := mustCreateConnection(t, s, "web", EnvDev)
		mustCreateChannel(t, s, NewNotifyChannel{Name: "ops", URL: notifyURL, OnPending: true})
		a := askApproval(t, s, agent, conn, "touch /x", 1)
		got, _ := s.ClaimNotifications(ctx, "c1", time.Second, 10)
		if len(got) != 1 {
			t.Fatalf("claimed %d; want 1", len(got))
		}
		if _, err := s.FinishNotification(ctx, got[0], "c1", NotifyOutcome{State: NotificationQueued,
			RetryAt: clock.Now().Add(time.Second), Status: 500, Error: "HTTP 500"}); err != nil {
			t.Fatal(err)
		}
		if exp, _ := s.ExpireNotifications(ctx); len(exp) != 0 {
			t.Errorf("expired %d before the request's expiry; want none", len(exp))
		}
		clock.Advance(2 * time.Minute)
		if got, _ := s.ClaimNotifications(ctx, "c2", time.Second, 10); len(got) != 0 {
			t.Errorf("claimed %d after the request expired; want none", len(got))
		}
		exp, err := s.ExpireNotifications(ctx)
		if err != nil || len(exp) != 1 || exp[0].ApprovalID != a.ID || exp[0].State != NotificationFailed ||
			!strings.Contains(exp[0].LastError, "expired") || !strings.Contains(exp[0].LastError, "HTTP 500") {
			t.Fatalf("ExpireNotifications = %+v, %v; want the row failed with why and the last error", exp, err)
		}
		if ch, _ := s.NotifyChannel(ctx, "ops"); ch.Queued != 0 || !strings.Contains(ch.LastError, "expired") {
			t.Errorf("channel after expiry: queued %d, error %q; want 0 and the expiry", ch.Queued, ch.LastError)
		}
		if n, err := s.PruneNotifications(ctx, clock.Now()); err != nil || n != 0 {
			t.Errorf("prune before now: %d, %v; want 0 (the row changed now)", n, err)
		}
		clock.Advance(time.Hour)
		if n, err := s.PruneNotifications(ctx, clock.Now()); err != nil || n != 1 {
			t.Errorf("prune after an hour: %d, %v; want 1", n, err)
		}
	})
}
