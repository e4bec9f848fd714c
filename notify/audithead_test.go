package notify

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/postern/postern/store"
)

// TestAuditHeadToChannels: a published head goes, signed like every
// event, to the channels that subscribe to audit.head and to no other; the
// same head queued again (another replica publishing it) is sent once; a
// channel that subscribes to audit.head alone gets no approval events.
func TestAuditHeadToChannels(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		ctx := context.Background()
		r := newRig(t)
		rc := newReceiver(t)
		r.channel(store.NewNotifyChannel{Name: "keeper", URL: rc.url(), Secret: []byte(hmacSecret), OnAuditHead: true})
		r.channel(store.NewNotifyChannel{Name: "ops", URL: rc.url() + "&ops", OnPending: true, OnDecided: true})
		chat := rc.url() + "&chat"
		r.channel(store.NewNotifyChannel{Name: "chat", Format: store.NotifySlack, URL: chat, OnDecided: true, OnAuditHead: true})

		hash := strings.Repeat("ab", 32)
		head := "41:" + hash
		giveUp := r.clock.Now().Add(15 * time.Minute)
		if n, err := r.st.QueueAuditHead(ctx, head, giveUp); err != nil || n != 2 {
			t.Fatalf("QueueAuditHead = %d, %v; want 2 rows (keeper and chat)", n, err)
		}
		if n, err := r.secondStore().QueueAuditHead(ctx, head, giveUp); err != nil || n != 0 {
			t.Fatalf("QueueAuditHead of the same head from another store = %d, %v; want 0 rows", n, err)
		}
		list, err := r.st.ListNotifications(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range list {
			if n.Event != store.NotifyAuditHead || n.Head != head || n.ApprovalID != "" || n.ChangeID != "" || !n.GiveUpAt.Equal(giveUp) {
				t.Errorf("outbox row %+v; want an audit.head row about %s only, giving up at %v", n, head, giveUp)
			}
		}

		d := r.dispatcher(nil, nil)
		if n := r.deliverDue(d); n != 2 {
			t.Fatalf("DeliverDue made %d attempts; want 2", n)
		}
		var sawJSON, sawSlack bool
		for _, req := range rc.requests() {
			switch {
			case strings.HasSuffix(req.path, "&chat"):
				sawSlack = true
				if !strings.Contains(string(req.body), "postern audit head: row 41") || !strings.Contains(string(req.body), head) {
					t.Errorf("slack message %s; want the headline and the head", req.body)
				}
			case strings.HasSuffix(req.path, "&ops"):
				t.Errorf("channel ops (pending, decided) got %s; want no audit head", req.body)
			default:
				sawJSON = true
				if !Verify([]byte(hmacSecret), req.body, req.header.Get(SignatureHeader)) {
					t.Errorf("the head's signature %q does not verify", req.header.Get(SignatureHeader))
				}
				if got := req.header.Get("X-Postern-Event"); got != "audit.head" {
					t.Errorf("X-Postern-Event = %q; want audit.head", got)
				}
				var p Payload
				if err := json.Unmarshal(req.body, &p); err != nil {
					t.Fatal(err)
				}
				if p.Event != "audit.head" || p.AuditHead == nil || p.AuditHead.Seq != 41 || p.AuditHead.Hash != hash ||
					p.AuditHead.Head != head || p.ApprovalID != "" || p.Operation != "" {
					t.Errorf("payload %s; want event audit.head with seq 41, hash %s, head %s and no request", req.body, hash, head)
				}
			}
		}
		if !sawJSON || !sawSlack {
			t.Errorf("got json %v, slack %v; want both delivered", sawJSON, sawSlack)
		}

		// An approval request goes to ops and not to keeper, which asked
		// only for heads.
		a := r.ask("rm -rf /srv/app", 2*time.Minute)
		if got := r.outbox(a.ID); len(got) != 1 || got[store.NotifyPending].Channel != "ops" {
			t.Errorf("outbox of a request: %+v; want one pending row for ops", got)
		}
		r.checkStoredNoSecrets()
	})
}

// TestAuditHeadChannelEvents: a channel may subscribe to audit.head alone,
// and an update that leaves it subscribed to nothing is refused.
func TestAuditHeadChannelEvents(t *testing.T) {
	ctx := context.Background()
	r := newRig(t)
	rc := newReceiver(t)
	c := r.channel(store.NewNotifyChannel{Name: "keeper", URL: rc.url(), OnAuditHead: true})
	if got := c.Subscriptions().String(); got != "audit.head" {
		t.Errorf("subscriptions %q; want audit.head", got)
	}
	off := false
	if _, err := r.st.UpdateNotifyChannel(ctx, store.Unaudited(), "keeper", store.NotifyChannelChange{OnAuditHead: &off}); err == nil ||
		!strings.Contains(err.Error(), "subscribes to no event") {
		t.Errorf("update to no event: got %v; want refused, subscribes to no event", err)
	}
	on := true
	c, err := r.st.UpdateNotifyChannel(ctx, store.Unaudited(), "keeper", store.NotifyChannelChange{OnPending: &on})
	if err != nil || c.Subscriptions().String() != "pending,audit.head" {
		t.Errorf("after adding pending: got %+v, %v; want pending,audit.head", c, err)
	}
}
