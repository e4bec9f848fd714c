package web

import (
	"context"
	"database/sql"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
)

// pages follows next_cursor from target to the end and returns every
// record's field, checking that has_more and next_cursor agree and that
// no page is larger than limit.
func (as *apiSite) pages(target, fieldName string, limit int) ([]string, int) {
	as.t.Helper()
	var out []string
	n := 0
	next := ""
	for {
		u := target
		sep := "?"
		if strings.Contains(u, "?") {
			sep = "&"
		}
		u += sep + "limit=" + strconv.Itoa(limit)
		if next != "" {
			u += "&cursor=" + url.QueryEscape(next)
		}
		r := as.get(u)
		if r.status != http.StatusOK {
			as.t.Fatalf("GET %s: %d %s", u, r.status, r.body)
		}
		recs, more, cur := r.list(as.t)
		n++
		if len(recs) > limit {
			as.t.Fatalf("GET %s: %d records; want at most %d", u, len(recs), limit)
		}
		out = append(out, field(recs, fieldName)...)
		if !more {
			return out, n
		}
		if len(recs) != limit {
			as.t.Fatalf("GET %s: a page with more after it has %d records; want %d", u, len(recs), limit)
		}
		next = cur
		if n > 100 {
			as.t.Fatal("more than 100 pages: the cursor does not advance")
		}
	}
}

// TestAPIPagination: every list pages through all its records, each once,
// in the order asked for, whatever the page size.
func TestAPIPagination(t *testing.T) {
	as := newAPISite(t, nil)
	ctx := context.Background()
	as.clock.Advance(time.Second) // after bot
	var names []string
	for i := range 7 {
		name := fmt.Sprintf("agent-%02d", 7-i)
		if _, err := as.st.CreateAgent(ctx, store.Unaudited(), name, newTestKeyPair(t).Authorized); err != nil {
			t.Fatal(err)
		}
		if _, err := as.st.SetGrant(ctx, store.Unaudited(), name, "web", store.DefaultRules()); err != nil {
			t.Fatal(err)
		}
		as.clock.Advance(time.Second)
		names = append(names, name)
	}
	allAgents := append(slices.Clone(names), "bot")
	slices.Sort(allAgents)
	var approvals []string
	for i := range 5 {
		approvals = append(approvals, as.ask(as.web, "write", fmt.Sprintf("touch /f%d", i), 1).ID)
		as.clock.Advance(time.Second)
	}

	desc := slices.Clone(allAgents)
	slices.Reverse(desc)
	byCreation := append([]string{"bot"}, names...)
	tests := []struct {
		name, target, field string
		want                []string
	}{
		{"agents by name", "/v1/agents", "name", allAgents},
		{"agents by name descending", "/v1/agents?sort=-name", "name", desc},
		{"agents by creation", "/v1/agents?sort=created_at", "name", byCreation},
		{"approvals oldest first", "/v1/approvals", "id", approvals},
		{"approvals newest first", "/v1/approvals?sort=-created_at", "id", reversed(approvals)},
		{"grants of one connection", "/v1/grants?connection=web", "agent", allAgents},
		{"recipes", "/v1/recipes", "key", nil}, // compared with the catalog below
	}
	for _, tt := range tests {
		for _, limit := range []int{1, 2, 3, 500} {
			t.Run(fmt.Sprintf("%s limit %d", tt.name, limit), func(t *testing.T) {
				got, n := as.pages(tt.target, tt.field, limit)
				want := tt.want
				if want == nil {
					for _, r := range as.srv.cfg.Catalog.All() {
						want = append(want, r.Key)
					}
				}
				if !slices.Equal(got, want) {
					t.Errorf("records %v; want %v", got, want)
				}
				if wantPages := max((len(want)+limit-1)/limit, 1); n != wantPages {
					t.Errorf("%d pages; want %d", n, wantPages)
				}
			})
		}
	}

	// The default limit is 50 and the largest 500.
	recs, more, _ := as.get("/v1/recipes?limit=500").list(t)
	if more || len(recs) != len(as.srv.cfg.Catalog.All()) {
		t.Errorf("limit=500: %d recipes, has_more %v; want all %d", len(recs), more, len(as.srv.cfg.Catalog.All()))
	}
}

func reversed(s []string) []string {
	out := slices.Clone(s)
	slices.Reverse(out)
	return out
}

// TestAPICursorSurvivesChanges: a record added before the cursor's
// position does not shift the next page.
func TestAPICursorSurvivesChanges(t *testing.T) {
	as := newAPISite(t, nil)
	for _, n := range []string{"b", "d", "f"} {
		if _, err := as.st.CreateAgent(context.Background(), store.Unaudited(), n, newTestKeyPair(t).Authorized); err != nil {
			t.Fatal(err)
		}
	}
	recs, _, next := as.get("/v1/agents?limit=2").list(t)
	if got := field(recs, "name"); !slices.Equal(got, []string{"b", "bot"}) {
		t.Fatalf("first page %v; want [b bot]", got)
	}
	if _, err := as.st.CreateAgent(context.Background(), store.Unaudited(), "a", newTestKeyPair(t).Authorized); err != nil {
		t.Fatal(err)
	}
	recs, _, _ = as.get("/v1/agents?limit=2&cursor=" + url.QueryEscape(next)).list(t)
	if got := field(recs, "name"); !slices.Equal(got, []string{"d", "f"}) {
		t.Errorf("second page after adding a %v; want [d f]", got)
	}
}

// TestAPIBadParameters: a bad parameter is a 400 that names it.
func TestAPIBadParameters(t *testing.T) {
	as := newAPISite(t, nil)
	_, _, cur := as.get("/v1/recipes?limit=1").list(t)
	raw, err := base64.RawURLEncoding.DecodeString(cur)
	if err != nil {
		t.Fatal(err)
	}
	tampered := slices.Clone(raw)
	tampered[len(tampered)-3] ^= 1
	forged := base64.RawURLEncoding.EncodeToString(tampered)
	if _, err := as.st.CreateAgent(context.Background(), store.Unaudited(), "zed", newTestKeyPair(t).Authorized); err != nil {
		t.Fatal(err)
	}
	_, _, agentCur := as.get("/v1/agents?limit=1").list(t)
	_, _, nameCur := as.get("/v1/recipes?limit=1&sort=name").list(t)
	q := url.QueryEscape

	tests := []struct {
		target      string
		code, field string
	}{
		{"/v1/agents?limit=0", "invalid_parameter", "limit"},
		{"/v1/agents?limit=501", "invalid_parameter", "limit"},
		{"/v1/agents?limit=ten", "invalid_parameter", "limit"},
		{"/v1/agents?limit=-1", "invalid_parameter", "limit"},
		{"/v1/agents?limit=1&limit=2", "invalid_parameter", "limit"},
		{"/v1/agents?sort=host", "invalid_parameter", "sort"},
		{"/v1/agents?sort=name,created_at", "invalid_parameter", "sort"},
		{"/v1/agents?sort=--name", "invalid_parameter", "sort"},
		{"/v1/audit?sort=seq", "invalid_parameter", "sort"},
		{"/v1/agents?colour=blue", "unknown_parameter", "colour"},
		{"/v1/agents?Name=bot", "unknown_parameter", "Name"},
		{"/v1/agents/bot?x=1", "unknown_parameter", "x"},
		{"/v1/agents?disabled=yes", "invalid_parameter", "disabled"},
		{"/v1/connections?env=prod", "invalid_parameter", "env"},
		{"/v1/connections?key_status=good", "invalid_parameter", "key_status"},
		{"/v1/grants?write=maybe", "invalid_parameter", "write"},
		{"/v1/approvals?status=open", "invalid_parameter", "status"},
		{"/v1/approvals?class=delete", "invalid_parameter", "class"},
		{"/v1/audit?decision=ok", "invalid_parameter", "decision"},
		{"/v1/audit?kind=scp", "invalid_parameter", "kind"},
		{"/v1/audit?since=yesterday", "invalid_parameter", "since"},
		{"/v1/audit?until=2026-13-01T00:00:00Z", "invalid_parameter", "until"},
		{"/v1/agents?name=" + strings.Repeat("n", 300), "invalid_parameter", "name"},
		{"/v1/agents?name=%ff", "invalid_parameter", "name"},
		{"/v1/recipes?cursor=" + q(forged), "invalid_parameter", "cursor"},
		{"/v1/recipes?cursor=" + q(cur[:len(cur)-4]), "invalid_parameter", "cursor"},
		{"/v1/recipes?cursor=not-a-cursor!", "invalid_parameter", "cursor"},
		{"/v1/recipes?cursor=" + q(agentCur), "invalid_parameter", "cursor"},
		{"/v1/recipes?cursor=" + q(nameCur), "invalid_parameter", "cursor"},
		{"/v1/audit?cursor=" + q(cur), "invalid_parameter", "cursor"},
		{"/v1/agents?cursor=" + strings.Repeat("A", 2000), "invalid_parameter", "cursor"},
		{"/v1/agents?name=%zz", "invalid_query", ""},
	}
	for _, tt := range tests {
		t.Run(tt.target, func(t *testing.T) {
			r := as.get(tt.target)
			if r.status != http.StatusBadRequest {
				t.Fatalf("status %d; want 400 (%s)", r.status, r.body)
			}
			if code, f := r.errCode(t); code != tt.code || f != tt.field {
				t.Errorf("code, field = %q, %q; want %q, %q", code, f, tt.code, tt.field)
			}
		})
	}
}

// TestAPIFilters: each list's filters keep exactly the matching records.
func TestAPIFilters(t *testing.T) {
	as := newAPISite(t, nil)
	ctx := context.Background()
	if _, err := as.st.CreateAgent(ctx, store.Unaudited(), "ci-runner", newTestKeyPair(t).Authorized); err != nil {
		t.Fatal(err)
	}
	if _, err := as.st.SetAgentDisabled(ctx, store.Unaudited(), "ci-runner", true); err != nil {
		t.Fatal(err)
	}
	if _, err := as.st.SetGrant(ctx, store.Unaudited(), "ci-runner", "web", store.DefaultRules()); err != nil {
		t.Fatal(err)
	}
	if _, err := as.st.SetKeyStatus(ctx, "db", store.KeyOK, "ok"); err != nil {
		t.Fatal(err)
	}
	w := as.ask(as.web, "write", "touch /x", 1)
	as.clock.Advance(time.Second)
	d := as.ask(as.db, "destructive", "rm -rf /srv", 2)
	as.clock.Advance(time.Second)
	x := as.ask(as.web, "destructive", "rm /y", 1)
	if _, err := as.eng.Deny(ctx, x.ID, policy.Decider{AdminID: as.alice, Name: "alice"}, "no"); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		target, field string
		want          []string
	}{
		{"/v1/agents?disabled=true", "name", []string{"ci-runner"}},
		{"/v1/agents?disabled=false", "name", []string{"bot"}},
		{"/v1/agents?name=bot", "name", []string{"bot"}},
		{"/v1/agents?fingerprint=" + url.QueryEscape(as.agent.Keys[0].Fingerprint), "name", []string{"bot"}},
		{"/v1/agents?name=nobody", "name", nil},
		{"/v1/connections?env=production", "alias", []string{"db"}},
		{"/v1/connections?key_status=ok", "alias", []string{"db"}},
		{"/v1/connections?key_status=unchecked&env=dev", "alias", []string{"web"}},
		{"/v1/connections?alias=web", "alias", []string{"web"}},
		{"/v1/connections?host=127.0.0.1&sort=-alias", "alias", []string{"web", "db"}},
		{"/v1/connections?sort=-env", "alias", []string{"db", "web"}},
		{"/v1/grants?agent=ci-runner", "connection", []string{"web"}},
		{"/v1/grants?agent=" + as.agent.ID + "&sort=connection", "connection", []string{"db", "web"}},
		{"/v1/grants?connection=" + as.db.ID, "agent", []string{"bot"}},
		{"/v1/grants?write=deny", "agent", []string{"ci-runner"}},
		{"/v1/grants?env=production&destructive=ask", "agent", []string{"bot"}},
		{"/v1/approvals?status=pending", "id", []string{w.ID, d.ID}},
		{"/v1/approvals?status=denied", "id", []string{x.ID}},
		{"/v1/approvals?class=destructive", "id", []string{d.ID, x.ID}},
		{"/v1/approvals?connection=db", "id", []string{d.ID}},
		{"/v1/approvals?connection=" + as.web.ID + "&status=pending", "id", []string{w.ID}},
		{"/v1/approvals?agent=bot&env=production", "id", []string{d.ID}},
		{"/v1/approvals?kind=sftp", "id", nil},
		{"/v1/recipes?vendor=cisco", "key", []string{"cisco-ios"}},
		{"/v1/recipes?host=github.com", "key", []string{"github"}},
		{"/v1/recipes?q=routeros", "key", []string{"mikrotik-routeros"}},
	}
	for _, tt := range tests {
		t.Run(tt.target, func(t *testing.T) {
			recs, _, _ := as.get(tt.target).list(t)
			if got := field(recs, tt.field); !slices.Equal(got, tt.want) {
				t.Errorf("%s: %v; want %v", tt.field, got, tt.want)
			}
		})
	}
}

// TestAPIAudit: the log pages newest first by seq, filters by every field,
// and its chain is verified by GET /v1/audit/verify, which notices an
// edited row.
func TestAPIAudit(t *testing.T) {
	as := newAPISite(t, nil)
	start := as.clock.Now()
	var seqs []string
	for i := range 12 {
		c, class, outcome := as.web, policy.Read, policy.Allowed
		if i%3 == 2 {
			c, class, outcome = as.db, policy.Destructive, policy.Denied
		}
		seqs = append(seqs, strconv.FormatInt(as.audit(c, class, outcome, fmt.Sprintf("cmd %d", i)), 10))
		as.clock.Advance(time.Minute)
	}
	newest := reversed(seqs)
	for _, limit := range []int{1, 5, 12, 50} {
		got, n := as.pages("/v1/audit", "id", limit)
		if !slices.Equal(got, newest) {
			t.Errorf("limit %d: ids %v; want %v", limit, got, newest)
		}
		if want := (12 + limit - 1) / limit; n != want {
			t.Errorf("limit %d: %d pages; want %d", limit, n, want)
		}
	}
	rfc := func(t time.Time) string { return url.QueryEscape(t.Format(time.RFC3339)) }
	tests := []struct {
		query string
		want  []string
	}{
		{"connection=db", []string{"12", "9", "6", "3"}},
		{"connection=" + as.db.ID + "&decision=denied", []string{"12", "9", "6", "3"}},
		{"class=read&agent=bot", []string{"11", "10", "8", "7", "5", "4", "2", "1"}},
		{"decision=allowed&kind=exec&since=" + rfc(start.Add(5*time.Minute)), []string{"11", "10", "8", "7"}},
		{"since=" + rfc(start.Add(2*time.Minute)) + "&until=" + rfc(start.Add(4*time.Minute)), []string{"4", "3"}},
		{"session=ses_db", []string{"12", "9", "6", "3"}},
		{"session=ses_web&q=CMD+1", []string{"11", "2"}},
		{"q=cmd+1", []string{"12", "11", "2"}},
		{"agent=nobody", nil},
		{"kind=sftp", nil},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			got, _ := as.pages("/v1/audit?"+tt.query, "id", 3)
			if !slices.Equal(got, tt.want) {
				t.Errorf("ids %v; want %v", got, tt.want)
			}
		})
	}
	row := as.get("/v1/audit?limit=1").decode(t)["data"].([]any)[0].(map[string]any)
	for k, want := range map[string]any{"id": "12", "seq": 12.0, "connection": "db", "agent": "bot", "class": "destructive",
		"decision": "denied", "operation": "cmd 11", "exit_status": nil, "session_id": "ses_db"} {
		if row[k] != want {
			t.Errorf("newest row %s = %v; want %v", k, row[k], want)
		}
	}
	if row["modified_at"] != row["time"] {
		t.Errorf("modified_at %v; want the row's time %v", row["modified_at"], row["time"])
	}

	v := as.get("/v1/audit/verify").data(t)
	if v["intact"] != true || v["rows"] != 12.0 || v["broken"] != nil {
		t.Fatalf("verify %v; want intact, 12 rows", v)
	}
	db, err := sql.Open("sqlite", as.path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE audit SET operation = 'cmd edited' WHERE seq = 5`); err != nil {
		t.Fatal(err)
	}
	v = as.get("/v1/audit/verify").data(t)
	brk, _ := v["broken"].(map[string]any)
	if v["intact"] != false || brk["seq"] != 5.0 {
		t.Errorf("verify after editing row 5: %v; want not intact, broken at seq 5", v)
	}
}
