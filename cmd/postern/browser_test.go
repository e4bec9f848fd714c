package main

// Browser tests: Debian's Chromium, driven by chromedp, against a real
// `postern serve` (its own process) with a real OpenSSH sshd as the
// target and the real ssh client as the agent. They pin the web page's
// promises from the admin's side: logging in, a request appearing live,
// Approve letting the command run, Deny leaving the target alone, agent
// markup shown as text, CSRF refusal, and a screenshot for people to look
// at.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/postern/postern/internal/e2e"
	"github.com/postern/postern/internal/testwait"
	"github.com/postern/postern/web"
)

// chromiumPath finds Debian's Chromium: /usr/bin/chromium, else chromium on
// PATH. Without it the test skips naming the package to install, or fails
// under POSTERN_E2E=1.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if st, err := os.Stat("/usr/bin/chromium"); err == nil && !st.IsDir() {
		return "/usr/bin/chromium"
	}
	return e2e.Tool(t, "chromium", "the Debian package chromium")
}

// testBrowser is the one Chromium of the browser tests, started by the
// first of them and stopped by TestMain: a browser start costs more CPU
// than a browser test's own steps, and no test here is about it. Each test
// gets a tab in a browser context of its own (its own cookies, storage and
// permissions, as a fresh profile has).
var testBrowser sharedBrowser

// sharedBrowser is a headless Chromium for the whole test binary that
// trusts one certificate: every browser rig's postern serves it as the
// self-signed certificate of its data directory (certDir's files, made by
// the same code that makes one in a data directory).
type sharedBrowser struct {
	once    sync.Once
	err     error
	ctx     context.Context // the browser's own first tab; tabs of tests are its children
	cancel  func()          // stops the browser
	dir     string          // holds the profile and certDir
	certDir string
	out     lockedBuffer // Chromium's output
}

// tab returns a new tab of the shared browser, started on first use, in a
// browser context of its own, closed when t ends.
func (b *sharedBrowser) tab(t *testing.T) context.Context {
	t.Helper()
	exe := chromiumPath(t)
	b.once.Do(func() { b.err = b.start(exe, testwait.Deadline(t)) })
	if b.err != nil {
		t.Fatalf("start chromium: %v\n%s", b.err, lastLines(b.out.String(), 30))
	}
	tctx, cancel := chromedp.NewContext(b.ctx, chromedp.WithNewBrowserContext())
	t.Cleanup(func() {
		cancel()
		if t.Failed() {
			t.Logf("chromium output:\n%s", lastLines(b.out.String(), 30))
		}
	})
	if err := chromedp.Do(tctx); err != nil {
		t.Fatalf("open a tab: %v\n%s", err, lastLines(b.out.String(), 30))
	}
	return tctx
}

// start makes the certificate and starts Chromium, which lives until stop
// or deadline (the test binary's: no test outlives it).
func (b *sharedBrowser) start(exe string, deadline time.Time) error {
	dir, err := os.MkdirTemp("", "postern-browser-test")
	if err != nil {
		return err
	}
	b.dir, b.certDir = dir, filepath.Join(dir, "cert")
	if err := os.Mkdir(b.certDir, 0o700); err != nil {
		return err
	}
	cert, err := web.LoadCertificate(b.certDir, "", "", time.Now())
	if err != nil {
		return err
	}
	leaf, err := x509.ParseCertificate(cert.TLS.Certificate[0])
	if err != nil {
		return err
	}
	sum := sha256.Sum256(leaf.RawSubjectPublicKeyInfo)
	ctx, cancelDeadline := context.WithDeadline(context.Background(), deadline)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		// Chromium trusts exactly the certificate the rigs serve, by its key.
		chromedp.Flag("ignore-certificate-errors-spki-list", base64.StdEncoding.EncodeToString(sum[:])),
		chromedp.UserDataDir(filepath.Join(dir, "profile")),
		chromedp.WindowSize(1280, 1000),
		chromedp.CombinedOutput(&b.out),
	)
	bctx, cancelBrowser := chromedp.NewContext(allocCtx)
	b.ctx = bctx
	b.cancel = func() {
		cancelBrowser()
		cancelAlloc()
		cancelDeadline()
	}
	// Start the browser on bctx itself: the first run on a context owns
	// the browser.
	return chromedp.Do(bctx)
}

// stop stops the browser, if one was started, and removes its profile.
func (b *sharedBrowser) stop() error {
	b.once.Do(func() {}) // no browser can start after this
	if b.cancel != nil {
		b.cancel()
	}
	if b.dir == "" {
		return nil
	}
	if err := os.RemoveAll(b.dir); err != nil {
		return fmt.Errorf("browser tests: %w", err)
	}
	return nil
}

// webRig is a running postern serve with the web page over an e2eRig: the
// connection "target", the agent bot with write=ask and destructive=ask on
// it, and an admin who can log in.
type webRig struct {
	*e2eRig
	base  string // the web page's URL
	tlsFP string // the web certificate's SHA-256 as logged
	admin string
}

// startWebRig starts the rig and serve with the web page.
func startWebRig(t *testing.T) *webRig {
	t.Helper()
	return startWebRigWith(t, nil)
}

// startBrowserRig starts the rig, serving the shared browser's
// certificate, and returns it with a tab of the shared browser.
func startBrowserRig(t *testing.T) (*webRig, context.Context) {
	t.Helper()
	chromiumPath(t) // skip before starting anything
	bctx := testBrowser.tab(t)
	return startWebRigWith(t, func(data string) {
		for _, f := range []string{web.SelfSignedCertFile, web.SelfSignedKeyFile} {
			b, err := os.ReadFile(filepath.Join(testBrowser.certDir, f))
			if err == nil {
				err = os.WriteFile(filepath.Join(data, f), b, 0o600)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}), bctx
}

// startWebRigWith starts the rig, calls prepare (if not nil) on its data
// directory, and starts serve.
func startWebRigWith(t *testing.T, prepare func(data string)) *webRig {
	t.Helper()
	r := &webRig{e2eRig: newRig(t, rigConfig{grant: []string{"--write", "ask", "--destructive", "ask"}, admins: []string{"alice"}}), admin: "alice"}
	if prepare != nil {
		prepare(r.cli.data)
	}
	r.serve("--approval-ttl", outlast(t), "--key-check-timeout", outlast(t))
	r.base, r.tlsFP = r.srv.webURL, r.srv.fingerprint
	return r
}

// lastLines is the end of a long text.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// step runs browser actions, failing the test with what was being done.
// A step ends when its actions do, or at the test's deadline.
func step(t *testing.T, bctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithDeadline(bctx, testwait.Deadline(t))
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v\nthe browser shows: %s", what, err, pageSummary(t, bctx))
	}
}

// pageSummary is the open page's address and the start of its text, for
// failure messages. (Typed passwords are input values, not page text.)
func pageSummary(t *testing.T, bctx context.Context) string {
	ctx, cancel := context.WithDeadline(bctx, testwait.Deadline(t))
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](
		`location.href + ' | ' + document.title + ' | ' + (document.body ? document.body.innerText.slice(0, 400) : '')`))
	if err != nil {
		return fmt.Sprintf("(unknown: %v)", err)
	}
	return s
}

// eval evaluates a JavaScript expression, awaiting a promise.
func eval[T any](t *testing.T, bctx context.Context, expr string) T {
	t.Helper()
	ctx, cancel := context.WithDeadline(bctx, testwait.Deadline(t))
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// login logs the admin in through the form.
func (r *webRig) login(t *testing.T, bctx context.Context, password string) {
	t.Helper()
	step(t, bctx, "open the login page",
		chromedp.Navigate(r.base+"/login"),
		chromedp.WaitVisible(chromedp.CSS("#login-submit")),
		chromedp.Clear(chromedp.CSS("#name")),
		chromedp.SendKeys(chromedp.CSS("#name"), r.admin),
		chromedp.SendKeys(chromedp.CSS("#password"), password),
		chromedp.Click(chromedp.CSS("#login-submit")),
	)
}

// pendingID waits until a pending request whose command contains text is
// on the open page, and returns its id.
func pendingID(t *testing.T, bctx context.Context, text string) string {
	t.Helper()
	expr := fmt.Sprintf(`(() => {
		for (const a of document.querySelectorAll('#approvals article.approval')) {
			const c = a.querySelector('pre.command');
			if (c && c.textContent.includes(%s)) return a.dataset.id;
		}
		return '';
	})()`, jsString(text))
	ctx, cancel := context.WithDeadline(bctx, testwait.Deadline(t))
	defer cancel()
	// No polling timeout of its own (0): the context ends the poll.
	id, err := chromedp.Run(ctx, chromedp.Poll[string](expr, chromedp.WithPollingInterval(100*time.Millisecond),
		chromedp.WithPollingTimeout(0)))
	if err != nil || id == "" {
		t.Fatalf("no pending request for %q appeared on the page: %v", text, err)
	}
	return id
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// approvalStatus opens the request's own page and returns the status it
// shows once decided.
func (r *webRig) approvalStatus(t *testing.T, bctx context.Context, id string) string {
	t.Helper()
	step(t, bctx, "open the approval's page",
		chromedp.Navigate(r.base+"/approvals/"+id),
		chromedp.WaitVisible(chromedp.CSS("#approval-status")),
	)
	return eval[string](t, bctx, `document.getElementById('approval-status').dataset.status`)
}

// pendingIDs lists the pending approvals through the CLI.
func (r *webRig) pendingIDs() []string {
	var ids []string
	for _, a := range r.cli.approvals(false) {
		ids = append(ids, a.ID)
	}
	return ids
}

// repoRoot is the module's root, where artifacts/ goes.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repository root: %v", err)
	}
	return root
}

// TestBrowser drives the approvals page in Chromium. The subtests share one
// postern and one browser, in order: each starts where the one before left
// the browser (logged in after "login").
func TestBrowser(t *testing.T) {
	t.Parallel()
	r, bctx := startBrowserRig(t)

	if !t.Run("login", func(t *testing.T) {
		r.login(t, bctx, "not the password at all")
		step(t, bctx, "wait for the login error", chromedp.WaitVisible(chromedp.CSS("#login-error")))
		r.login(t, bctx, r.password)
		step(t, bctx, "wait for the logged-in page", chromedp.WaitVisible(chromedp.CSS("#logout")))
		if path := eval[string](t, bctx, `location.pathname`); path == "/login" {
			t.Errorf("after login: got path %s; want to have left the login page", path)
		}
	}) {
		t.FailNow()
	}

	dir := filepath.Join(r.scratch, "x")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	approveFile, denyFile := filepath.Join(dir, "file"), filepath.Join(dir, "kept")
	for _, f := range []string{approveFile, denyFile} {
		if err := os.WriteFile(f, []byte("data\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	var live *agentRun
	var liveID string
	t.Run("destructive command appears live", func(t *testing.T) {
		step(t, bctx, "open the approvals page",
			chromedp.Navigate(r.base+"/approvals"),
			chromedp.WaitVisible(chromedp.CSS("#no-approvals")),
		)
		// A mark on the page's window: a reload or navigation would lose it.
		eval[bool](t, bctx, `(window.posternTestMark = true)`)
		live = r.ssh("target", "rm -f "+approveFile)
		liveID = pendingID(t, bctx, "rm -f "+approveFile)
		if !eval[bool](t, bctx, `window.posternTestMark === true`) {
			t.Error("the page was reloaded; want the request to appear live")
		}
		for _, sel := range []string{".agent", ".alias", ".env", ".class", ".kind", ".reasons", ".asked", ".countdown[data-expires]", ".approvers"} {
			if !eval[bool](t, bctx, fmt.Sprintf(`!!document.querySelector('#approval-%s %s')`, liveID, sel)) {
				t.Errorf("the request lacks %s", sel)
			}
		}
		if got := eval[string](t, bctx, fmt.Sprintf(`document.querySelector('#approval-%s .class').textContent.trim()`, liveID)); got != "destructive" {
			t.Errorf("class: got %q; want destructive", got)
		}
	})
	if liveID == "" {
		t.FailNow()
	}

	t.Run("approve lets the command finish", func(t *testing.T) {
		// The form post's navigation (303 back to the list, with a flash)
		// must end before the test navigates, or one aborts the other.
		step(t, bctx, "click Approve", chromedp.Click(chromedp.CSS("#approval-"+liveID+" button.approve")),
			chromedp.WaitVisible(chromedp.CSS("#flash")))
		live.wait(t)
		if live.code != 0 {
			t.Errorf("approved rm: got exit %d, stderr %q; want 0", live.code, live.stderr)
		}
		if want := "an admin decides at " + r.base + "/approvals/" + liveID; !strings.Contains(live.stderr, want) {
			t.Errorf("waiting line: got stderr %q; want it to contain %q", live.stderr, want)
		}
		// The line goes to an untrusted agent: no path of the bastion's
		// binary or data directory.
		if strings.Contains(live.stderr, r.cli.data) || strings.Contains(live.stderr, "--data") {
			t.Errorf("waiting line %q names the data directory; want no bastion path", live.stderr)
		}
		if _, err := os.Stat(approveFile); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after the approved rm: got %v; want it gone", approveFile, err)
		}
		if got := r.approvalStatus(t, bctx, liveID); got != "approved" {
			t.Errorf("approval page: got status %q; want approved", got)
		}
	})

	t.Run("deny leaves the target unchanged", func(t *testing.T) {
		step(t, bctx, "open the approvals page", chromedp.Navigate(r.base+"/approvals"), chromedp.WaitVisible(chromedp.CSS("#approvals")))
		a := r.ssh("target", "rm -f "+denyFile)
		id := pendingID(t, bctx, "rm -f "+denyFile)
		form := "#approval-" + id
		step(t, bctx, "type a note and click Deny",
			chromedp.SendKeys(chromedp.CSS(form+" input.note"), "not on a Friday"),
			chromedp.Click(chromedp.CSS(form+" button.deny")),
			chromedp.WaitVisible(chromedp.CSS("#flash")),
		)
		a.wait(t)
		if a.code != 126 {
			t.Errorf("denied rm: got exit %d, stderr %q; want 126", a.code, a.stderr)
		}
		if b, err := os.ReadFile(denyFile); err != nil || string(b) != "data\n" {
			t.Errorf("%s after the denied rm: got %q, %v; want it unchanged", denyFile, b, err)
		}
		if got := r.approvalStatus(t, bctx, id); got != "denied" {
			t.Errorf("approval page: got status %q; want denied", got)
		}
		if text := eval[string](t, bctx, `document.getElementById('approval-status').textContent`); !strings.Contains(text, "not on a Friday") {
			t.Errorf("approval page: got %q; want the note", text)
		}
	})

	// The markup request stays pending for the CSRF and screenshot
	// subtests, and is denied at the end.
	const markup = `<script>window.pwned=1</script><b id=injected>x</b>`
	markupFile := filepath.Join(dir, "markup.html")
	var markupRun *agentRun
	var markupID string
	t.Run("markup in a command renders as text", func(t *testing.T) {
		step(t, bctx, "open the approvals page", chromedp.Navigate(r.base+"/approvals"), chromedp.WaitVisible(chromedp.CSS("#approvals")))
		markupRun = r.ssh("target", "echo '"+markup+"' > "+markupFile)
		markupID = pendingID(t, bctx, "<script>")
		got := eval[string](t, bctx, fmt.Sprintf(`document.querySelector('#approval-%s pre.command').textContent`, markupID))
		if !strings.Contains(got, markup) {
			t.Errorf("pre.command text: got %q; want it to contain %q", got, markup)
		}
		if eval[bool](t, bctx, `document.getElementById('injected') !== null`) {
			t.Error("the agent's <b id=injected> became an element")
		}
		if eval[bool](t, bctx, `typeof window.pwned !== 'undefined'`) {
			t.Error("the agent's <script> ran")
		}
		// And after a full load of the page, not only after a live update.
		step(t, bctx, "reload", chromedp.Navigate(r.base+"/approvals"), chromedp.WaitVisible(chromedp.CSS("#approval-"+markupID)))
		if eval[bool](t, bctx, `document.getElementById('injected') !== null || typeof window.pwned !== 'undefined'`) {
			t.Error("after a reload the agent's markup is live")
		}
	})

	t.Run("form post without CSRF token is refused", func(t *testing.T) {
		if markupID == "" {
			t.Skip("no pending request (the markup subtest failed)")
		}
		status := eval[int](t, bctx, fmt.Sprintf(`fetch('/approvals/%s/approve', {method: 'POST', credentials: 'same-origin',
			body: new URLSearchParams({next: '/approvals'})}).then(r => r.status)`, markupID))
		if status != 403 {
			t.Errorf("fetch POST without the token: got status %d; want 403", status)
		}
		// The form itself, with its csrf_token field taken out: the submit
		// navigates, and RunResponse waits for that navigation's answer.
		ctx, cancel := context.WithDeadline(bctx, testwait.Deadline(t))
		defer cancel()
		resp, err := chromedp.RunResponse(ctx, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => {
			const f = document.querySelector('#approval-%s form.approve');
			f.querySelector('input[name=csrf_token]').remove();
			f.submit();
		})()`, markupID)))
		if err != nil {
			t.Fatalf("submit the form without the token: %v; the browser shows: %s", err, pageSummary(t, bctx))
		}
		refused := `location.pathname.endsWith('/approve') && document.body.innerText.includes('CSRF')`
		if resp.Status != 403 || !eval[bool](t, bctx, refused) {
			t.Errorf("form post without the token: got status %d; want 403 and the refusal page; the browser shows: %s",
				resp.Status, pageSummary(t, bctx))
		}
		if ids := r.pendingIDs(); len(ids) != 1 || ids[0] != markupID {
			t.Errorf("pending after the refused posts: got %v; want [%s]", ids, markupID)
		}
		if _, err := os.Stat(markupFile); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: got %v; want the write not to have run", markupFile, err)
		}
	})

	t.Run("screenshot", func(t *testing.T) {
		if markupID == "" {
			t.Skip("no pending request (the markup subtest failed)")
		}
		step(t, bctx, "open the approvals page", chromedp.Navigate(r.base+"/approvals"),
			chromedp.WaitVisible(chromedp.CSS("#approval-"+markupID)))
		sctx, cancel := context.WithDeadline(bctx, testwait.Deadline(t))
		defer cancel()
		shot, err := chromedp.Run(sctx, chromedp.FullScreenshot(100)) // 100: PNG
		if err != nil {
			t.Fatalf("screenshot: %v", err)
		}
		dir := filepath.Join(repoRoot(t), "artifacts")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "approvals.png")
		if err := os.WriteFile(path, shot, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot of the approvals page: %s", path)
		b, err := os.ReadFile(path)
		if err != nil || len(b) == 0 {
			t.Fatalf("%s: got %d bytes, %v; want a PNG", path, len(b), err)
		}
		img, err := png.Decode(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s does not decode as PNG: %v", path, err)
		}
		if sz := img.Bounds().Size(); sz.X < 100 || sz.Y < 100 {
			t.Errorf("screenshot: got %v pixels; want a page", sz)
		}
	})

	if markupID != "" {
		r.cli.ok("", "approvals", "deny", markupID, "--reason", "test over", "--as", r.admin)
		markupRun.wait(t)
		if markupRun.code != 126 {
			t.Errorf("denied markup write: got exit %d; want 126", markupRun.code)
		}
	}
	if code := r.srv.end(syscall.SIGTERM); code != 0 {
		t.Errorf("SIGTERM: got exit %d; want 0\nstderr:\n%s", code, r.srv.stderrText())
	}
	if strings.Contains(r.srv.stderrText(), r.password) {
		t.Error("the admin password is in postern's log")
	}
}
