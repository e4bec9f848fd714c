package web

import (
	"net/http"
	"strings"
	"testing"

	"github.com/postern/postern/policy"
)

// TestCardExtentAsShown: what lies beyond the command box is measured as
// the box shows the command. Plain ASCII measures as policy.ExtentOf does
// (issue 28's two commands); tabs and escaped control bytes, which take more
// columns than bytes, no longer let a command that fits 12 lines of 80 bytes
// hide its end below the box with no marker.
func TestCardExtentAsShown(t *testing.T) {
	tabs := strings.Repeat("\t", 70)   // 560 columns: 7 rows
	ctrl := strings.Repeat("\x01", 30) // <U+0001> each: 240 columns, 3 rows
	tests := []struct {
		name, text string
		beyond     string
	}{
		{"short", "uptime", ""},
		{"60 newlines", "true" + strings.Repeat("\n", 60) + "touch /tmp/pwned", "49 more lines, 64 more bytes"},
		{"6,000 bytes", "echo " + strings.Repeat("A", 6000) + "; touch /tmp/pwned", "5,063 more bytes"},
		{"12 lines of 80 bytes fit", strings.Repeat(strings.Repeat("x", 79)+"\n", 11) + strings.Repeat("y", 80), ""},
		{"lines of tabs", "true\n" + strings.Repeat(tabs+"\n", 10) + "touch /tmp/pwned", "9 more lines, 615 more bytes"},
		{"escaped control bytes", "true\n" + strings.Repeat("echo "+ctrl+"\n", 10) + "touch /tmp/pwned", "8 more lines, 270 more bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, p := cardExtent(tt.text), policy.ExtentOf(tt.text)
			if e.Lines != p.Lines || e.Bytes != p.Bytes {
				t.Errorf("size %v; want policy's %v", e, p)
			}
			if got := e.Beyond(); got != tt.beyond {
				t.Errorf("beyond %q; want %q", got, tt.beyond)
			}
			if !strings.ContainsAny(tt.text, "\t\x01") && e != p {
				t.Errorf("ASCII text: %+v; want policy.ExtentOf's %+v", e, p)
			}
		})
	}

	// On the card: the note before the approve form, and the marker.
	ps := newPageSite(t, nil)
	pc := ps.admin("alice")
	a := ps.ask(ps.conn, "write", tests[4].text, 1)
	status, _, body := pc.get("/approvals/" + a.ID)
	if status != http.StatusOK {
		t.Fatalf("got status %d; want 200", status)
	}
	more := strings.Index(body, `<p class="command-more" role="note">▼ The command is longer than its box: `+tests[4].beyond+` below`)
	approve := strings.Index(body, `<form class="approve"`)
	if more < 0 || approve < 0 || more > approve ||
		!strings.Contains(body, `<span class="scroll-marker" aria-hidden="true">▼ scroll for `+tests[4].beyond+`</span>`) {
		t.Errorf("lines of tabs: note at %d, approve form at %d; want the note first, and the box's marker", more, approve)
	}
}
