package main

import (
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/postern/postern/model"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
)

// newAuditCmd builds `postern audit` (list rows, filtered) and
// `postern audit verify` (check the hash chain).
func newAuditCmd() *cobra.Command {
	var agent, conn, session, since string
	var limit int
	var sessions bool
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Show the audit log (verify: check its hash chain)",
		Long: `Show the audit log: one row per decision, oldest first, with the operation's
secrets redacted. --session ID lists the rows of one agent SSH connection
(the session_id of -o json and of the audit page; the commands of one
OpenSSH ControlMaster share it); --sessions lists the sessions instead, one
line each (agent, connections, first and last time, rows), the most
recently active last. --since takes an RFC 3339 time, a date (2006-01-02), or a
duration meaning that long ago (24h, 90m).`,
		Args: wantNoArgs,
	}
	data := addDataFlag(cmd)
	out := addOutputFlag(cmd)
	cmd.Flags().StringVar(&agent, "agent", "", "only rows of this agent (name or id)")
	cmd.Flags().StringVar(&conn, "conn", "", "only rows of this connection (alias or id)")
	cmd.Flags().StringVar(&session, "session", "", "only rows of this agent SSH connection (its session id, ses_...)")
	cmd.Flags().BoolVar(&sessions, "sessions", false, "one line per session (agent SSH connection) instead of one per row")
	cmd.Flags().StringVar(&since, "since", "", "only rows at or after this time")
	cmd.Flags().IntVar(&limit, "limit", 0, "only the newest N rows (0: all)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		asJSON, err := out.json()
		if err != nil {
			return err
		}
		f := store.AuditFilter{Agent: agent, Connection: conn, Session: session, Limit: limit}
		if limit < 0 {
			return usageError{fmt.Errorf("--limit %d is negative", limit)}
		}
		if since != "" {
			if f.Since, err = parseSince(since, time.Now()); err != nil {
				return usageError{err}
			}
		}
		st, err := data.open(cmd.Context())
		if err != nil {
			return storeErr(err)
		}
		defer st.Close()
		if sessions {
			list, err := st.ListAuditSessions(cmd.Context(), f)
			if err != nil {
				return err
			}
			slices.Reverse(list) // oldest first, as the rows are
			return auditSessionList().write(cmd.OutOrStdout(), cmd.ErrOrStderr(), asJSON, list)
		}
		rows, err := st.ListAudit(cmd.Context(), f)
		if err != nil {
			return err
		}
		return auditRowList().write(cmd.OutOrStdout(), cmd.ErrOrStderr(), asJSON, rows)
	}
	cmd.AddCommand(newAuditVerifyCmd(data), newAuditHeadCmd(data), newAuditExportCmd(data))
	return cmd
}

// parseSince reads --since: RFC 3339, a date, a date and minute, or a Go
// duration counted back from now.
func parseSince(s string, now time.Time) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04", "2006-01-02 15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t, nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("--since %q: want an RFC 3339 time, a date (2006-01-02) or a duration (24h)", s)
}

// auditRowList is how `postern audit` shows rows: model.AuditRow in -o
// json, a table otherwise.
func auditRowList() listSpec[store.AuditRow] {
	return listSpec[store.AuditRow]{
		json:  func(r store.AuditRow) any { return model.AuditRowOf(r) },
		empty: "no audit rows",
		header: []string{"SEQ", "TIME", "AGENT", "CONNECTION", "CLASS", "DECISION", "BY", "EXIT", "DURATION",
			"IN/OUT", "OPERATION"},
		rows: func(r store.AuditRow) [][]string {
			exit := "-"
			if r.ExitStatus != nil {
				exit = strconv.Itoa(*r.ExitStatus)
			}
			return [][]string{{strconv.FormatInt(r.Seq, 10), r.Time.Local().Format("2006-01-02 15:04:05"),
				orDash(r.AgentName), orDash(r.ConnectionAlias), orDash(r.Class), r.Decision,
				orDash(strings.Join(r.Deciders, ",")), exit, r.Duration.Round(time.Millisecond).String(),
				fmt.Sprintf("%d/%d", r.BytesIn, r.BytesOut), kindOp(r.Kind, r.Operation)}}
		},
	}
}

// auditSessionJSON is one line of `postern audit --sessions -o json`.
type auditSessionJSON struct {
	SessionID   string     `json:"session_id"`
	Agent       string     `json:"agent"`
	Connections []string   `json:"connections"`
	First       model.Time `json:"first"`
	Last        model.Time `json:"last"`
	Rows        int64      `json:"rows"`
	LastSeq     int64      `json:"last_seq"`
}

// auditSessionList is how `postern audit --sessions` shows sessions.
func auditSessionList() listSpec[store.AuditSession] {
	return listSpec[store.AuditSession]{
		json: func(v store.AuditSession) any {
			aliases := v.Aliases
			if aliases == nil {
				aliases = []string{}
			}
			return auditSessionJSON{SessionID: v.ID, Agent: v.AgentName, Connections: aliases, First: model.Time(v.First),
				Last: model.Time(v.Last), Rows: v.Rows, LastSeq: v.LastSeq}
		},
		empty:  "no sessions",
		header: []string{"SESSION", "AGENT", "CONNECTIONS", "FIRST", "LAST", "ROWS"},
		rows: func(v store.AuditSession) [][]string {
			return [][]string{{v.ID, orDash(v.AgentName), orDash(strings.Join(v.Aliases, ",")),
				v.First.Local().Format("2006-01-02 15:04:05"), v.Last.Local().Format("2006-01-02 15:04:05"),
				strconv.FormatInt(v.Rows, 10)}}
		},
	}
}

// newAuditVerifyCmd builds `postern audit verify`: exit 0 when the chain is
// intact, 1 naming the first broken row otherwise. With --from SEQ:HASH, a
// head kept elsewhere, it also exits 1 when that row's hash differs or the
// log ends before it: the chain alone cannot see rows removed from its end.
func newAuditVerifyCmd(data *dataFlag) *cobra.Command {
	var from string
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Check the audit log's hash chain; exit 1 at the first broken row",
		Long: `Check the audit log's hash chain: exit 0 when it is intact, 1 naming the
first broken row otherwise.

--from SEQ:HASH, a head printed by postern audit head or published by serve
and kept outside postern, also proves that the rows up to that head are
still there unchanged: row SEQ must have hash HASH, and a log that ends
before SEQ is reported with the number of rows missing from its end.`,
		Args: wantNoArgs,
	}
	cmd.Flags().StringVar(&from, "from", "", "a kept head, SEQ:HASH: fail unless the rows up to it are still there, unchanged")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		var kept *policy.Head
		if from != "" {
			h, err := policy.ParseHead(from)
			if err != nil {
				return usageError{fmt.Errorf("--from: %w", err)}
			}
			kept = &h
		}
		st, err := data.open(cmd.Context())
		if err != nil {
			return storeErr(err)
		}
		defer st.Close()
		var res policy.VerifyResult
		if kept != nil {
			res, err = policy.VerifyFrom(cmd.Context(), st, *kept)
		} else {
			res, err = policy.Verify(cmd.Context(), st)
		}
		if err != nil {
			return err
		}
		if res.Broken != nil {
			return fmt.Errorf("audit chain broken at %s (rows before it are intact)", res.Broken)
		}
		switch {
		case res.Lost > 0 && res.Rows == 0:
			return fmt.Errorf("audit log lost rows: the kept head is row %d but the log is empty: all %d rows are missing", kept.Seq, res.Lost)
		case res.Lost > 0:
			return fmt.Errorf("audit log lost rows: the kept head is row %d but the newest row is %d: %d rows after row %d are missing (rows 1 to %d are intact)",
				kept.Seq, res.Rows, res.Lost, res.Rows, res.Rows)
		}
		w := cmd.OutOrStdout()
		if _, err := fmt.Fprintf(w, "audit chain intact: %d rows, head %s\n", res.Rows, res.Head); err != nil || kept == nil {
			return err
		}
		_, err = fmt.Fprintf(w, "kept head %d is there unchanged; %d rows were added after it\n", kept.Seq, res.Rows-kept.Seq)
		return err
	}
	return cmd
}

// auditHeadJSON is `postern audit head -o json`.
type auditHeadJSON struct {
	Seq  int64  `json:"seq"`
	Hash string `json:"hash"`
	Head string `json:"head"` // SEQ:HASH, as verify --from takes it
}

// newAuditHeadCmd builds `postern audit head`: the newest row's seq and
// hash, to keep outside postern (cron, a ticket, another system) and check
// later with verify --from.
func newAuditHeadCmd(data *dataFlag) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "head",
		Short: "Print the newest audit row's SEQ:HASH, to keep elsewhere and check with verify --from",
		Long: `Print the audit log's head: the newest row's sequence number and hash as
SEQ:HASH on the first line, and what to do with it on the second. Keep it
outside postern; postern audit verify --from SEQ:HASH then proves that the
rows up to it are still there, unchanged. The hash is the row's as stored:
verify is what checks the chain. An empty log's head is 0 and 64 zeros.`,
		Args: wantNoArgs,
	}
	out := addOutputFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		asJSON, err := out.json()
		if err != nil {
			return err
		}
		st, err := data.open(cmd.Context())
		if err != nil {
			return storeErr(err)
		}
		defer st.Close()
		seq, hash, err := st.AuditHead(cmd.Context())
		if err != nil {
			return err
		}
		h := policy.Head{Seq: seq, Hash: hash}
		w := cmd.OutOrStdout()
		if asJSON {
			return writeJSON(w, auditHeadJSON{Seq: h.Seq, Hash: hex.EncodeToString(h.Hash), Head: h.String()})
		}
		note := fmt.Sprintf("audit head: row %d is the newest; keep the line above outside postern and check it later with postern audit verify --from %s", h.Seq, h)
		if h.Seq == 0 {
			note = "audit head: the audit log is empty"
		}
		_, err = fmt.Fprintf(w, "%s\n%s\n", h, note)
		return err
	}
	return cmd
}

// exportPageSize is how many rows audit export reads at a time: enough that
// the queries cost little next to writing, few enough that a log of
// millions of rows is never in memory whole.
const exportPageSize = 1000

// newAuditExportCmd builds `postern audit export`: the rows from a seq or
// a time on, as JSON lines (the API's row) or CSV, for a one-off pull into
// another system.
func newAuditExportCmd(data *dataFlag) *cobra.Command {
	var since, format string
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Write the audit rows from a seq or time on as JSON lines or CSV",
		Long: `Write the audit rows from --since on, oldest first, one per line: JSON lines
(-o jsonl, the row as GET /v1/audit gives it) or CSV with a header (-o csv).
--since takes a sequence number (rows with that seq and after), or an RFC
3339 time, a date (2006-01-02) or a duration meaning that long ago (rows
whose time is at or after it); without it, every row. Operations and reasons
are redacted as on the audit page. A CSV cell that a spreadsheet would run
as a formula (starting with = + - @, a tab or a CR) gets a leading '.`,
		Args: wantNoArgs,
	}
	cmd.Flags().StringVar(&since, "since", "", "first row: a sequence number, or a time (RFC 3339, a date, or a duration ago)")
	cmd.Flags().StringVarP(&format, "output", "o", "jsonl", "output format: jsonl or csv")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if format != model.AuditJSONL && format != model.AuditCSV {
			return usageError{fmt.Errorf("unknown output format %q: want jsonl or csv", format)}
		}
		from, sinceTime, err := parseExportSince(since, time.Now())
		if err != nil {
			return usageError{err}
		}
		st, err := data.open(cmd.Context())
		if err != nil {
			return storeErr(err)
		}
		defer st.Close()
		exp, err := model.NewAuditExporter(cmd.OutOrStdout(), format)
		if err != nil {
			return err
		}
		f := store.AuditFilter{AfterSeq: from - 1, Since: sinceTime}
		if err := model.ExportAudit(cmd.Context(), st.ListAudit, f, exportPageSize, exp.Write); err != nil {
			return err
		}
		return exp.Close()
	}
	return cmd
}

// parseExportSince reads export's --since: a sequence number (digits only)
// gives the first seq, anything else is a time as parseSince reads it. ""
// is every row: seq 1 and no time.
func parseExportSince(s string, now time.Time) (seq int64, since time.Time, err error) {
	if s == "" {
		return 1, time.Time{}, nil
	}
	if strings.Trim(s, "0123456789") == "" {
		seq, err := strconv.ParseInt(s, 10, 64)
		if err != nil || seq < 1 {
			return 0, time.Time{}, fmt.Errorf("--since %q: a sequence number starts at 1", s)
		}
		return seq, time.Time{}, nil
	}
	t, err := parseSince(s, now)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("--since %q: want a sequence number, an RFC 3339 time, a date (2006-01-02) or a duration (24h)", s)
	}
	return 1, t, nil
}

// kindOp is an operation as the tables show it: its kind, then its text
// with control and direction characters escaped. An SFTP operation's text
// names its kind already ("sftp put …"), so it is not named twice.
func kindOp(kind, op string) string {
	op = policy.VisibleLine(op)
	if strings.HasPrefix(op, kind+" ") {
		return op
	}
	return kind + ": " + op
}

// orDash is s, or "-" for a table cell with nothing in it.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
