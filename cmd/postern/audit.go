package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/postern/postern/model"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
)

// newAuditCmd builds `postern audit` (list rows, filtered) and
// `postern audit verify` (check the hash chain).
func newAuditCmd() *cobra.Command {
	var agent, conn, since string
	var limit int
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Show the audit log (verify: check its hash chain)",
		Long: `Show the audit log: one row per decision, oldest first, with the operation's
secrets redacted. --since takes an RFC 3339 time, a date (2006-01-02), or a
duration meaning that long ago (24h, 90m).`,
		Args: wantNoArgs,
	}
	data := addDataFlag(cmd)
	out := addOutputFlag(cmd)
	cmd.Flags().StringVar(&agent, "agent", "", "only rows of this agent (name or id)")
	cmd.Flags().StringVar(&conn, "conn", "", "only rows of this connection (alias or id)")
	cmd.Flags().StringVar(&since, "since", "", "only rows at or after this time")
	cmd.Flags().IntVar(&limit, "limit", 0, "only the newest N rows (0: all)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		asJSON, err := out.json()
		if err != nil {
			return err
		}
		f := store.AuditFilter{Agent: agent, Connection: conn, Limit: limit}
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
		rows, err := st.ListAudit(cmd.Context(), f)
		if err != nil {
			return err
		}
		if asJSON {
			js := make([]model.AuditRow, 0, len(rows))
			for _, r := range rows {
				js = append(js, model.AuditRowOf(r))
			}
			return writeJSON(cmd.OutOrStdout(), js)
		}
		return printAudit(cmd.OutOrStdout(), rows)
	}
	cmd.AddCommand(newAuditVerifyCmd(data))
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

func printAudit(w io.Writer, rows []store.AuditRow) error {
	if len(rows) == 0 {
		_, err := fmt.Fprintln(w, "no audit rows")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tTIME\tAGENT\tCONNECTION\tCLASS\tDECISION\tBY\tEXIT\tDURATION\tIN/OUT\tOPERATION")
	for _, r := range rows {
		exit := "-"
		if r.ExitStatus != nil {
			exit = strconv.Itoa(*r.ExitStatus)
		}
		by := strings.Join(r.Deciders, ",")
		if by == "" {
			by = "-"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d/%d\t%s\n",
			r.Seq, r.Time.Local().Format("2006-01-02 15:04:05"), orDash(r.AgentName), orDash(r.ConnectionAlias),
			orDash(r.Class), r.Decision, by, exit, r.Duration.Round(time.Millisecond), r.BytesIn, r.BytesOut,
			kindOp(r.Kind, r.Operation))
	}
	return tw.Flush()
}

// newAuditVerifyCmd builds `postern audit verify`: exit 0 when the chain is
// intact, 1 naming the first broken row otherwise.
func newAuditVerifyCmd(data *dataFlag) *cobra.Command {
	return &cobra.Command{
		Use:   "verify",
		Short: "Check the audit log's hash chain; exit 1 at the first broken row",
		Args:  wantNoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := data.open(cmd.Context())
			if err != nil {
				return storeErr(err)
			}
			defer st.Close()
			res, err := policy.Verify(cmd.Context(), st)
			if err != nil {
				return err
			}
			if res.Broken != nil {
				return fmt.Errorf("audit chain broken at %s (rows before it are intact)", res.Broken)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "audit chain intact: %d rows, head %s\n", res.Rows, res.Head)
			return err
		},
	}
}

// orDash is s, or "-" for a table cell with nothing in it.
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

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
