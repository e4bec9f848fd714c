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

// TestCardSaysWhatTheBoxHides: a command whose end lies below its box's
// first view (60 newlines after `true`, or 6,000 bytes on one line) has its
// size and what lies beyond said on the card, before the decision forms,
// and a marker in the box; a short one has its size only.
func TestCardSaysWhatTheBoxHides(t *testing.T) {
	ps := newPageSite(t, nil)
	pc := ps.admin("alice")
	tests := []struct {
		name, command string
		size, more    string // "" for no note
	}{
		{"short", "uptime", "1 line, 6 bytes", ""},
		{"60 newlines", "true" + strings.Repeat("\n", 60) + "touch /tmp/pwned", "61 lines, 80 bytes", "49 more lines, 64 more bytes"},
		{"6,000 bytes", "echo " + strings.Repeat("A", 6000) + "; touch /tmp/pwned", "1 line, 6,023 bytes", "5,063 more bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := ps.ask(ps.conn, "write", tt.command, 1)
			status, _, body := pc.get("/approvals/" + a.ID)
			if status != http.StatusOK {
				t.Fatalf("got status %d; want 200", status)
			}
			size := strings.Index(body, `<p class="command-size">`+tt.size+`</p>`)
			approve := strings.Index(body, `<form class="approve"`)
			if size < 0 || approve < 0 || size > approve {
				t.Errorf("size %q at %d, approve form at %d; want the size before the form", tt.size, size, approve)
			}
			more := strings.Index(body, `<p class="command-more" role="note">▼ The command is longer than its box: `+tt.more+` below`)
			marker := strings.Contains(body, `<span class="scroll-marker" aria-hidden="true">▼ scroll for `+tt.more+`</span>`)
			switch {
			case tt.more == "" && (strings.Contains(body, `class="command-more"`) || strings.Contains(body, `class="scroll-marker"`)):
				t.Errorf("a command that fits has a note or marker:\n%s", body)
			case tt.more != "" && (more < 0 || more > approve || !marker):
				t.Errorf("note at %d (approve form at %d), marker %v; want both, the note before the form", more, approve, marker)
			}
			if !strings.Contains(body, "touch /tmp/pwned") && tt.more != "" {
				t.Error("the page lacks the command's end; want it whole in the box")
			}
		})
	}
}

// TestCardOfATerminalSession: a request with a terminal says it is an
// interactive shell and how long it may run, and offers no scope.
func TestCardOfATerminalSession(t *testing.T) {
	ps := newPageSite(t, nil)
	pc := ps.admin("alice")
	text := "git log --oneline"
	a, _, err := ps.st.RequestApproval(context.Background(), store.Approval{
		AgentID: ps.agent.ID, ConnectionID: ps.conn.ID, Class: "destructive", Kind: "exec", Operation: text,
		OperationSHA256: policy.OperationHash(text), ApprovalsNeeded: 1, TerminalLife: 15 * time.Minute,
	}, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	_, _, body := pc.get("/approvals/" + a.ID)
	for _, want := range []string{`<span class="terminal">with a terminal</span>`,
		`With a terminal: an interactive shell.`, `Once approved it runs at most 15m0s, then postern ends it. No scope covers it.`} {
		if !strings.Contains(body, want) {
			t.Errorf("the card lacks %q", want)
		}
	}
	if strings.Contains(body, `<select name="scope"`) {
		t.Error("the card offers a scope for a session with a terminal; want none")
	}
}
