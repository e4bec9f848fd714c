package main

// Secret hygiene of the whole product (SECURITY.md, "No key reaches an
// agent"): a full scenario against `postern serve` and a
// real sshd, after which every byte postern produced is searched for the
// secrets it was given.

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/postern/postern/internal/e2e"
	"github.com/postern/postern/internal/testsshd"
	"github.com/postern/postern/internal/testwait"
)

// secret is one needle: bytes that must appear nowhere postern writes.
type secret struct {
	what   string // names the secret and the form searched; never holds it
	needle []byte
}

// tag names a secret in a failure message by what it is and a SHA-256
// prefix of its bytes, which tells two needles apart without showing them.
func (s secret) tag() string {
	sum := sha256.Sum256(s.needle)
	return fmt.Sprintf("%s (sha256:%x)", s.what, sum[:6])
}

// exhibit is one piece of what postern produced, and where it came from.
type exhibit struct {
	place string
	data  []byte
}

// leakHunt collects exhibits during the scenario and searches them all at
// the end. Every failure message of the scenario goes through redact, so
// that a test that finds a leak does not leak it again into the test log.
type leakHunt struct {
	t        *testing.T
	secrets  []secret
	exhibits []exhibit
}

func (h *leakHunt) add(place string, data []byte) {
	h.exhibits = append(h.exhibits, exhibit{place: place, data: bytes.Clone(data)})
}

func (h *leakHunt) addString(place, s string) { h.add(place, []byte(s)) }

// redact replaces every secret in s by its tag.
func (h *leakHunt) redact(s string) string {
	for _, sec := range h.secrets {
		s = strings.ReplaceAll(s, string(sec.needle), "[SECRET "+sec.tag()+"]")
	}
	return s
}

// hits lists the secrets found in data, with the offset of the first hit.
func (h *leakHunt) hits(data []byte) []string {
	var found []string
	for _, sec := range h.secrets {
		if i := bytes.Index(data, sec.needle); i >= 0 {
			found = append(found, fmt.Sprintf("%s at byte %d", sec.tag(), i))
		}
	}
	return found
}

// cli runs postern against c's data directory and keeps both outputs; a
// want of -1 takes any exit status.
func (h *leakHunt) cli(c *cli, want int, args ...string) result {
	h.t.Helper()
	r := c.run("", args...)
	place := "postern " + strings.Join(args, " ")
	h.addString(place+": stdout", r.stdout)
	h.addString(place+": stderr", r.stderr)
	if want >= 0 && r.code != want {
		h.t.Fatalf("%s: got exit %d; want %d\nstdout: %s\nstderr: %s", place, r.code, want, h.redact(r.stdout), h.redact(r.stderr))
	}
	return r
}

// check is cli for a command that checks a connection's key, with
// checkTimeout.
func (h *leakHunt) check(c *cli, want int, args ...string) result {
	h.t.Helper()
	return h.cli(c, want, append(args, checkTimeout(h.t)...)...)
}

// agent waits for an agent's run and keeps its output; a want of -1 takes
// any exit status.
func (h *leakHunt) agent(place string, a *agentRun, want int) *agentRun {
	h.t.Helper()
	a.wait(h.t)
	h.addString(place+": stdout", a.stdout)
	h.addString(place+": stderr", a.stderr)
	if want >= 0 && a.code != want {
		h.t.Errorf("%s: got exit %d; want %d\nstdout: %s\nstderr: %s", place, a.code, want, h.redact(a.stdout), h.redact(a.stderr))
	}
	return a
}

// http sends one request with the web client and keeps the answer; the
// token is sent as the bearer when not empty, a POST with an
// Idempotency-Key. A want of 0 takes any status.
func (h *leakHunt) http(ctx context.Context, wc *webClient, token, method, path, body string, want int) string {
	h.t.Helper()
	code, answer := apiCall(ctx, wc, token, method, path, body)
	h.addString(method+" "+path, answer)
	if want != 0 && code != want {
		h.t.Errorf("%s %s: got status %d; want %d\n%s", method, path, code, want, h.redact(answer))
	}
	return answer
}

// form posts a form of the logged-in page with the session's CSRF token,
// read from the page at from, and keeps both answers. It returns the
// status of the post.
func (h *leakHunt) form(ctx context.Context, wc *webClient, from, path string, values url.Values) int {
	h.t.Helper()
	code, page := wc.get(ctx, from)
	h.addString("GET "+from, page)
	m := loginCSRF.FindStringSubmatch(page)
	if code != http.StatusOK || m == nil {
		h.t.Fatalf("GET %s: got status %d, CSRF field found %v; want 200 and the field", from, code, m != nil)
	}
	values.Set("csrf_token", m[1])
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, wc.base+path, strings.NewReader(values.Encode()))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", wc.base)
	code, answer := wc.do(req)
	h.addString("POST "+path, answer)
	return code
}

// login posts the login form with name and password and keeps the
// answers; it returns the post's status.
func (h *leakHunt) login(ctx context.Context, wc *webClient, name, password string) int {
	h.t.Helper()
	return h.form(ctx, wc, "/login", "/login", url.Values{"name": {name}, "password": {password}, "next": {"/"}})
}

// canaryKey is a target private key made to be found: its ed25519 seed
// starts with a marker, and every form of it is a needle.
type canaryKey struct {
	signer  ssh.Signer
	pemText []byte
	file    string
	secrets []secret
}

// newCanaryKey makes the key, writes it as an unencrypted OpenSSH file and
// lists its needles: the PEM text, each PEM body line that carries the
// seed, and the seed and whole private key raw, in hex and in base64 (the
// seed at each of base64's three alignments, in both alphabets).
func newCanaryKey(t *testing.T, name string) canaryKey {
	t.Helper()
	seed := make([]byte, ed25519.SeedSize)
	n := copy(seed, "pstrn-canary-seed:"+name)
	if _, err := rand.Read(seed[n:]); err != nil {
		t.Fatal(err)
	}
	priv := ed25519.NewKeyFromSeed(seed)
	block, err := ssh.MarshalPrivateKey(priv, "postern canary "+name)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	k := canaryKey{signer: signer, pemText: pem.EncodeToMemory(block), file: filepath.Join(t.TempDir(), name)}
	if err := os.WriteFile(k.file, k.pemText, 0o600); err != nil {
		t.Fatal(err)
	}

	add := func(what string, needle []byte) {
		k.secrets = append(k.secrets, secret{what: name + " key: " + what, needle: needle})
	}
	add("PEM text", k.pemText)
	// The body lines that change when the seed does carry it; the others
	// (the format's magic, the public key) are public.
	i := bytes.Index(block.Bytes, seed)
	if i < 0 {
		t.Fatal("the seed is not in the OpenSSH key blob")
	}
	zeroed := bytes.Clone(block.Bytes)
	clear(zeroed[i : i+len(seed)])
	lines := strings.Split(string(k.pemText), "\n")
	other := strings.Split(string(pem.EncodeToMemory(&pem.Block{Type: block.Type, Headers: block.Headers, Bytes: zeroed})), "\n")
	seedLines := 0
	for j, l := range lines {
		if j < len(other) && l != other[j] {
			add(fmt.Sprintf("PEM body line %d", j), []byte(l))
			seedLines++
		}
	}
	if seedLines == 0 {
		t.Fatal("no PEM body line carries the seed")
	}
	for _, v := range []struct {
		what string
		raw  []byte
	}{{"seed", seed}, {"private key", priv}} {
		add(v.what+" (raw)", v.raw)
		add(v.what+" (hex)", []byte(hex.EncodeToString(v.raw)))
		add(v.what+" (HEX)", []byte(strings.ToUpper(hex.EncodeToString(v.raw))))
		add(v.what+" (base64)", []byte(base64.StdEncoding.EncodeToString(v.raw)))
		add(v.what+" (base64url)", []byte(base64.RawURLEncoding.EncodeToString(v.raw)))
	}
	// The seed inside a longer base64 text: whichever of the three byte
	// alignments it has there, the groups that hold only seed bytes are the
	// same as here.
	for shift := range 3 {
		enc := base64.StdEncoding.EncodeToString(append(make([]byte, shift), seed...))
		inner := enc[4 : len(enc)-4]
		add(fmt.Sprintf("seed (base64, alignment %d)", shift), []byte(inner))
		add(fmt.Sprintf("seed (base64url, alignment %d)", shift), []byte(strings.NewReplacer("+", "-", "/", "_").Replace(inner)))
	}
	return k
}

// textSecrets are the needles of a text secret: as is, in base64 and hex.
func textSecrets(what, s string) []secret {
	return []secret{
		{what + " (text)", []byte(s)},
		{what + " (base64)", []byte(base64.StdEncoding.EncodeToString([]byte(s)))},
		{what + " (hex)", []byte(hex.EncodeToString([]byte(s)))},
	}
}

// TestSecretsNeverLeak runs a full scenario — a connection added with its
// private key and checked, allowed, asked (approved over the API) and
// denied commands, SFTP transfers with a denied operation, key checks that
// pass and fail, every API route, every page of the web console after a
// login, and a series of errors — against postern serve with debug
// logging. It then searches everything postern produced (its log and
// stdout, every CLI output and error, the agents' output, every API answer
// and page, the audit log, and every file in the data directory, the
// database with its -wal and -shm included) for the connections' private
// keys, the console token and the admin password. SECURITY.md promises 0
// hits.
func TestSecretsNeverLeak(t *testing.T) {
	t.Parallel()
	requireSSHClient(t)
	e2e.Tool(t, "sftp", "openssh-client")
	target, stale := newCanaryKey(t, "target"), newCanaryKey(t, "stale")
	// Keys given over the API, the page's form and a config file.
	viaAPI, viaForm, viaApply := newCanaryKey(t, "api"), newCanaryKey(t, "form"), newCanaryKey(t, "apply")
	sshd := testsshd.Start(t, testsshd.Options{AuthorizedKeys: []ssh.PublicKey{target.signer.PublicKey()}})
	c := newCLI(t)
	h := &leakHunt{t: t}
	for _, k := range []canaryKey{target, stale, viaAPI, viaForm, viaApply} {
		h.secrets = append(h.secrets, k.secrets...)
	}

	ctx := testwait.Context(t)

	// The admin's password, and the console token postern makes.
	password := "Canary-Admin-Password-" + newPassword()
	h.secrets = append(h.secrets, textSecrets("admin password", password)...)
	h.cli(c, 0, "admin", "add", "alice", "--password-file", writePasswordFile(t, password))
	tokenOut := c.run("", "token", "add", "console", "--admin", "alice")
	if tokenOut.code != 0 {
		t.Fatalf("token add: got exit %d; want 0\nstderr: %s", tokenOut.code, tokenOut.stderr)
	}
	token := tokenFromOutput(t, tokenOut.stdout)
	h.secrets = append(h.secrets, textSecrets("console token", token)...)
	h.secrets = append(h.secrets, textSecrets("console token body", strings.TrimPrefix(token, "pst_"))...)
	// A token of scope admin, for the API's changes.
	adminOut := c.run("", "token", "add", "automation", "--admin", "alice", "--scope", "admin")
	if adminOut.code != 0 {
		t.Fatalf("token add --scope admin: got exit %d; want 0\nstderr: %s", adminOut.code, adminOut.stderr)
	}
	adminToken := tokenFromOutput(t, adminOut.stdout)
	c.approveChanges() // both tokens waited for a second admin
	h.secrets = append(h.secrets, textSecrets("admin token", adminToken)...)

	// A notification channel's URL (its path is a token) and secret.
	hookToken := "hook-path-token-" + newPassword()
	hookSecret := "hook-signing-secret-" + newPassword()
	h.secrets = append(h.secrets, textSecrets("notification URL token", hookToken)...)
	h.secrets = append(h.secrets, textSecrets("notification secret", hookSecret)...)
	hookDir := t.TempDir()
	urlFile := filepath.Join(hookDir, "url")
	secretFile := filepath.Join(hookDir, "secret")
	if err := os.WriteFile(urlFile, []byte("https://hooks.example.com/services/"+hookToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secretFile, []byte(hookSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h.cli(c, 0, "notify", "add", "ops", "--url-file", urlFile, "--secret-file", secretFile)

	// The scanner finds what it looks for: the key files and the one
	// output meant to show the token hold their needles.
	for _, sample := range []struct {
		what string
		data []byte
		want string
	}{
		{"the target key file", target.pemText, "target key: PEM body line"},
		{"the stale key file", stale.pemText, "stale key: seed (base64, alignment"},
		{"token add's output", []byte(tokenOut.stdout), "console token (text)"},
	} {
		if found := strings.Join(h.hits(sample.data), "\n"); !strings.Contains(found, sample.want) {
			t.Fatalf("self-check: scanning %s finds %q; want %q among the hits", sample.what, found, sample.want)
		}
	}

	// Connections: target with its key proved at once, stale with a key the
	// target does not accept.
	hostKey := strings.TrimSpace(sshd.KnownHostsLine)
	port := strconv.Itoa(sshd.Port)
	h.check(c, 0, "conn", "add", "target", "--host", sshd.Host, "--port", port, "--user", sshd.User,
		"--key-file", target.file, "--host-key", hostKey, "--recipe", "linux")
	h.cli(c, 0, "conn", "add", "--no-check", "stale", "--host", sshd.Host, "--port", port, "--user", sshd.User,
		"--key-file", stale.file, "--host-key", hostKey, "--recipe", "linux")
	agent := newE2EAgent(t, c, "bot")
	h.cli(c, 0, "grant", "bot", "target", "--write", "ask", "--destructive", "deny")
	h.cli(c, 0, "grant", "bot", "stale")

	// Errors of the CLI that read a key: a duplicate alias, a truncated key
	// file, an unknown alias to check, a key the target refuses.
	h.cli(c, 2, "conn", "add", "target", "--host", sshd.Host, "--port", port, "--user", sshd.User,
		"--key-file", target.file, "--host-key", hostKey)
	truncated := filepath.Join(t.TempDir(), "truncated")
	if err := os.WriteFile(truncated, target.pemText[:len(target.pemText)*3/4], 0o600); err != nil {
		t.Fatal(err)
	}
	h.cli(c, -1, "conn", "add", "--no-check", "broken", "--host", sshd.Host, "--user", sshd.User,
		"--key-file", truncated, "--host-key", hostKey)
	h.cli(c, 2, "conn", "check", "nosuch")
	h.check(c, 1, "conn", "check", "stale")
	h.check(c, 1, "conn", "check", "stale", "-o", "json")
	h.check(c, 0, "conn", "check", "target")
	// The lifecycle commands that read a key or print a connection.
	// A rotation stages the key beside the current one; its commit is
	// refused while the target does not accept it; abort drops it.
	h.check(c, 0, "conn", "rotate-key", "target", "--key-file", stale.file)
	h.check(c, 0, "conn", "rotate-key", "target", "--key-file", stale.file, "-o", "json")
	h.check(c, 1, "conn", "rotate-key", "target", "--commit")
	h.check(c, 1, "conn", "rotate-key", "target", "--commit", "-o", "json")
	h.check(c, 0, "conn", "rotate-key", "target", "--abort")
	h.check(c, 0, "conn", "pin", "target", "--host-key", hostKey, "-o", "json")
	h.check(c, 0, "conn", "update", "target", "--env", "staging")
	// Config as code: a file naming a key file, applied, and the export.
	conf := filepath.Join(t.TempDir(), "postern.toml")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf("[[connection]]\nalias = \"applied\"\nhost = %q\nport = %d\nuser = %q\n"+
		"host_keys = [%q]\nkey_file = %q\nallow_unverified = true\n", sshd.Host, sshd.Port, sshd.User, hostKey, viaApply.file)), 0o600); err != nil {
		t.Fatal(err)
	}
	h.check(c, 0, "apply", "-f", conf)
	h.check(c, 0, "apply", "-f", conf)
	h.cli(c, 0, "export")

	p := startServe(t, c.data, "--log-level", "debug", "--approval-ttl", outlast(t), "--key-check-timeout", outlast(t))
	wc := p.web(t)
	scratch := t.TempDir()
	readme := filepath.Join(scratch, "readme.txt")
	if err := os.WriteFile(readme, []byte("hello from the target\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	// Commands: allowed, asked and approved over the API, denied, to an
	// unknown alias, to the connection whose key is refused, the listing.
	h.agent("ssh target cat", agent.ssh(t, p.sshAddr, "target", "cat "+readme), 0)
	h.agent("ssh target echo", agent.ssh(t, p.sshAddr, "target", "echo canary-run"), 0)
	touched := filepath.Join(scratch, "touched")
	asked := agent.ssh(t, p.sshAddr, "target", "touch "+touched)
	req := c.waitPending(asked, "touch "+touched)
	h.http(ctx, wc, token, http.MethodGet, "/v1/approvals/"+req.ID, "", http.StatusOK)
	h.http(ctx, wc, token, http.MethodPost, "/v1/approvals/"+req.ID+"/approve", "", http.StatusOK)
	h.agent("ssh target touch (asked)", asked, 0)
	h.agent("ssh target rm (denied)", agent.ssh(t, p.sshAddr, "target", "rm -f "+readme), 126)
	h.agent("ssh nosuch (unknown alias)", agent.ssh(t, p.sshAddr, "nosuch", "uptime"), 2)
	h.agent("ssh stale (key refused)", agent.ssh(t, p.sshAddr, "stale", "echo never"), 255)
	h.agent("ssh help", agent.ssh(t, p.sshAddr, "help"), 0)
	h.agent("ssh target env with a secret-looking variable", agent.ssh(t, p.sshAddr, "target", "PASSWORD=x echo hidden"), -1)

	// SFTP: a put that asks (approved over the API), then through the
	// virtual root a get and a denied remove.
	local := filepath.Join(t.TempDir(), "upload.txt")
	if err := os.WriteFile(local, []byte("uploaded through postern\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	uploaded := filepath.Join(scratch, "uploaded.txt")
	put := agent.sftp(t, p.sshAddr, "target", fmt.Sprintf("put %s %s\n", local, uploaded))
	putReq := c.waitPending(put, uploaded)
	h.http(ctx, wc, token, http.MethodPost, "/v1/approvals/"+putReq.ID+"/approve", "", http.StatusOK)
	h.agent("sftp target put (asked)", put, 0)
	fetched := filepath.Join(t.TempDir(), "fetched.txt")
	h.agent("sftp bot get and rm (denied)", agent.sftp(t, p.sshAddr, "bot",
		fmt.Sprintf("ls /\nget /target%s %s\nrm /target%s\n", uploaded, fetched, uploaded)), 1)
	if b, err := os.ReadFile(fetched); err != nil || string(b) != "uploaded through postern\n" {
		t.Errorf("sftp get: got %q, %v; want the uploaded text", b, err)
	}
	if _, err := os.Stat(uploaded); err != nil {
		t.Errorf("%s after the denied remove: %v; want it kept", uploaded, err)
	}

	// The API: every route, the per-id ones with real ids, key checks that
	// pass and fail, and its errors.
	for _, path := range []string{"/v1/openapi.json", "/v1/agents", "/v1/connections", "/v1/grants", "/v1/approvals",
		"/v1/approvals?status=approved", "/v1/audit", "/v1/audit?limit=2", "/v1/audit/verify", "/v1/recipes", "/v1/recipes/linux"} {
		h.http(ctx, wc, token, http.MethodGet, path, "", http.StatusOK)
	}
	ids := func(path string) []string {
		var env struct {
			Data []struct{ ID string } `json:"data"`
		}
		body := h.http(ctx, wc, token, http.MethodGet, path, "", http.StatusOK)
		if err := json.Unmarshal([]byte(body), &env); err != nil || len(env.Data) == 0 {
			t.Fatalf("GET %s: got %v and %d records; want some", path, err, len(env.Data))
		}
		var out []string
		for _, d := range env.Data {
			out = append(out, d.ID)
		}
		return out
	}
	for _, id := range ids("/v1/agents") {
		h.http(ctx, wc, token, http.MethodGet, "/v1/agents/"+id, "", http.StatusOK)
	}
	for _, id := range ids("/v1/connections") {
		h.http(ctx, wc, token, http.MethodGet, "/v1/connections/"+id, "", http.StatusOK)
		h.http(ctx, wc, token, http.MethodPost, "/v1/connections/"+id+"/check", "", http.StatusOK)
	}
	for _, id := range ids("/v1/approvals") {
		h.http(ctx, wc, token, http.MethodGet, "/v1/approvals/"+id, "", http.StatusOK)
	}
	for _, e := range []struct {
		token, method, path, body string
		want                      int
	}{
		{"", http.MethodGet, "/v1/approvals", "", http.StatusUnauthorized},
		{token[:len(token)-4] + "XXXX", http.MethodGet, "/v1/approvals", "", http.StatusUnauthorized},
		{password, http.MethodGet, "/v1/connections", "", http.StatusUnauthorized},
		{token, http.MethodGet, "/v1/audit?decision=bogus", "", http.StatusBadRequest},
		{token, http.MethodGet, "/v1/approvals?status=nope", "", http.StatusBadRequest},
		{token, http.MethodGet, "/v1/connections?limit=many", "", http.StatusBadRequest},
		{token, http.MethodGet, "/v1/connections/nosuch", "", http.StatusNotFound},
		{token, http.MethodPost, "/v1/connections/nosuch/check", "", http.StatusNotFound},
		{token, http.MethodGet, "/v1/approvals/apr_nosuch", "", http.StatusNotFound},
		{token, http.MethodPost, "/v1/approvals/" + req.ID + "/approve", "", http.StatusConflict},
		{token, http.MethodPost, "/v1/approvals/" + req.ID + "/deny", `{"reason": 1}`, 0},
		{token, http.MethodGet, "/v1/nosuch", "", http.StatusNotFound},
	} {
		h.http(ctx, wc, e.token, e.method, e.path, e.body, e.want)
	}

	// The API's changes, with keys in their bodies: a connection added, a
	// key rotated, both refused and accepted, and a channel changed.
	keyJSON := func(k canaryKey) string { b, _ := json.Marshal(string(k.pemText)); return string(b) }
	addBody := fmt.Sprintf(`{"alias": "viaapi", "host": %q, "port": %d, "user": %q, "host_keys": [%q], "private_key": %s`,
		sshd.Host, sshd.Port, sshd.User, hostKey, keyJSON(viaAPI))
	h.http(ctx, wc, adminToken, http.MethodPost, "/v1/connections", addBody+"}", http.StatusUnprocessableEntity)
	h.http(ctx, wc, adminToken, http.MethodPost, "/v1/connections", addBody+`, "allow_unverified": true}`, http.StatusCreated)
	h.http(ctx, wc, token, http.MethodPost, "/v1/connections", addBody+"}", http.StatusForbidden)
	h.http(ctx, wc, adminToken, http.MethodPost, "/v1/connections/viaapi/rotate-key",
		`{"private_key": `+keyJSON(stale)+`}`, http.StatusOK)
	h.http(ctx, wc, adminToken, http.MethodPost, "/v1/connections/viaapi/rotate-key", `{"commit": true}`, http.StatusUnprocessableEntity)
	h.http(ctx, wc, adminToken, http.MethodPost, "/v1/connections/viaapi/rotate-key", `{"private_key": "not a key"}`, http.StatusBadRequest)
	h.http(ctx, wc, adminToken, http.MethodPatch, "/v1/notifications/ops", `{"events": ["pending"]}`, http.StatusOK)
	for _, path := range []string{"/v1/notifications", "/v1/notifications/ops", "/v1/tokens", "/v1/admins"} {
		h.http(ctx, wc, adminToken, http.MethodGet, path, "", http.StatusOK)
	}
	// A token made over the API is in that one answer and nowhere else.
	code, made := apiCall(ctx, wc, adminToken, http.MethodPost, "/v1/tokens", `{"name": "made", "scope": "read"}`)
	var madeToken struct {
		Data struct{ Value string } `json:"data"`
	}
	if err := json.Unmarshal([]byte(made), &madeToken); err != nil || code != http.StatusCreated || madeToken.Data.Value == "" {
		t.Fatalf("POST /v1/tokens: %d, %v", code, err)
	}
	h.secrets = append(h.secrets, textSecrets("token made over the API", madeToken.Data.Value)...)
	if len(h.hits([]byte(made))) == 0 {
		t.Fatal("self-check: the answer that shows the new token does not hit its needle")
	}
	h.http(ctx, wc, madeToken.Data.Value, http.MethodGet, "/v1/tokens", "", http.StatusOK)

	// The web page: failed logins (a wrong password; the right password
	// with a wrong name), a login, every page, a failed Re-check.
	if code := h.login(ctx, p.web(t), "alice", "Not-The-Password-At-All"); code != http.StatusUnauthorized {
		t.Errorf("login with a wrong password: got status %d; want 401", code)
	}
	if code := h.login(ctx, p.web(t), "mallory", password); code != http.StatusUnauthorized {
		t.Errorf("login as an unknown admin: got status %d; want 401", code)
	}
	if code := h.login(ctx, wc, "alice", password); code != http.StatusSeeOther {
		t.Fatalf("login: got status %d; want 303", code)
	}
	// A connection added on the page with a pasted key, refused then kept.
	pasted := url.Values{"alias": {"viaform"}, "host": {sshd.Host}, "port": {port}, "user": {sshd.User},
		"host_keys": {hostKey}, "private_key": {string(viaForm.pemText)}}
	if code := h.form(ctx, wc, "/connections", "/connections", pasted); code != http.StatusSeeOther {
		t.Errorf("add with a pasted key: got status %d; want 303", code)
	}
	pasted.Set("allow_unverified", "1")
	if code := h.form(ctx, wc, "/connections", "/connections", pasted); code != http.StatusSeeOther {
		t.Errorf("add with a pasted key, kept unverified: got status %d; want 303", code)
	}
	for _, path := range []string{"/", "/approvals", "/approvals/list", "/approvals/" + req.ID, "/approvals/" + putReq.ID,
		"/connections", "/agents", "/grants", "/audit", "/audit?decision=denied", "/recipes", "/approvals/apr_nosuch",
		"/audit?decision=bogus", "/audit?since=yesterday", "/tokens", "/notifications"} {
		code, page := wc.get(ctx, path)
		h.addString("page "+path, page)
		if code >= 500 {
			t.Errorf("GET %s: got status %d; want a page\n%s", path, code, h.redact(page))
		}
	}
	if code := h.form(ctx, wc, "/connections", "/connections/stale/check", url.Values{}); code != http.StatusSeeOther {
		t.Errorf("Re-check of stale: got status %d; want 303", code)
	}
	if code := h.form(ctx, wc, "/connections", "/connections/target/check", url.Values{}); code != http.StatusSeeOther {
		t.Errorf("Re-check of target: got status %d; want 303", code)
	}
	code, page := wc.get(ctx, "/connections")
	h.addString("page /connections after the Re-checks", page)
	if code != http.StatusOK || !strings.Contains(page, "stale") {
		t.Errorf("GET /connections after the Re-checks: got status %d; want 200 and the stale connection", code)
	}

	// The CLI's view of it all.
	for _, args := range [][]string{
		{"conn", "list"}, {"conn", "list", "-o", "json"}, {"agent", "list", "-o", "json"}, {"grant", "list"},
		{"approvals", "list", "--all"}, {"approvals", "list", "--all", "-o", "json"}, {"audit"}, {"audit", "-o", "json"},
		{"audit", "verify"}, {"token", "list", "-o", "json"}, {"admin", "list"},
	} {
		h.cli(c, 0, args...)
	}
	h.cli(c, 2, "approvals", "approve", "apr_nosuch", "--as", "alice")
	h.cli(c, 1, "approvals", "approve", req.ID, "--as", "alice")
	h.cli(c, 0, "notify", "list", "-o", "json")
	h.cli(c, 0, "export")

	// A backup taken while serve runs: its files hold the keys sealed.
	backup := filepath.Join(t.TempDir(), "backup")
	h.cli(c, 0, "backup", backup)
	addDataDir(t, h, backup, "backup")

	// The database while postern runs (the WAL holds the newest pages),
	// then postern's whole output and the data directory after it stopped.
	addDataDir(t, h, c.data, "while serving")
	if code := p.end(syscall.SIGTERM); code != 0 {
		t.Errorf("SIGTERM: got exit %d; want 0\nstderr:\n%s", code, h.redact(p.stderrText()))
	}
	h.addString("postern serve: stderr (the log)", p.stderrText())
	h.addString("postern serve: stdout", p.stdoutText())
	addDataDir(t, h, c.data, "after serve stopped")

	// The scenario happened as meant: otherwise 0 hits would prove little.
	rows := c.auditRows()
	decisions := map[string]int{}
	for _, r := range rows {
		decisions[r.Kind+" "+r.Decision]++
	}
	for _, want := range []string{"exec allowed", "exec approved", "exec denied", "sftp allowed", "sftp approved", "sftp denied", "admin changed"} {
		if decisions[want] == 0 {
			t.Errorf("audit: no %s row; want the scenario to have made one (got %v)", want, decisions)
		}
	}
	log := p.stderrText()
	for _, want := range []string{`"level":"debug"`, `"waiting for approval"`, `"web page serving"`} {
		if !strings.Contains(log, want) {
			t.Errorf("postern's log lacks %s; want the debug log of the whole scenario", want)
		}
	}

	total := 0
	for _, e := range h.exhibits {
		total += len(e.data)
		for _, hit := range h.hits(e.data) {
			t.Errorf("LEAK in %s: %s", e.place, hit)
		}
	}
	t.Logf("searched %d exhibits, %d bytes, for %d needles", len(h.exhibits), total, len(h.secrets))
}

// addDataDir adds every file of the data directory as an exhibit, raw.
func addDataDir(t *testing.T, h *leakHunt, dir, when string) {
	t.Helper()
	seen := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		h.add("data directory "+when+": "+rel, b)
		if strings.HasPrefix(rel, "postern.db") {
			seen++
		}
		return nil
	})
	if err != nil {
		t.Fatalf("read the data directory: %v", err)
	}
	if seen == 0 {
		t.Fatalf("data directory %s: no postern.db", when)
	}
}
