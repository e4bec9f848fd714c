package model

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/postern/postern/store"
)

// fakeAuditList is a store's ListAudit over rows, for the fields an
// export sets, recording the AfterSeq of each page asked.
type fakeAuditList struct {
	rows  []store.AuditRow
	asked []int64
}

func (l *fakeAuditList) list(_ context.Context, f store.AuditFilter) ([]store.AuditRow, error) {
	l.asked = append(l.asked, f.AfterSeq)
	if !f.Oldest || f.BeforeSeq != 0 || f.Limit <= 0 {
		return nil, errors.New("fake: an export asks for the oldest page after a seq")
	}
	var page []store.AuditRow
	for _, r := range l.rows {
		if r.Seq > f.AfterSeq && !r.Time.Before(f.Since) && len(page) < f.Limit {
			page = append(page, r)
		}
	}
	return page, nil
}

// TestExportAuditPages: an export reads page after page from the last seq
// it wrote, stops at the first short page, and writes every row once; the
// filter's own paging fields do not narrow it.
func TestExportAuditPages(t *testing.T) {
	rowsOf := func(n int) []store.AuditRow {
		var rows []store.AuditRow
		for i := 1; i <= n; i++ {
			rows = append(rows, store.AuditRow{Seq: int64(i), Time: time.Unix(int64(i), 0), Operation: "op"})
		}
		return rows
	}
	tests := []struct {
		name      string
		rows      int
		f         store.AuditFilter
		wantSeqs  []int64
		wantAsked []int64
	}{
		{"empty log", 0, store.AuditFilter{}, nil, []int64{0}},
		{"one short page", 2, store.AuditFilter{}, []int64{1, 2}, []int64{0}},
		{"exactly one page", 3, store.AuditFilter{}, []int64{1, 2, 3}, []int64{0, 3}},
		{"several pages", 7, store.AuditFilter{}, []int64{1, 2, 3, 4, 5, 6, 7}, []int64{0, 3, 6}},
		{"after a seq", 7, store.AuditFilter{AfterSeq: 4}, []int64{5, 6, 7}, []int64{4, 7}},
		{"since a time", 7, store.AuditFilter{Since: time.Unix(3, 0)}, []int64{3, 4, 5, 6, 7}, []int64{0, 5}},
		{"a page's fields ignored", 4, store.AuditFilter{BeforeSeq: 2, Limit: 1}, []int64{1, 2, 3, 4}, []int64{0, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := &fakeAuditList{rows: rowsOf(tt.rows)}
			var got []int64
			err := ExportAudit(t.Context(), src.list, tt.f, 3, func(r AuditRow) error {
				got = append(got, r.Seq)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.wantSeqs) || !slices.Equal(src.asked, tt.wantAsked) {
				t.Errorf("got rows %v after pages %v; want %v after %v", got, src.asked, tt.wantSeqs, tt.wantAsked)
			}
		})
	}
	// A failed write ends the export with its error, as does a failed read.
	boom := errors.New("disk full")
	src := &fakeAuditList{rows: rowsOf(5)}
	if err := ExportAudit(t.Context(), src.list, store.AuditFilter{}, 3, func(AuditRow) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("export with a failing writer: got %v; want %v", err, boom)
	}
	if len(src.asked) != 1 {
		t.Errorf("export with a failing writer read %d pages; want 1", len(src.asked))
	}
	failing := func(context.Context, store.AuditFilter) ([]store.AuditRow, error) { return nil, boom }
	if err := ExportAudit(t.Context(), failing, store.AuditFilter{}, 3, func(AuditRow) error { return nil }); !errors.Is(err, boom) {
		t.Errorf("export with a failing store: got %v; want %v", err, boom)
	}
	if err := ExportAudit(t.Context(), src.list, store.AuditFilter{}, 0, func(AuditRow) error { return nil }); err == nil {
		t.Errorf("export with page size 0: got no error; want one")
	}
}

func TestAuditCSVCell(t *testing.T) {
	tests := []struct{ in, want string }{
		{"uptime", "uptime"},
		{"", ""},
		{`=HYPERLINK("http://x")`, `'=HYPERLINK("http://x")`},
		{"+1", "'+1"},
		{"-2+3", "'-2+3"},
		{"@SUM(A1)", "'@SUM(A1)"},
		{"\tcmd", "'\tcmd"},
		{"\rcmd", "'\rcmd"},
		{"ls -l", "ls -l"}, // only the first character counts
	}
	for _, tt := range tests {
		if got := CSVCell(tt.in); got != tt.want {
			t.Errorf("CSVCell(%q): got %q; want %q", tt.in, got, tt.want)
		}
	}
}
