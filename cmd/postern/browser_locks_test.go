package main

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestBrowserLocks drives the Locks page in Chromium against a real postern
// serve and sshd: the admin locks agent bot with a time and a reason while
// bot runs `sleep 600`, which ends at once with the lock's words; the page
// lists the lock; Unlock removes it and bot's next command runs.
func TestBrowserLocks(t *testing.T) {
	t.Parallel()
	r, bctx := startBrowserRig(t)
	r.login(t, bctx, r.password)
	step(t, bctx, "wait for the logged-in page", chromedp.WaitVisible(chromedp.CSS("#logout")))
	submit := func(t *testing.T, what, button string) string {
		t.Helper()
		eval[bool](t, bctx, `(document.getElementById('flash')?.remove(), true)`)
		step(t, bctx, what, chromedp.Click(chromedp.CSS(button)), chromedp.WaitVisible(chromedp.CSS("#flash")))
		return eval[string](t, bctx, `document.getElementById('flash').textContent`)
	}

	run := r.ssh("target", "echo started >&2; sleep 600; echo never")
	run.waitStderr(t, "started")
	step(t, bctx, "open /locks", chromedp.Navigate(r.base+"/locks"), chromedp.WaitVisible(chromedp.CSS("#add-lock")))
	step(t, bctx, "fill the form",
		chromedp.SetValue(chromedp.CSS(`#add-lock select[name=target]`), "agent:bot"),
		chromedp.SendKeys(chromedp.CSS(`#add-lock input[name=for]`), "1h"),
		chromedp.SendKeys(chromedp.CSS(`#add-lock input[name=reason]`), "incident 12"))
	if f := submit(t, "lock", "#add-lock-submit"); !strings.Contains(f, "agent bot is locked until") || !strings.Contains(f, "incident 12") {
		t.Errorf("flash %q; want the lock", f)
	}
	run.wait(t)
	if run.code != 255 || !strings.Contains(run.stderr, "agent bot is locked until") {
		t.Errorf("the running command: exit %d, stderr %q; want 255 with the lock's words", run.code, run.stderr)
	}
	if !eval[bool](t, bctx, `!!document.getElementById('lock-agent-bot')`) {
		t.Fatalf("the page does not list the lock: %s", pageSummary(t, bctx))
	}
	if f := submit(t, "unlock", "#lock-agent-bot button.unlock"); !strings.Contains(f, "Unlocked agent bot") {
		t.Errorf("flash %q; want the unlock", f)
	}
	again := r.ssh("target", "echo hello")
	again.wait(t)
	if again.code != 0 || again.stdout != "hello\n" {
		t.Errorf("after unlock: exit %d, stdout %q, stderr %q; want hello", again.code, again.stdout, again.stderr)
	}
}
