package main

import (
	"testing"

	"github.com/chromedp/chromedp"
)

// TestBrowserRecordingPlayback: in Chromium, the Recordings page lists a
// recorded command, its page shows the output the agent received, and
// "Play with timing" hides it and shows it again piece by piece.
func TestBrowserRecordingPlayback(t *testing.T) {
	t.Parallel()
	r, bctx := startBrowserRig(t)
	r.cli.ok("", "conn", "update", "target", "--record", "exec")
	run := r.ssh("target", "printf 'first-%s\\n' 6b2e; printf 'second-%s\\n' 6b2e >&2")
	run.wait(t)
	if run.code != 0 || run.stdout != "first-6b2e\n" || run.stderr != "second-6b2e\n" {
		t.Fatalf("printf: exit %d, stdout %q, stderr %q; want 0 and its output", run.code, run.stdout, run.stderr)
	}
	recs := r.cli.recordings()
	if len(recs) != 1 {
		t.Fatalf("recordings: %+v; want one", recs)
	}
	id := recs[0].ID

	r.login(t, bctx, r.password)
	step(t, bctx, "wait for the logged-in page", chromedp.WaitVisible(chromedp.CSS("#logout")))
	step(t, bctx, "open the recordings page and the recording",
		chromedp.Navigate(r.base+"/recordings"),
		chromedp.WaitVisible(chromedp.CSS("#recording-"+id+" a")),
		chromedp.Click(chromedp.CSS("#recording-"+id+" a")),
		chromedp.WaitVisible(chromedp.CSS("#playback")),
	)
	// stdout and stderr are two streams: which of the two lines reached
	// postern first is the machine's, not the command's, to say.
	if got := eval[string](t, bctx, `document.getElementById('playback').textContent`); got != run.stdout+run.stderr && got != run.stderr+run.stdout {
		t.Errorf("playback text: got %q; want %q and %q in either order", got, run.stdout, run.stderr)
	}
	if got := eval[string](t, bctx, `document.querySelector('#playback .stream-stderr').textContent`); got != run.stderr {
		t.Errorf("stderr piece: got %q; want %q", got, run.stderr)
	}
	step(t, bctx, "play it with timing",
		chromedp.WaitVisible(chromedp.CSS("#play")),
		chromedp.Click(chromedp.CSS("#play")),
	)
	// Every piece comes back once its time has come (a few milliseconds).
	waitFor(t, bctx, "the playback to end", `document.getElementById('playback').getAttribute('data-played') === 'done'`)
	if !eval[bool](t, bctx, `Array.from(document.querySelectorAll('#playback .piece')).every(p => !p.hidden)`) {
		t.Errorf("after the playback some pieces are hidden")
	}
}
