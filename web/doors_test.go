package web

import (
	"net/http"
	"strings"
	"testing"

	"github.com/postern/postern/internal/usererr"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
)

// hostileReasons are denial reasons that would print something other than
// themselves on the waiting agent's terminal.
var hostileReasons = []struct{ name, reason string }{
	{"newline", "not now\npostern: approved, running"},
	{"escape", "\x1b[31mnot now\x1b[0m"},
	{"bidi override", "ok \u202eworb"},
	{"3 KiB", strings.Repeat("x", 3<<10)},
}

// policyRefusal is the message policy gives for reason: what every door
// must show.
func policyRefusal(t *testing.T, reason string) string {
	t.Helper()
	err := policy.CheckAdminText("reason", reason, policy.MaxDenyReason)
	if err == nil {
		t.Fatalf("policy accepts %.40q; want it refused", reason)
	}
	return usererr.Message(err, "")
}

// TestAPIDenyReasonRefusedByPolicy: REST answers a hostile reason with its
// 400 invalid_body on field reason and policy's message, and records
// nothing.
func TestAPIDenyReasonRefusedByPolicy(t *testing.T) {
	as := newAPISite(t, nil)
	a := as.ask(as.web, "write", "touch /x", 1)
	for _, tt := range hostileReasons {
		t.Run(tt.name, func(t *testing.T) {
			body := string(apiJSON(map[string]string{"reason": tt.reason}))
			r := as.call("POST", "/v1/approvals/"+a.ID+"/deny", as.ci, body)
			code, field := r.errCode(t)
			if r.status != http.StatusBadRequest || code != "invalid_body" || field != "reason" {
				t.Errorf("got %d %s on %q; want 400 invalid_body on reason", r.status, code, field)
			}
			if got, want := r.errMessage(t), policyRefusal(t, tt.reason); got != want {
				t.Errorf("message: got %q; want %q", got, want)
			}
		})
	}
	if got := as.get("/v1/approvals/" + a.ID).data(t)["status"]; got != "pending" {
		t.Errorf("after the refused reasons the request is %v; want pending", got)
	}
}

// TestPageDenyReasonRefusedByPolicy: the page's deny form shows policy's
// message for a hostile note and records nothing.
func TestPageDenyReasonRefusedByPolicy(t *testing.T) {
	ps := newPageSite(t, nil)
	pc := ps.admin("alice")
	a := ps.ask(ps.conn, "write", "touch /srv/x", 1)
	for _, tt := range hostileReasons {
		t.Run(tt.name, func(t *testing.T) {
			status, h, _ := pc.post("/approvals/"+a.ID+"/deny", pc.form("note", tt.reason, "next", "/approvals"))
			if status != http.StatusSeeOther {
				t.Fatalf("got status %d; want 303", status)
			}
			want := "Not denied: the note is refused: " + policyRefusal(t, tt.reason) + "."
			if got := flashText(pc.follow(h)); got != want {
				t.Errorf("flash: got %q; want %q", got, want)
			}
		})
	}
	if got := ps.approval(a.ID); got.Status != store.ApprovalPending || got.Reason != "" {
		t.Errorf("after the refused notes: got %s with reason %q; want pending without one", got.Status, got.Reason)
	}
}

// TestAPIMessagesWithoutPrefixes: REST shows the words policy, manage and
// store wrote for people, never their package prefixes.
func TestAPIMessagesWithoutPrefixes(t *testing.T) {
	as := newAPISite(t, nil)
	a := as.ask(as.web, "write", "touch /x", 1)
	tests := []struct {
		name, method, path, token, body string
		status                          int
		want                            string
	}{
		{"scope that does not parse", "POST", "/v1/approvals/" + a.ID + "/approve", as.ci, `{"scope": "forever"}`, 400,
			`approval scope not allowed: unknown scope "forever"; want request, operation or class`},
		{"scope too long", "POST", "/v1/approvals/" + a.ID + "/approve", as.ci, `{"scope": "class", "for": "9h"}`, 422,
			"approval scope not allowed: a class scope lasts more than 0 and at most 8h0m0s, not 9h0m0s"},
		{"token for another admin", "POST", "/v1/tokens", as.root, `{"name": "for-bob", "admin": "bob"}`, 403,
			"a token is only ever made for the admin who makes it: alice cannot make one for bob; bob makes their own"},
		{"agent taken", "POST", "/v1/agents", as.root, `{"name": "bot", "keys": ["` + strings.TrimSpace(newTestKeyPair(t).Authorized) + `"]}`, 409,
			"Agent bot already exists"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := as.call(tt.method, tt.path, tt.token, tt.body)
			if r.status != tt.status {
				t.Fatalf("got status %d; want %d (%s)", r.status, tt.status, r.body)
			}
			if got := r.errMessage(t); got != tt.want {
				t.Errorf("message: got %q; want %q", got, tt.want)
			}
		})
	}
}

// TestPageMessagesWithoutPrefixes: the page's flashes show the words
// policy, manage and store wrote for people, never their package prefixes.
func TestPageMessagesWithoutPrefixes(t *testing.T) {
	ps := newPageSite(t, nil)
	pc := ps.admin("alice")
	ps.addAdmin("bob")
	a := ps.ask(ps.conn, "write", "touch /srv/x", 1)
	tests := []struct {
		name, path string
		form       []string
		want       string
	}{
		{"scope too long", "/approvals/" + a.ID + "/approve", []string{"scope", "class", "for", "9h", "next", "/approvals"},
			"Not approved: approval scope not allowed: a class scope lasts more than 0 and at most 8h0m0s, not 9h0m0s."},
		{"token for another admin", "/tokens", []string{"name", "for-bob", "admin", "bob"},
			"Token for-bob not made: a token is only ever made for the admin who makes it: alice cannot make one for bob; bob makes their own"},
		{"agent not found", "/agents/nosuch/remove", []string{"confirm", "on"},
			`Agent nosuch not removed: Agent "nosuch" not found`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, h, _ := pc.post(tt.path, pc.form(tt.form...))
			if status != http.StatusSeeOther {
				t.Fatalf("got status %d; want 303", status)
			}
			if got := flashText(pc.follow(h)); got != tt.want {
				t.Errorf("flash: got %q; want %q", got, tt.want)
			}
		})
	}
}
