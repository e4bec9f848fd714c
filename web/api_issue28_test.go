package web

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
)

// TestAPIApprovalSaysWhatTheCardSays: REST's approval carries what the card
// shows (issue 28): the command whole with its lines and bytes (60 newlines
// before a touch; 6,000 bytes before it on one line), and for a session with
// a terminal its life; such a request refuses every scope over REST too.
func TestAPIApprovalSaysWhatTheCardSays(t *testing.T) {
	as := newAPISite(t, nil)
	for _, tt := range []struct {
		name, text   string
		lines, bytes float64
	}{
		{"60 newlines", "true" + strings.Repeat("\n", 60) + "touch /tmp/pwned", 61, 80},
		{"6,000 bytes", "echo " + strings.Repeat("A", 6000) + "; touch /tmp/pwned", 1, 6023},
	} {
		a := as.ask(as.web, "write", tt.text, 1)
		d := as.get("/v1/approvals/" + a.ID).data(t)
		if d["operation"] != tt.text || d["operation_lines"] != tt.lines || d["operation_bytes"] != tt.bytes ||
			d["terminal_life_seconds"] != float64(0) {
			t.Errorf("%s: operation whole %v, lines %v, bytes %v, terminal life %v; want the whole command, %v, %v, 0",
				tt.name, d["operation"] == tt.text, d["operation_lines"], d["operation_bytes"], d["terminal_life_seconds"], tt.lines, tt.bytes)
		}
	}

	text := "git log --oneline"
	a, _, err := as.st.RequestApproval(context.Background(), store.Approval{
		AgentID: as.agent.ID, ConnectionID: as.web.ID, Class: string(policy.Destructive), Kind: "exec", Operation: text,
		OperationSHA256: policy.OperationHash(text), ApprovalsNeeded: 1, TerminalLife: 15 * time.Minute,
	}, policy.DefaultApprovalLifetime)
	if err != nil {
		t.Fatal(err)
	}
	if got := as.get("/v1/approvals/" + a.ID).data(t)["terminal_life_seconds"]; got != float64(900) {
		t.Errorf("terminal_life_seconds of a session with a terminal: %v; want 900", got)
	}
	for _, body := range []string{`{"scope": "operation", "for": "5m"}`, `{"scope": "class", "for": "5m"}`} {
		r := as.call("POST", "/v1/approvals/"+a.ID+"/approve", as.ci, body)
		if code, _ := r.errCode(t); r.status != http.StatusUnprocessableEntity || code != "scope_not_allowed" {
			t.Errorf("approve %s of a session with a terminal: %d %q; want 422 scope_not_allowed", body, r.status, code)
		}
	}
	if d := as.call("POST", "/v1/approvals/"+a.ID+"/approve", as.ci, "").data(t); d["status"] != "approved" || d["scope"] != "request" {
		t.Errorf("approve of the one session: status %v, scope %v; want approved, request", d["status"], d["scope"])
	}
}
