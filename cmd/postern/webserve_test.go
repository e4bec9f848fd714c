package main

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/postern/postern/internal/testwait"
	"github.com/postern/postern/model"
)

func TestServeWebBadFlags(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	cert := filepath.Join(t.TempDir(), "cert.pem")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"cert without key", []string{"--http-listen", "127.0.0.1:0", "--tls-cert", cert}, "give both --tls-cert and --tls-key"},
		{"key without cert", []string{"--http-listen", "127.0.0.1:0", "--tls-key", cert}, "give both --tls-cert and --tls-key"},
		{"cert without web", []string{"--tls-cert", cert, "--tls-key", cert}, "--tls-cert needs --http-listen"},
		{"public url without web", []string{"--public-url", "https://b.example.com"}, "--public-url needs --http-listen"},
		{"listen address", []string{"--http-listen", "8443"}, `--http-listen "8443": want HOST:PORT`},
		{"relative public url", []string{"--http-listen", "127.0.0.1:0", "--public-url", "b.example.com"}, "want an absolute URL"},
		{"public url scheme", []string{"--http-listen", "127.0.0.1:0", "--public-url", "ftp://b.example.com"}, "want an absolute URL"},
		{"public url query", []string{"--http-listen", "127.0.0.1:0", "--public-url", "https://b.example.com/?x=1"}, "want an absolute URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"serve", "--data", c.data, "--ssh-listen", "127.0.0.1:0"}, tt.args...)
			r := runCLI(t, "", args...)
			if r.code != 2 || !strings.Contains(r.stderr, tt.want) {
				t.Errorf("postern %s: got exit %d, stderr %q; want 2 and %q", strings.Join(args, " "), r.code, r.stderr, tt.want)
			}
			if n := strings.Count(strings.TrimSpace(r.stderr), "\n"); n != 0 {
				t.Errorf("got %d lines on stderr; want one", n+1)
			}
		})
	}
	// A certificate file that is not one fails at start, exit 1, before
	// anything serves.
	os.WriteFile(cert, []byte("not a certificate"), 0o600)
	r := c.run("", "serve", "--ssh-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--tls-cert", cert, "--tls-key", cert)
	if r.code != 1 || !strings.Contains(r.stderr, "TLS certificate") {
		t.Errorf("serve with a bad certificate: got exit %d, stderr %q; want 1 and TLS certificate", r.code, r.stderr)
	}
}

// TestServeWeb serves the bastion and the web page together: the start log
// names the URL and the certificate fingerprint, the self-signed
// certificate is the data directory's, an admin logs in, a console token
// printed by token add reaches the API until it is removed, the API's key
// check is bounded by --key-check-timeout, and SIGTERM stops both.
func TestServeWeb(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	const pw = "a long admin password"
	c.ok("", "admin", "add", "alice", "--password-file", writePasswordFile(t, pw))
	token := strings.Split(c.ok("", "token", "add", "ci", "--admin", "alice"), "\n")[1]
	c.approveChanges()
	// A target that takes the connection and never says a word: its key
	// check ends at --key-check-timeout, which the test means to trip.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	k := writeKeyFiles(t, "target", "")
	c.ok("", "conn", "add", "--no-check", "silent", "--host", "127.0.0.1", "--port", itoa(silent.Addr().(*net.TCPAddr).Port),
		"--user", "u", "--key-file", k.priv, "--host-key", hostLine(t, "127.0.0.1"))

	p := startPostern(t, "serve", "--data", c.data, "--ssh-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0",
		"--key-check-timeout", "200ms")
	p.waitLog("postern serving")
	m := p.waitLog("web page serving")
	base, _ := m["url"].(string)
	fp, _ := m["tls_fingerprint"].(string)
	if !strings.HasPrefix(base, "https://127.0.0.1:") || len(fp) != 95 || m["self_signed"] != true {
		t.Fatalf("web log line: got url %q, fingerprint %q, self_signed %v; want https://127.0.0.1:PORT, AA:BB:... and true", base, fp, m["self_signed"])
	}
	if _, err := os.Stat(filepath.Join(c.data, "web-cert.pem")); err != nil {
		t.Errorf("self-signed certificate: %v", err)
	}

	ctx := testwait.Context(t)
	wc := newWebClient(t, base, fp)
	if code := wc.login(ctx, "alice", pw); code != http.StatusSeeOther {
		t.Errorf("login: got status %d; want 303", code)
	}
	api := func(tok string) int {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/recipes?limit=1", nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		code, _ := newWebClient(t, base, fp).do(req)
		return code
	}
	if code := api(token); code != http.StatusOK {
		t.Errorf("GET /v1/recipes with the printed token: got status %d; want 200", code)
	}
	if code := api(""); code != http.StatusUnauthorized {
		t.Errorf("GET /v1/recipes without a token: got status %d; want 401", code)
	}
	var checked struct {
		Data model.ConnectionResult `json:"data"`
	}
	code, body := apiCall(ctx, newWebClient(t, base, fp), token, http.MethodPost, "/v1/connections/silent/check", "")
	if err := json.Unmarshal([]byte(body), &checked); err != nil || code != http.StatusOK || checked.Data.Check == nil ||
		checked.Data.Check.Status != "unreachable" || !strings.Contains(checked.Data.Check.Message, "within 200ms") {
		t.Errorf("POST /v1/connections/silent/check: %d %s; want the check unreachable, ended by --key-check-timeout 200ms", code, body)
	}
	c.ok("", "token", "remove", "ci")
	if code := api(token); code != http.StatusUnauthorized {
		t.Errorf("GET /v1/recipes with a removed token: got status %d; want 401", code)
	}

	if code := p.stop(); code != 0 {
		t.Errorf("SIGTERM: got exit %d; want 0\nstderr:\n%s", code, p.stderrText())
	}
	if strings.Contains(p.stderrText(), pw) || strings.Contains(p.stderrText(), token) {
		t.Error("the log holds the admin password or the token")
	}
}
