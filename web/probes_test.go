package web

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/postern/postern/internal/fakeclock"
)

// probeSite serves a Server over backend b with edit applied to its Config.
func probeSite(t *testing.T, b testBackend, edit func(*Config)) *httptest.Server {
	t.Helper()
	cfg := Config{Store: b.st, Engine: b.eng, Catalog: b.cat, APIRate: 1, APIBurst: 1}
	if edit != nil {
		edit(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return ts
}

// probe GETs path with the headers (name, value pairs).
func probe(t *testing.T, ts *httptest.Server, path string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", ts.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestProbes: /healthz answers ok while the process is up; /readyz answers
// ok over a writable store with its master key, and 503 with the reason,
// and not the error behind it, when the check fails: a closed store, a
// store that takes no write, a missing master key.
func TestProbes(t *testing.T) {
	const detail = "password=hunter2 at db.internal"
	tests := []struct {
		name       string
		path       string
		edit       func(b testBackend) func(*Config)
		wantStatus int
		wantBody   string
	}{
		{"healthz", "/healthz", nil, http.StatusOK, "ok\n"},
		{"readyz", "/readyz", nil, http.StatusOK, "ok\n"},
		{"healthz with the store closed", "/healthz", func(b testBackend) func(*Config) {
			b.st.Close()
			return nil
		}, http.StatusOK, "ok\n"},
		{"readyz with the store closed", "/readyz", func(b testBackend) func(*Config) {
			b.st.Close()
			return nil
		}, http.StatusServiceUnavailable, "not ready: the database cannot be reached\n"},
		{"readyz without a master key", "/readyz", func(testBackend) func(*Config) {
			return func(c *Config) {
				c.Ready = func(context.Context) error {
					return &NotReadyError{Reason: "the master key is not loaded", Err: errors.New(detail)}
				}
			}
		}, http.StatusServiceUnavailable, "not ready: the master key is not loaded\n"},
		{"readyz with another error", "/readyz", func(testBackend) func(*Config) {
			return func(c *Config) { c.Ready = func(context.Context) error { return errors.New(detail) } }
		}, http.StatusServiceUnavailable, "not ready: the readiness check failed\n"},
		{"readyz that does not answer in time", "/readyz", func(testBackend) func(*Config) {
			return func(c *Config) {
				c.ReadyTimeout = 1 // the check waits for its context, which ends at once
				c.Ready = func(ctx context.Context) error {
					<-ctx.Done()
					return &NotReadyError{Reason: "the database does not take writes", Err: ctx.Err()}
				}
			}
		}, http.StatusServiceUnavailable, "not ready: the database does not take writes (no answer within 1ns)\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newTestBackend(t, fakeclock.New())
			var edit func(*Config)
			if tt.edit != nil {
				edit = tt.edit(b)
			}
			ts := probeSite(t, b, edit)
			status, body := probe(t, ts, tt.path)
			if status != tt.wantStatus || body != tt.wantBody {
				t.Errorf("GET %s = %d %q; want %d %q", tt.path, status, body, tt.wantStatus, tt.wantBody)
			}
			if strings.Contains(body, "hunter2") {
				t.Errorf("GET %s answered the error behind the failure: %q", tt.path, body)
			}
		})
	}
}

// TestProbesNotLimited: the probes are outside the API's rate limit and
// the cross-origin protection: a load balancer polling from one address
// more often than the limit allows, or a probe that carries a browser's
// headers, is answered.
func TestProbesNotLimited(t *testing.T) {
	b := newTestBackend(t, fakeclock.New())
	ts := probeSite(t, b, nil) // APIRate 1, APIBurst 1 (a frozen clock refills nothing)
	// The API's public route is limited per address: the second call is 429.
	probe(t, ts, "/v1/openapi.json")
	if status, _ := probe(t, ts, "/v1/openapi.json"); status != http.StatusTooManyRequests {
		t.Fatalf("second GET /v1/openapi.json = %d; want 429 (the limit this test relies on)", status)
	}
	for i := range 5 {
		for _, path := range []string{"/healthz", "/readyz"} {
			if status, body := probe(t, ts, path, "Sec-Fetch-Site", "cross-site", "Origin", "https://lb.example"); status != http.StatusOK {
				t.Fatalf("GET %s #%d = %d %q; want 200", path, i+1, status, body)
			}
		}
	}
}
