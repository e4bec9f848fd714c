package notify

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
)

// bidiOp is a command whose display differs from what runs: U+202E makes
// `…/‮cte/nimda.txt` read as `…/txt.admin/etc`.
const bidiOp = "cp /tmp/ok.txt /tmp/\u202ecte/nimda.txt\u202c"

// bidiShown is bidiOp as every notification must show it.
const bidiShown = "cp /tmp/ok.txt /tmp/<U+202E>cte/nimda.txt<U+202C>"

// TestSlackMessage: a slack channel gets an incoming-webhook message with a
// text, a summary section with a link, the operation as plain text (no
// markup interpreted) and the facts; the bidi control arrives escaped.
func TestSlackMessage(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		r := newRig(t)
		rc := newReceiver(t)
		r.channel(store.NewNotifyChannel{Name: "chat", URL: rc.url(), Format: store.NotifySlack, OnPending: true})
		a := r.ask(bidiOp+" <!channel> <https://evil.example|x>", 2*time.Minute)
		r.deliverDue(r.dispatcher(nil, nil))
		got := rc.requests()
		if len(got) != 1 {
			t.Fatalf("receiver got %d requests; want 1", len(got))
		}
		checkNoRawBidi(t, got[0].body)
		var m struct {
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
		if err := json.Unmarshal(got[0].body, &m); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, got[0].body)
		}
		if got[0].header.Get("Content-Type") != "application/json" {
			t.Errorf("Content-Type %q; want application/json", got[0].header.Get("Content-Type"))
		}
		if !strings.Contains(m.Text, "Approval needed") || !strings.Contains(m.Text, "bot") || !strings.Contains(m.Text, "web (production)") {
			t.Errorf("text %q; want the request's summary", m.Text)
		}
		if len(m.Blocks) != 3 || m.Blocks[0].Type != "section" || m.Blocks[1].Type != "section" || m.Blocks[2].Type != "context" {
			t.Fatalf("blocks = %+v; want section, section, context", m.Blocks)
		}
		link := "<https://postern.example:8443/approvals/" + a.ID + "|Open " + a.ID + " in postern>"
		if m.Blocks[0].Text.Type != "mrkdwn" || !strings.Contains(m.Blocks[0].Text.Text, link) {
			t.Errorf("summary %+v; want mrkdwn with %s", m.Blocks[0].Text, link)
		}
		op := m.Blocks[1].Text
		if op.Type != "plain_text" || op.Text != "exec: "+bidiShown+" <!channel> <https://evil.example|x>" {
			t.Errorf("operation block %+v; want plain_text with the escaped operation as it is", op)
		}
		var ctx []string
		for _, e := range m.Blocks[2].Elements {
			if e.Type != "plain_text" {
				t.Errorf("context element of type %s; want plain_text", e.Type)
			}
			ctx = append(ctx, e.Text)
		}
		if c := strings.Join(ctx, "\n"); !strings.Contains(c, "Why destructive: rm deletes files") || !strings.Contains(c, "Expires ") {
			t.Errorf("context %q; want the reasons and the expiry", c)
		}
		if strings.Contains(m.Blocks[0].Text.Text+m.Text, "channel") {
			t.Error("the agent's text reached the mrkdwn summary")
		}
	})
}

// TestNtfyMessage: an ntfy channel gets a plain-text message with a title,
// a click URL and a view action to the request, and its access token as a
// bearer token; the bidi control arrives escaped.
func TestNtfyMessage(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		r := newRig(t)
		rc := newReceiver(t)
		r.channel(store.NewNotifyChannel{Name: "phone", URL: rc.url(), Format: store.NotifyNtfy, Secret: []byte(ntfyToken), OnPending: true})
		a := r.ask(bidiOp, 2*time.Minute)
		r.deliverDue(r.dispatcher(nil, nil))
		got := rc.requests()
		if len(got) != 1 {
			t.Fatalf("receiver got %d requests; want 1", len(got))
		}
		checkNoRawBidi(t, got[0].body)
		link := "https://postern.example:8443/approvals/" + a.ID
		for h, want := range map[string]string{
			"Title":         "postern: Approval needed: bot asks to run a destructive command on web (production)",
			"Click":         link,
			"Actions":       "view, Open, " + link,
			"Priority":      "high",
			"Authorization": "Bearer " + ntfyToken,
			"Content-Type":  "text/plain; charset=utf-8",
		} {
			if v := got[0].header.Get(h); v != want {
				t.Errorf("header %s = %q; want %q", h, v, want)
			}
		}
		body := string(got[0].body)
		if !strings.HasPrefix(body, "exec: "+bidiShown+"\n") || !strings.Contains(body, "Why destructive: rm deletes files") ||
			!strings.Contains(body, "Expires ") {
			t.Errorf("body %q; want the escaped operation, the reasons and the expiry", body)
		}
		r.checkStoredNoSecrets()
	})
}

// TestJSONShowsEscapes: the json payload carries the operation as
// policy.Visible shows it.
func TestJSONShowsEscapes(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		r := newRig(t)
		rc := newReceiver(t)
		r.channel(store.NewNotifyChannel{Name: "ops", URL: rc.url(), OnPending: true})
		r.ask(bidiOp, 2*time.Minute)
		r.deliverDue(r.dispatcher(nil, nil))
		got := rc.requests()
		if len(got) != 1 {
			t.Fatalf("receiver got %d requests; want 1", len(got))
		}
		checkNoRawBidi(t, got[0].body)
		var p Payload
		if err := json.Unmarshal(got[0].body, &p); err != nil || p.Operation != bidiShown {
			t.Errorf("operation %q (%v); want %q", p.Operation, err, bidiShown)
		}
	})
}

// checkNoRawBidi fails if body holds a raw U+202E or U+202C.
func checkNoRawBidi(t *testing.T, body []byte) {
	t.Helper()
	if strings.ContainsAny(string(body), "\u202e\u202c") {
		t.Errorf("the message holds a raw bidi control: %q", body)
	}
}

func TestChatTextLimits(t *testing.T) {
	long := strings.Repeat("é", 5000) // 10000 bytes of two-byte runes
	p := Payload{Event: "pending", ApprovalID: "apr_x", Agent: "bot", Alias: "web", Env: "dev", Class: "write",
		Kind: "exec", Operation: long, Reasons: long, ExpiresAt: rfc3339(time.Now())}
	n := renderNtfy(p, nil)
	if len(n.body) > 4096 || !strings.Contains(string(n.body), "more bytes)") {
		t.Errorf("ntfy body of %d bytes; want at most 4096, saying what was cut", len(n.body))
	}
	s := renderSlack(p)
	var m slackMessage
	if err := json.Unmarshal(s.body, &m); err != nil {
		t.Fatal(err)
	}
	for _, b := range m.Blocks {
		texts := b.Elements
		if b.Text != nil {
			texts = append(texts, *b.Text)
		}
		for _, tx := range texts {
			if n := len([]rune(tx.Text)); n > 3000 {
				t.Errorf("a %s text of %d characters; want at most 3000", b.Type, n)
			}
		}
	}
	if got := cut("aé", 2); got != "a… (2 more bytes)" {
		t.Errorf(`cut("aé", 2) = %q; want it cut before the é`, got)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		in   string
		want time.Duration
	}{
		{"", 0}, {"30", 30 * time.Second}, {"-5", 0}, {"junk", 0}, {"99999", maxRetryAfter},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
	} {
		if got := parseRetryAfter(tt.in, now); got != tt.want {
			t.Errorf("parseRetryAfter(%q) = %v; want %v", tt.in, got, tt.want)
		}
	}
}

// TestReasonAndScopeInPayload: the agent's stated reason arrives escaped
// like the operation, and a decided event names the approval's scope and
// its end.
func TestReasonAndScopeInPayload(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		r := newRig(t)
		rc := newReceiver(t)
		r.channel(store.NewNotifyChannel{Name: "ops", URL: rc.url(), OnPending: true, OnDecided: true})
		ctx := context.Background()
		a, _, err := r.st.RequestApproval(ctx, store.Approval{AgentID: r.agent.ID, ConnectionID: r.conn.ID,
			Class: "write", Kind: "exec", Operation: "touch /srv/x", OperationSHA256: policy.OperationHash("touch /srv/x"),
			ApprovalsNeeded: 1, AgentReason: "deploy \u202eticket 42"}, 2*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		end := r.clock.Now().Add(30 * time.Minute)
		if _, _, err := r.st.DecideApproval(ctx, store.Decision{ID: a.ID, Approve: true,
			By: r.alice, Scope: store.ScopeClass, ScopeExpiresAt: end}); err != nil {
			t.Fatal(err)
		}
		r.deliverDue(r.dispatcher(nil, nil))
		got := rc.requests()
		if len(got) != 1 {
			t.Fatalf("receiver got %d requests; want the decided event only", len(got))
		}
		var p Payload
		if err := json.Unmarshal(got[0].body, &p); err != nil {
			t.Fatal(err)
		}
		if p.AgentReason != "deploy <U+202E>ticket 42" {
			t.Errorf("agent_reason %q; want the escaped reason", p.AgentReason)
		}
		if p.Scope != "class" || p.ScopeExpiresAt == nil || *p.ScopeExpiresAt != rfc3339(end) {
			t.Errorf("scope %q until %v; want class until %s", p.Scope, p.ScopeExpiresAt, rfc3339(end))
		}
		text := strings.Join(facts(p), "\n")
		if !strings.Contains(text, "The agent says: deploy <U+202E>ticket 42") ||
			!strings.Contains(text, "every write operation of bot on web runs without asking until") {
			t.Errorf("chat facts %q; want the agent's reason and the scope", text)
		}
	})
}
