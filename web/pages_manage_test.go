package web

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/postern/postern/recipes"
	"github.com/postern/postern/store"
)

// The forms of the Connections, Agents and Tokens pages, over
// HTTP; cmd/postern's browser test drives them in Chromium.

// TestManageFormsNeedCSRFToken: every new form is refused without the
// session's CSRF token, and changes nothing.
func TestManageFormsNeedCSRFToken(t *testing.T) {
	ps := newPageSite(t, withChecker(t, func(tg recipes.Target) recipes.Result {
		t.Errorf("a key check of %s ran for a post without its CSRF token", tg.Name)
		return recipes.Result{}
	}))
	pc := ps.admin("alice")
	k := newTestKeyPair(t)
	posts := map[string]url.Values{
		"/connections":                 {"alias": {"x"}, "host": {"h"}, "user": {"u"}, "generate_key": {"1"}, "host_keys": {k.Authorized}},
		"/connections/web1/update":     {"port": {"2200"}},
		"/connections/web1/pin":        {"host_keys": {k.Authorized}},
		"/connections/web1/rotate-key": {"generate_key": {"1"}},
		"/connections/web1/remove":     {"confirm": {"1"}},
		"/agents":                      {"name": {"x"}, "keys": {k.Authorized}},
		"/agents/bot/keys":             {"key": {k.Authorized}},
		"/agents/bot/disable":          {},
		"/agents/bot/remove":           {"confirm": {"1"}},
		"/tokens":                      {"name": {"x"}},
	}
	before := snapshotStore(t, ps.st)
	for path, form := range posts {
		for _, tok := range []string{"", "not-the-token"} {
			f := url.Values{}
			for k, v := range form {
				f[k] = v
			}
			if tok != "" {
				f.Set(csrfField, tok)
			}
			if status, _, _ := pc.post(path, f); status != http.StatusForbidden {
				t.Errorf("POST %s with CSRF token %q: %d; want 403", path, tok, status)
			}
		}
	}
	if after := snapshotStore(t, ps.st); after != before {
		t.Errorf("refused posts changed the data:\n%s\nwant\n%s", after, before)
	}
}

// snapshotStore describes agents, connections and tokens for comparison.
func snapshotStore(t *testing.T, st *store.Store) string {
	t.Helper()
	ctx := context.Background()
	var b strings.Builder
	agents, _ := st.ListAgents(ctx)
	for _, a := range agents {
		b.WriteString("agent " + a.Name + " " + a.ModifiedAt.String() + "\n")
	}
	conns, _ := st.ListConnections(ctx)
	for _, c := range conns {
		b.WriteString("conn " + c.Alias + " " + c.ModifiedAt.String() + "\n")
	}
	toks, _ := st.ListConsoleTokens(ctx)
	for _, tk := range toks {
		b.WriteString("token " + tk.Name + "\n")
	}
	return b.String()
}

// TestConnectionForms: add with a generated key (the public line shown),
// a refused add (nothing stored, the pasted key not echoed), edit, re-pin,
// rotate and remove, each audited as the admin via web.
func TestConnectionForms(t *testing.T) {
	result := recipes.Result{Status: recipes.StatusRejected, Message: "Permission denied (publickey)"}
	ps := newPageSite(t, withChecker(t, func(recipes.Target) recipes.Result { return result }))
	pc := ps.admin("alice")
	hostKey := newTestKeyPair(t)
	pasted := newTestKeyPair(t)

	_, h, _ := pc.post("/connections", pc.form("alias", "gen", "host", "10.0.0.9", "port", "22", "user", "deploy",
		"env", "staging", "host_keys", hostKey.Authorized, "generate_key", "1"))
	page := pc.follow(h)
	flash := flashText(page)
	c, err := ps.st.ConnectionByAlias(context.Background(), "gen")
	if err != nil {
		t.Fatalf("generated connection not stored: %v (flash %q)", err, flash)
	}
	pub, err := ps.st.ConnectionPublicKey(context.Background(), c.ID)
	if err != nil {
		t.Fatal(err)
	}
	line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub)))
	if !strings.Contains(flash, "Add this public key") || !strings.Contains(flash, line) || !strings.Contains(flash, "Key check: rejected") {
		t.Errorf("flash %q; want the public line %s and the check", flash, line)
	}
	if !strings.Contains(html.UnescapeString(page), line+" postern:gen") {
		t.Error("the connections page does not show the generated key's public line")
	}

	_, h, _ = pc.post("/connections", pc.form("alias", "pasted", "host", "10.0.0.10", "user", "deploy",
		"host_keys", hostKey.Authorized, "private_key", string(pasted.PrivatePEM)))
	page = pc.follow(h)
	if f := flashText(page); !strings.Contains(f, "not added: rejected: Permission denied") || !strings.Contains(f, "Nothing was stored") {
		t.Errorf("refused add: flash %q", f)
	}
	if strings.Contains(page, strings.Split(string(pasted.PrivatePEM), "\n")[1]) || strings.Contains(h.Get("Location"), "PRIVATE") {
		t.Error("a refused add shows the pasted private key")
	}
	if _, err := ps.st.ConnectionByAlias(context.Background(), "pasted"); err == nil {
		t.Error("a connection whose key was rejected was stored")
	}
	_, h, _ = pc.post("/connections", pc.form("alias", "pasted", "host", "10.0.0.10", "user", "deploy",
		"host_keys", hostKey.Authorized, "private_key", string(pasted.PrivatePEM), "allow_unverified", "1"))
	if _, err := ps.st.ConnectionByAlias(context.Background(), "pasted"); err != nil {
		t.Errorf("add with allow_unverified: %v (flash %q); want stored", err, flashText(pc.follow(h)))
	}

	result = recipes.Result{Status: recipes.StatusOK, Message: "ran true"}
	_, h, _ = pc.post("/connections/web1/update", pc.form("host", "127.0.0.1", "port", "2200", "user", "deploy", "env", "test", "recipe", ""))
	if f := flashText(pc.follow(h)); !strings.HasPrefix(f, "Changed connection web1 (deploy@127.0.0.1:2200, test).") {
		t.Errorf("edit: flash %q", f)
	}
	newHost := newTestKeyPair(t)
	_, h, _ = pc.post("/connections/web1/pin", pc.form("host_keys", newHost.Authorized))
	if f := flashText(pc.follow(h)); !strings.Contains(f, "Host key: ") || !strings.Contains(f, " → "+ssh.FingerprintSHA256(newHost.Public)) {
		t.Errorf("re-pin: flash %q; want old → new", f)
	}
	_, h, _ = pc.post("/connections/web1/rotate-key", pc.form("generate_key", "1"))
	if f := flashText(pc.follow(h)); !strings.Contains(f, "Add this public key") || !strings.Contains(f, "nothing switched yet") {
		t.Errorf("stage: flash %q", f)
	}
	if _, _, body := pc.get("/connections"); !strings.Contains(body, `class="staged-fingerprint"`) || !strings.Contains(body, `value="commit"`) {
		t.Errorf("the page does not show the staged key with its Commit button")
	}
	result = recipes.Result{Status: recipes.StatusRejected, Message: "Permission denied (publickey)"}
	_, h, _ = pc.post("/connections/web1/rotate-key", pc.form("action", "commit"))
	if f := flashText(pc.follow(h)); !strings.Contains(f, "not switched") || !strings.Contains(f, "rejected") {
		t.Errorf("commit of a rejected key: flash %q", f)
	}
	result = recipes.Result{Status: recipes.StatusOK, Message: "ran true"}
	_, h, _ = pc.post("/connections/web1/rotate-key", pc.form("action", "commit"))
	if f := flashText(pc.follow(h)); !strings.Contains(f, "switched to key") {
		t.Errorf("commit: flash %q", f)
	}
	_, h, _ = pc.post("/connections/web1/rotate-key", pc.form("generate_key", "1"))
	pc.follow(h)
	_, h, _ = pc.post("/connections/web1/rotate-key", pc.form("action", "abort"))
	if f := flashText(pc.follow(h)); !strings.Contains(f, "Dropped the staged key") {
		t.Errorf("abort: flash %q", f)
	}
	_, h, _ = pc.post("/connections/web1/remove", pc.form())
	if f := flashText(pc.follow(h)); !strings.Contains(f, "tick the box") {
		t.Errorf("remove without confirm: flash %q", f)
	}
	_, h, _ = pc.post("/connections/web1/remove", pc.form("confirm", "1"))
	if f := flashText(pc.follow(h)); !strings.HasPrefix(f, "Removed connection web1") {
		t.Errorf("remove: flash %q", f)
	}
	rows, err := ps.st.ListAudit(context.Background(), store.AuditFilter{Kind: "admin"})
	if err != nil {
		t.Fatal(err)
	}
	var ops []string
	for _, r := range rows {
		if r.Deciders[0] != "alice" || r.Reason == "" || !strings.HasPrefix(r.Reason, "via web") {
			t.Errorf("audit row %d: %v %q; want alice via web", r.Seq, r.Deciders, r.Reason)
		}
		ops = append(ops, strings.SplitN(r.Operation, ":", 2)[0])
	}
	want := "conn add gen|conn add pasted|conn update web1|conn update web1|conn rotate-key web1|conn rotate-key web1|" +
		"conn rotate-key web1|conn rotate-key web1|conn remove web1"
	if got := strings.Join(ops, "|"); got != want {
		t.Errorf("admin rows %q; want %q", got, want)
	}
}

// TestAgentAndTokenForms: agents are registered from a pasted key, given
// and relieved of keys, disabled and removed; a token is shown once, in the
// form's answer, never in a URL, and revoked.
func TestAgentAndTokenForms(t *testing.T) {
	ps := newPageSite(t, nil)
	pc := ps.admin("alice")
	k1, k2 := newTestKeyPair(t), newTestKeyPair(t)
	_, h, _ := pc.post("/agents", pc.form("name", "ci", "keys", k1.Authorized+" ci@runner\n"))
	if f := flashText(pc.follow(h)); !strings.HasPrefix(f, "Added agent ci with key "+ssh.FingerprintSHA256(k1.Public)) {
		t.Errorf("add agent: flash %q", f)
	}
	_, h, _ = pc.post("/agents", pc.form("name", "ci2", "keys", "ssh-ed25519 nonsense"))
	if f := flashText(pc.follow(h)); !strings.HasPrefix(f, "Agent ci2 not added") {
		t.Errorf("add agent with a bad key: flash %q", f)
	}
	pc.post("/agents/ci/keys", pc.form("key", k2.Authorized))
	pc.post("/agents/ci/keys/remove", pc.form("fingerprint", ssh.FingerprintSHA256(k1.Public)))
	pc.post("/agents/ci/disable", pc.form())
	a, err := ps.st.AgentByName(context.Background(), "ci")
	if err != nil || !a.Disabled || len(a.Keys) != 1 || a.Keys[0].Fingerprint != ssh.FingerprintSHA256(k2.Public) {
		t.Fatalf("agent after the forms: %+v, %v; want disabled with the second key only", a, err)
	}
	_, _, page := pc.get("/agents")
	if !strings.Contains(page, `action="/agents/ci/enable"`) {
		t.Error("a disabled agent has no Enable button")
	}
	pc.post("/agents/ci/remove", pc.form("confirm", "1"))
	if _, err := ps.st.AgentByName(context.Background(), "ci"); err == nil {
		t.Error("agent ci not removed")
	}

	// A read token is made at once; approve and admin tokens wait for a
	// second admin (TestPageTokenWaitsForSecondAdmin).
	status, h, page := pc.post("/tokens", pc.form("name", "ci", "scope", "read"))
	m := regexp.MustCompile(`id="new-token-value" class="token" readonly size="60" value="(pst_[^"]+)"`).FindStringSubmatch(page)
	if status != http.StatusOK || m == nil || h.Get("Location") != "" {
		t.Fatalf("make token: %d, location %q; want 200 showing the token, no redirect", status, h.Get("Location"))
	}
	token := m[1]
	tk, err := ps.st.ConsoleTokenByHash(context.Background(), hashToken(token))
	if err != nil || tk.Name != "ci" || tk.Scope != store.ScopeRead || tk.AdminName != "alice" {
		t.Fatalf("the shown token: %+v, %v; want ci, read scope, alice's", tk, err)
	}
	if _, _, again := pc.get("/tokens"); strings.Contains(again, token) || !strings.Contains(again, `id="token-ci"`) {
		t.Error("the tokens page shows the token again, or does not list it")
	}
	_, h, _ = pc.post("/tokens/ci/remove", pc.form())
	if f := flashText(pc.follow(h)); !strings.HasPrefix(f, "Revoked token ci") {
		t.Errorf("revoke: flash %q", f)
	}
	if _, err := ps.st.ConsoleTokenByHash(context.Background(), hashToken(token)); err == nil {
		t.Error("the revoked token still authenticates")
	}
}
