package main

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestBrowserCardSaysWhatTheBoxHides: in Chromium, a command whose end
// lies below its box's first view (`true` and 60 newlines before a touch;
// 6,000 bytes before it on one line) has, on its own page and without
// scrolling, its size, what lies beyond, and a marker on the box's lower
// edge, all above the approve button; the box scrolls to the command's
// end.
func TestBrowserCardSaysWhatTheBoxHides(t *testing.T) {
	t.Parallel()
	r, bctx := startBrowserRig(t)
	r.login(t, bctx, r.password)
	step(t, bctx, "wait for the logged-in page", chromedp.WaitVisible(chromedp.CSS("#logout")))

	tests := []struct {
		name, command, beyond string
	}{
		{"60 newlines", "true" + strings.Repeat("\n", 60) + "touch " + r.file("lines"), "49 more lines"},
		{"6,000 bytes", "echo " + strings.Repeat("A", 6000) + "; touch " + r.file("bytes"), "more bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run := r.ssh("target", tt.command)
			step(t, bctx, "open the approvals page", chromedp.Navigate(r.base+"/approvals"))
			id := pendingID(t, bctx, "touch "+r.scratch)
			step(t, bctx, "open the request's page", chromedp.Navigate(r.base+"/approvals/"+id))
			art := `document.querySelector('#approval-` + id + `')`
			step(t, bctx, "wait for the card", chromedp.WaitVisible(chromedp.CSS("#approval-"+id)))
			// Each element's box, in the viewport as loaded (no scroll).
			rect := func(sel string) [4]float64 {
				return eval[[4]float64](t, bctx, fmt.Sprintf(`(() => { const e = %s.querySelector(%q); if (!e) return [-1,-1,-1,-1];
					const r = e.getBoundingClientRect(); return [r.top, r.bottom, r.height, window.innerHeight]; })()`, art, sel))
			}
			more, marker, approve := rect("p.command-more"), rect("pre.command .scroll-marker"), rect("button.approve")
			for _, el := range []struct {
				name string
				r    [4]float64
			}{{"the note of what lies beyond", more}, {"the box's marker", marker}, {"the approve button", approve}} {
				if el.r[2] <= 0 || el.r[0] < 0 || el.r[1] > el.r[3] {
					t.Errorf("%s: top %v bottom %v height %v, viewport %v; want it shown without scrolling", el.name, el.r[0], el.r[1], el.r[2], el.r[3])
				}
			}
			if more[1] > approve[0] {
				t.Errorf("the note ends at %v, the approve button starts at %v; want the note first", more[1], approve[0])
			}
			note := eval[string](t, bctx, art+`.querySelector('p.command-more').innerText`)
			size := eval[string](t, bctx, art+`.querySelector('p.command-size').innerText`)
			if !strings.Contains(note, tt.beyond) || !strings.Contains(size, "bytes") {
				t.Errorf("size %q, note %q; want the size and %q", size, note, tt.beyond)
			}
			box := art + `.querySelector('pre.command')`
			if overflows := eval[bool](t, bctx, box+`.scrollHeight > `+box+`.clientHeight`); !overflows {
				t.Error("the box does not scroll; want it to hold the whole command")
			}
			if whole := eval[string](t, bctx, box+`.querySelector('.cmd').textContent`); !strings.HasSuffix(whole, tt.command[len(tt.command)-40:]) {
				t.Errorf("the box's text ends %q; want the whole command", whole[max(0, len(whole)-80):])
			}
			r.cli.ok("", "approvals", "deny", id, "--reason", "test over", "--as", r.admin)
			run.wait(t)
		})
	}
	for _, f := range []string{"lines", "bytes"} {
		if _, err := os.Stat(r.file(f)); !os.IsNotExist(err) {
			t.Errorf("%s after the denial: %v; want it not made", f, err)
		}
	}
}
