package web

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/postern/postern/policy"
)

// FuzzAPIFilters feeds arbitrary query strings to the list endpoints,
// through the whole handler, and checks that the answer is never a panic's
// 500 or any 5xx but 503 (the database failing), that it has the API's
// envelope (a list, or an error naming what was wrong), and that it holds
// no private key.
func FuzzAPIFilters(f *testing.F) {
	as := newAPISite(f, nil)
	for i := range 3 {
		as.ask(as.web, "write", "touch /f"+string(rune('a'+i)), 1)
		as.audit(as.db, policy.Read, policy.Allowed, "uptime")
	}
	_, _, agentCursor := as.get("/v1/recipes?limit=2").list(f)
	_, _, auditCursor := as.get("/v1/audit?limit=1").list(f)
	for _, seed := range []struct {
		list  uint8
		query string
	}{
		{0, "q=linux&vendor=Debian&host=github.com"},
		{0, "limit=2&cursor=" + agentCursor},
		{1, "limit=1&sort=-created_at"},
		{1, "disabled=true&name=bot&fingerprint=SHA256:x"},
		{2, "env=production&key_status=ok&sort=-key_checked_at"},
		{3, "agent=bot&connection=web&read=allow"},
		{4, "status=pending&class=write&kind=exec&env=dev&limit=500"},
		{5, "since=2026-03-01T00:00:00Z&until=2026-03-02T00:00:00Z&decision=allowed"},
		{5, "cursor=" + auditCursor},
		{5, "limit=1&limit=2"},
		{2, "colour=blue"},
		{1, "name=%zz"},
		{4, "sort=--created_at;x=1"},
	} {
		f.Add(seed.list, seed.query)
	}
	lists := []string{"/v1/recipes", "/v1/agents", "/v1/connections", "/v1/grants", "/v1/approvals", "/v1/audit"}
	f.Fuzz(func(t *testing.T, list uint8, query string) {
		req := httptest.NewRequest("GET", "https://postern.test"+lists[int(list)%len(lists)], nil)
		req.URL.RawQuery = query
		req.Header.Set("Authorization", "Bearer "+as.ci)
		rec := httptest.NewRecorder()
		as.srv.Handler().ServeHTTP(rec, req)
		res := rec.Result()
		body, _ := io.ReadAll(res.Body)
		r := apiResp{status: res.StatusCode, header: res.Header, body: body}
		if r.status >= 500 && r.status != http.StatusServiceUnavailable {
			t.Fatalf("?%s: status %d; want no 5xx but 503\n%s", query, r.status, body)
		}
		if r.status != http.StatusOK && r.status != http.StatusBadRequest && r.status != http.StatusServiceUnavailable {
			t.Fatalf("?%s: status %d; want 200, 400 or 503", query, r.status)
		}
		if _, err := checkEnvelope(r); err != nil {
			t.Fatalf("?%s: %v\n%s", query, err, body)
		}
		if leak := keyLeak(as.keys, string(body)); leak != "" {
			t.Fatalf("?%s: answer contains %s", query, leak)
		}
	})
}
