package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/postern/postern/model"
	"github.com/postern/postern/store"
)

// webClient talks HTTPS to a postern web page whose certificate it pins by
// the SHA-256 fingerprint postern printed, the way an admin compares it in
// the browser, and keeps its cookies like a browser.
type webClient struct {
	t    *testing.T
	base string
	http *http.Client
}

func newWebClient(t *testing.T, base, fingerprint string) *webClient {
	t.Helper()
	want := strings.ToLower(strings.ReplaceAll(fingerprint, ":", ""))
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	tlsConf := &tls.Config{
		MinVersion: tls.VersionTLS12,
		// The chain is self-signed: the pin below is the whole check.
		InsecureSkipVerify: true,
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) == 0 {
				return errors.New("no certificate")
			}
			sum := sha256.Sum256(raw[0])
			if got := hex.EncodeToString(sum[:]); got != want {
				return fmt.Errorf("certificate SHA-256 %s; want the printed %s", got, want)
			}
			return nil
		},
	}
	return &webClient{t: t, base: strings.TrimSuffix(base, "/"), http: &http.Client{
		Jar:       jar,
		Transport: &http.Transport{TLSClientConfig: tlsConf},
		// Redirects are answers to check, not to follow.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// do sends one request and returns the status and body; a transport error
// fails the test.
func (c *webClient) do(req *http.Request) (int, string) {
	c.t.Helper()
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		c.t.Fatalf("%s %s: read body: %v", req.Method, req.URL.Path, err)
	}
	return resp.StatusCode, string(b)
}

func (c *webClient) get(ctx context.Context, path string) (int, string) {
	c.t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	return c.do(req)
}

// loginCSRF finds the login form's CSRF field.
var loginCSRF = regexp.MustCompile(`name="csrf_token" value="([^"]+)"`)

// login fetches the login page and posts the form with its CSRF value, as
// a browser would, and returns the status of the post (303 on success).
// The password never reaches a failure message.
func (c *webClient) login(ctx context.Context, name, password string) int {
	c.t.Helper()
	code, body := c.get(ctx, "/login")
	if code != http.StatusOK {
		c.t.Fatalf("GET /login: got status %d; want 200", code)
	}
	m := loginCSRF.FindStringSubmatch(body)
	if m == nil {
		c.t.Fatalf("GET /login: no csrf_token field in the form")
	}
	form := url.Values{"name": {name}, "password": {password}, "csrf_token": {m[1]}, "next": {"/"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/login", strings.NewReader(form.Encode()))
	if err != nil {
		c.t.Fatal("build login request")
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	code, _ = c.do(req)
	return code
}

// redactPasswords hides the demo's admin line in output a test prints.
func redactPasswords(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		if f := strings.Fields(l); len(f) > 0 && f[0] == "admin" {
			l = "  admin (line hidden: it holds the password)"
		}
		out[i] = l
	}
	return out
}

// writePasswordFile writes pw and a second line that must be ignored.
func writePasswordFile(t *testing.T, pw string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(p, []byte(pw+"\r\nsecond line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// openStore opens a CLI test's data directory for checks the CLI does not
// show (hashes).
func openStore(t *testing.T, data string) *store.Store {
	t.Helper()
	s, err := (store.Dir{Path: data}).Open(context.Background(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestAdminCommands(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	const pw = "correct horse battery"
	out := c.ok("", "admin", "add", "alice", "--password-file", writePasswordFile(t, pw))
	if !strings.Contains(out, "added admin alice") || strings.Contains(out, "password:") {
		t.Errorf("admin add --password-file: got %q; want the added line and no password", out)
	}
	out = c.ok("", "admin", "add", "bob")
	var gen string
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, "password: "); ok {
			gen = v
		}
	}
	if len(gen) < 20 || !strings.Contains(out, "shown only now") {
		t.Errorf("admin add without a file: got %d-character password, note %v; want a generated one of 20+ and the shown-only-now note",
			len(gen), strings.Contains(out, "shown only now"))
	}
	c.ok(pw+"\n", "admin", "add", "carol", "--password-file", "-")

	var admins []model.Admin
	raw := c.ok("", "admin", "list", "-o", "json")
	if err := json.Unmarshal([]byte(raw), &admins); err != nil {
		t.Fatal(err)
	}
	if len(admins) != 3 || admins[0].Name != "alice" || admins[1].Name != "bob" || admins[2].Name != "carol" || admins[0].ID == "" {
		t.Errorf("admin list -o json: got %+v; want alice, bob, carol", admins)
	}
	text := c.ok("", "admin", "list")
	for _, want := range []string{"NAME", "alice", "bob", "enabled"} {
		if !strings.Contains(text, want) {
			t.Errorf("admin list lacks %q:\n%s", want, text)
		}
	}
	s := openStore(t, c.data)
	a, err := s.AdminByName(context.Background(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{raw, text} {
		if strings.Contains(out, a.PasswordHash) || strings.Contains(out, "argon2id") || strings.Contains(out, pw) {
			t.Error("admin list shows a password or its hash")
		}
	}
	if !strings.HasPrefix(a.PasswordHash, "$argon2id$") {
		t.Errorf("stored hash: got prefix %.10q; want $argon2id$", a.PasswordHash)
	}

	out = c.ok("", "admin", "passwd", "alice", "--password-file", writePasswordFile(t, "another long password"))
	if !strings.Contains(out, "changed the password of admin alice") {
		t.Errorf("admin passwd: got %q", out)
	}
	b, err := s.AdminByName(context.Background(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	if b.PasswordHash == a.PasswordHash {
		t.Error("admin passwd: the stored hash did not change")
	}
	out = c.ok("", "admin", "passwd", "bob")
	if !strings.Contains(out, "password: ") || strings.Contains(out, gen) {
		t.Errorf("admin passwd without a file: got a new password %v; want a new generated one", strings.Contains(out, "password: "))
	}
}

func TestTokenCommands(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.ok("", "admin", "add", "alice", "--password-file", writePasswordFile(t, "a good long password"))
	// An approve token (the default scope) waits for a second admin; its
	// value is shown now, and only now.
	out := c.ok("", "token", "add", "ci", "--admin", "alice")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "token add ci: of admin alice, scope approve waits for a second admin: change request chg_") ||
		!strings.HasPrefix(lines[1], "pst_") || !strings.Contains(lines[2], "shown only now") {
		t.Fatalf("token add: got %q; want the waiting line, the token (pst_...) and the shown-only-now note", lines)
	}
	token := lines[1]
	if got := c.approveChanges(); len(got) != 1 {
		t.Fatalf("changes waiting after token add: %v; want the one", got)
	}
	// A read token is made at once.
	out = c.ok("", "token", "add", "deploy", "--admin", "ALICE", "--scope", "read")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 3 || !strings.HasPrefix(lines[0], "added token deploy (") {
		t.Errorf("token add --scope read: got %q; want the added line first", lines)
	}

	s := openStore(t, c.data)
	toks, err := s.ListConsoleTokens(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(token))
	if len(toks) != 2 || toks[0].Name != "ci" || toks[0].TokenSHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("stored tokens: got %d, first %q; want ci stored as the SHA-256 of the printed token", len(toks), toks[0].Name)
	}

	raw := c.ok("", "token", "list", "-o", "json")
	var list []model.Token
	if err := json.Unmarshal([]byte(raw), &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Name != "ci" || list[1].Name != "deploy" || !list[0].LastUsedAt.IsZero() ||
		list[0].Admin != "alice" || list[1].Admin != "alice" {
		t.Errorf("token list -o json: got %+v; want ci, deploy, never used, both alice's (deploy added --admin ALICE)", list)
	}
	text := c.ok("", "token", "list")
	for _, out := range []string{raw, text} {
		if strings.Contains(out, token) || strings.Contains(out, toks[0].TokenSHA256) || strings.Contains(out, "pst_") {
			t.Error("token list shows a token or its hash")
		}
	}
	if !strings.Contains(text, "LAST USED") || !strings.Contains(text, "deploy") {
		t.Errorf("token list:\n%s", text)
	}

	c.ok("", "token", "remove", "ci")
	if err := json.Unmarshal([]byte(c.ok("", "token", "list", "-o", "json")), &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Name != "deploy" {
		t.Errorf("after token remove: got %+v; want deploy only", list)
	}
}

// TestWebCommandsBadInput runs admin and token commands that must fail
// with exit status 2 and one line on stderr, none of which may hold the
// password given.
func TestWebCommandsBadInput(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	const secret = "sh0rt-Secre" // one short of web.MinPasswordLength
	c.ok("", "admin", "add", "alice", "--password-file", writePasswordFile(t, "a good long password"))
	c.ok("", "token", "add", "ci", "--admin", "alice", "--scope", "read")
	empty := filepath.Join(t.TempDir(), "empty")
	os.WriteFile(empty, []byte("\nsecond\n"), 0o600)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"short password", []string{"admin", "add", "bob", "--password-file", writePasswordFile(t, secret)}, "want at least 12"},
		{"short password passwd", []string{"admin", "passwd", "alice", "--password-file", writePasswordFile(t, secret)}, "want at least 12"},
		{"empty first line", []string{"admin", "add", "bob", "--password-file", empty}, "first line of the password file is empty"},
		{"missing password file", []string{"admin", "add", "bob", "--password-file", "/nonexistent/pw"}, "password file"},
		{"duplicate admin", []string{"admin", "add", "alice", "--password-file", writePasswordFile(t, "a good long password")}, "admin alice already exists"},
		{"bad admin name", []string{"admin", "add", "a b"}, "admin name"},
		{"passwd unknown admin", []string{"admin", "passwd", "nobody", "--password-file", writePasswordFile(t, "a good long password")}, `admin "nobody" not found`},
		{"admin no name", []string{"admin", "add"}, "want the admin NAME"},
		{"admin unknown subcommand", []string{"admin", "frob"}, `unknown subcommand "frob"`},
		{"duplicate token", []string{"token", "add", "ci", "--admin", "alice"}, "token ci already exists"},
		{"admin of another case", []string{"admin", "add", "Alice", "--password-file", writePasswordFile(t, "a good long password")}, "admin alice already exists"},
		{"token without an admin", []string{"token", "add", "orphan"}, "a token belongs to the admin who makes it: give --as ADMIN"},
		{"token of an unknown admin", []string{"token", "add", "orphan", "--admin", "nobody"}, `no admin is named "nobody"`},
		{"assign to an unknown admin", []string{"token", "assign", "ci", "--admin", "nobody"}, `no admin is named "nobody"`},
		{"assign an unknown token", []string{"token", "assign", "nope", "--admin", "alice"}, `token "nope" not found`},
		{"remove unknown token", []string{"token", "remove", "nope"}, `token "nope" not found`},
		{"bad token name", []string{"token", "add", "a/b", "--admin", "alice"}, "token name"},
		{"token list format", []string{"token", "list", "-o", "yaml"}, "unknown output format"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := c.run("", tt.args...)
			if r.code != 2 || !strings.Contains(r.stderr, tt.want) {
				t.Errorf("got exit %d, stderr %q; want 2 and %q", r.code, r.stderr, tt.want)
			}
			if n := strings.Count(strings.TrimSpace(r.stderr), "\n"); n != 0 {
				t.Errorf("got %d lines on stderr; want one", n+1)
			}
			if strings.Contains(r.stdout+r.stderr, secret) {
				t.Error("the password appears in the output")
			}
		})
	}
	var admins []model.Admin
	json.Unmarshal([]byte(c.ok("", "admin", "list", "-o", "json")), &admins)
	if len(admins) != 1 {
		t.Errorf("after the failures: got %d admins; want 1", len(admins))
	}
}
