package main

// The approvals page's own notices, in Chromium against a real postern
// serve (docs/notifications.md): the pending count in the
// title, kept current as requests arrive and go, and a browser
// notification per new request once the admin allowed them — not for
// requests already on the page, and not again after a reload.

import (
	"context"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/postern/postern/internal/testwait"
)

// waitFor polls a JavaScript expression in the page until it is true.
func waitFor(t *testing.T, bctx context.Context, what, expr string) {
	t.Helper()
	ctx, cancel := context.WithDeadline(bctx, testwait.Deadline(t))
	defer cancel()
	// No polling timeout of its own (0): the context ends the poll.
	ok, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(50*time.Millisecond),
		chromedp.WithPollingTimeout(0)))
	if err != nil || !ok {
		t.Fatalf("%s: %s never held (%v); the browser shows: %s", what, expr, err, pageSummary(t, bctx))
	}
}

// waitTitle waits until the page's title is want.
func waitTitle(t *testing.T, bctx context.Context, want string) {
	t.Helper()
	waitFor(t, bctx, "title "+want, "document.title === "+jsString(want))
}

// notificationSpy replaces a page's Notification, before any of the page's
// scripts run, with one that records each notification's tag and then
// shows it: the test sees what a headless browser shows nobody, from the
// first moment of every page.
const notificationSpy = `(() => {
	const Real = window.Notification;
	if (!Real) return;
	window.posternShown = [];
	const Spy = function (title, options) {
		window.posternShown.push(options.tag);
		return new Real(title, options);
	};
	Object.defineProperty(Spy, 'permission', {get: () => Real.permission});
	Spy.requestPermission = (cb) => Real.requestPermission(cb);
	window.Notification = Spy;
})();`

// spyOnNotifications installs notificationSpy in every document the tab
// loads from now on.
func spyOnNotifications(t *testing.T, bctx context.Context) {
	t.Helper()
	c := chromedp.FromContext(bctx)
	if _, err := cdp.Call(bctx, c.Target, page.AddScriptToEvaluateOnNewDocument,
		page.AddScriptToEvaluateOnNewDocumentParams{Source: notificationSpy}); err != nil {
		t.Fatalf("install the notification spy: %v", err)
	}
}

// shownTags is what the spy recorded, sorted and joined.
func shownTags(t *testing.T, bctx context.Context) string {
	t.Helper()
	return eval[string](t, bctx, `(window.posternShown || []).slice().sort().join(',')`)
}

func TestBrowserApprovalsTitleAndNotifications(t *testing.T) {
	t.Parallel()
	r, bctx := startBrowserRig(t)
	spyOnNotifications(t, bctx)
	r.login(t, bctx, r.password)
	step(t, bctx, "wait for the logged-in page", chromedp.WaitVisible(chromedp.CSS("#logout")))
	step(t, bctx, "open the approvals page", chromedp.Navigate(r.base+"/approvals"),
		chromedp.WaitVisible(chromedp.CSS("#no-approvals")))
	if got := eval[string](t, bctx, `document.title`); got != "Approvals · postern" {
		t.Errorf("title with nothing pending: %q; want Approvals · postern", got)
	}
	eval[bool](t, bctx, `(window.posternTestMark = true)`)

	// The count follows requests as they arrive, without a reload.
	var runs []*agentRun
	touch := func(name string) string {
		f := filepath.Join(r.scratch, name)
		runs = append(runs, r.ssh("target", "touch "+f))
		return f
	}
	first := touch("first")
	waitTitle(t, bctx, "(1) Approvals · postern")
	firstID := pendingID(t, bctx, first)

	// The offer to turn notifications on shows once nothing was answered;
	// the admin allows them (the permission granted through the DevTools
	// protocol, as a person would in the browser's prompt).
	if !eval[bool](t, bctx, `!document.getElementById('notify-offer').hidden && Notification.permission === 'default'`) {
		t.Fatalf("the notification offer is not shown; the browser shows: %s", pageSummary(t, bctx))
	}
	c := chromedp.FromContext(bctx)
	if _, err := cdp.Call(bctx, c.Browser, browser.SetPermission, browser.SetPermissionParams{
		Permission: &browser.PermissionDescriptor{Name: "notifications"}, Setting: browser.PermissionSettingGranted,
		Origin: r.base, BrowserContextID: c.BrowserContextID}); err != nil {
		t.Fatalf("grant the notification permission: %v", err)
	}
	step(t, bctx, "click the offer", chromedp.Click(chromedp.CSS("#notify-enable")))
	waitFor(t, bctx, "the answer remembered", `localStorage.getItem('postern.notifications') === 'granted' &&
		document.getElementById('notify-offer').hidden`)

	second := touch("second")
	waitTitle(t, bctx, "(2) Approvals · postern")
	secondID := pendingID(t, bctx, second)
	if got, want := shownTags(t, bctx), "postern-"+secondID; got != want {
		t.Errorf("notifications shown: %q; want only the new request's %q (not %s, on the page before)", got, want, firstID)
	}
	if !eval[bool](t, bctx, `window.posternTestMark === true`) {
		t.Error("the page was reloaded; want the title and notification to come live")
	}

	// A reload shows neither request again, nor the offer; a decision made
	// elsewhere lowers the count.
	step(t, bctx, "reload", chromedp.Navigate(r.base+"/approvals"), chromedp.WaitVisible(chromedp.CSS("#approval-"+secondID)))
	if got := eval[string](t, bctx, `document.title`); got != "(2) Approvals · postern" {
		t.Errorf("title after the reload: %q; want (2) Approvals · postern", got)
	}
	if !eval[bool](t, bctx, `document.getElementById('notify-offer').hidden`) {
		t.Error("after the admin answered, the offer is shown again")
	}
	r.cli.ok("", "approvals", "deny", firstID, "--reason", "test over", "--as", r.admin)
	waitTitle(t, bctx, "(1) Approvals · postern")
	third := touch("third")
	waitTitle(t, bctx, "(2) Approvals · postern")
	thirdID := pendingID(t, bctx, third)
	if got, want := shownTags(t, bctx), "postern-"+thirdID; got != want {
		t.Errorf("notifications after the reload: %q; want only the newest request's %q", got, want)
	}

	for _, id := range []string{secondID, thirdID} {
		r.cli.ok("", "approvals", "deny", id, "--reason", "test over", "--as", r.admin)
	}
	waitTitle(t, bctx, "Approvals · postern")
	for i, run := range runs {
		run.wait(t)
		if run.code != 126 {
			t.Errorf("denied request %d: exit %d; want 126", i+1, run.code)
		}
	}
	if code := r.srv.end(syscall.SIGTERM); code != 0 {
		t.Errorf("SIGTERM: exit %d; want 0", code)
	}
	if strings.Contains(r.srv.stderrText(), r.password) {
		t.Error("the admin password is in postern's log")
	}
}
