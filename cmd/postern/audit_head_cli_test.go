package main

import (
	"bytes"
	"database/sql"
	"encoding/csv"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	pmodel "github.com/prometheus/common/model"

	"github.com/postern/postern/internal/testwait"
	"github.com/postern/postern/model"
	"github.com/postern/postern/notify"
	"github.com/postern/postern/store"
)

// auditToggles appends n audit rows, one an admin change each: the agent
// bot (added by the caller) disabled and enabled in turn.
func (c *cli) auditToggles(n int) {
	c.t.Helper()
	for i := range n {
		verb := "disable"
		if i%2 == 1 {
			verb = "enable"
		}
		c.ok("", "agent", verb, "bot")
	}
}

// headLine is the first line of `postern audit head`: SEQ:HASH.
func (c *cli) headLine() string {
	c.t.Helper()
	line, _, _ := strings.Cut(c.ok("", "audit", "head"), "\n")
	return line
}

// deleteAuditAfter deletes the audit rows after seq straight from the
// SQLite database, as someone with the file could.
func (c *cli) deleteAuditAfter(seq int64) {
	c.t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(c.data, store.DatabaseFile)+"?_pragma=busy_timeout(5000)")
	if err != nil {
		c.t.Fatal(err)
	}
	defer db.Close()
	res, err := db.Exec(`DELETE FROM audit WHERE seq > ?`, seq)
	if err != nil {
		c.t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		c.t.Fatalf("deleting audit rows after %d: none deleted", seq)
	}
}

// newAuditCLI is a data directory whose audit log holds n rows.
func newAuditCLI(t *testing.T, n int) *cli {
	t.Helper()
	c := newCLI(t)
	c.ok("", "agent", "add", "bot", "--key", writeKeyFiles(t, "bot", "").pub)
	c.auditToggles(n - 1)
	return c
}

// TestAuditHeadCommand: audit head prints the newest row's SEQ:HASH and a
// line for people, or the same as JSON; an empty log's head is 0 and zeros.
func TestAuditHeadCommand(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	zeros := strings.Repeat("0", 64)
	if got, want := c.ok("", "audit", "head"), "0:"+zeros+"\naudit head: the audit log is empty\n"; got != want {
		t.Errorf("audit head of an empty log: got %q; want %q", got, want)
	}
	c.ok("", "agent", "add", "bot", "--key", writeKeyFiles(t, "bot", "").pub)
	c.auditToggles(2)
	rows := c.auditRows()
	if len(rows) != 3 {
		t.Fatalf("audit rows: got %d; want 3", len(rows))
	}
	head := "3:" + rows[2].Hash
	out := c.ok("", "audit", "head")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 2 || lines[0] != head || !strings.Contains(lines[1], "verify --from "+head) {
		t.Errorf("audit head: got %q; want %s, then a line naming verify --from %s", out, head, head)
	}
	var js auditHeadJSON
	if err := json.Unmarshal([]byte(c.ok("", "audit", "head", "-o", "json")), &js); err != nil {
		t.Fatal(err)
	}
	if want := (auditHeadJSON{Seq: 3, Hash: rows[2].Hash, Head: head}); js != want {
		t.Errorf("audit head -o json: got %+v; want %+v", js, want)
	}
	if r := c.run("", "audit", "head", "-o", "yaml"); r.code != 2 {
		t.Errorf("audit head -o yaml: got exit %d; want 2", r.code)
	}
}

// TestAuditVerifyFrom: rows deleted from the end pass verify, which sees
// only the chain, and fail verify --from with a head taken before; a head
// taken at or before what is left still passes, and rows appended in the
// place of the deleted ones fail it at the kept seq.
func TestAuditVerifyFrom(t *testing.T) {
	t.Parallel()
	c := newAuditCLI(t, 3)
	head3 := c.headLine()
	c.auditToggles(2)
	head5 := c.headLine()
	if !strings.HasPrefix(head5, "5:") {
		t.Fatalf("head after 5 rows: got %q; want 5:HASH", head5)
	}

	out := c.ok("", "audit", "verify", "--from", head5)
	if want := "kept head 5 is there unchanged; 0 rows were added after it\n"; !strings.HasSuffix(out, want) {
		t.Errorf("verify --from the newest head: got %q; want it to end %q", out, want)
	}
	out = c.ok("", "audit", "verify", "--from", head3)
	if want := "kept head 3 is there unchanged; 2 rows were added after it\n"; !strings.HasSuffix(out, want) {
		t.Errorf("verify --from an older head: got %q; want it to end %q", out, want)
	}

	c.deleteAuditAfter(3)
	_, hash3, _ := strings.Cut(head3, ":")
	// Without --from, verify is what it was: the shortened chain is intact.
	if got, want := c.ok("", "audit", "verify"), "audit chain intact: 3 rows, head "+hash3+"\n"; got != want {
		t.Errorf("verify after deleting rows 4 and 5: got %q; want %q", got, want)
	}
	r := c.run("", "audit", "verify", "--from", head5)
	wantLost := "postern: audit log lost rows: the kept head is row 5 but the newest row is 3: 2 rows after row 3 are missing (rows 1 to 3 are intact)\n"
	if r.code != 1 || r.stderr != wantLost || r.stdout != "" {
		t.Errorf("verify --from %s after deleting rows 4 and 5: got exit %d, stdout %q, stderr %q; want 1 and %q", head5, r.code, r.stdout, r.stderr, wantLost)
	}
	c.ok("", "audit", "verify", "--from", head3)

	// New rows in the deleted ones' place: row 5 is there again, with
	// another hash.
	c.auditToggles(2)
	r = c.run("", "audit", "verify", "--from", head5)
	if r.code != 1 || !strings.HasPrefix(r.stderr, "postern: audit chain broken at row 5 (position 5): hash is ") || !strings.Contains(r.stderr, "kept head says") {
		t.Errorf("verify --from %s with rows 4 and 5 rewritten: got exit %d, stderr %q; want 1 and a break at row 5", head5, r.code, r.stderr)
	}
	if r := c.run("", "audit", "verify"); r.code != 0 {
		t.Errorf("verify with rows 4 and 5 rewritten: got exit %d, stderr %q; want 0 (the chain alone cannot tell)", r.code, r.stderr)
	}

	// A well-formed head that names a row with another hash.
	r = c.run("", "audit", "verify", "--from", "2:"+strings.Repeat("ab", 32))
	if r.code != 1 || !strings.HasPrefix(r.stderr, "postern: audit chain broken at row 2 ") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("verify --from a wrong hash at row 2: got exit %d, stderr %q; want 1 and one line naming row 2", r.code, r.stderr)
	}

	for _, bad := range []string{"5", "5:abc", "x:" + strings.Repeat("ab", 32), "0:" + strings.Repeat("ab", 32), "-1:" + strings.Repeat("ab", 32)} {
		r := c.run("", "audit", "verify", "--from", bad)
		if r.code != 2 || !strings.HasPrefix(r.stderr, "postern: --from: ") || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("verify --from %q: got exit %d, stderr %q; want 2 and one line about --from", bad, r.code, r.stderr)
		}
	}
}

// TestAuditExport: export writes the rows from a seq or a time on, as JSON
// lines in the API's shape or as CSV with a header.
func TestAuditExport(t *testing.T) {
	t.Parallel()
	c := newAuditCLI(t, 5)
	rows := c.auditRows()
	if len(rows) != 5 {
		t.Fatalf("audit rows: got %d; want 5", len(rows))
	}
	rowTime := func(i int) string { return time.Time(rows[i].Time).UTC().Format(time.RFC3339Nano) }
	seqsOf := func(rs []model.AuditRow) []int64 {
		var s []int64
		for _, r := range rs {
			s = append(s, r.Seq)
		}
		return s
	}
	tests := []struct {
		name  string
		since []string
		want  []model.AuditRow
	}{
		{"every row", nil, rows},
		{"since a seq", []string{"--since", "3"}, rows[2:]},
		{"since the newest seq", []string{"--since", "5"}, rows[4:]},
		{"since past the end", []string{"--since", "9"}, nil},
		{"since a row's time", []string{"--since", rowTime(3)}, rows[3:]},
	}
	for _, tt := range tests {
		t.Run(tt.name+" jsonl", func(t *testing.T) {
			out := c.ok("", append([]string{"audit", "export", "-o", "jsonl"}, tt.since...)...)
			var got []model.AuditRow
			dec := json.NewDecoder(strings.NewReader(out))
			for {
				var r model.AuditRow
				if err := dec.Decode(&r); err == io.EOF {
					break
				} else if err != nil {
					t.Fatalf("decoding %q: %v", out, err)
				}
				got = append(got, r)
			}
			if strings.Count(out, "\n") != len(tt.want) {
				t.Errorf("got %d lines; want %d, one per row:\n%s", strings.Count(out, "\n"), len(tt.want), out)
			}
			gotJS, _ := json.Marshal(got)
			wantJS, _ := json.Marshal(tt.want)
			if !bytes.Equal(gotJS, wantJS) {
				t.Errorf("got rows %v; want %v, as audit -o json shows them\ngot:  %s\nwant: %s", seqsOf(got), seqsOf(tt.want), gotJS, wantJS)
			}
		})
		t.Run(tt.name+" csv", func(t *testing.T) {
			out := c.ok("", append([]string{"audit", "export", "-o", "csv"}, tt.since...)...)
			recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
			if err != nil {
				t.Fatalf("reading %q: %v", out, err)
			}
			if len(recs) == 0 || strings.Join(recs[0], ",") != strings.Join(model.AuditCSVHeader(), ",") {
				t.Fatalf("got %q; want the header %v first", out, model.AuditCSVHeader())
			}
			recs = recs[1:]
			if len(recs) != len(tt.want) {
				t.Fatalf("got %d records; want %d:\n%s", len(recs), len(tt.want), out)
			}
			col := map[string]int{}
			for i, name := range model.AuditCSVHeader() {
				col[name] = i
			}
			for i, w := range tt.want {
				r := recs[i]
				got := []string{r[col["seq"]], r[col["time"]], r[col["operation"]], r[col["deciders"]], r[col["hash"]], r[col["exit_status"]]}
				want := []string{strconv.FormatInt(w.Seq, 10), time.Time(w.Time).UTC().Format(time.RFC3339Nano), w.Operation,
					strings.Join(w.Deciders, ","), w.Hash, ""}
				if strings.Join(got, "|") != strings.Join(want, "|") {
					t.Errorf("record %d: got %q; want %q", i, got, want)
				}
			}
		})
	}
	for _, bad := range [][]string{{"-o", "json"}, {"--since", "0"}, {"--since", "yesterday"}} {
		if r := c.run("", append([]string{"audit", "export"}, bad...)...); r.code != 2 || r.stdout != "" {
			t.Errorf("audit export %v: got exit %d, stdout %q; want 2 and nothing written", bad, r.code, r.stdout)
		}
	}
}

// TestServeAuditHead: serve publishes the head at start and at shutdown to
// the log, the metrics and a notification channel that subscribes to
// audit.head (signed); a head it published catches rows deleted after it,
// which verify alone does not. --audit-head-interval 0 publishes none.
func TestServeAuditHead(t *testing.T) {
	t.Parallel()
	c := newAuditCLI(t, 3)

	heads := make(chan []byte, 8)
	keeper := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if notify.Verify([]byte("keeper-key"), body, r.Header.Get(notify.SignatureHeader)) {
			select {
			case heads <- body:
			default: // only the first few are checked
			}
		}
	}))
	defer keeper.Close()
	if r := c.run("keeper-key", "notify", "add", "keeper", "--url", keeper.URL+"/heads", "--secret-file", "-",
		"--events", "audit.head"); r.code != 0 {
		t.Fatalf("notify add keeper: got exit %d, %q; want 0", r.code, r.stderr)
	} // the channel's addition is audit row 4

	p := startServe(t, c.data, "--audit-head-interval", "0")
	if code := p.end(syscall.SIGTERM); code != 0 {
		t.Fatalf("serve --audit-head-interval 0: got exit %d; want 0\n%s", code, p.stderrText())
	}
	if l := p.logged("audit head"); l != nil {
		t.Errorf("serve --audit-head-interval 0: got %v; want no audit head logged", l)
	}

	p = startServe(t, c.data, "--metrics-listen", "127.0.0.1:0")
	metricsURL, _ := p.waitLog("metrics serving")["url"].(string)
	start := p.waitLog("audit head")
	head3 := c.headLine()
	select {
	case body := <-heads:
		var got notify.Payload
		if err := json.Unmarshal(body, &got); err != nil || got.Event != "audit.head" || got.AuditHead == nil || got.AuditHead.Head != head3 {
			t.Errorf("channel keeper got %s (%v); want a signed audit.head with head %s", body, err, head3)
		}
	case <-testwait.Context(t).Done():
		t.Fatalf("channel keeper got no signed audit head before the test's deadline\n%s", p.stderrText())
	}
	if start["head"] != head3 || start["seq"] != 4.0 || start["trigger"] != "start" {
		t.Errorf("audit head at start: got %v; want head %s, seq 4, trigger start", start, head3)
	}
	seq, info := scrapeAuditHead(t, metricsURL)
	if _, hash3, _ := strings.Cut(head3, ":"); seq != 4 || info != hash3 {
		t.Errorf("metrics at start: got seq %v, hash %q; want 4, %s", seq, info, hash3)
	}

	c.auditToggles(2) // rows 5 and 6, written while serve runs
	head5 := c.headLine()
	if code := p.end(syscall.SIGTERM); code != 0 {
		t.Fatalf("SIGTERM: got exit %d; want 0\n%s", code, p.stderrText())
	}
	var last map[string]any
	for _, line := range strings.Split(p.stderrText(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["message"] == "audit head" {
			last = m
		}
	}
	if last["head"] != head5 || last["trigger"] != "shutdown" || last["level"] != "info" {
		t.Fatalf("last audit head logged: got %v; want head %s at shutdown", last, head5)
	}

	c.deleteAuditAfter(4)
	if r := c.run("", "audit", "verify"); r.code != 0 {
		t.Errorf("verify after deleting rows 5 and 6: got exit %d, %q; want 0, as before --from existed", r.code, r.stderr)
	}
	published, _ := last["head"].(string)
	r := c.run("", "audit", "verify", "--from", published)
	if r.code != 1 || !strings.Contains(r.stderr, "2 rows after row 4 are missing") {
		t.Errorf("verify --from the head published at shutdown: got exit %d, %q; want 1 and 2 rows missing", r.code, r.stderr)
	}
	if r := c.run("", "audit", "verify", "--from", head3); r.code != 0 {
		t.Errorf("verify --from the head published at start: got exit %d, %q; want 0", r.code, r.stderr)
	}
	if r := c.run("", "serve", "--audit-head-interval", "-1m"); r.code != 2 || !strings.Contains(r.stderr, "--audit-head-interval") {
		t.Errorf("serve --audit-head-interval -1m: got exit %d, %q; want 2 naming the flag", r.code, r.stderr)
	}
}

// scrapeAuditHead reads postern_audit_head_seq and the hash label of
// postern_audit_head_info from url.
func scrapeAuditHead(t *testing.T, url string) (seq float64, hash string) {
	t.Helper()
	req, err := http.NewRequestWithContext(testwait.Context(t), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(pmodel.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if f := fams["postern_audit_head_seq"]; f != nil && len(f.GetMetric()) == 1 {
		seq = f.GetMetric()[0].GetGauge().GetValue()
	}
	if f := fams["postern_audit_head_info"]; f != nil && len(f.GetMetric()) == 1 {
		for _, l := range f.GetMetric()[0].GetLabel() {
			if l.GetName() == "hash" {
				hash = l.GetValue()
			}
		}
	}
	return seq, hash
}
