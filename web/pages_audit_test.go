package web

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/postern/postern/model"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
)

// auditFixture writes 250 rows: one a minute from 2026-03-01 12:00 UTC,
// every third destructive and denied, five sessions of 50 rows each
// (ses_test0 .. ses_test4), row 8's reason "limit 100% reached".
func auditFixture(t *testing.T, ps *pageSite) {
	t.Helper()
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for i := range 250 {
		class, decision := policy.Read, policy.Allowed
		if i%3 == 0 {
			class, decision = policy.Destructive, policy.Denied
		}
		reason := ""
		if i == 7 {
			reason = "limit 100% reached"
		}
		if _, err := ps.eng.Audit(context.Background(), policy.Record{
			Time: base.Add(time.Duration(i) * time.Minute), AgentID: ps.agent.ID, AgentName: "bot",
			ConnectionID: ps.conn.ID, ConnectionAlias: "web1", Class: class, Kind: policy.Exec, Outcome: decision,
			Operation: fmt.Sprintf("cmd %d <b>", i+1), Reason: reason, SessionID: fmt.Sprintf("ses_test%d", i/50),
		}); err != nil {
			t.Fatalf("Audit: %v", err)
		}
	}
}

func TestAuditPage(t *testing.T) {
	ps := newPageSite(t, nil)
	pc := ps.admin("alice")
	auditFixture(t, ps)
	seqs := func(body string) []string {
		var out []string
		for _, m := range regexp.MustCompile(`<tr id="audit-(\d+)"`).FindAllStringSubmatch(body, -1) {
			out = append(out, m[1])
		}
		return out
	}
	link := func(body, id string) string {
		if m := regexp.MustCompile(`<a href="([^"]*)" id="` + id + `"`).FindStringSubmatch(body); m != nil {
			return m[1]
		}
		return ""
	}
	for _, tc := range []struct {
		name                string
		path                string
		wantFirst, wantLast string
		wantRows            int
		wantOlder           string
		wantNewer           string
	}{
		{"first page", "/audit", "250", "151", 100, "/audit?before=151", ""},
		{"second page", "/audit?before=151", "150", "51", 100, "/audit?before=51", "/audit?after=150"},
		{"last page", "/audit?before=51", "50", "1", 50, "", "/audit?after=50"},
		{"newer from the second", "/audit?after=150", "250", "151", 100, "/audit?before=151", ""},
		{"newer from the last", "/audit?after=50", "150", "51", 100, "/audit?before=51", "/audit?after=150"},
		{"class filter", "/audit?class=destructive", "250", "1", 84, "", ""},
		{"decision and agent filter", "/audit?agent=bot&decision=allowed&kind=exec&connection=web1", "249", "101", 100,
			"/audit?agent=bot&amp;before=101&amp;connection=web1&amp;decision=allowed&amp;kind=exec", ""},
		{"search, any case", "/audit?q=CMD+12", "129", "12", 11, "", ""},
		{"search a wildcard", "/audit?q=100%25", "8", "8", 1, "", ""},
		{"session", "/audit?session=ses_test2", "150", "101", 50, "", ""},
		{"session, second page", "/audit?session=ses_test2&before=120", "119", "101", 19, "", "/audit?after=119&amp;session=ses_test2"},
		{"time range", "/audit?since=2026-03-01T12:10&until=2026-03-01T12:20", "20", "11", 10, "", ""},
		{"time range RFC 3339", "/audit?since=2026-03-01T14:00:00%2B02:00&until=2026-03-01T12:03:00Z", "3", "1", 3, "", ""},
		{"no match", "/audit?agent=nobody", "", "", 0, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, body := pc.get(tc.path)
			if status != http.StatusOK {
				t.Fatalf("got status %d; want 200", status)
			}
			got := seqs(body)
			if len(got) != tc.wantRows {
				t.Fatalf("got %d rows; want %d", len(got), tc.wantRows)
			}
			if len(got) > 0 && (got[0] != tc.wantFirst || got[len(got)-1] != tc.wantLast) {
				t.Errorf("got rows %s..%s; want %s..%s (newest first)", got[0], got[len(got)-1], tc.wantFirst, tc.wantLast)
			}
			if got := link(body, "audit-older"); got != tc.wantOlder {
				t.Errorf("got Older link %q; want %q", got, tc.wantOlder)
			}
			if got := link(body, "audit-newer"); got != tc.wantNewer {
				t.Errorf("got Newer link %q; want %q", got, tc.wantNewer)
			}
		})
	}
	_, _, body := pc.get("/audit")
	if !strings.Contains(body, `<p id="chain-status" data-ok="true"`) {
		t.Errorf("intact chain: want #chain-status data-ok=true")
	}
	if strings.Contains(body, "<b>") || !strings.Contains(body, "cmd 250 &lt;b&gt;") {
		t.Errorf("operation text is not escaped")
	}
	for _, bad := range []string{"/audit?before=x", "/audit?since=yesterday", "/audit?before=3&after=1", "/audit/export?format=xml",
		"/audit?q=" + strings.Repeat("x", 300), "/audit/export?format=csv&q=%ff"} {
		if status, _, _ := pc.get(bad); status != http.StatusBadRequest {
			t.Errorf("%s: got status %d; want 400", bad, status)
		}
	}
	// An edited row breaks the chain, and the page says so.
	db, err := sql.Open("sqlite", ps.dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE audit SET operation = 'edited' WHERE seq = 7`); err != nil {
		t.Fatal(err)
	}
	_, _, body = pc.get("/audit")
	if !strings.Contains(body, `<p id="chain-status" data-ok="false"`) || !strings.Contains(body, "BROKEN at row 7") {
		t.Errorf("edited row 7: want #chain-status data-ok=false naming row 7")
	}
}

// TestAuditPageSessions: the collapsed view has one line per session,
// the most recently active first, with its agent, connection, first and
// last time and row count, linking to its rows.
func TestAuditPageSessions(t *testing.T) {
	ps := newPageSite(t, nil)
	pc := ps.admin("alice")
	auditFixture(t, ps)
	status, _, body := pc.get("/audit?view=sessions")
	if status != http.StatusOK {
		t.Fatalf("got status %d; want 200", status)
	}
	re := regexp.MustCompile(`(?s)<tr data-session="([^"]+)">.*?<a href="([^"]*)" class="session-link">.*?<td class="agent">([^<]*)</td>\s*<td class="alias">([^<]*)</td>.*?<td class="num rows">(\d+)</td>`)
	var got []string
	for _, m := range re.FindAllStringSubmatch(body, -1) {
		got = append(got, strings.Join(m[1:], " "))
	}
	want := []string{}
	for i := 4; i >= 0; i-- {
		want = append(want, fmt.Sprintf("ses_test%d /audit?session=ses_test%d bot web1 50", i, i))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got sessions\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// A filter applies to the rows counted: destructive rows only.
	_, _, body = pc.get("/audit?view=sessions&class=destructive&session=ignored")
	if m := re.FindStringSubmatch(body); m == nil || m[1] != "ses_test4" || m[5] != "17" {
		t.Errorf("destructive sessions: first line %q; want ses_test4 with 17 rows", m)
	}
}

// TestAuditExport: the export link gives the filter's rows, oldest first,
// as CSV or JSON lines with the columns of `postern audit export`, to a
// viewer too. The fixture fits one page; the paging is model.ExportAudit's
// (TestExportAuditPages).
func TestAuditExport(t *testing.T) {
	ps := newPageSite(t, nil)
	pc := ps.admin("alice")
	if _, err := ps.st.CreateAdmin(context.Background(), store.Unaudited(), "vera", cheapHash(pagePassword), store.RoleViewer); err != nil {
		t.Fatal(err)
	}
	viewer := ps.client()
	viewer.loginAs("vera")
	auditFixture(t, ps)
	for _, tc := range []struct {
		name, query string
		wantSeqs    []int64
	}{
		{"session", "session=ses_test1", seqRange(51, 100)},
		{"search", "q=cmd+12", append([]int64{12}, seqRange(120, 129)...)},
		{"all", "", seqRange(1, 250)},
	} {
		for _, format := range []string{"csv", "jsonl"} {
			t.Run(tc.name+" "+format, func(t *testing.T) {
				for _, c := range []*pageClient{pc, viewer} {
					status, h, body := c.get("/audit/export?format=" + format + "&" + tc.query)
					if status != http.StatusOK {
						t.Fatalf("got status %d; want 200", status)
					}
					if cd := h.Get("Content-Disposition"); !strings.HasPrefix(cd, "attachment;") || !strings.HasSuffix(cd, "."+format+`"`) {
						t.Errorf("Content-Disposition %q; want an attachment .%s", cd, format)
					}
					var got []model.AuditRow
					if format == "jsonl" {
						dec := json.NewDecoder(strings.NewReader(body))
						for dec.More() {
							var r model.AuditRow
							if err := dec.Decode(&r); err != nil {
								t.Fatal(err)
							}
							got = append(got, r)
						}
					} else {
						recs, err := csv.NewReader(strings.NewReader(body)).ReadAll()
						if err != nil {
							t.Fatal(err)
						}
						if strings.Join(recs[0], ",") != strings.Join(model.AuditCSVHeader(), ",") {
							t.Fatalf("CSV header %v; want %v", recs[0], model.AuditCSVHeader())
						}
						for _, rec := range recs[1:] {
							var r model.AuditRow
							fmt.Sscan(rec[0], &r.Seq)
							r.Operation, r.SessionID = rec[12], rec[19]
							got = append(got, r)
						}
					}
					if len(got) != len(tc.wantSeqs) {
						t.Fatalf("got %d rows; want %d", len(got), len(tc.wantSeqs))
					}
					for i, r := range got {
						if r.Seq != tc.wantSeqs[i] || r.SessionID != fmt.Sprintf("ses_test%d", (r.Seq-1)/50) ||
							r.Operation != fmt.Sprintf("cmd %d <b>", r.Seq) {
							t.Fatalf("row %d: seq %d, session %q, operation %q; want seq %d of its session", i, r.Seq, r.SessionID, r.Operation, tc.wantSeqs[i])
						}
					}
				}
			})
		}
	}
	// The page links to the export of its own filter.
	_, _, body := pc.get("/audit?session=ses_test1&q=cmd")
	if !bytes.Contains([]byte(body), []byte(`href="/audit/export?format=csv&amp;q=cmd&amp;session=ses_test1"`)) {
		t.Errorf("the page does not link the CSV export of its filter")
	}
}

func seqRange(from, to int64) []int64 {
	var out []int64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}
