package main

import (
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/chromedp/chromedp"
	"golang.org/x/crypto/ssh"

	"github.com/postern/postern/internal/testwait"
)

// TestBrowserManage drives the Agents, Connections and Tokens pages'
// forms in Chromium against a real postern serve and sshd: an
// agent registered from a pasted key; a connection added with a key that
// postern generates, whose public line the page shows and the test
// installs on the target; edited, re-pinned after the target's host key
// changes, rotated and removed; a token made (shown once), used and
// revoked. Every change is audited as the admin, via web.
func TestBrowserManage(t *testing.T) {
	t.Parallel()
	r, bctx := startBrowserRig(t)
	ctx := testwait.Context(t)
	r.login(t, bctx, r.password)
	step(t, bctx, "wait for the logged-in page", chromedp.WaitVisible(chromedp.CSS("#logout")))
	sshd := r.target

	// open navigates to a page (which has no flash yet) and waits for sel.
	open := func(t *testing.T, path, sel string) {
		t.Helper()
		step(t, bctx, "open "+path, chromedp.Navigate(r.base+path), chromedp.WaitVisible(chromedp.CSS(sel)))
	}
	// submit clicks a form's button and waits for the flash it leads to.
	// The flash of the form before is removed first, so that the wait is
	// for the new page's.
	submit := func(t *testing.T, what, button string) string {
		t.Helper()
		eval[bool](t, bctx, `(document.getElementById('flash')?.remove(), true)`)
		step(t, bctx, what, chromedp.Click(chromedp.CSS(button)), chromedp.WaitVisible(chromedp.CSS("#flash")))
		return eval[string](t, bctx, `document.getElementById('flash').textContent`)
	}
	publicLine := regexp.MustCompile(`ssh-ed25519 [A-Za-z0-9+/=]+ postern:gen`)

	t.Run("register an agent", func(t *testing.T) {
		k := writeKeyFiles(t, "claude", "")
		open(t, "/agents", "#add-agent")
		step(t, bctx, "fill the form",
			chromedp.SendKeys(chromedp.CSS(`#add-agent input[name=name]`), "claude"),
			chromedp.SendKeys(chromedp.CSS(`#add-agent textarea[name=keys]`), k.pubLine))
		if f := submit(t, "add the agent", "#add-agent-submit"); !strings.Contains(f, "Added agent claude with key "+k.fingerprint) {
			t.Errorf("flash %q", f)
		}
		if !eval[bool](t, bctx, `!!document.getElementById('agent-claude')`) {
			t.Error("the agents page lacks claude")
		}
	})

	var line string
	t.Run("add a connection with a generated key", func(t *testing.T) {
		open(t, "/connections", "#add-connection")
		step(t, bctx, "fill the form",
			chromedp.SendKeys(chromedp.CSS(`#add-connection input[name=alias]`), "gen"),
			chromedp.SendKeys(chromedp.CSS(`#add-connection input[name=host]`), sshd.Host),
			chromedp.SetValue(chromedp.CSS(`#add-connection input[name=port]`), strconv.Itoa(sshd.Port)),
			chromedp.SendKeys(chromedp.CSS(`#add-connection input[name=user]`), sshd.User),
			chromedp.SendKeys(chromedp.CSS(`#add-connection textarea[name=host_keys]`), bareKey(sshd.HostKey)),
			chromedp.Click(chromedp.CSS(`#add-connection input[name=generate_key]`)))
		f := submit(t, "add the connection", "#add-connection-submit")
		line = publicLine.FindString(f)
		if line == "" || !strings.Contains(f, "Key check: rejected") {
			t.Fatalf("flash %q; want the generated key's public line and the target's refusal", f)
		}
		if shown := eval[string](t, bctx, `document.querySelector('#conn-gen textarea.public-key').value`); shown != line {
			t.Errorf("the row's public key %q; want %q", shown, line)
		}
		// The admin installs the line on the target, then re-checks.
		sshd.Authorize(t, line)
		if f := submit(t, "re-check", "#conn-gen form.recheck button"); !strings.HasPrefix(f, "Key check of gen: ok") {
			t.Errorf("re-check after installing the key: flash %q; want ok", f)
		}
		if got := eval[string](t, bctx, `document.getElementById('conn-gen').dataset.keyStatus`); got != "ok" {
			t.Errorf("row status %q; want ok", got)
		}
	})
	if line == "" {
		t.FailNow()
	}

	t.Run("edit the connection", func(t *testing.T) {
		open(t, "/connections", "#conn-gen")
		// (Staging: on production the re-pin and the rotation below
		// would wait for a second admin, TestDualControlThroughThePage's
		// subject.)
		step(t, bctx, "open Edit and choose staging",
			chromedp.Click(chromedp.CSS(`#conn-gen details.edit summary`)),
			chromedp.SetValue(chromedp.CSS(`#conn-gen form.edit-connection select[name=env]`), "staging"))
		if f := submit(t, "save", `#conn-gen form.edit-connection button.save`); !strings.HasPrefix(f, "Changed connection gen") ||
			!strings.Contains(f, "staging") {
			t.Errorf("flash %q", f)
		}
	})

	t.Run("re-pin after the target's host key changed", func(t *testing.T) {
		oldFP := ssh.FingerprintSHA256(sshd.HostKey)
		sshd.NewHostKey(t)
		newFP := ssh.FingerprintSHA256(sshd.HostKey)
		open(t, "/connections", "#conn-gen")
		if f := submit(t, "re-check", "#conn-gen form.recheck button"); !strings.Contains(f, "host_key_mismatch") || !strings.Contains(f, newFP) {
			t.Errorf("re-check with the new host key: flash %q; want a mismatch naming %s", f, newFP)
		}
		open(t, "/connections", "#conn-gen")
		step(t, bctx, "open Re-pin and accept the presented key",
			chromedp.Click(chromedp.CSS(`#conn-gen details.pin summary`)),
			chromedp.Click(chromedp.CSS(`#conn-gen form.pin-connection input[name=accept_new_host_key]`)))
		f := submit(t, "re-pin", `#conn-gen form.pin-connection button.pin`)
		if !strings.Contains(f, "Host key: "+oldFP+" → "+newFP) || !strings.Contains(f, "Key check: ok") {
			t.Errorf("flash %q; want old → new and the check ok", f)
		}
	})

	t.Run("rotate to another generated key in stages", func(t *testing.T) {
		open(t, "/connections", "#conn-gen")
		step(t, bctx, "open Rotate key and tick generate",
			chromedp.Click(chromedp.CSS(`#conn-gen details.rotate summary`)),
			chromedp.Click(chromedp.CSS(`#conn-gen form.rotate-key input[name=generate_key]`)))
		f := submit(t, "stage", `#conn-gen form.rotate-key button.rotate`)
		next := publicLine.FindString(f)
		if next == "" || next == line || !strings.Contains(f, "nothing switched yet") {
			t.Fatalf("flash %q; want a new public line, staged", f)
		}
		if shown := eval[string](t, bctx, `document.querySelector('#conn-gen textarea.staged-public-key').value`); shown != next {
			t.Errorf("the page shows the staged line %q; want %q", shown, next)
		}
		if f := submit(t, "commit before installing", `#conn-gen form.commit-key button.commit`); !strings.Contains(f, "not switched") {
			t.Errorf("commit of a key the target does not know: %q; want it refused", f)
		}
		sshd.Authorize(t, next)
		if f := submit(t, "commit", `#conn-gen form.commit-key button.commit`); !strings.Contains(f, "switched to key") {
			t.Errorf("commit after installing the new key: %q", f)
		}
		if f := submit(t, "re-check", "#conn-gen form.recheck button"); !strings.HasPrefix(f, "Key check of gen: ok") {
			t.Errorf("re-check after the commit: %q", f)
		}
		if eval[bool](t, bctx, `!!document.querySelector('#conn-gen .staged-key')`) {
			t.Error("the page still shows a staged key after the commit")
		}
	})

	t.Run("remove a connection", func(t *testing.T) {
		open(t, "/connections", "#conn-target")
		step(t, bctx, "tick the confirmation", chromedp.Click(chromedp.CSS(`#conn-target form.remove input[name=confirm]`)))
		if f := submit(t, "remove", `#conn-target form.remove button.remove`); !strings.HasPrefix(f, "Removed connection target") {
			t.Errorf("flash %q", f)
		}
		if eval[bool](t, bctx, `!!document.getElementById('conn-target')`) {
			t.Error("the removed connection is still listed")
		}
	})

	t.Run("make, use and revoke a token", func(t *testing.T) {
		open(t, "/tokens", "#add-token")
		step(t, bctx, "make an admin token",
			chromedp.SendKeys(chromedp.CSS(`#add-token input[name=name]`), "automation"),
			chromedp.SetValue(chromedp.CSS(`#add-token select[name=scope]`), "admin"),
			chromedp.Click(chromedp.CSS("#add-token-submit")),
			chromedp.WaitVisible(chromedp.CSS("#new-token-value")))
		token := eval[string](t, bctx, `document.getElementById('new-token-value').value`)
		if !strings.HasPrefix(token, "pst_") || strings.Contains(eval[string](t, bctx, `location.href`), token) {
			t.Fatalf("token %q shown at %s; want a pst_ token, not in the URL", token, eval[string](t, bctx, `location.href`))
		}
		// An admin token waits for a second admin: refused until then.
		wc := newWebClient(t, r.base, r.tlsFP)
		if status, _ := apiCall(ctx, wc, token, http.MethodGet, "/v1/agents", ""); status != http.StatusUnauthorized {
			t.Errorf("the token before a second admin approved it: %d; want 401", status)
		}
		if ids := r.cli.approveChanges(); len(ids) != 1 {
			t.Fatalf("changes waiting after the token was made: %v; want the one", ids)
		}
		status, body := apiCall(ctx, wc, token, http.MethodPost, "/v1/grants", `{"agent": "claude", "connection": "gen", "write": "ask"}`)
		if status != http.StatusCreated {
			t.Errorf("the new admin token granting: %d %s; want 201", status, body)
		}
		open(t, "/tokens", "#token-automation")
		if eval[bool](t, bctx, fmt.Sprintf(`document.body.innerHTML.includes(%s)`, jsString(token))) {
			t.Error("the tokens page shows the token again")
		}
		if f := submit(t, "revoke", `#token-automation form.revoke button`); !strings.HasPrefix(f, "Revoked token automation") {
			t.Errorf("flash %q", f)
		}
		if status, _ := apiCall(ctx, wc, token, http.MethodGet, "/v1/agents", ""); status != http.StatusUnauthorized {
			t.Errorf("the revoked token: %d; want 401", status)
		}
	})

	var web []string
	for _, row := range adminRows(r.cli.auditRows()) {
		if strings.HasPrefix(row.Reason, "via web") {
			// The token's row once approved is both admins', made when
			// the second approved (with the CLI: no address).
			made := len(row.Deciders) == 2 && row.Deciders[1] == secondAdmin
			if row.Deciders[0] != r.admin || (row.SourceAddr == "") != made {
				t.Errorf("audit row %d %q: by %v from %q; want %s from an address", row.Seq, row.Operation, row.Deciders, row.SourceAddr, r.admin)
			}
			web = append(web, strings.SplitN(row.Operation, ":", 2)[0])
		}
	}
	want := "agent add claude|conn add gen|conn update gen|conn update gen|conn rotate-key gen|conn rotate-key gen|conn remove target|token add automation|token add automation|token remove automation"
	if got := strings.Join(web, "|"); got != want {
		t.Errorf("the page's audited changes:\n%s\nwant\n%s", got, want)
	}
	if code := r.srv.end(syscall.SIGTERM); code != 0 {
		t.Errorf("SIGTERM: exit %d", code)
	}
}
