package model

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/postern/postern/store"
)

// Audit export: the rows of the audit log as JSON lines (one AuditRow per
// line, as GET /v1/audit gives it) or CSV with a header. `postern audit
// export` and the audit page's export link both write through
// AuditExporter, so that the two give the same columns, the same redaction
// (the rows' own, done before they were stored) and the same protection
// of a spreadsheet.

// Audit export formats.
const (
	AuditJSONL = "jsonl"
	AuditCSV   = "csv"
)

// AuditExporter writes audit rows in one format. Call Close once after the
// last row: it flushes a CSV writer and reports a write that failed.
type AuditExporter struct {
	write func(AuditRow) error
	close func() error
}

// NewAuditExporter writes to w in format (AuditJSONL or AuditCSV); a CSV
// starts with its header at once.
func NewAuditExporter(w io.Writer, format string) (*AuditExporter, error) {
	switch format {
	case AuditJSONL:
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		return &AuditExporter{write: func(r AuditRow) error { return enc.Encode(r) }, close: func() error { return nil }}, nil
	case AuditCSV:
		cw := csv.NewWriter(w)
		if err := cw.Write(AuditCSVHeader()); err != nil {
			return nil, fmt.Errorf("model: audit export: %w", err)
		}
		return &AuditExporter{
			write: func(r AuditRow) error { return cw.Write(AuditCSVRecord(r)) },
			close: func() error { cw.Flush(); return cw.Error() },
		}, nil
	}
	return nil, fmt.Errorf("model: unknown audit export format %q: want %s or %s", format, AuditJSONL, AuditCSV)
}

// Write writes one row.
func (e *AuditExporter) Write(r AuditRow) error {
	if err := e.write(r); err != nil {
		return fmt.Errorf("model: audit export: %w", err)
	}
	return nil
}

// Close flushes what is buffered.
func (e *AuditExporter) Close() error {
	if err := e.close(); err != nil {
		return fmt.Errorf("model: audit export: %w", err)
	}
	return nil
}

// ExportAudit passes write every row that f keeps with a seq above
// f.AfterSeq (f's BeforeSeq, Limit and Oldest aside), oldest first, as the
// API shows it, reading pageSize rows at a time through list
// ((*store.Store).ListAudit). Each page starts after the last seq of the
// one before, so that a long log is never held whole and rows appended
// meanwhile are neither skipped nor repeated; the export ends at the first
// page that is not full. `postern audit export` and the page's export both
// page through it.
func ExportAudit(ctx context.Context, list func(context.Context, store.AuditFilter) ([]store.AuditRow, error),
	f store.AuditFilter, pageSize int, write func(AuditRow) error) error {
	if pageSize <= 0 {
		return fmt.Errorf("model: audit export: page size %d is not positive", pageSize)
	}
	f.BeforeSeq, f.Limit, f.Oldest = 0, pageSize, true
	for {
		page, err := list(ctx, f)
		if err != nil {
			return err
		}
		for _, r := range page {
			if err := write(AuditRowOf(r)); err != nil {
				return err
			}
		}
		if len(page) < pageSize {
			return nil
		}
		f.AfterSeq = page[len(page)-1].Seq
	}
}

// AuditCSVHeader names the columns of the CSV export: AuditRow's JSON
// names, without id and modified_at, which repeat seq and time.
func AuditCSVHeader() []string {
	return []string{"seq", "time", "agent", "agent_id", "connection", "connection_id", "class", "kind",
		"decision", "reason", "approval_id", "deciders", "operation", "exit_status", "duration_ms",
		"bytes_in", "bytes_out", "agent_reason", "source_addr", "session_id", "hash"}
}

// AuditCSVRecord is r as a CSV record in AuditCSVHeader's order. Text an
// agent or admin chose goes through CSVCell; deciders are joined by commas
// (their names cannot hold one); a missing exit status is an empty cell.
func AuditCSVRecord(r AuditRow) []string {
	exit := ""
	if r.ExitStatus != nil {
		exit = strconv.Itoa(*r.ExitStatus)
	}
	return []string{strconv.FormatInt(r.Seq, 10), time.Time(r.Time).UTC().Format(time.RFC3339Nano),
		CSVCell(r.Agent), r.AgentID, CSVCell(r.Connection), r.ConnectionID, r.Class, r.Kind, r.Decision,
		CSVCell(r.Reason), r.ApprovalID, CSVCell(strings.Join(r.Deciders, ",")), CSVCell(r.Operation), exit,
		strconv.FormatFloat(r.DurationMS, 'f', -1, 64), strconv.FormatInt(r.BytesIn, 10),
		strconv.FormatInt(r.BytesOut, 10), CSVCell(r.AgentReason), CSVCell(r.SourceAddr), r.SessionID, r.Hash}
}

// CSVCell keeps a spreadsheet from running a cell as a formula: an agent
// chooses its operation's text, and an auditor opens the export in a
// spreadsheet (CSV injection). Such a cell gets a leading ', as OWASP
// advises; the JSON lines keep the text exact.
func CSVCell(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}
