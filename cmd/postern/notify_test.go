package main

// The notification channels from the admin's side: `postern notify` (add,
// list, remove, test), and end to end (TestNotifyEndToEnd) a request made
// by a real ssh client and a decision made with the CLI in another process
// reaching a local webhook from the serving postern.

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/postern/postern/internal/testwait"
	"github.com/postern/postern/model"
	"github.com/postern/postern/notify"
)

// Secrets given to channels in these tests: no output of postern may hold
// them.
const (
	hookPathToken = "Zq7cliHookToken"
	hookHMACKey   = "Zq7cliSigningSecret"
)

// webhook is a local receiver (httptest on 127.0.0.1) for a channel.
type webhook struct {
	srv *httptest.Server
	// mu guards status and got.
	mu     sync.Mutex
	status int
	got    []hookRequest
	// arrived gets each request as it comes.
	arrived chan hookRequest
}

type hookRequest struct {
	header http.Header
	body   []byte
}

func newWebhook(t *testing.T) *webhook {
	t.Helper()
	h := &webhook{status: http.StatusOK, arrived: make(chan hookRequest, 100)}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rq := hookRequest{header: r.Header.Clone(), body: b}
		h.mu.Lock()
		h.got = append(h.got, rq)
		code := h.status
		h.mu.Unlock()
		h.arrived <- rq
		w.WriteHeader(code)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *webhook) url() string {
	return h.srv.URL + "/hooks/" + hookPathToken + "?sig=" + hookPathToken
}

func (h *webhook) setStatus(code int) {
	h.mu.Lock()
	h.status = code
	h.mu.Unlock()
}

// next waits for the next request with event.
func (h *webhook) next(t *testing.T, event string) (hookRequest, notify.Payload) {
	t.Helper()
	deadline := time.NewTimer(testwait.Remaining(t))
	defer deadline.Stop()
	for {
		select {
		case rq := <-h.arrived:
			var p notify.Payload
			if err := json.Unmarshal(rq.body, &p); err != nil {
				t.Fatalf("webhook got a body that is not the payload: %v", err)
			}
			if p.Event == event {
				return rq, p
			}
		case <-deadline.C:
			t.Fatalf("no %s notification by the test's deadline", event)
		}
	}
}

// secretFile writes a secret file as an admin would (with a final newline).
func secretFile(t *testing.T, secret string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(f, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// checkNoHookSecrets fails if out holds the URL's token or the HMAC key.
func checkNoHookSecrets(t *testing.T, place, out string) {
	t.Helper()
	for _, s := range []string{hookPathToken, hookHMACKey} {
		if strings.Contains(out, s) {
			t.Errorf("%s holds a channel secret (%s…)", place, s[:6])
		}
	}
}

func TestNotifyCommands(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	hook := newWebhook(t)
	var outputs strings.Builder
	run := func(stdin string, args ...string) result {
		t.Helper()
		r := c.run(stdin, args...)
		outputs.WriteString(r.stdout + r.stderr)
		return r
	}

	r := run("", "notify", "add", "ops", "--url", hook.url(), "--secret-file", secretFile(t, hookHMACKey),
		"--events", "pending,decided")
	shown := "http://" + hook.srv.Listener.Addr().String() + "/…"
	if r.code != 0 || !strings.HasPrefix(r.stdout, "added notification channel ops (chn_") ||
		!strings.HasSuffix(r.stdout, "): json to "+shown+", events pending,decided, secret set\n") {
		t.Errorf("notify add: exit %d, stdout %q, stderr %q; want the channel added", r.code, r.stdout, r.stderr)
	}
	if r.stderr != "" {
		t.Errorf("notify add to a loopback http URL warned: %q; want no warning", r.stderr)
	}
	// The URL from standard input, and a warning for plain http off loopback.
	r = run("http://hooks.example.com/"+hookPathToken+"\n", "notify", "add", "chat", "--url-file", "-", "--format", "slack",
		"--events", "decided")
	if r.code != 0 || !strings.Contains(r.stdout, "slack to http://hooks.example.com/…, events decided, secret not set") ||
		!strings.Contains(r.stderr, "warning: the URL is plain http") {
		t.Errorf("notify add --url-file -: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}

	text := run("", "notify", "list")
	for _, want := range []string{"NAME", "LAST DELIVERY", "ops", "json", shown, "pending,decided", " set ", "chat", "not set"} {
		if !strings.Contains(text.stdout, want) {
			t.Errorf("notify list lacks %q:\n%s", want, text.stdout)
		}
	}
	js := run("", "notify", "list", "-o", "json")
	var list []model.Channel
	if err := json.Unmarshal([]byte(js.stdout), &list); err != nil {
		t.Fatalf("notify list -o json: %v\n%s", err, js.stdout)
	}
	if len(list) != 2 || list[0].Name != "chat" || list[1].Name != "ops" || !list[1].SecretSet || list[1].URL != shown ||
		strings.Join(list[1].Events, ",") != "pending,decided" || !list[1].LastDeliveryAt.IsZero() {
		t.Errorf("notify list -o json = %+v; want chat and ops with ops's facts", list)
	}

	// test: delivered (exit 0), then refused (exit 1), and the list shows both.
	r = run("", "notify", "test", "ops")
	if r.code != 0 || r.stdout != "test message delivered to ops ("+shown+", HTTP 200)\n" {
		t.Errorf("notify test: exit %d, stdout %q, stderr %q; want delivered", r.code, r.stdout, r.stderr)
	}
	rq, p := hook.next(t, notify.EventTest)
	if !notify.Verify([]byte(hookHMACKey), rq.body, rq.header.Get(notify.SignatureHeader)) || p.Link != "" {
		t.Errorf("test message: signature verifies %v, link %q; want signed with the file's secret (trimmed), no link",
			notify.Verify([]byte(hookHMACKey), rq.body, rq.header.Get(notify.SignatureHeader)), p.Link)
	}
	hook.setStatus(http.StatusUnauthorized)
	r = run("", "notify", "test", "ops")
	if r.code != 1 || !strings.Contains(r.stderr, "test message to ops not delivered: HTTP 401 Unauthorized") {
		t.Errorf("notify test against a 401: exit %d, stderr %q; want 1 and the status", r.code, r.stderr)
	}
	if err := json.Unmarshal([]byte(run("", "notify", "list", "-o", "json").stdout), &list); err != nil {
		t.Fatal(err)
	}
	if list[1].LastDeliveryAt.IsZero() || list[1].LastFailureAt.IsZero() || !strings.Contains(list[1].LastError, "401") {
		t.Errorf("ops after two tests = %+v; want a delivery, a failure and its error", list[1])
	}

	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"duplicate", []string{"notify", "add", "ops", "--url", "https://h/x"}, "notification channel ops already exists"},
		{"bad URL", []string{"notify", "add", "x", "--url", "ftp://h/" + hookPathToken}, "must start with https://"},
		{"no URL", []string{"notify", "add", "x"}, "missing --url"},
		{"both URLs", []string{"notify", "add", "x", "--url", "https://h/", "--url-file", "f"}, "not both"},
		{"format", []string{"notify", "add", "x", "--url", "https://h/", "--format", "xml"}, "want json, slack or ntfy"},
		{"events", []string{"notify", "add", "x", "--url", "https://h/", "--events", "expired"}, `event "expired"`},
		{"slack secret", []string{"notify", "add", "x", "--url", "https://h/", "--format", "slack", "--secret-file",
			secretFile(t, hookHMACKey)}, "takes no secret"},
		{"remove unknown", []string{"notify", "remove", "nope"}, `notification channel "nope" not found`},
		{"test unknown", []string{"notify", "test", "nope"}, `notification channel "nope" not found`},
		{"no subcommand", []string{"notify"}, "missing subcommand"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := run("", tt.args...)
			if r.code != 2 || !strings.Contains(r.stderr, tt.want) {
				t.Errorf("got exit %d, stderr %q; want 2 and %q", r.code, r.stderr, tt.want)
			}
		})
	}

	if r := run("", "notify", "remove", "chat"); r.code != 0 || r.stdout != "removed notification channel chat\n" {
		t.Errorf("notify remove: exit %d, stdout %q", r.code, r.stdout)
	}
	if err := json.Unmarshal([]byte(run("", "notify", "list", "-o", "json").stdout), &list); err != nil || len(list) != 1 {
		t.Errorf("after remove: %d channels, %v; want 1", len(list), err)
	}
	checkNoHookSecrets(t, "the CLI's output", outputs.String())
}

// TestNotifyEndToEnd: against a real postern serve, sshd and ssh client, a
// request the agent makes reaches a local webhook as a signed pending
// notification with a link to its page, and a decision made with the CLI,
// in another process, reaches it as a decided notification sent by the
// serving postern. Neither the URL's token nor the signing key appears in
// postern's log or the CLI's output.
func TestNotifyEndToEnd(t *testing.T) {
	t.Parallel()
	r := startWebRig(t)
	hook := newWebhook(t)
	var outputs strings.Builder
	outputs.WriteString(r.cli.ok("", "notify", "add", "ops", "--url", hook.url(), "--secret-file", secretFile(t, hookHMACKey)))

	target := filepath.Join(r.scratch, "notified")
	run := r.ssh("target", "touch "+target)
	rq, p := hook.next(t, "pending")
	if !notify.Verify([]byte(hookHMACKey), rq.body, rq.header.Get(notify.SignatureHeader)) {
		t.Error("the pending notification's signature does not verify with the channel's secret")
	}
	if p.Agent != "bot" || p.Alias != "target" || p.Class != "write" || p.Status != "pending" ||
		p.Operation != "touch "+target || p.Link != r.base+"/approvals/"+p.ApprovalID || p.ApprovalID == "" {
		t.Errorf("pending payload = %+v; want bot's write on target, with a link to the request's page", p)
	}
	if ids := r.pendingIDs(); len(ids) != 1 || ids[0] != p.ApprovalID {
		t.Fatalf("pending requests %v; want the notified %s", ids, p.ApprovalID)
	}

	// The decision comes from the CLI, a process of its own; the serving
	// postern's dispatcher finds it in the outbox.
	outputs.WriteString(r.cli.ok("", "approvals", "approve", p.ApprovalID, "--as", r.admin))
	rq, d := hook.next(t, "decided")
	if !notify.Verify([]byte(hookHMACKey), rq.body, rq.header.Get(notify.SignatureHeader)) ||
		d.ApprovalID != p.ApprovalID || d.Status != "approved" || len(d.DecidedBy) != 1 || d.DecidedBy[0] != r.admin ||
		d.Delivery == p.Delivery {
		t.Errorf("decided payload = %+v; want %s approved by %s, signed, its own delivery id", d, p.ApprovalID, r.admin)
	}
	run.wait(t)
	if run.code != 0 {
		t.Errorf("the approved command: exit %d, stderr %q; want 0", run.code, run.stderr)
	}
	if _, err := os.Stat(target); err != nil {
		t.Errorf("the approved touch did not run: %v", err)
	}
	// The webhook has both requests; the dispatcher records a delivery
	// once it has read the answer, a moment later.
	var list []model.Channel
	testwait.Until(t, "notify list to show both deliveries recorded", func() bool {
		list = nil
		if err := json.Unmarshal([]byte(r.cli.ok("", "notify", "list", "-o", "json")), &list); err != nil || len(list) != 1 {
			t.Fatalf("notify list = %+v, %v; want the one channel", list, err)
		}
		return list[0].Queued == 0
	})
	if list[0].LastDeliveryAt.IsZero() {
		t.Errorf("notify list after both deliveries = %+v; want a last delivery", list)
	}
	if code := r.srv.end(syscall.SIGTERM); code != 0 {
		t.Errorf("SIGTERM: exit %d; want 0", code)
	}
	logText := r.srv.stderrText()
	if strings.Count(logText, "notify: notification delivered") != 2 {
		t.Errorf("the log has %d delivery lines; want 2\n%s", strings.Count(logText, "notify: notification delivered"), logText)
	}
	checkNoHookSecrets(t, "postern's log", logText)
	checkNoHookSecrets(t, "the CLI's output", outputs.String())
}
