package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/postern/postern/config"
	"github.com/postern/postern/manage"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/recipes"
	"github.com/postern/postern/web"
)

func newApplyCmd() *cobra.Command {
	var file string
	var dryRun, prune, allowUnverified bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "apply -f postern.toml [--dry-run] [--prune]",
		Short: "Make the database hold what a config file declares: agents, connections, grants, notification channels",
		Long: `apply reads a config file (docs/config.md), checks all of it, prints what
differs from the database (+ added, ~ changed, - removed) and makes those
changes, each audited as yours, via apply. A new or changed connection is
key-checked first, as conn add and conn update do: a host key mismatch
changes nothing, a key not proved changes nothing unless the connection has
allow_unverified (or --allow-unverified). Running it again changes nothing.

Nothing the file does not name is removed unless --prune: then agents,
connections, grants, notification channels and agents' keys that the file
leaves out are removed (grants first). --dry-run prints the files it
reads (the config file and the key, URL and secret files it names) and
the plan, and changes nothing.

apply exits 2 when the file cannot be applied as written (nothing is
changed), 1 when a change failed (the others were made), 0 otherwise.`,
		Args: exactArgs(0, "no arguments (the file is -f FILE)"),
	}
	data := addDataFlag(cmd)
	addAsFlag(cmd, data)
	fl := cmd.Flags()
	fl.StringVarP(&file, "file", "f", "", "the config file (required)")
	fl.BoolVar(&dryRun, "dry-run", false, "print the files read and what would change, change nothing")
	fl.BoolVar(&prune, "prune", false, "also remove what the file does not name")
	fl.BoolVar(&allowUnverified, "allow-unverified", false, "keep new or changed connections whose key check is not ok (never a host key mismatch)")
	fl.DurationVar(&timeout, "timeout", recipes.DefaultCheckTimeout, "bound on each key check")
	run := func(cmd *cobra.Command) error {
		if file == "" {
			return usagef("apply: give the config file with -f FILE")
		}
		if timeout <= 0 {
			return usagef("apply: --timeout must be positive")
		}
		f, err := config.Load(file)
		if err != nil {
			return usageError{err}
		}
		// The file's [serve] data names the data directory it is for,
		// unless --data or POSTERN_DATA says otherwise.
		if f.Serve != nil && f.Serve.Data != "" && !cmd.Flags().Changed("data") && os.Getenv(envData) == "" {
			data.dir = f.Serve.Data
		}
		return withManager(cmd.Context(), data, func(m *manage.Manager) error {
			res, err := config.Apply(cmd.Context(), m, f, config.Options{DryRun: dryRun, Prune: prune,
				AllowUnverified: allowUnverified, Timeout: timeout, Actor: data.actor("apply"), Out: cmd.OutOrStdout(),
				HashPassword: web.HashPassword})
			if errors.Is(err, config.ErrInvalid) {
				return usageError{err}
			}
			if err != nil {
				return err
			}
			if res.Failed > 0 {
				return fmt.Errorf("apply: %d of %d changes failed (see above); the others were made", res.Failed, res.Planned)
			}
			return nil
		})
	}
	cmd.RunE = func(cmd *cobra.Command, _ []string) error { return visibleErr(run(cmd)) }
	return cmd
}

func newExportCmd() *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "export [-f FILE]",
		Short: "Write agents, connections, grants and notification channels as a config file (no secrets)",
		Long: `export writes what the database holds in the format apply reads
(docs/config.md), to standard output or to a new FILE: agents with their
public keys, connections with their pinned host keys, grants, notification
channels. No secret is written: a connection's private key and a channel's
URL and secret stay sealed in the database, and apply keeps them when the
file names none. Applying the export to the same database changes nothing.`,
		Args: exactArgs(0, "no arguments"),
	}
	data := addDataFlag(cmd)
	cmd.Flags().StringVarP(&file, "file", "f", "", "write to this new file instead of standard output")
	run := func(cmd *cobra.Command) error {
		s, err := data.open(cmd.Context())
		if err != nil {
			return storeErr(err)
		}
		defer s.Close()
		f, err := config.Export(cmd.Context(), s)
		if err != nil {
			return err
		}
		b, err := config.Marshal(f)
		if err != nil {
			return err
		}
		b = append([]byte(config.ExportHeader), b...)
		if file == "" {
			_, err = cmd.OutOrStdout().Write(b)
			return err
		}
		out, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return usagef("export: %v", err)
		}
		_, err = out.Write(b)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		return err
	}
	cmd.RunE = func(cmd *cobra.Command, _ []string) error { return visibleErr(run(cmd)) }
	return cmd
}

// visibleErr is err with its text shown as policy.Visible shows it (every
// control, bidi or other invisible character escaped, newlines kept for
// apply's list of mistakes), still a usage error if it was one. apply and
// export print what a file, the database or a target holds: none of it may
// reach the admin's terminal as itself.
func visibleErr(err error) error {
	if err == nil {
		return nil
	}
	var ue usageError
	if asUsageError(err, &ue) {
		return usageError{visibleError{ue.err}}
	}
	return visibleError{err}
}

// visibleError shows an error's text as policy.Visible does.
type visibleError struct{ cause error }

func (e visibleError) Error() string { return policy.Visible(e.cause.Error()) }
func (e visibleError) Unwrap() error { return e.cause }
