package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
	"github.com/postern/postern/web"
)

func newBackupCmd() *cobra.Command {
	var withoutKey bool
	cmd := &cobra.Command{
		Use:   "backup DIR",
		Short: "Copy the database (consistent, while serve runs), master key and host key into DIR",
		Long: `backup writes a copy of the data directory into DIR, which must not exist or
be empty: the database, taken as one consistent snapshot with SQLite's
VACUUM INTO while postern serve keeps running, the master key that opens
its sealed keys (unless --without-master-key), the bastion's host key and
the web page's self-signed certificate if there is one. It then opens the
copy and verifies its audit chain, and prints the chain's head hash.

A backup with the master key opens every target: keep it as you keep the
data directory. To restore, stop postern serve, put the files of DIR into
an empty data directory (docs/deploy.md), and run postern audit verify.`,
		Args: exactArgs(1, "the backup DIR"),
	}
	data := addDataFlag(cmd)
	cmd.Flags().BoolVar(&withoutKey, "without-master-key", false, "leave the master key out (keep it elsewhere)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx := cmd.Context()
		s, err := data.open(ctx)
		if err != nil {
			return storeErr(err)
		}
		defer s.Close()
		res, err := store.BackupDir(ctx, s, data.storeDir(), args[0], store.BackupOptions{
			WithoutMasterKey: withoutKey,
			Extra:            []string{web.SelfSignedCertFile, web.SelfSignedKeyFile},
		})
		if err != nil {
			return storeErr(err)
		}
		// The copy is checked as a restore would use it.
		copyDir := store.Dir{Path: res.Dir}
		if withoutKey {
			copyDir.MasterKeyFile = data.storeDir().MasterKeyPath()
		}
		cs, err := copyDir.Open(ctx, store.Options{})
		if err != nil {
			return fmt.Errorf("backup: the copy does not open: %w", err)
		}
		defer cs.Close()
		if err := cs.CheckMasterKey(); err != nil {
			return fmt.Errorf("backup: the copy does not open with the master key: %w", err)
		}
		v, err := policy.Verify(ctx, cs)
		if err != nil {
			return fmt.Errorf("backup: the copy's audit log: %w", err)
		}
		if v.Broken != nil {
			return fmt.Errorf("backup: the copy's audit chain is broken at %s", v.Broken)
		}
		w := cmd.OutOrStdout()
		fmt.Fprintf(w, "backup of %s in %s:\n", data.dir, res.Dir)
		for _, f := range res.Files {
			fmt.Fprintf(w, "  %s\n", f)
		}
		fmt.Fprintf(w, "audit chain intact: %d rows, head %s\n", v.Rows, v.Head)
		if withoutKey {
			fmt.Fprintln(w, "the master key is not in the backup: a restore needs it from where you keep it")
		}
		return nil
	}
	return cmd
}
