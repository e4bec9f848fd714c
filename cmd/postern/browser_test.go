package main

// Browser tests: Debian's Chromium, driven by chromedp, against a real
// `postern serve` (the built binary) with a real OpenSSH sshd as the
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
	"encoding/pem"
	"errors"
	"fmt"
	"image/png"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/postern/postern/internal/e2e"
	"github.com/postern/postern/internal/testsshd"
	"github.com/postern/postern/internal/testwait"
	"github.com/postern/postern/store"
	"github.com/postern/postern/web"
)

// Bounds of the browser tests' waits.
const (
	// browserStepTimeout bounds one step in the browser: a navigation, an
	// element to appear, a click and what follows it.
	browserStepTimeout = 30 * time.Second
	// browserTestTimeout bounds a whole browser test, browser start included.
	browserTestTimeout = 4 * time.Minute
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

// webRig is a running postern serve with the web page, a real sshd target
// behind the connection "target", an agent "bot" with write=ask and
// destructive=ask on it, and an admin who can log in.
type webRig struct {
	t       *testing.T
	cli     *cli
	p       *bgPostern
	base    string // the web page's URL
	spki    string // base64 SHA-256 of the certificate's SubjectPublicKeyInfo, for Chromium
	sshArgs []string
	scratch string // a directory on the target (the same machine) for the commands to touch
	admin   string
	pw      string // never logged
	sshd    *testsshd.Server
	tlsFP   string // the web certificate's SHA-256 as logged
}

func startWebRig(t *testing.T) *webRig {
	t.Helper()
	requireSSHClient(t)
	sshd := testsshd.Start(t, testsshd.Options{})
	c := newCLI(t)
	r := &webRig{t: t, cli: c, admin: "alice", pw: newPassword(), scratch: t.TempDir(), sshd: sshd}

	targetKey := filepath.Join(t.TempDir(), "target_key")
	if err := os.WriteFile(targetKey, sshd.UserKeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	c.ok("", "conn", "add", "--no-check", "target", "--host", sshd.Host, "--port", strconv.Itoa(sshd.Port),
		"--user", sshd.User, "--key-file", targetKey, "--host-key", strings.TrimSpace(sshd.KnownHostsLine))
	agent := writeKeyFiles(t, "agent", "")
	c.ok("", "agent", "add", "bot", "--key", agent.pub)
	c.ok("", "grant", "bot", "target", "--write", "ask", "--destructive", "ask")
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte(r.pw+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c.ok("", "admin", "add", r.admin, "--password-file", pwFile)

	r.p = startPostern(t, "serve", "--data", c.data, "--ssh-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0",
		"--approval-ttl", "10m")
	sshAddr, _ := r.p.waitLog("postern serving")["addr"].(string)
	m := r.p.waitLog("web page serving")
	r.base, _ = m["url"].(string)
	r.tlsFP, _ = m["tls_fingerprint"].(string)
	host, port, err := net.SplitHostPort(sshAddr)
	if err != nil || r.base == "" {
		t.Fatalf("start logs: got ssh address %q, web URL %q; want both", sshAddr, r.base)
	}

	// Pin the bastion's host key for the agent's ssh.
	hostKey, err := (store.Dir{Path: c.data}).HostKey()
	if err != nil {
		t.Fatal(err)
	}
	kh := filepath.Join(t.TempDir(), "known_hosts")
	line := knownhosts.Line([]string{knownhosts.Normalize(sshAddr)}, hostKey.PublicKey())
	if err := os.WriteFile(kh, []byte(line+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r.sshArgs = []string{"-F", "/dev/null", "-i", agent.priv, "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
		"-o", "UserKnownHostsFile=" + kh, "-o", "ConnectTimeout=10", "-p", port, host, "target"}

	// Chromium trusts exactly the certificate postern made, by its key.
	certPEM, err := os.ReadFile(filepath.Join(c.data, web.SelfSignedCertFile))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(certPEM)
	if block == nil {
		t.Fatalf("%s holds no PEM block", web.SelfSignedCertFile)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	r.spki = base64.StdEncoding.EncodeToString(sum[:])
	return r
}

// agent runs command on the target through the bastion as the agent,
// bounded by agentTimeout. Wait for it with wait.
func (r *webRig) agent(command string) *agentRun {
	return startAgentRun(r.t, "ssh", append(append([]string{}, r.sshArgs...), command)...)
}

// newBrowser starts a headless Chromium with a fresh profile that trusts
// the rig's certificate, and returns its context; the browser is stopped
// when the test ends, before its profile directory is removed.
func (r *webRig) newBrowser(ctx context.Context) context.Context {
	t := r.t
	profile := t.TempDir()
	var chromeOut bytes.Buffer
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("ignore-certificate-errors-spki-list", r.spki),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1280, 1000),
		chromedp.CombinedOutput(&chromeOut),
	)
	bctx, cancelBrowser := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancelBrowser()
		cancelAlloc()
		if t.Failed() && chromeOut.Len() > 0 {
			t.Logf("chromium output:\n%s", lastLines(chromeOut.String(), 30))
		}
	})
	// Start the browser on bctx itself: the first run on a context owns the
	// browser, and the steps' timeout contexts end when each step does.
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start chromium: %v\n%s", err, lastLines(chromeOut.String(), 30))
	}
	return bctx
}

// lastLines is the end of a long text.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// step runs browser actions bounded by browserStepTimeout, failing the
// test with what was being done.
func step(t *testing.T, bctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(bctx, browserStepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v\nthe browser shows: %s", what, err, pageSummary(bctx))
	}
}

// pageSummary is the open page's address and the start of its text, for
// failure messages. (Typed passwords are input values, not page text.)
func pageSummary(bctx context.Context) string {
	ctx, cancel := context.WithTimeout(bctx, 5*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](
		`location.href + ' | ' + document.title + ' | ' + (document.body ? document.body.innerText.slice(0, 400) : '')`))
	if err != nil {
		return fmt.Sprintf("(unknown: %v)", err)
	}
	return s
}

// eval evaluates a JavaScript expression, awaiting a promise, bounded by
// browserStepTimeout.
func eval[T any](t *testing.T, bctx context.Context, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(bctx, browserStepTimeout)
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
	ctx, cancel := context.WithTimeout(bctx, browserStepTimeout)
	defer cancel()
	id, err := chromedp.Run(ctx, chromedp.Poll[string](expr, chromedp.WithPollingInterval(100*time.Millisecond),
		chromedp.WithPollingTimeout(browserStepTimeout)))
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
func (r *webRig) pendingIDs(t *testing.T) []string {
	t.Helper()
	var list []struct{ ID string }
	if err := json.Unmarshal([]byte(r.cli.ok("", "approvals", "list", "-o", "json")), &list); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, a := range list {
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
	chromiumPath(t) // skip before starting anything
	r := startWebRig(t)
	ctx, cancel := context.WithTimeout(context.Background(), browserTestTimeout)
	defer cancel()
	bctx := r.newBrowser(ctx)

	if !t.Run("login", func(t *testing.T) {
		r.login(t, bctx, "not the password at all")
		step(t, bctx, "wait for the login error", chromedp.WaitVisible(chromedp.CSS("#login-error")))
		r.login(t, bctx, r.pw)
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
		live = r.agent("rm -f " + approveFile)
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
		a := r.agent("rm -f " + denyFile)
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
		markupRun = r.agent("echo '" + markup + "' > " + markupFile)
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
		// The form itself, with its csrf_token field taken out.
		eval[bool](t, bctx, fmt.Sprintf(`(() => {
			const f = document.querySelector('#approval-%s form.approve');
			f.querySelector('input[name=csrf_token]').remove();
			f.submit();
			return true;
		})()`, markupID))
		// The submit navigates; until the answer loads, an evaluation may
		// fail with the old page gone, so ask again until the bound.
		refused := `location.pathname.endsWith('/approve') && document.body !== null && document.body.innerText.includes('CSRF')`
		var last error
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("last evaluation error %v; the browser shows: %s", last, pageSummary(bctx))
			}
		})
		testwait.Until(t, "the refusal page of the form post without the token", func() bool {
			ctx, cancel := context.WithTimeout(bctx, time.Second)
			defer cancel()
			ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](refused))
			last = err
			return err == nil && ok
		})
		if ids := r.pendingIDs(t); len(ids) != 1 || ids[0] != markupID {
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
		sctx, cancel := context.WithTimeout(bctx, browserStepTimeout)
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
	if code := r.p.stop(); code != 0 {
		t.Errorf("SIGTERM: got exit %d; want 0\nstderr:\n%s", code, r.p.stderrText())
	}
	if strings.Contains(r.p.stderrText(), r.pw) {
		t.Error("the admin password is in postern's log")
	}
}
