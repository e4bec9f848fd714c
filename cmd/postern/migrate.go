package main

import (
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
)

// newMigrateCmd builds `postern migrate --from-sqlite DIR --database URL`:
// an installation moves from SQLite to PostgreSQL, to be served by several
// replicas.
func newMigrateCmd() *cobra.Command {
	var from string
	cmd := &cobra.Command{
		Use:   "migrate --from-sqlite DIR --database URL",
		Short: "Move an installation from SQLite (a data directory) to PostgreSQL",
		Long: `migrate copies everything the SQLite database of data directory DIR holds —
agents, connections with their sealed keys, grants, approvals, admins,
tokens, notification channels and the whole audit log — into the
PostgreSQL database --database names, which must be empty (create it with
createdb; migrate creates the schema). It reads a consistent snapshot,
writes all or nothing, checks that every table holds as many rows as in
SQLite, and verifies the audit chain on PostgreSQL: the same rows and the
same head hash as before.

Stop postern serve on DIR first. The master key is not in either database:
copy DIR's master.key (or the file POSTERN_MASTER_KEY_FILE names) and the
host key to every machine that will run a replica.`,
		Args: exactArgs(0, "no arguments (--from-sqlite DIR --database URL)"),
	}
	data := addDataFlag(cmd)
	cmd.Flags().StringVar(&from, "from-sqlite", "", "the data directory whose SQLite database to move")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if from == "" {
			return usagef("%s: --from-sqlite DIR is required", cmdPath(cmd))
		}
		if data.database == "" {
			return usagef("%s: --database URL (or %s) is required: the PostgreSQL database to move to", cmdPath(cmd), envDatabaseURL)
		}
		if err := data.check(); err != nil {
			return err
		}
		ctx := cmd.Context()
		srcDir := store.Dir{Path: from, MasterKeyFile: os.Getenv(envMasterKeyFile)}
		if _, err := os.Stat(srcDir.DatabasePath()); err != nil {
			return usagef("%s: no SQLite database in %s: %v", cmdPath(cmd), from, err)
		}
		src, err := srcDir.Open(ctx, data.options())
		if err != nil {
			return storeErr(err)
		}
		defer src.Close()
		before, err := policy.Verify(ctx, src)
		if err != nil {
			return err
		}
		if before.Broken != nil {
			return fmt.Errorf("migrate: the SQLite audit chain is broken at %s; not moving a log that does not verify", before.Broken)
		}
		dst, err := store.OpenPostgres(ctx, data.database, store.Options{})
		if err != nil {
			return storeErr(err)
		}
		defer dst.Close()
		res, err := store.CopyFromSQLite(ctx, src, dst)
		if err != nil {
			return storeErr(err)
		}
		after, err := policy.Verify(ctx, dst)
		if err != nil {
			return err
		}
		if after.Broken != nil || after.Rows != before.Rows || after.Head != before.Head {
			return fmt.Errorf("migrate: the audit chain on PostgreSQL does not match: %d rows, head %s, broken %v; SQLite had %d rows, head %s",
				after.Rows, after.Head, after.Broken, before.Rows, before.Head)
		}
		w := cmd.OutOrStdout()
		fmt.Fprintf(w, "moved %s to %s\n", srcDir.DatabasePath(), store.RedactURL(data.database))
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, t := range res.Tables {
			fmt.Fprintf(tw, "  %s\t%d rows\n", t.Table, t.Rows)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(w, "audit chain intact on PostgreSQL: %d rows, head %s (as in SQLite)\n", after.Rows, after.Head)
		fmt.Fprintf(w, "\nEvery replica needs the master key (%s) and the host key (%s);\nserve them with: postern serve --data DIR --database URL\n",
			srcDir.MasterKeyPath(), srcDir.HostKeyPath())
		return nil
	}
	return cmd
}
