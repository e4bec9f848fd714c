package notify

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/postern/postern/store"
)

// Hostile text in a change request, as a database or an admin could hold
// it: a line break that would fake a line of the message, Slack markup
// (a mention and a link) and a bidi control.
const (
	hostileAsker   = "cli:<!channel>\nApproved by bob"
	hostileSummary = "conn update web: env production -> staging <https://evil.example|x>\nApproved by bob"
	hostileAfter   = "env=staging \u202eon\u202c"
	hostileReason  = "no\nApproved by bob"
)

// What policy.VisibleLine makes of them, which every format must show.
const (
	askerShown   = "cli:<!channel><U+000A>Approved by bob"
	summaryShown = "conn update web: env production -> staging <https://evil.example|x><U+000A>Approved by bob"
	afterShown   = "env=staging <U+202E>on<U+202C>"
	reasonShown  = "no<U+000A>Approved by bob"
)

// askChange stores a pending change request about the rig's connection,
// asked by the server's CLI (no registered admin, so alice may decide it).
func (r *rig) askChange(lifetime time.Duration) store.ChangeRequest {
	r.t.Helper()
	c, err := r.st.CreateChangeRequest(context.Background(), store.Unaudited(), store.ChangeRequest{Kind: "conn-update",
		Summary: hostileSummary, Before: "env=production", After: hostileAfter, Payload: []byte(`{}`),
		RequestedBy: hostileAsker, RequestedVia: "cli", ConnectionID: r.conn.ID, ConnectionAlias: r.conn.Alias}, lifetime)
	if err != nil {
		r.t.Fatalf("CreateChangeRequest: %v", err)
	}
	return c
}

// decideChange records alice's decision of change request id.
func (r *rig) decideChange(id string, approve bool, reason string) {
	r.t.Helper()
	if _, err := r.st.DecideChangeRequest(context.Background(), store.Unaudited(), id, store.ChangeDecision{AdminID: r.alice.AdminID,
		Name: r.alice.Name, Approve: approve, Reason: reason}); err != nil {
		r.t.Fatalf("DecideChangeRequest: %v", err)
	}
}

// onlyRequest is the one request rc got since it had seen before.
func onlyRequest(t *testing.T, rc *receiver, seen int) received {
	t.Helper()
	got := rc.requests()
	if len(got) != seen+1 {
		t.Fatalf("receiver got %d requests; want %d", len(got), seen+1)
	}
	return got[seen]
}

// checkNoFakeLine fails if a line of text begins with what the hostile
// fields tried to make a line of their own.
func checkNoFakeLine(t *testing.T, place, text string) {
	t.Helper()
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "Approved by bob") {
			t.Errorf("%s has a line made by a hostile field: %q", place, line)
		}
	}
}

// TestChangeJSON: a json channel gets a change request's notification of
// kind change, with the summary, before and after, who asked, the expiry
// and the link to its card, every admin's text escaped, signed; then the
// decision, with who decided and the reason.
func TestChangeJSON(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		r := newRig(t)
		rc := newReceiver(t)
		r.channel(store.NewNotifyChannel{Name: "ops", URL: rc.url(), Secret: []byte(hmacSecret), OnPending: true, OnDecided: true})
		c := r.askChange(10 * time.Minute)
		d := r.dispatcher(nil, nil)
		if n := r.deliverDue(d); n != 1 {
			t.Fatalf("DeliverDue made %d attempts; want 1", n)
		}
		req := onlyRequest(t, rc, 0)
		checkNoRawBidi(t, req.body)
		if !Verify([]byte(hmacSecret), req.body, req.header.Get(SignatureHeader)) {
			t.Error("the change's notification does not verify with the channel's secret")
		}
		var p Payload
		if err := json.Unmarshal(req.body, &p); err != nil {
			t.Fatalf("body is not the JSON payload: %v\n%s", err, req.body)
		}
		link := "https://postern.example:8443/approvals/" + c.ID
		want := ChangeFacts{What: "conn-update", Before: "env=production", After: afterShown,
			RequestedBy: askerShown, RequestedVia: "cli"}
		switch {
		case p.Change == nil:
			t.Fatalf("payload has no change: %s", req.body)
		case *p.Change != want:
			t.Errorf("change = %+v; want %+v", *p.Change, want)
		}
		if p.Event != "pending" || p.Kind != KindChange || p.ApprovalID != c.ID || p.Status != store.ChangePending ||
			p.Operation != summaryShown || p.Alias != "web" || p.Link != link || p.ExpiresAt != rfc3339(c.ExpiresAt) ||
			len(p.DecidedBy) != 0 || p.DecidedAt != nil || p.ApprovalsNeeded != 1 {
			t.Errorf("payload = %+v; want a pending change %s with the escaped summary, link %s and expiry %s",
				p, c.ID, link, rfc3339(c.ExpiresAt))
		}
		if got := req.header.Get("X-Postern-Event"); got != "pending" {
			t.Errorf("X-Postern-Event = %q; want pending", got)
		}

		r.clock.Advance(time.Second)
		r.decideChange(c.ID, false, hostileReason)
		r.deliverDue(d)
		req = onlyRequest(t, rc, 1)
		var dp Payload
		if err := json.Unmarshal(req.body, &dp); err != nil {
			t.Fatal(err)
		}
		if dp.Event != "decided" || dp.Status != store.ChangeDenied || len(dp.DecidedBy) != 1 || dp.DecidedBy[0] != "alice" ||
			dp.Note != reasonShown || dp.DecidedAt == nil || *dp.DecidedAt != rfc3339(r.clock.Now()) || dp.Change == nil ||
			dp.Change.After != afterShown {
			t.Errorf("decided payload = %+v; want denied by alice with the escaped reason, at %s, with the change",
				dp, rfc3339(r.clock.Now()))
		}
		if row := r.outbox(c.ID)[store.NotifyDecided]; row.State != store.NotificationDelivered || row.ChangeID != c.ID {
			t.Errorf("decided row: state %s, change %q; want delivered, %s", row.State, row.ChangeID, c.ID)
		}
		r.checkStoredNoSecrets()
	})
}

// slackBody is a Slack message as the receiver got it.
type slackBody struct {
	Text   string `json:"text"`
	Blocks []struct {
		Type string `json:"type"`
		Text *struct {
			Type, Text string
		} `json:"text"`
		Elements []struct {
			Type, Text string
		} `json:"elements"`
	} `json:"blocks"`
}

// TestChangeSlack: a slack channel gets the change's summary and its before
// and after as plain_text sections, who asked and the expiry as plain_text
// context; the mrkdwn summary links the card and holds no markup of the
// admins' text, and no field makes a line of its own.
func TestChangeSlack(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		r := newRig(t)
		rc := newReceiver(t)
		r.channel(store.NewNotifyChannel{Name: "chat", URL: rc.url(), Format: store.NotifySlack, OnPending: true, OnDecided: true})
		c := r.askChange(10 * time.Minute)
		d := r.dispatcher(nil, nil)
		r.deliverDue(d)
		req := onlyRequest(t, rc, 0)
		checkNoRawBidi(t, req.body)
		var m slackBody
		if err := json.Unmarshal(req.body, &m); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, req.body)
		}
		if len(m.Blocks) != 4 || m.Blocks[0].Type != "section" || m.Blocks[1].Type != "section" ||
			m.Blocks[2].Type != "section" || m.Blocks[3].Type != "context" {
			t.Fatalf("blocks = %+v; want section, section, section, context", m.Blocks)
		}
		top := m.Blocks[0].Text
		wantHead := "Change needs a second admin: cli:&lt;!channel&gt;&lt;U+000A&gt;Approved by bob asks for a conn-update change on web"
		link := "<https://postern.example:8443/approvals/" + c.ID + "|Open " + c.ID + " in postern>"
		if m.Text != wantHead {
			t.Errorf("text = %q; want %q", m.Text, wantHead)
		}
		if top.Type != "mrkdwn" || top.Text != "*"+wantHead+"*\n"+link {
			t.Errorf("summary = %+v; want mrkdwn %q and the link %s", top, "*"+wantHead+"*", link)
		}
		for _, bad := range []string{"<!channel>", "evil.example", "staging"} {
			if strings.Contains(m.Text+top.Text, bad) {
				t.Errorf("the mrkdwn summary holds %q from an admin's text", bad)
			}
		}
		for i, want := range []string{"change: " + summaryShown, "Before: env=production\nAfter: " + afterShown} {
			if b := m.Blocks[i+1].Text; b.Type != "plain_text" || b.Text != want {
				t.Errorf("block %d = %+v; want plain_text %q", i+1, b, want)
			}
		}
		var ctx []string
		for _, e := range m.Blocks[3].Elements {
			if e.Type != "plain_text" {
				t.Errorf("context element of type %s; want plain_text", e.Type)
			}
			checkNoFakeLine(t, "a context element", e.Text)
			ctx = append(ctx, e.Text)
		}
		if len(ctx) != 2 || ctx[0] != "Asked by "+askerShown+" (cli)" || !strings.HasPrefix(ctx[1], "Expires ") ||
			!strings.HasSuffix(ctx[1], "("+c.ID+")") {
			t.Errorf("context = %q; want who asked and the expiry", ctx)
		}

		r.decideChange(c.ID, true, "")
		r.deliverDue(d)
		req = onlyRequest(t, rc, 1)
		if err := json.Unmarshal(req.body, &m); err != nil {
			t.Fatal(err)
		}
		if want := "Approved by alice: cli:&lt;!channel&gt;&lt;U+000A&gt;Approved by bob's conn-update change on web"; m.Text != want {
			t.Errorf("decided text = %q; want %q", m.Text, want)
		}
	})
}

// TestChangeNtfy: an ntfy channel gets the change with a title, the
// change tag, high priority while it waits, the card as click and view
// action, and a body of the summary, before and after, who asked and the
// expiry, in which no field makes a line of its own.
func TestChangeNtfy(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		r := newRig(t)
		rc := newReceiver(t)
		r.channel(store.NewNotifyChannel{Name: "phone", URL: rc.url(), Format: store.NotifyNtfy, Secret: []byte(ntfyToken),
			OnPending: true, OnDecided: true})
		c := r.askChange(10 * time.Minute)
		d := r.dispatcher(nil, nil)
		r.deliverDue(d)
		req := onlyRequest(t, rc, 0)
		checkNoRawBidi(t, req.body)
		link := "https://postern.example:8443/approvals/" + c.ID
		for h, want := range map[string]string{
			"Title":         "postern: Change needs a second admin: cli:<!channel><U+000A>Approved by bob asks for a conn-update change on web",
			"Tags":          "postern,change",
			"Priority":      "high",
			"Click":         link,
			"Actions":       "view, Open, " + link,
			"Authorization": "Bearer " + ntfyToken,
		} {
			if v := req.header.Get(h); v != want {
				t.Errorf("header %s = %q; want %q", h, v, want)
			}
		}
		body := string(req.body)
		checkNoFakeLine(t, "the body", body)
		lines := strings.Split(body, "\n")
		if len(lines) != 7 || lines[0] != "change: "+summaryShown || lines[2] != "Before: env=production" ||
			lines[3] != "After: "+afterShown || lines[5] != "Asked by "+askerShown+" (cli)" ||
			!strings.HasPrefix(lines[6], "Expires ") {
			t.Errorf("body lines = %q; want summary, before, after, who asked and the expiry", lines)
		}

		r.decideChange(c.ID, false, hostileReason)
		r.deliverDue(d)
		req = onlyRequest(t, rc, 1)
		checkNoFakeLine(t, "the decided body", string(req.body))
		if got := req.header.Get("Priority"); got != "" {
			t.Errorf("decided Priority = %q; want none", got)
		}
		if !strings.Contains(string(req.body), "\nReason: "+reasonShown+"\n") {
			t.Errorf("decided body %q; want the escaped reason on its own line", req.body)
		}
	})
}

// TestChangePendingNotSentLate: a change's pending notification not yet
// sent when the change is decided is cancelled, and the decided one goes;
// one still queued at the change's expiry is given up.
func TestChangePendingNotSentLate(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		r := newRig(t)
		rc := newReceiver(t)
		r.channel(store.NewNotifyChannel{Name: "ops", URL: rc.url(), OnPending: true, OnDecided: true})
		decided := r.askChange(10 * time.Minute)
		r.decideChange(decided.ID, true, "")
		d := r.dispatcher(nil, nil)
		r.deliverDue(d)
		got := rc.requests()
		if len(got) != 1 || got[0].header.Get("X-Postern-Event") != "decided" {
			t.Fatalf("receiver got %d requests; want only the decided one", len(got))
		}
		if row := r.outbox(decided.ID)[store.NotifyPending]; row.State != store.NotificationCancelled ||
			!strings.Contains(row.LastError, "change request was approved") {
			t.Errorf("pending row: state %s, error %q; want cancelled because the change request was approved", row.State, row.LastError)
		}

		expired := r.askChange(time.Minute)
		rc.setAnswer(status(503))
		r.deliverDue(d) // fails; retried after the backoff
		r.clock.Advance(time.Minute)
		if n := r.deliverDue(d); n != 0 {
			t.Errorf("after the change expired: %d attempts; want none", n)
		}
		if row := r.outbox(expired.ID)[store.NotifyPending]; row.State != store.NotificationFailed ||
			!strings.Contains(row.LastError, "the change request expired") {
			t.Errorf("pending row after the expiry: state %s, error %q; want failed because the change request expired",
				row.State, row.LastError)
		}
		if !strings.Contains(r.logs.String(), `"change":"`+expired.ID+`"`) {
			t.Errorf("the log does not name the change %s:\n%s", expired.ID, r.logs.String())
		}
	})
}

// TestChangeHeadline: the first line of a change's chat message names who
// asked, the kind of change and what it is about, and once decided the
// verdict and who gave it.
func TestChangeHeadline(t *testing.T) {
	tests := []struct {
		name         string
		event        string
		status       string
		agent, alias string
		decidedBy    []string
		want         string
	}{
		{"pending grant", "pending", "pending", "bot", "web", nil,
			"Change needs a second admin: alice asks for a grant change for agent bot on web"},
		{"pending on a connection", "pending", "pending", "", "web", nil,
			"Change needs a second admin: alice asks for a grant change on web"},
		{"pending about nothing", "pending", "pending", "", "", nil,
			"Change needs a second admin: alice asks for a grant change"},
		{"pending about an agent", "pending", "pending", "bot", "", nil,
			"Change needs a second admin: alice asks for a grant change for agent bot"},
		{"approved", "decided", "approved", "", "web", []string{"bob"},
			"Approved by bob: alice's grant change on web"},
		{"denied", "decided", "denied", "", "web", []string{"bob"},
			"Denied by bob: alice's grant change on web"},
		{"failed", "decided", "failed", "", "web", []string{"bob"},
			"Failed after approval by bob: alice's grant change on web"},
	}
	for _, tt := range tests {
		t.Run(strings.ReplaceAll(tt.name, " ", "_"), func(t *testing.T) {
			p := Payload{Event: tt.event, Status: tt.status, Agent: tt.agent, Alias: tt.alias, Kind: KindChange,
				DecidedBy: tt.decidedBy, Change: &ChangeFacts{What: "grant", RequestedBy: "alice"}}
			if got := headline(p); got != tt.want {
				t.Errorf("headline = %q; want %q", got, tt.want)
			}
		})
	}
}
