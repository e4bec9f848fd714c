package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/postern/postern/manage"
	"github.com/postern/postern/model"
	"github.com/postern/postern/store"
)

// Recordings (issue 24): the connection setting's flag, the commands that
// list and play them back, and serve's retention sweep.

// Defaults of serve's recording settings.
const (
	// defaultRecordingRetention is how long a recording is kept: long
	// enough to look into an incident after a weekend or a holiday,
	// short enough that what commands printed does not pile up.
	defaultRecordingRetention = 30 * 24 * time.Hour
	// recordingSweepInterval is how often serve deletes recordings past
	// their retention (besides at start), unless the retention is
	// shorter; but never more often than recordingSweepMinInterval: a
	// retention of a millisecond (as a test sets) must not become a
	// DELETE every millisecond.
	recordingSweepInterval    = time.Hour
	recordingSweepMinInterval = time.Minute
)

// addRecordFlag registers --record on conn add and conn update.
func addRecordFlag(cmd *cobra.Command, v *string, def string) {
	cmd.Flags().StringVar(v, "record", def,
		"what postern records, sealed, of the connection's sessions: off, exec (output of commands without a terminal) or all (terminal sessions too)")
}

func newRecordingCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "recording",
		Short: "List and play back recorded sessions (admin role and above)",
		Long: `Recordings are the output of commands on connections whose --record is exec
or all (postern conn update ALIAS --record exec), sealed with the master key
and deleted after serve's --recording-retention. Only admins and owners may
see them: they hold whatever the targets printed. Secrets that the audit's
redaction knows are redacted on playback.`,
		Args: cobra.ArbitraryArgs,
		RunE: groupRunE,
	}
	data := addDataFlag(cmd)
	addAsFlag(cmd, data)
	cmd.AddCommand(newRecordingListCmd(data), newRecordingShowCmd(data))
	return cmd
}

func newRecordingListCmd(data *dataFlag) *cobra.Command {
	var conn string
	var limit int
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List recordings, newest first",
		Args:  wantNoArgs,
	}
	out := addOutputFlag(cmd)
	cmd.Flags().StringVar(&conn, "conn", "", "only recordings of this connection (alias or id)")
	cmd.Flags().IntVar(&limit, "limit", 0, "only the newest N (0: all)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		asJSON, err := out.json()
		if err != nil {
			return err
		}
		if limit < 0 {
			return usagef("recording list: --limit %d is negative", limit)
		}
		return withManager(cmd.Context(), data, func(m *manage.Manager) error {
			rs, err := m.Recordings(cmd.Context(), data.actor("cli"), store.RecordingFilter{Connection: conn, Limit: limit})
			if err != nil {
				return manageErr(err)
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), rs)
			}
			if len(rs) == 0 {
				_, err := fmt.Fprintln(cmd.OutOrStdout(), "no recordings (a connection records with: postern conn update ALIAS --record exec)")
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSTARTED\tAGENT\tCONNECTION\tMODE\tAUDIT\tKEPT\tDROPPED\tOPERATION")
			for _, r := range rs {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\n", r.ID, time.Time(r.StartedAt).UTC().Format(time.RFC3339),
					r.AgentName, r.ConnectionAlias, r.Mode, r.AuditSeq, r.BytesKept, r.BytesDropped, strconv.Quote(r.Operation))
			}
			return tw.Flush()
		})
	}
	return cmd
}

func newRecordingShowCmd(data *dataFlag) *cobra.Command {
	var timing bool
	cmd := &cobra.Command{
		Use:   "show ID [--timing]",
		Short: "Play a recording back: its stdout (and a terminal's stream) to stdout, its stderr to stderr",
		Long: `show prints a recording's output as the agent received it, with secrets
that the audit's redaction knows redacted: stdout and a terminal's stream
to stdout, stderr to stderr. --timing waits between the pieces as long as
the agent did. A recording that was cut at the bound says so on stderr at
the end. -o json prints the recording with its events (data in base64).`,
		Args: exactArgs(1, "the recording ID"),
	}
	out := addOutputFlag(cmd)
	cmd.Flags().BoolVar(&timing, "timing", false, "replay with the recorded delays between the pieces of output")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		asJSON, err := out.json()
		if err != nil {
			return err
		}
		return withManager(cmd.Context(), data, func(m *manage.Manager) error {
			r, err := m.Recording(cmd.Context(), data.actor("cli"), args[0])
			if err != nil {
				return manageErr(err)
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), r)
			}
			if err := playRecording(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), r, timing); err != nil {
				return err
			}
			if r.BytesDropped > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "\npostern: recording %s was cut at its bound: %d more bytes were not kept\n", r.ID, r.BytesDropped)
			}
			return nil
		})
	}
	return cmd
}

// playRecording writes r's events to stdout and stderr, waiting the
// recorded time before each with timing, until ctx ends.
func playRecording(ctx context.Context, stdout, stderr io.Writer, r model.Recording, timing bool) error {
	start := time.Now()
	for _, e := range r.Events {
		if timing {
			if wait := time.Until(start.Add(e.Offset())); wait > 0 {
				t := time.NewTimer(wait)
				select {
				case <-ctx.Done():
					t.Stop()
					return ctx.Err()
				case <-t.C:
				}
			}
		}
		w := stdout
		if e.Stream == store.StreamStderr {
			w = stderr
		}
		if _, err := w.Write(e.Data); err != nil {
			return fmt.Errorf("recording: %w", err)
		}
	}
	return nil
}

// recordingDeleter is what the sweep needs of the store.
type recordingDeleter interface {
	DeleteRecordingsBefore(ctx context.Context, cutoff time.Time) (int64, error)
}

// recordingSweeper deletes recordings older than retention, at start and
// then every interval, until its context ends. serve owns it.
type recordingSweeper struct {
	st        recordingDeleter
	log       zerolog.Logger
	retention time.Duration
	interval  time.Duration
	now       func() time.Time
}

func newRecordingSweeper(st recordingDeleter, log zerolog.Logger, retention time.Duration) *recordingSweeper {
	return &recordingSweeper{st: st, log: log, retention: retention, interval: min(recordingSweepInterval, max(retention, recordingSweepMinInterval)), now: time.Now}
}

// run sweeps at once and then every interval until ctx ends.
func (p *recordingSweeper) run(ctx context.Context) {
	p.sweep(ctx)
	every(ctx, p.interval, func() { p.sweep(ctx) })
}

// sweep deletes what is past retention now. A failure is logged; the next
// interval tries again.
func (p *recordingSweeper) sweep(ctx context.Context) int64 {
	cutoff := p.now().Add(-p.retention)
	n, err := p.st.DeleteRecordingsBefore(ctx, cutoff)
	if err != nil {
		if ctx.Err() == nil {
			p.log.Error().Err(err).Msg("old recordings not deleted")
		}
		return 0
	}
	if n > 0 {
		p.log.Info().Int64("recordings", n).Str("retention", p.retention.String()).Msg("recordings deleted")
	}
	return n
}
