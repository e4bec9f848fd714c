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

	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
)

// auditPageSize is how many audit rows one page shows.
const auditPageSize = 50

// verifyTimeout bounds the audit chain's verification on a page view. It
// walks the whole log, which takes well under a second at a bastion's
// scale; past the bound the page says the chain could not be verified
// rather than hang.
const verifyTimeout = 20 * time.Second

// auditFilters are the audit page's GET parameters.
type auditFilters struct {
	Agent, Connection, Class, Decision, Kind string
}

// auditRow is one audit row as the page shows it.
type auditRow struct {
	store.AuditRow
	Deciders string
	Exit     string
	Took     string
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
	Rows      []auditRow
	Older     string // the next page's URL, "" on the last page
	Newest    string // the first page's URL, "" on the first page
	Chain     chainStatus
}

func (s *Server) auditPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := auditFilters{
		Agent: strings.TrimSpace(q.Get("agent")), Connection: strings.TrimSpace(q.Get("connection")),
		Class: q.Get("class"), Decision: q.Get("decision"), Kind: q.Get("kind"),
	}
	var before int64
	if b := q.Get("before"); b != "" {
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil || n < 1 {
			http.Error(w, "before: want a positive audit sequence number", http.StatusBadRequest)
			return
		}
		before = n
	}
	// One row more than a page tells whether there is an older page.
	list, err := s.cfg.Store.ListAudit(r.Context(), store.AuditFilter{
		Agent: f.Agent, Connection: f.Connection, Class: f.Class, Decision: f.Decision, Kind: f.Kind,
		BeforeSeq: before, Limit: auditPageSize + 1,
	})
	if err != nil {
		s.serverError(w, r, "reading the audit log", err)
		return
	}
	d := auditData{
		Filters:   f,
		Classes:   []string{string(policy.Read), string(policy.Write), string(policy.Destructive)},
		Kinds:     []string{string(policy.Exec), string(policy.SFTP), string(policy.Admin)},
		Decisions: []string{string(policy.Allowed), string(policy.Approved), string(policy.Denied), string(policy.Expired), string(policy.Asked), string(policy.Failed), string(policy.Changed)},
	}
	more := len(list) > auditPageSize
	if more {
		list = list[1:] // ListAudit is oldest first: drop the oldest
	}
	for _, row := range slices.Backward(list) {
		d.Rows = append(d.Rows, newAuditRow(row))
	}
	if more {
		d.Older = auditURL(f, list[0].Seq)
	}
	if before > 0 {
		d.Newest = auditURL(f, 0)
	}
	d.Chain = s.verifyChain(r.Context())
	s.render(w, r, http.StatusOK, "audit.html", page("Audit", "audit", "", d))
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

// auditURL is the audit page with filters f and rows before seq (all if 0).
func auditURL(f auditFilters, before int64) string {
	v := url.Values{}
	for _, p := range []struct{ k, v string }{
		{"agent", f.Agent}, {"connection", f.Connection}, {"class", f.Class},
		{"decision", f.Decision}, {"kind", f.Kind},
	} {
		if p.v != "" {
			v.Set(p.k, p.v)
		}
	}
	if before > 0 {
		v.Set("before", strconv.FormatInt(before, 10))
	}
	if len(v) == 0 {
		return "/audit"
	}
	return "/audit?" + v.Encode()
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
