package notify

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/postern/postern/internal/testwait"
	"github.com/postern/postern/store"
)

// TestDeliverSignedJSON: a request is delivered at once to a json channel,
// signed over the exact body; the signature verifies with the channel's
// secret and not with another; the row and the channel record the
// delivery.
func TestDeliverSignedJSON(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		r := newRig(t)
		rc := newReceiver(t)
		r.channel(store.NewNotifyChannel{Name: "ops", URL: rc.url(), Secret: []byte(hmacSecret), OnPending: true, OnDecided: true})
		a := r.ask("rm -rf /srv/app", 2*time.Minute)
		d := r.dispatcher(nil, nil)

		if n := r.deliverDue(d); n != 1 {
			t.Fatalf("DeliverDue made %d attempts; want 1", n)
		}
		got := rc.requests()
		if len(got) != 1 {
			t.Fatalf("receiver got %d requests; want 1", len(got))
		}
		req := got[0]
		if req.path != "/hook/"+urlToken+"?key="+queryToken {
			t.Errorf("request went to %q; want the channel's URL", req.path)
		}
		sig := req.header.Get(SignatureHeader)
		if !Verify([]byte(hmacSecret), req.body, sig) {
			t.Errorf("%s %q does not verify with the channel's secret", SignatureHeader, sig)
		}
		if Verify([]byte("another secret"), req.body, sig) {
			t.Error("the signature verifies with another secret")
		}
		if Verify([]byte(hmacSecret), append(req.body, ' '), sig) {
			t.Error("the signature verifies over a changed body")
		}
		var p Payload
		if err := json.Unmarshal(req.body, &p); err != nil {
			t.Fatalf("body is not the JSON payload: %v", err)
		}
		want := Payload{Event: "pending", Delivery: r.outbox(a.ID)[store.NotifyPending].ID, ApprovalID: a.ID,
			Status: "pending", Agent: "bot", Alias: "web", Env: "production", Class: "destructive", Kind: "exec",
			Operation: "rm -rf /srv/app", Reasons: "rm deletes files", ApprovalsNeeded: 1,
			Link: "https://postern.example:8443/approvals/" + a.ID, ExpiresAt: rfc3339(a.ExpiresAt)}
		if p.Event != want.Event || p.Delivery != want.Delivery || p.ApprovalID != want.ApprovalID || p.Status != want.Status ||
			p.Agent != want.Agent || p.Alias != want.Alias || p.Env != want.Env || p.Class != want.Class || p.Kind != want.Kind ||
			p.Operation != want.Operation || p.Reasons != want.Reasons || p.ApprovalsNeeded != want.ApprovalsNeeded ||
			p.Link != want.Link || p.ExpiresAt != want.ExpiresAt || len(p.DecidedBy) != 0 || p.DecidedAt != nil {
			t.Errorf("payload:\n got %+v\nwant %+v", p, want)
		}
		for h, v := range map[string]string{"Content-Type": "application/json", "X-Postern-Event": "pending",
			"X-Postern-Delivery": want.Delivery, "User-Agent": userAgent} {
			if got := req.header.Get(h); got != v {
				t.Errorf("header %s = %q; want %q", h, got, v)
			}
		}
		row := r.outbox(a.ID)[store.NotifyPending]
		if row.State != store.NotificationDelivered || row.Attempts != 1 || row.LastStatus != 200 {
			t.Errorf("outbox row: state %s, attempts %d, status %d; want delivered, 1, 200", row.State, row.Attempts, row.LastStatus)
		}
		ch, _ := r.st.NotifyChannel(context.Background(), "ops")
		if ch.LastDeliveryAt.IsZero() || !ch.LastFailureAt.IsZero() || ch.Queued != 0 {
			t.Errorf("channel: delivered %v, failed %v, queued %d; want a delivery, no failure, none queued",
				ch.LastDeliveryAt, ch.LastFailureAt, ch.Queued)
		}
		if n := r.deliverDue(d); n != 0 || len(rc.requests()) != 1 {
			t.Errorf("a second round made %d attempts (receiver has %d); want none", n, len(rc.requests()))
		}

		// The decision is announced too, with who decided.
		if _, _, err := r.decide(a.ID, false, "not now"); err != nil {
			t.Fatal(err)
		}
		r.deliverDue(d)
		got = rc.requests()
		if len(got) != 2 {
			t.Fatalf("receiver got %d requests after the decision; want 2", len(got))
		}
		var dp Payload
		if err := json.Unmarshal(got[1].body, &dp); err != nil {
			t.Fatal(err)
		}
		if dp.Event != "decided" || dp.Status != "denied" || len(dp.DecidedBy) != 1 || dp.DecidedBy[0] != "alice" ||
			dp.Note != "not now" || dp.DecidedAt == nil || !Verify([]byte(hmacSecret), got[1].body, got[1].header.Get(SignatureHeader)) {
			t.Errorf("decided payload = %+v; want event decided, status denied by alice with the note, signed", dp)
		}
		r.checkStoredNoSecrets()
	})
}

// TestRetryAfter5xx: a 503 is retried after the backoff, not before, and
// the notification is delivered once.
func TestRetryAfter5xx(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		r := newRig(t)
		rc := newReceiver(t)
		rc.setAnswer(func(n int, w http.ResponseWriter, _ *http.Request) {
			if n == 1 {
				w.WriteHeader(http.StatusServiceUnavailable)
			}
		})
		r.channel(store.NewNotifyChannel{Name: "ops", URL: rc.url(), OnPending: true})
		a := r.ask("rm -rf /srv/app", 2*time.Minute)
		d := r.dispatcher(nil, nil)

		r.deliverDue(d)
		row := r.outbox(a.ID)[store.NotifyPending]
		if row.State != store.NotificationQueued || row.LastStatus != 503 || !row.DueAt.Equal(r.clock.Now().Add(time.Second)) ||
			!strings.Contains(row.LastError, "503") {
			t.Fatalf("after a 503: state %s, status %d, due %v, error %q; want queued, 503, due in 1s",
				row.State, row.LastStatus, row.DueAt, row.LastError)
		}
		if ch, _ := r.st.NotifyChannel(context.Background(), "ops"); ch.LastFailureAt.IsZero() || ch.Queued != 1 {
			t.Errorf("channel after a 503: failed at %v, queued %d; want a failure and one queued", ch.LastFailureAt, ch.Queued)
		}
		if n := r.deliverDue(d); n != 0 {
			t.Errorf("a round before the backoff ended made %d attempts; want none", n)
		}
		r.clock.Advance(time.Second)
		if n := r.deliverDue(d); n != 1 {
			t.Fatalf("a round after the backoff made %d attempts; want 1", n)
		}
		got := rc.requests()
		if len(got) != 2 {
			t.Fatalf("receiver got %d requests; want 2 (the 503 and the retry)", len(got))
		}
		if got[0].header.Get("X-Postern-Delivery") != got[1].header.Get("X-Postern-Delivery") {
			t.Error("the retry has another delivery id; want the same, for receivers to deduplicate")
		}
		row = r.outbox(a.ID)[store.NotifyPending]
		if row.State != store.NotificationDelivered || row.Attempts != 2 {
			t.Errorf("after the retry: state %s, attempts %d; want delivered after 2", row.State, row.Attempts)
		}
		r.clock.Advance(time.Hour)
		if n := r.deliverDue(d); n != 0 || len(rc.requests()) != 2 {
			t.Errorf("later rounds sent again (%d attempts); want the delivered notification left alone", n)
		}
	})
}

// TestTimeoutIsBoundedAndRetried: a receiver that never answers costs one
// timeout, and the notification is tried again later.
func TestTimeoutIsBoundedAndRetried(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		r := newRig(t)
		rc := newReceiver(t)
		rc.setAnswer(func(n int, w http.ResponseWriter, req *http.Request) {
			if n == 1 {
				<-req.Context().Done() // hang until the client gives up
			}
		})
		r.channel(store.NewNotifyChannel{Name: "ops", URL: rc.url(), OnPending: true})
		a := r.ask("rm -rf /srv/app", 2*time.Minute)
		d := r.dispatcher(nil, func(c *Config) { c.Timeout = 200 * time.Millisecond })

		r.deliverDue(d) // returns after the attempt's timeout
		row := r.outbox(a.ID)[store.NotifyPending]
		if row.State != store.NotificationQueued || row.LastStatus != 0 || row.LastError != "no answer within 200ms" {
			t.Fatalf("after a timeout: state %s, status %d, error %q; want queued, no status, %q",
				row.State, row.LastStatus, row.LastError, "no answer within 200ms")
		}
		r.clock.Advance(time.Second)
		r.deliverDue(d)
		if row := r.outbox(a.ID)[store.NotifyPending]; row.State != store.NotificationDelivered || row.Attempts != 2 {
			t.Errorf("after the retry: state %s, attempts %d; want delivered after 2", row.State, row.Attempts)
		}
		r.checkStoredNoSecrets()
	})
}

// TestExpiryStopsRetries: a receiver that always fails is tried with
// growing backoff until the request's expiry, and then never again.
func TestExpiryStopsRetries(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		r := newRig(t)
		rc := newReceiver(t)
		rc.setAnswer(status(http.StatusInternalServerError))
		r.channel(store.NewNotifyChannel{Name: "ops", URL: rc.url(), OnPending: true})
		a := r.ask("rm -rf /srv/app", 10*time.Second)
		d := r.dispatcher(nil, nil)

		// Attempts at 0 s, then after 1, 2 and 4 s of backoff: 1 s, 3 s, 7 s.
		// The next would come 8 s later, after the expiry at 10 s.
		start := r.clock.Now()
		var at []time.Duration
		for range 20 {
			if n := r.deliverDue(d); n == 1 {
				at = append(at, r.clock.Now().Sub(start))
			}
			r.clock.Advance(500 * time.Millisecond)
		}
		want := []time.Duration{0, time.Second, 3 * time.Second, 7 * time.Second}
		if len(at) != len(want) {
			t.Fatalf("attempts at %v; want at %v", at, want)
		}
		for i := range want {
			if at[i] != want[i] {
				t.Errorf("attempt %d at %v; want %v", i+1, at[i], want[i])
			}
		}
		row := r.outbox(a.ID)[store.NotifyPending]
		if row.State != store.NotificationFailed || !strings.Contains(row.LastError, "gave up after 4 attempts") ||
			!strings.Contains(row.LastError, "expires") {
			t.Errorf("after the last attempt: state %s, error %q; want failed, giving up before the expiry", row.State, row.LastError)
		}
		r.clock.Advance(time.Hour)
		r.deliverDue(d)
		if got := len(rc.requests()); got != 4 {
			t.Errorf("receiver got %d requests; want 4", got)
		}
		if !strings.Contains(r.logs.String(), "notification not delivered") {
			t.Error("the log does not say the notification was not delivered")
		}
	})
}

// TestExpiryWhileQueued: a notification still waiting for its retry when
// the request expires is given up without another attempt.
func TestExpiryWhileQueued(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		r := newRig(t)
		rc := newReceiver(t)
		rc.setAnswer(status(http.StatusBadGateway))
		r.channel(store.NewNotifyChannel{Name: "ops", URL: rc.url(), OnPending: true})
		a := r.ask("rm -rf /srv/app", 10*time.Second)
		d := r.dispatcher(nil, func(c *Config) { c.BackoffMin = 5 * time.Second })
		r.deliverDue(d)
		r.clock.Advance(20 * time.Second) // the dispatcher was away
		if n := r.deliverDue(d); n != 0 {
			t.Errorf("a round after the expiry made %d attempts; want none", n)
		}
		row := r.outbox(a.ID)[store.NotifyPending]
		if row.State != store.NotificationFailed || !strings.Contains(row.LastError, "expired") || !strings.Contains(row.LastError, "502") {
			t.Errorf("state %s, error %q; want failed, saying the request expired and the last error", row.State, row.LastError)
		}
		if len(rc.requests()) != 1 {
			t.Errorf("receiver got %d requests; want 1", len(rc.requests()))
		}
	})
}

// TestRefusalsAreFinal: a 4xx and a redirect are not retried, and the
// redirect is not followed.
func TestRefusalsAreFinal(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		for _, tt := range []struct {
			name   string
			answer func(int, http.ResponseWriter, *http.Request)
			want   string
		}{
			{"404", status(http.StatusNotFound), "HTTP 404 Not Found: the receiver refused"},
			{"redirect", func(_ int, w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, "/elsewhere", http.StatusFound)
			}, "postern follows no redirect"},
		} {
			t.Run(tt.name, func(t *testing.T) {
				r := newRig(t)
				rc := newReceiver(t)
				rc.setAnswer(tt.answer)
				r.channel(store.NewNotifyChannel{Name: "ops", URL: rc.url(), OnPending: true})
				a := r.ask("rm -rf /srv/app", 2*time.Minute)
				d := r.dispatcher(nil, nil)
				r.deliverDue(d)
				r.clock.Advance(time.Minute)
				r.deliverDue(d)
				row := r.outbox(a.ID)[store.NotifyPending]
				if row.State != store.NotificationFailed || row.Attempts != 1 || !strings.Contains(row.LastError, tt.want) {
					t.Errorf("state %s after %d attempts, error %q; want failed after 1 with %q", row.State, row.Attempts, row.LastError, tt.want)
				}
				for _, rq := range rc.requests() {
					if rq.path == "/elsewhere" {
						t.Error("the redirect was followed")
					}
				}
				if got := len(rc.requests()); got != 1 {
					t.Errorf("receiver got %d requests; want 1", got)
				}
			})
		}
	})
}

// TestRetryAfterIsHonoured: a 429's Retry-After holds the retry back when
// it is longer than the backoff.
func TestRetryAfterIsHonoured(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		r := newRig(t)
		rc := newReceiver(t)
		rc.setAnswer(func(_ int, w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Retry-After", "30")
			w.WriteHeader(http.StatusTooManyRequests)
		})
		r.channel(store.NewNotifyChannel{Name: "ops", URL: rc.url(), OnPending: true})
		a := r.ask("rm -rf /srv/app", 2*time.Minute)
		r.deliverDue(r.dispatcher(nil, nil))
		if row := r.outbox(a.ID)[store.NotifyPending]; !row.DueAt.Equal(r.clock.Now().Add(30 * time.Second)) {
			t.Errorf("retry due at %v; want in 30 s, as Retry-After says", row.DueAt.Sub(r.clock.Now()))
		}
	})
}

// TestPendingNotSentAfterDecision: a pending event whose request was
// decided before the dispatcher got to it is cancelled; the decided event
// goes.
func TestPendingNotSentAfterDecision(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		r := newRig(t)
		rc := newReceiver(t)
		r.channel(store.NewNotifyChannel{Name: "ops", URL: rc.url(), OnPending: true, OnDecided: true})
		a := r.ask("rm -rf /srv/app", 2*time.Minute)
		if _, _, err := r.decide(a.ID, true, ""); err != nil {
			t.Fatal(err)
		}
		r.deliverDue(r.dispatcher(nil, nil))
		got := rc.requests()
		if len(got) != 1 || got[0].header.Get("X-Postern-Event") != "decided" {
			t.Fatalf("receiver got %d requests (first %v); want only the decided event", len(got), got)
		}
		rows := r.outbox(a.ID)
		if p := rows[store.NotifyPending]; p.State != store.NotificationCancelled || !strings.Contains(p.LastError, "approved before") {
			t.Errorf("pending row: %s, %q; want cancelled because the request was approved", p.State, p.LastError)
		}
	})
}

// TestUnreachableReceiverErrorHasNoURL: a connection refused is retried,
// and what is recorded and logged of it holds no part of the URL.
func TestUnreachableReceiverErrorHasNoURL(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		r := newRig(t)
		rc := newReceiver(t)
		dead := rc.url()
		rc.srv.Close() // nothing listens there now
		r.channel(store.NewNotifyChannel{Name: "ops", URL: dead, Secret: []byte(hmacSecret), OnPending: true})
		a := r.ask("rm -rf /srv/app", 2*time.Minute)
		r.deliverDue(r.dispatcher(nil, nil))
		row := r.outbox(a.ID)[store.NotifyPending]
		if row.State != store.NotificationQueued || !strings.HasPrefix(row.LastError, "no answer: ") {
			t.Errorf("state %s, error %q; want queued with the cause", row.State, row.LastError)
		}
		if strings.Contains(row.LastError, "/hook/") {
			t.Errorf("error %q holds the URL's path", row.LastError)
		}
		r.checkStoredNoSecrets()
	})
}

// TestTwoDispatchersDeliverOnce: two dispatchers, each with its own
// connection to one database as two postern processes would have, deliver
// every notification exactly once.
func TestTwoDispatchersDeliverOnce(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		r := newRig(t)
		rc := newReceiver(t)
		r.channel(store.NewNotifyChannel{Name: "a", URL: rc.url(), OnPending: true, OnDecided: true})
		r.channel(store.NewNotifyChannel{Name: "b", URL: rc.url(), OnPending: true})
		const requests = 15
		var ids []string
		for i := range requests {
			a := r.ask("rm -rf /srv/app"+strings.Repeat("x", i), 2*time.Minute)
			ids = append(ids, a.ID)
		}
		for _, id := range ids[:5] { // decided before any dispatcher runs: pending cancelled, decided sent
			if _, _, err := r.decide(id, true, ""); err != nil {
				t.Fatal(err)
			}
		}
		const want = 2*(requests-5) + 5 // pending to a and b for the undecided, decided to a for the decided
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for _, st := range []Store{r.st, r.secondStore()} {
			d := r.dispatcher(st, func(c *Config) { c.Poll = 5 * time.Millisecond; c.Workers = 3 })
			wg.Add(1)
			go func() {
				defer wg.Done()
				d.Run(ctx)
			}()
		}
		deadline := testwait.End(t)
		for i := 0; i < want; i++ {
			select {
			case <-rc.arrived:
			case <-deadline:
				cancel()
				wg.Wait()
				t.Fatalf("%d of %d notifications arrived by the test's deadline", i, want)
			}
		}
		cancel()
		wg.Wait()
		// What the two left (pending events of decided requests, which are
		// cancelled without a request, may not all have been claimed yet) is
		// finished by one more round; it must send nothing new.
		r.deliverDue(r.dispatcher(nil, nil))
		seen := map[string]int{}
		for _, rq := range rc.requests() {
			seen[rq.header.Get("X-Postern-Delivery")]++
		}
		if len(rc.requests()) != want || len(seen) != want {
			t.Errorf("receiver got %d requests with %d distinct deliveries; want %d of each", len(rc.requests()), len(seen), want)
		}
		for id, n := range seen {
			if n != 1 {
				t.Errorf("delivery %s arrived %d times; want once", id, n)
			}
		}
		ns, _ := r.st.ListNotifications(context.Background(), 1000)
		for _, n := range ns {
			if n.State == store.NotificationQueued || n.State == store.NotificationSending {
				t.Errorf("notification %s is still %s", n.ID, n.State)
			}
		}
	})
}

// TestRunGivesBackAtShutdown: stopping Run during an attempt that gets no
// answer ends it after the stop grace, and the notification goes back to
// the outbox, due at once, for the next dispatcher, without marking the
// channel failed.
func TestRunGivesBackAtShutdown(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		r := newRig(t)
		rc := newReceiver(t)
		rc.setAnswer(func(_ int, _ http.ResponseWriter, req *http.Request) { <-req.Context().Done() })
		r.channel(store.NewNotifyChannel{Name: "ops", URL: rc.url(), OnPending: true})
		a := r.ask("rm -rf /srv/app", 2*time.Minute)
		d := r.dispatcher(nil, func(c *Config) {
			c.Poll, c.Timeout, c.StopGrace = 5*time.Millisecond, time.Minute, 10*time.Millisecond
		})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			d.Run(ctx)
		}()
		select {
		case <-rc.arrived:
		case <-testwait.End(t):
			t.Fatal("the notification did not arrive")
		}
		cancel()
		select {
		case <-done:
		case <-testwait.End(t):
			t.Fatal("Run did not return after its context ended")
		}
		row := r.outbox(a.ID)[store.NotifyPending]
		if row.State != store.NotificationQueued || !row.DueAt.Equal(r.clock.Now()) || row.LastError != "" {
			t.Errorf("after shutdown: state %s, due %v, error %q; want queued, due now, no error", row.State, row.DueAt, row.LastError)
		}
		if ch, _ := r.st.NotifyChannel(context.Background(), "ops"); !ch.LastFailureAt.IsZero() {
			t.Errorf("the channel is marked failed (%q) by a shutdown", ch.LastError)
		}
	})
}

// TestTestMessage: Test sends a test event at once and records the result
// on the channel; a receiver's refusal is a result, not an error.
func TestTestMessage(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		r := newRig(t)
		rc := newReceiver(t)
		r.channel(store.NewNotifyChannel{Name: "ops", URL: rc.url(), Secret: []byte(hmacSecret), OnPending: true})
		d := r.dispatcher(nil, nil)
		res, err := d.Test(context.Background(), "ops")
		if err != nil || !res.Delivered || res.Status != 200 || res.Channel.LastDeliveryAt.IsZero() {
			t.Fatalf("Test = %+v, %v; want delivered with 200 and recorded", res, err)
		}
		got := rc.requests()
		var p Payload
		if len(got) != 1 || json.Unmarshal(got[0].body, &p) != nil || p.Event != EventTest ||
			p.Link != "https://postern.example:8443/approvals" || !Verify([]byte(hmacSecret), got[0].body, got[0].header.Get(SignatureHeader)) {
			t.Errorf("test message = %s; want a signed test event linking to the approvals page", got[0].body)
		}
		rc.setAnswer(status(http.StatusForbidden))
		res, err = d.Test(context.Background(), "ops")
		if err != nil || res.Delivered || res.Status != 403 || !strings.Contains(res.Channel.LastError, "403") {
			t.Errorf("Test against a 403 = %+v, %v; want not delivered, 403, recorded", res, err)
		}
		if _, err := d.Test(context.Background(), "nosuch"); err == nil {
			t.Error("Test of an unknown channel: no error")
		}
		ns, _ := r.st.ListNotifications(context.Background(), 10)
		if len(ns) != 0 {
			t.Errorf("a test left %d outbox rows; want none", len(ns))
		}
		r.checkStoredNoSecrets()
	})
}

func TestBackoff(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		r := newRig(t)
		d := r.dispatcher(nil, func(c *Config) { c.BackoffMin, c.BackoffMax = time.Second, 20*time.Second })
		for _, tt := range []struct {
			attempts int
			want     time.Duration
		}{{1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second}, {5, 16 * time.Second}, {6, 20 * time.Second}, {100, 20 * time.Second}} {
			if got := d.Backoff(tt.attempts); got != tt.want {
				t.Errorf("Backoff(%d) = %v; want %v", tt.attempts, got, tt.want)
			}
		}
		for range 1000 {
			if j := equalJitter(8 * time.Second); j < 4*time.Second || j > 8*time.Second {
				t.Fatalf("equalJitter(8s) = %v; want within [4s, 8s]", j)
			}
		}
		if _, err := New(Config{Store: r.st, BackoffMin: time.Minute, BackoffMax: time.Second}); err == nil {
			t.Error("New accepted BackoffMax below BackoffMin")
		}
	})
}

// TestSignKnownAnswer checks Sign against RFC 4231's test case 2, which
// fixes HMAC-SHA256 independently of this code.
func TestSignKnownAnswer(t *testing.T) {
	const want = "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
	if got := Sign([]byte("Jefe"), []byte("what do ya want for nothing?")); got != want {
		t.Errorf("Sign = %s; want %s", got, want)
	}
	for _, bad := range []string{"", "sha256=", "sha1=5bdcc146", "sha256=zz", strings.TrimPrefix(want, "sha256=")} {
		if Verify([]byte("Jefe"), []byte("what do ya want for nothing?"), bad) {
			t.Errorf("Verify accepted %q", bad)
		}
	}
}
