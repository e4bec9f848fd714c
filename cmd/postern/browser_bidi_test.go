package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/postern/postern/internal/testwait"
)

// TestBrowserShowsBidiEscapes: a command with a right-to-left override
// (displayed raw, `cp /tmp/ok.txt /tmp/‮cte/nimda.txt‬` reads as
// `cp /tmp/ok.txt /tmp/txt.admin/etc`) is shown in Chromium with its
// invisible code points as escapes, in logical order, left to right; a
// screenshot of the card goes to artifacts/bidi.png.
func TestBrowserShowsBidiEscapes(t *testing.T) {
	t.Parallel()
	r, bctx := startBrowserRig(t)
	r.login(t, bctx, r.password)
	step(t, bctx, "wait for the logged-in page", chromedp.WaitVisible(chromedp.CSS("#logout")))

	dst := filepath.Join(r.scratch, "\u202ecte", "nimda.txt\u202c")
	command := "cp /etc/hostname '" + dst + "'"
	run := r.ssh("target", command)
	step(t, bctx, "open the approvals page", chromedp.Navigate(r.base+"/approvals"))
	id := pendingID(t, bctx, "cte/nimda.txt")

	box := `document.querySelector('#approval-` + id + ` pre.command')`
	text := eval[string](t, bctx, box+`.innerText`)
	want := "/<U+202E>cte/nimda.txt<U+202C>"
	if !strings.Contains(text, want) || strings.ContainsRune(text, '\u202e') {
		t.Errorf("command box reads %q; want it to contain %q and no raw U+202E", text, want)
	}
	if dir := eval[string](t, bctx, `getComputedStyle(`+box+`).direction`); dir != "ltr" {
		t.Errorf("command box direction %q; want ltr", dir)
	}
	if bidi := eval[string](t, bctx, `getComputedStyle(`+box+`).unicodeBidi`); bidi != "isolate-override" {
		t.Errorf("command box unicode-bidi %q; want isolate-override", bidi)
	}

	sctx, cancelShot := context.WithDeadline(bctx, testwait.Deadline(t))
	defer cancelShot()
	shot, err := chromedp.Run(sctx, chromedp.Screenshot(chromedp.CSS("#approval-"+id)))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	dir := filepath.Join(repoRoot(t), "artifacts")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bidi.png"), shot, 0o644); err != nil {
		t.Fatal(err)
	}
	if len(shot) < 100 {
		t.Errorf("screenshot of the card: %d bytes; want a PNG", len(shot))
	}

	r.cli.ok("", "approvals", "deny", id, "--reason", "test over", "--as", r.admin)
	run.wait(t)
	if run.code != 126 {
		t.Errorf("denied cp: exit %d; want 126", run.code)
	}
	if _, err := os.Stat(dst); !os.IsNotExist(err) {
		t.Errorf("%q after the denial: %v; want it not to exist", dst, err)
	}
}
