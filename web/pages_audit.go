package web

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/postern/postern/model"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
)

// auditPageSize is how many audit rows (or sessions) one page shows.
const auditPageSize = 100

// auditExportPage is how many rows an export reads from the store at a
// time: a long log is streamed, never held whole.
const auditExportPage = 1000

// verifyTimeout bounds the audit chain's verification on a page view. It
// walks the whole log, which takes well under a second at a bastion's
// scale; past the bound the page says the chain could not be verified
// rather than hang.
const verifyTimeout = 20 * time.Second

// auditFilters are the filters of the audit log as the page, its export
// link and GET /v1/audit take them: one set of names (fields), one reading
// into the store's filter (storeFilter), so that a filter reads the same
// through every door. Since and Until are as given (RFC 3339, or the
// form's date and time, read as UTC).
type auditFilters struct {
	Agent, Connection, Session, Class, Decision, Kind, Search, Since, Until string
}

// auditFilterField is one filter and its query parameter's name.
type auditFilterField struct {
	name string
	v    *string
}

// fields are f's filters with their query parameters' names.
func (f *auditFilters) fields() []auditFilterField {
	return []auditFilterField{{"agent", &f.Agent}, {"connection", &f.Connection}, {"session", &f.Session},
		{"class", &f.Class}, {"decision", &f.Decision}, {"kind", &f.Kind}, {"q", &f.Search},
		{"since", &f.Since}, {"until", &f.Until}}
}

// auditFiltersOf reads each filter with get, given its parameter's name.
func auditFiltersOf(get func(name string) string) auditFilters {
	var f auditFilters
	for _, fl := range f.fields() {
		*fl.v = get(fl.name)
	}
	return f
}

// storeFilter is f as the store reads it; a since or until that is no
// time is an error.
func (f auditFilters) storeFilter() (store.AuditFilter, error) {
	sf := store.AuditFilter{Agent: f.Agent, Connection: f.Connection, Session: f.Session, Class: f.Class,
		Decision: f.Decision, Kind: f.Kind, Search: f.Search}
	var err error
	if f.Since != "" {
		if sf.Since, err = parseAuditTime("since", f.Since); err != nil {
			return sf, err
		}
	}
	if f.Until != "" {
		if sf.Until, err = parseAuditTime("until", f.Until); err != nil {
			return sf, err
		}
	}
	return sf, nil
}

// auditTimeLayouts are what since and until take: RFC 3339 (the API's
// only form), and what the page's datetime-local input sends, read as UTC.
var auditTimeLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"}

// parseAuditTime reads a since or until value.
func parseAuditTime(name, v string) (time.Time, error) {
	for _, layout := range auditTimeLayouts {
		if t, err := time.ParseInLocation(layout, v, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%s: want a time such as 2026-03-01T12:00 (UTC) or an RFC 3339 time", name)
}

// parseAuditFilters reads the page's filters from q into the page's form
// and the store's filter, with the page's paging (before, after). A bad
// value is an error to show the admin.
func parseAuditFilters(q url.Values) (auditFilters, store.AuditFilter, error) {
	f := auditFiltersOf(func(name string) string {
		if name == "q" {
			return q.Get(name) // a search for " x" means the space
		}
		return strings.TrimSpace(q.Get(name))
	})
	for _, fl := range f.fields() {
		if len(*fl.v) > maxFilterLen || !utf8.ValidString(*fl.v) {
			return f, store.AuditFilter{}, fmt.Errorf("a filter is not valid UTF-8 text of at most %d bytes", maxFilterLen)
		}
	}
	sf, err := f.storeFilter()
	if err != nil {
		return f, sf, err
	}
	for _, p := range []struct{ name, v string }{{"before", q.Get("before")}, {"after", q.Get("after")}} {
		if p.v == "" {
			continue
		}
		n, err := strconv.ParseInt(p.v, 10, 64)
		if err != nil || n < 1 {
			return f, sf, fmt.Errorf("%s: want a positive audit sequence number", p.name)
		}
		if p.name == "before" {
			sf.BeforeSeq = n
		} else {
			sf.AfterSeq = n
		}
	}
	return f, sf, nil
}

// auditRow is one audit row as the page shows it.
type auditRow struct {
	store.AuditRow
	Deciders string
	Exit     string
	Took     string
	// SessionURL is the page filtered to the row's session, "" without one.
	SessionURL string
}

// auditSession is one line of the collapsed session view.
type auditSession struct {
	store.AuditSession
	URL     string // the page filtered to the session
	Aliases string
}

// chainStatus is policy.Verify's answer in words.
type chainStatus struct {
	OK   bool
	Text string
}

type auditData struct {
	Filters   auditFilters
	Classes   []string
	Kinds     []string
	Decisions []string
	Sessions  bool // the collapsed view: one line per session
	Rows      []auditRow
	SessList  []auditSession
	Older     string // the next older page's URL, "" on the oldest page
	Newer     string // the next newer page's URL, "" on the newest page
	Newest    string // the first page's URL, "" on the first page
	RowsURL   string // the filter as rows
	SessURL   string // the filter as sessions
	ExportCSV string // the filter's rows as CSV
	ExportJS  string // the filter's rows as JSON lines
	Chain     chainStatus
}

func (s *Server) auditPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f, sf, err := parseAuditFilters(q)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if sf.BeforeSeq > 0 && sf.AfterSeq > 0 {
		http.Error(w, "before and after: give one of them", http.StatusBadRequest)
		return
	}
	d := auditData{
		Filters:   f,
		Classes:   []string{string(policy.Read), string(policy.Write), string(policy.Destructive)},
		Kinds:     []string{string(policy.Exec), string(policy.SFTP), string(policy.Admin)},
		Decisions: []string{string(policy.Allowed), string(policy.Approved), string(policy.Denied), string(policy.Expired), string(policy.Asked), string(policy.Failed), string(policy.Changed)},
		Sessions:  q.Get("view") == "sessions",
		RowsURL:   auditURL(f, "", nil), SessURL: auditURL(f, "sessions", nil),
		ExportCSV: auditExportURL(f, model.AuditCSV), ExportJS: auditExportURL(f, model.AuditJSONL),
	}
	if d.Sessions {
		err = s.auditSessions(r.Context(), f, sf, &d)
	} else {
		err = s.auditRows(r.Context(), f, sf, &d)
	}
	if err != nil {
		s.serverError(w, r, "reading the audit log", err)
		return
	}
	d.Chain = s.verifyChain(r.Context())
	s.render(w, r, http.StatusOK, "audit.html", page("Audit", "audit", "", d))
}

// auditRows fills d with the page of rows sf names: the newest before
// sf.BeforeSeq, or the oldest after sf.AfterSeq, newest first. Each page
// and each "is there more" probe reads by seq from one end, through an
// index when the filter has one (store/migrations/0015): no offsets.
func (s *Server) auditRows(ctx context.Context, f auditFilters, sf store.AuditFilter, d *auditData) error {
	page := sf
	page.Limit, page.Oldest = auditPageSize, sf.AfterSeq > 0
	list, err := s.cfg.Store.ListAudit(ctx, page)
	if err != nil {
		return err
	}
	for _, row := range slices.Backward(list) {
		v := newAuditRow(row)
		if row.SessionID != "" {
			v.SessionURL = auditURL(auditFilters{Session: row.SessionID}, "", nil)
		}
		d.Rows = append(d.Rows, v)
	}
	if sf.BeforeSeq > 0 || sf.AfterSeq > 0 {
		d.Newest = auditURL(f, "", nil)
	}
	if len(list) == 0 {
		// An empty page past either end: the other links lead back.
		return nil
	}
	oldest, newest := list[0].Seq, list[len(list)-1].Seq
	probe := sf
	probe.BeforeSeq, probe.AfterSeq, probe.Limit, probe.Oldest = oldest, 0, 1, false
	if more, err := s.cfg.Store.ListAudit(ctx, probe); err != nil {
		return err
	} else if len(more) > 0 {
		d.Older = auditURL(f, "", url.Values{"before": {strconv.FormatInt(oldest, 10)}})
	}
	probe.BeforeSeq, probe.AfterSeq, probe.Oldest = 0, newest, true
	if more, err := s.cfg.Store.ListAudit(ctx, probe); err != nil {
		return err
	} else if len(more) > 0 {
		d.Newer = auditURL(f, "", url.Values{"after": {strconv.FormatInt(newest, 10)}})
	} else {
		d.Newest = ""
	}
	return nil
}

// auditSessions fills d with a page of the collapsed view: one line per
// session whose rows match the filter, the most recently active first.
func (s *Server) auditSessions(ctx context.Context, f auditFilters, sf store.AuditFilter, d *auditData) error {
	page := sf
	page.Session, page.AfterSeq, page.Limit = "", 0, auditPageSize+1
	list, err := s.cfg.Store.ListAuditSessions(ctx, page)
	if err != nil {
		return err
	}
	more := len(list) > auditPageSize
	if more {
		list = list[:auditPageSize]
	}
	for _, v := range list {
		sess := f
		sess.Session = v.ID
		d.SessList = append(d.SessList, auditSession{AuditSession: v, URL: auditURL(sess, "", nil),
			Aliases: strings.Join(v.Aliases, ", ")})
	}
	if more {
		d.Older = auditURL(f, "sessions", url.Values{"before": {strconv.FormatInt(list[len(list)-1].LastSeq, 10)}})
	}
	if sf.BeforeSeq > 0 {
		d.Newest = auditURL(f, "sessions", nil)
	}
	return nil
}

func newAuditRow(row store.AuditRow) auditRow {
	v := auditRow{AuditRow: row, Deciders: strings.Join(row.Deciders, ", ")}
	if row.ExitStatus != nil {
		v.Exit = strconv.Itoa(*row.ExitStatus)
	}
	if row.Duration > 0 {
		v.Took = row.Duration.Round(time.Millisecond).String()
	}
	return v
}

// values is f as query parameters, the empty ones left out.
func (f auditFilters) values() url.Values {
	v := url.Values{}
	for _, fl := range f.fields() {
		if *fl.v != "" {
			v.Set(fl.name, *fl.v)
		}
	}
	return v
}

// auditURL is the audit page with filters f, in view ("" for rows,
// "sessions"), with the paging parameters in extra.
func auditURL(f auditFilters, view string, extra url.Values) string {
	v := f.values()
	if view != "" {
		v.Set("view", view)
	}
	for k, vs := range extra {
		v[k] = vs
	}
	if len(v) == 0 {
		return "/audit"
	}
	return "/audit?" + v.Encode()
}

// auditExportURL downloads the rows of filter f in format.
func auditExportURL(f auditFilters, format string) string {
	v := f.values()
	v.Set("format", format)
	return "/audit/export?" + v.Encode()
}

// auditExport downloads every row of the filter, oldest first, in the
// format `postern audit export` writes (model.AuditExporter): the same
// columns, and the rows' own redaction, paged as it pages
// (model.ExportAudit, auditExportPage rows at a time). Paging parameters
// are ignored: the export is the filter's, not the page's.
func (s *Server) auditExport(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	_, sf, err := parseAuditFilters(q)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	format := q.Get("format")
	ctype := map[string]string{model.AuditCSV: "text/csv; charset=utf-8", model.AuditJSONL: "application/jsonl; charset=utf-8"}[format]
	if ctype == "" {
		http.Error(w, "format: want csv or jsonl", http.StatusBadRequest)
		return
	}
	sf.AfterSeq = 0 // from the first row; ExportAudit sets the rest of the paging
	// The answer starts once the first page is read, so that a store that
	// cannot be read is an error page, not a cut download.
	var exp *model.AuditExporter
	list := func(ctx context.Context, f store.AuditFilter) ([]store.AuditRow, error) {
		rows, err := s.cfg.Store.ListAudit(ctx, f)
		if err != nil || exp != nil {
			return rows, err
		}
		w.Header().Set("Content-Type", ctype)
		w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="postern-audit-%s.%s"`,
			s.cfg.Now().UTC().Format("20060102T150405Z"), format))
		w.Header().Set("Cache-Control", "no-store")
		exp, err = model.NewAuditExporter(w, format)
		return rows, err
	}
	err = model.ExportAudit(r.Context(), list, sf, auditExportPage, func(row model.AuditRow) error { return exp.Write(row) })
	if err == nil {
		err = exp.Close()
	}
	switch {
	case exp == nil:
		s.serverError(w, r, "reading the audit log", err)
	case err != nil:
		// Headers are sent: the cut download (a store that failed, or
		// a client that went away) is all that can say so.
		s.cfg.Logger.Warn().Err(err).Msg("web: audit export cut short")
	}
}

// verifyChain checks the whole audit chain, bounded by verifyTimeout and
// the request.
func (s *Server) verifyChain(ctx context.Context) chainStatus {
	ctx, cancel := context.WithTimeout(ctx, verifyTimeout)
	defer cancel()
	res, err := policy.Verify(ctx, s.cfg.Store)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			s.cfg.Logger.Error().Err(err).Msg("web: verifying the audit chain")
		}
		return chainStatus{Text: "The audit chain could not be verified: the log could not be read to the end."}
	case res.Broken != nil:
		return chainStatus{Text: "The audit chain is BROKEN at " + res.Broken.String() + "."}
	}
	head := res.Head
	if len(head) > 16 {
		head = head[:16]
	}
	return chainStatus{OK: true, Text: fmt.Sprintf("The audit chain is intact: %d rows verified (head %s…).", res.Rows, head)}
}
