package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/postern/postern/model"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
)

// browserAuditRows appends n audit rows to the rig's log, as another
// postern of the same data directory would: operation "op-I", one a
// minute from base, sessions of 50 rows (ses_fill0, ses_fill1, ...).
func browserAuditRows(t *testing.T, r *webRig, n int, base time.Time) {
	t.Helper()
	st, err := (store.Dir{Path: r.cli.data}).Open(context.Background(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	eng, err := policy.New(policy.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	for i := range n {
		if _, err := eng.Audit(context.Background(), policy.Record{Time: base.Add(time.Duration(i) * time.Minute),
			AgentName: "bot", ConnectionAlias: "target", Class: policy.Read, Kind: policy.Exec, Outcome: policy.Allowed,
			Operation: fmt.Sprintf("op-%d", i), SessionID: fmt.Sprintf("ses_fill%d", i/50)}); err != nil {
			t.Fatal(err)
		}
	}
}

// shownSeqs is the seqs of the audit rows the open page shows, in order.
func shownSeqs(t *testing.T, bctx context.Context) []int64 {
	t.Helper()
	return eval[[]int64](t, bctx, `[...document.querySelectorAll('#audit tbody tr')].map(tr => Number(tr.dataset.seq))`)
}

// shownOps is the operations of the audit rows the open page shows.
func shownOps(t *testing.T, bctx context.Context) []string {
	t.Helper()
	return eval[[]string](t, bctx, `[...document.querySelectorAll('#audit tbody tr code.op')].map(c => c.textContent)`)
}

// TestBrowserAuditPage drives the audit page in Chromium as an auditor
// would: paging older and newer, a time range, a search, the session view,
// and the export of the current filter, fetched from its link and read.
func TestBrowserAuditPage(t *testing.T) {
	t.Parallel()
	r, bctx := startBrowserRig(t)
	run := r.ssh("target", "echo through-postern")
	run.wait(t)
	if run.code != 0 {
		t.Fatalf("echo: exit %d, stderr %q", run.code, run.stderr)
	}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	browserAuditRows(t, r, 150, base)
	total := int64(len(r.cli.auditRows()))
	r.login(t, bctx, r.password)
	step(t, bctx, "wait for the logged-in page", chromedp.WaitVisible(chromedp.CSS("#logout")))

	step(t, bctx, "open the audit page", chromedp.Navigate(r.base+"/audit"), chromedp.WaitVisible(chromedp.CSS("#audit")))
	first := shownSeqs(t, bctx)
	if len(first) != 100 || first[0] != total || first[99] != total-99 {
		t.Fatalf("first page: %d rows from %v; want 100, %d down to %d", len(first), first[:min(1, len(first))], total, total-99)
	}
	step(t, bctx, "page to older rows", chromedp.Click(chromedp.CSS("#audit-older")),
		chromedp.WaitVisible(chromedp.CSS("#audit-newer")))
	older := shownSeqs(t, bctx)
	if want := int(total - 100); len(older) != want || older[0] != total-100 || older[len(older)-1] != 1 {
		t.Fatalf("older page: %d rows %v..; want %d, %d down to 1", len(older), older[:min(1, len(older))], want, total-100)
	}
	if n := eval[int](t, bctx, `document.querySelectorAll('#audit-older').length`); n != 0 {
		t.Errorf("the oldest page links to an older one")
	}
	step(t, bctx, "page back to newer rows", chromedp.Click(chromedp.CSS("#audit-newer")),
		chromedp.WaitVisible(chromedp.CSS("#audit-older")))
	if back := shownSeqs(t, bctx); !slices.Equal(back, first) {
		t.Errorf("newer from the older page: rows %v..; want the first page again", back[:min(1, len(back))])
	}

	step(t, bctx, "filter a time range",
		chromedp.SendKeys(chromedp.CSS("#audit-since"), "2026-01-01T00:10"),
		chromedp.SendKeys(chromedp.CSS("#audit-until"), "2026-01-01T00:20"),
		chromedp.Submit(chromedp.CSS("#audit-since")),
		chromedp.WaitVisible(chromedp.CSS(`#audit-since[value="2026-01-01T00:10"]`)))
	var want []string
	for i := 19; i >= 10; i-- {
		want = append(want, fmt.Sprintf("op-%d", i))
	}
	if got := shownOps(t, bctx); !slices.Equal(got, want) {
		t.Errorf("00:10 to 00:20: operations %v; want %v", got, want)
	}

	step(t, bctx, "search instead",
		chromedp.Clear(chromedp.CSS("#audit-since")), chromedp.Clear(chromedp.CSS("#audit-until")),
		chromedp.SendKeys(chromedp.CSS("#audit-q"), "OP-12"),
		chromedp.Submit(chromedp.CSS("#audit-q")),
		chromedp.WaitVisible(chromedp.CSS(`#audit-q[value="OP-12"]`)))
	want = []string{"op-129", "op-128", "op-127", "op-126", "op-125", "op-124", "op-123", "op-122", "op-121", "op-120", "op-12"}
	if got := shownOps(t, bctx); !slices.Equal(got, want) {
		t.Errorf("search OP-12: operations %v; want %v", got, want)
	}
	if q := eval[string](t, bctx, `new URL(location.href).searchParams.get('q')`); q != "OP-12" {
		t.Errorf("the search is not in the URL: q=%q", q)
	}

	// The export links of this filter, fetched as the browser would
	// download them (the session's cookie goes along).
	fetch := func(id string) string {
		return eval[string](t, bctx, `fetch(document.getElementById('`+id+`').href).then(r => r.ok ? r.text() : 'HTTP ' + r.status)`)
	}
	recs, err := csv.NewReader(strings.NewReader(fetch("audit-export-csv"))).ReadAll()
	if err != nil {
		t.Fatalf("CSV export: %v", err)
	}
	if len(recs) == 0 || !slices.Equal(recs[0], model.AuditCSVHeader()) {
		t.Fatalf("CSV export header %v; want %v", recs[:min(1, len(recs))], model.AuditCSVHeader())
	}
	var csvOps []string
	for _, rec := range recs[1:] {
		csvOps = append(csvOps, rec[12])
		if !strings.HasPrefix(rec[19], "ses_fill") {
			t.Errorf("CSV row %s: session_id %q; want its session", rec[0], rec[19])
		}
	}
	slices.Reverse(want) // the export is oldest first
	if !slices.Equal(csvOps, want) {
		t.Errorf("CSV export operations %v; want %v", csvOps, want)
	}
	var jsOps []string
	for _, line := range strings.Split(strings.TrimSpace(fetch("audit-export-jsonl")), "\n") {
		var row model.AuditRow
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatalf("JSON lines export: %v in %q", err, line)
		}
		jsOps = append(jsOps, row.Operation)
	}
	if !slices.Equal(jsOps, want) {
		t.Errorf("JSON lines export operations %v; want %v", jsOps, want)
	}

	// The session view: the real ssh connection's session, and one line
	// per filled session; its link shows that session's rows alone.
	step(t, bctx, "open the session view", chromedp.Navigate(r.base+"/audit?view=sessions"),
		chromedp.WaitVisible(chromedp.CSS("#audit-sessions")))
	sessions := eval[[]string](t, bctx, `[...document.querySelectorAll('#audit-sessions tbody tr')].map(tr =>
		tr.dataset.session + ' ' + tr.querySelector('td.rows').textContent)`)
	var real string
	for _, row := range r.cli.auditRows() {
		if row.Operation == "echo through-postern" {
			real = row.SessionID
		}
	}
	wantSessions := []string{"ses_fill2 50", "ses_fill1 50", "ses_fill0 50", real + " 1"}
	if real == "" || !slices.Equal(sessions, wantSessions) {
		t.Fatalf("sessions %v; want %v", sessions, wantSessions)
	}
	step(t, bctx, "open the ssh connection's session",
		chromedp.Click(chromedp.CSS(`#audit-sessions tr[data-session="`+real+`"] a.session-link`)),
		chromedp.WaitVisible(chromedp.CSS("#audit")))
	if got := shownOps(t, bctx); !slices.Equal(got, []string{"echo through-postern"}) {
		t.Errorf("the session's rows: %v; want the echo alone", got)
	}
}
