package web

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/postern/postern/internal/testwait"
	"github.com/postern/postern/store"
)

func TestPasswordHashRoundTrip(t *testing.T) {
	const pw = "correct horse battery staple"
	h, err := HashPassword(pw)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(h, pw) {
		t.Fatalf("hash %q contains the password", h)
	}
	if !strings.HasPrefix(h, "$argon2id$v=19$m=19456,t=2,p=1$") {
		t.Errorf("got hash %q; want an argon2id PHC string with the stated parameters", h)
	}
	h2, err := HashPassword(pw)
	if err != nil {
		t.Fatal(err)
	}
	if h == h2 {
		t.Errorf("two hashes of one password are equal; want distinct salts")
	}
	for _, tc := range []struct {
		pw   string
		want bool
	}{
		{pw, true},
		{pw + " ", false},
		{"", false},
		{strings.Repeat("x", maxPasswordLength+1), false},
	} {
		got, err := VerifyPassword(h, tc.pw)
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("VerifyPassword(len %d) = %v; want %v", len(tc.pw), got, tc.want)
		}
	}
}

func TestPasswordPolicy(t *testing.T) {
	for _, pw := range []string{"", "Qz7-pw", strings.Repeat("Qz", MinPasswordLength/2-1) + "Q", strings.Repeat("Qz", maxPasswordLength/2+1)} {
		if _, err := HashPassword(pw); err == nil {
			t.Errorf("HashPassword(len %d) = nil error; want a refusal", len(pw))
		} else if strings.Contains(err.Error(), pw) && pw != "" {
			t.Errorf("error %q repeats the password", err)
		}
	}
}

func TestVerifyPasswordBadHash(t *testing.T) {
	for _, h := range []string{
		"", "plain", "$argon2i$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA",
		"$argon2id$v=18$m=19456,t=2,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA",
		"$argon2id$v=19$m=0,t=2,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA",
		"$argon2id$v=19$m=99999999,t=2,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA",
		"$argon2id$v=19$m=19456,t=2,p=1$!!$aGFzaGhhc2hoYXNoaGFzaA",
		"$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ$c2hvcnQ",
	} {
		ok, err := VerifyPassword(h, "whatever password")
		if ok || err == nil {
			t.Errorf("VerifyPassword(%q) = %v, %v; want false and an error", h, ok, err)
		}
	}
	// The dummy hash used for unknown names must be well formed, or an
	// unknown name would cost less than a wrong password.
	if _, err := VerifyPassword(dummyHash, "x"); err != nil {
		t.Errorf("dummy hash: %v; want a well-formed hash", err)
	}
}

func TestSelfSignedCertificate(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	c, err := LoadCertificate(dir, "", "", now)
	if err != nil {
		t.Fatal(err)
	}
	if !c.SelfSigned || c.CertFile != filepath.Join(dir, SelfSignedCertFile) {
		t.Errorf("got SelfSigned %v, CertFile %q; want a self-signed certificate in the data dir", c.SelfSigned, c.CertFile)
	}
	leaf, err := x509.ParseCertificate(c.TLS.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(leaf.DNSNames, ","); got != "localhost" {
		t.Errorf("got DNS SANs %q; want localhost", got)
	}
	if err := leaf.VerifyHostname("127.0.0.1"); err != nil {
		t.Errorf("127.0.0.1 SAN: %v", err)
	}
	if len(strings.Split(c.Fingerprint, ":")) != 32 {
		t.Errorf("got fingerprint %q; want 32 colon-separated bytes", c.Fingerprint)
	}
	st, err := os.Stat(filepath.Join(dir, SelfSignedKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("got key file mode %v; want 0600", st.Mode().Perm())
	}
	// A second start reuses it; one near its end is replaced.
	again, err := LoadCertificate(dir, "", "", now.Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if again.Fingerprint != c.Fingerprint {
		t.Errorf("second load made a new certificate; want the stored one reused")
	}
	renewed, err := LoadCertificate(dir, "", "", now.Add(selfSignedLifetime-selfSignedRenew+time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if renewed.Fingerprint == c.Fingerprint {
		t.Errorf("certificate within %v of its end was kept; want a new one", selfSignedRenew)
	}
	// Given files are used as they are; one without the other is refused.
	given, err := LoadCertificate(t.TempDir(), renewed.CertFile, filepath.Join(dir, SelfSignedKeyFile), now)
	if err != nil {
		t.Fatal(err)
	}
	if given.SelfSigned {
		t.Errorf("given certificate reported as self-signed")
	}
	if _, err := LoadCertificate(dir, renewed.CertFile, "", now); err == nil {
		t.Errorf("certificate without key: got nil error; want a refusal")
	}
}

func TestTLSConfigRefusesOldVersions(t *testing.T) {
	c, err := LoadCertificate(t.TempDir(), "", "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.TLS = TLSConfig(c.TLS)
	srv.StartTLS()
	defer srv.Close()
	for _, tc := range []struct {
		max  uint16
		want bool
	}{{tls.VersionTLS11, false}, {tls.VersionTLS12, true}, {tls.VersionTLS13, true}} {
		conn, err := tls.DialWithDialer(&net.Dialer{Deadline: testwait.Deadline(t)}, "tcp", srv.Listener.Addr().String(),
			&tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS10, MaxVersion: tc.max})
		if conn != nil {
			conn.Close()
		}
		if got := err == nil; got != tc.want {
			t.Errorf("handshake with max version %x: got ok=%v (%v); want %v", tc.max, got, err, tc.want)
		}
	}
}

func TestSafeNext(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "/"},
		{"/approvals", "/approvals"},
		{"/audit?agent=a&before=3", "/audit?agent=a&before=3"},
		{"//evil.example/", "/"},
		{"https://evil.example/", "/"},
		{"/\\evil.example", "/"},
		{"/a\r\nSet-Cookie: x=y", "/"},
		{"approvals", "/"},
	} {
		if got := safeNext(tc.in); got != tc.want {
			t.Errorf("safeNext(%q) = %q; want %q", tc.in, got, tc.want)
		}
	}
}

func TestSameOrigin(t *testing.T) {
	for _, tc := range []struct {
		origin, host string
		want         bool
	}{
		{"", "127.0.0.1:8443", true},
		{"https://127.0.0.1:8443", "127.0.0.1:8443", true},
		{"https://LOCALHOST:8443", "localhost:8443", true},
		{"http://127.0.0.1:8443", "127.0.0.1:8443", false},
		{"https://evil.example", "127.0.0.1:8443", false},
		{"null", "127.0.0.1:8443", false},
	} {
		r := httptest.NewRequest(http.MethodPost, "https://"+tc.host+"/x", nil)
		if tc.origin != "" {
			r.Header.Set("Origin", tc.origin)
		}
		if got := sameOrigin(r); got != tc.want {
			t.Errorf("sameOrigin(Origin %q, Host %q) = %v; want %v", tc.origin, tc.host, got, tc.want)
		}
	}
}

func TestNewTokenHashes(t *testing.T) {
	tok, sha := NewConsoleToken()
	if !strings.HasPrefix(tok, tokenPrefix) || len(tok) < 40 {
		t.Errorf("got token of length %d with prefix %q; want %q and 256 random bits", len(tok), tok[:4], tokenPrefix)
	}
	if sha != hashToken(tok) || len(sha) != 64 || strings.Contains(sha, tok) {
		t.Errorf("got hash %q; want the hex SHA-256 of the token", sha)
	}
	tok2, _ := NewConsoleToken()
	if tok == tok2 {
		t.Errorf("two tokens are equal")
	}
}

// TestCrossOriginRefused: a state-changing request that a browser says
// another site made is refused before any handler runs, on the pages (with
// a valid session and CSRF token) and the API (with a valid token); the
// same requests from the page itself, or from a client that is not a
// browser, go through.
func TestCrossOriginRefused(t *testing.T) {
	ps := newPageSite(t, nil)
	pc := ps.admin("alice")
	as := newAPISite(t, nil)
	tests := []struct {
		name   string
		header []string
		want   int
	}{
		{"another site", []string{"Sec-Fetch-Site", "cross-site"}, http.StatusForbidden},
		{"another origin", []string{"Origin", "https://evil.example"}, http.StatusForbidden},
		{"the page itself", []string{"Sec-Fetch-Site", "same-origin"}, http.StatusSeeOther},
		{"not a browser", nil, http.StatusSeeOther},
	}
	for _, tc := range tests {
		t.Run("page: "+tc.name, func(t *testing.T) {
			a := ps.ask(ps.conn, "write", "touch /srv/"+strings.ReplaceAll(tc.name, " ", "-"), 1)
			req, err := http.NewRequest("POST", ps.ts.URL+"/approvals/"+a.ID+"/deny", strings.NewReader(pc.form("note", "x").Encode()))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			if tc.header != nil {
				req.Header.Set(tc.header[0], tc.header[1])
			}
			resp, err := pc.c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("status %d; want %d", resp.StatusCode, tc.want)
			}
			denied := ps.approval(a.ID).Status == store.ApprovalDenied
			if denied != (tc.want != http.StatusForbidden) {
				t.Errorf("request denied = %v; want %v", denied, tc.want != http.StatusForbidden)
			}
		})
		t.Run("api: "+tc.name, func(t *testing.T) {
			a := as.ask(as.web, "write", "touch /srv/"+strings.ReplaceAll(tc.name, " ", "-"), 1)
			want := http.StatusOK
			if tc.want == http.StatusForbidden {
				want = http.StatusForbidden
			}
			r := as.call("POST", "/v1/approvals/"+a.ID+"/deny", as.ci, "", tc.header...)
			if r.status != want {
				t.Errorf("status %d; want %d (%s)", r.status, want, r.body)
			}
			if want == http.StatusForbidden {
				if code, _ := r.errCode(t); code != "cross_origin" {
					t.Errorf("error code %q; want cross_origin", code)
				}
			}
		})
	}
}
