package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
)

// TestBoundSummaryDelivered: when the agent's bound on waiting requests
// refuses requests, each channel subscribed to pending gets one summary
// for the episode, in its format, however many requests were refused —
// and it is sent even when the request it rides on was decided first,
// since it tells of the queue, not of that request.
func TestBoundSummaryDelivered(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		r := newRig(t)
		rc := newReceiver(t)
		for _, f := range store.NotifyFormats {
			r.channel(store.NewNotifyChannel{Name: string(f), URL: rc.url() + "&f=" + string(f), Format: f, OnPending: true})
		}
		r.channel(store.NewNotifyChannel{Name: "decisions", URL: rc.url() + "&f=decisions", OnDecided: true})
		limits := store.PendingLimits{PerAgent: 2}
		request := func(text string) (store.Approval, error) {
			a, _, err := r.st.RequestApprovalWithin(context.Background(), store.Approval{AgentID: r.agent.ID,
				ConnectionID: r.conn.ID, Class: "write", Kind: "exec", Operation: text,
				OperationSHA256: policy.OperationHash(text), ApprovalsNeeded: 1}, 2*time.Minute, limits)
			return a, err
		}
		var newest store.Approval
		for i := range 2 {
			r.clock.Advance(time.Millisecond)
			a, err := request(fmt.Sprintf("touch /w%d", i))
			if err != nil {
				t.Fatal(err)
			}
			newest = a
		}
		for i := range 10 {
			if _, err := request(fmt.Sprintf("touch /r%d", i)); !errors.Is(err, store.ErrTooManyPending) {
				t.Fatalf("request %d past the bound: %v; want ErrTooManyPending", i, err)
			}
		}
		if _, _, err := r.decide(newest.ID, false, "no"); err != nil {
			t.Fatal(err)
		}
		r.deliverDue(r.dispatcher(nil, nil))

		bound := map[string]received{}
		for _, got := range rc.requests() {
			format := got.path[strings.LastIndex(got.path, "=")+1:]
			var event string
			switch format {
			case "json":
				event = got.header.Get("X-Postern-Event")
			case "slack":
				if strings.Contains(string(got.body), "requests waiting") {
					event = "bound"
				}
			case "ntfy":
				if strings.Contains(got.header.Get("Title"), "requests waiting") {
					event = "bound"
				}
			}
			if event != "bound" {
				continue
			}
			if _, dup := bound[format]; dup {
				t.Errorf("channel %s got a second summary", format)
			}
			bound[format] = got
		}
		if len(bound) != 3 {
			t.Fatalf("summaries on %v; want one on each of json, slack and ntfy (none on decisions)", keys(bound))
		}
		const head = "agent bot has 2 requests waiting; further requests are being denied"
		var p Payload
		if err := json.Unmarshal(bound["json"].body, &p); err != nil {
			t.Fatal(err)
		}
		if p.Event != "bound" || p.Bound != store.BoundAgent || p.Waiting != 2 || p.ApprovalID != newest.ID ||
			p.Agent != "bot" || p.Operation != "" {
			t.Errorf("json summary %+v; want event bound, agent bot, 2 waiting, about %s, no operation", p, newest.ID)
		}
		if !strings.Contains(string(bound["slack"].body), head) {
			t.Errorf("slack summary %s; want %q", bound["slack"].body, head)
		}
		if title := bound["ntfy"].header.Get("Title"); title != "postern: "+head || bound["ntfy"].header.Get("Priority") != "high" {
			t.Errorf("ntfy title %q, priority %q; want %q, high", title, bound["ntfy"].header.Get("Priority"), "postern: "+head)
		}
		r.checkStoredNoSecrets()
	})
}

// TestBoundHeadline: the summary says whose bound it is.
func TestBoundHeadline(t *testing.T) {
	tests := []struct {
		name  string
		scope string
		env   store.Env
		want  string
	}{
		{"agent", store.BoundAgent, store.EnvProduction, "agent bot has 10 requests waiting; further requests are being denied"},
		{"connection", store.BoundConnection, store.EnvProduction, "connection web (production) has 10 requests waiting; further requests are being denied"},
		{"connection removed", store.BoundConnection, "", "connection web (connection removed) has 10 requests waiting; further requests are being denied"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := store.Approval{ID: "apr_x", Status: store.ApprovalPending, AgentName: "bot", ConnectionAlias: "web",
				ConnectionEnv: tt.env, Class: "write", Kind: "exec", Operation: "touch /x"}
			p := boundSummary(newPayload(a, string(store.NotifyBound), "ntf_x", "", time.Now()), tt.scope, 10)
			if got := headline(p); got != tt.want {
				t.Errorf("headline = %q; want %q", got, tt.want)
			}
		})
	}
}

func keys(m map[string]received) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
