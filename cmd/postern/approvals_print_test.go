package main

import (
	"strings"
	"testing"
	"time"

	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
)

// TestPrintApprovalsSaysTheSize: `approvals list` prints every command
// whole on its line (newlines escaped) and, for one longer than a line or
// than the page's box, its size first, as the page and REST say it.
func TestPrintApprovalsSaysTheSize(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name, op string
		want     string // a part of the line
	}{
		{"short", "uptime", "exec: uptime"},
		{"60 newlines", "true" + strings.Repeat("\n", 60) + "touch /tmp/pwned",
			"[61 lines, 80 bytes] exec: true" + strings.Repeat("<U+000A>", 60) + "touch /tmp/pwned"},
		{"6,000 bytes", "echo " + strings.Repeat("A", 6000) + "; touch /tmp/pwned",
			"[1 line, 6,023 bytes] exec: echo AAAA"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			a := policy.Approval{ID: "apr_1", Status: store.ApprovalPending, AgentName: "bot", ConnectionAlias: "web",
				Class: "write", Kind: "exec", Operation: tt.op, ApprovalsNeeded: 1, ExpiresAt: now.Add(time.Minute)}
			if err := printApprovals(&b, []policy.Approval{a}, now); err != nil {
				t.Fatal(err)
			}
			out := b.String()
			if !strings.Contains(out, tt.want) || !strings.HasSuffix(strings.TrimSpace(out), strings.TrimSpace(tt.op[len(tt.op)-6:])) {
				t.Errorf("got %q; want a line with %q that ends with the command's end", out, tt.want)
			}
			if tt.name == "short" && strings.Contains(out, "[") {
				t.Errorf("got %q; want no size for a one-line command that fits", out)
			}
		})
	}
}
