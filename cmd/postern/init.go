package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newInitCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Create the data directory, master key, host key and database",
		Long: `init creates the data directory (mode 0700) with the database, the master
key that seals every connection's private key, and the bastion's SSH host
key. Whatever already exists is kept, so running it again is harmless; it
never replaces a master key.

The master key is read from ` + envMasterKeyFile + ` when that is set,
and created there if the file does not exist yet.

With --database postgres://... the database is that PostgreSQL database
(created beforehand, empty or already postern's), whose schema init creates
or brings up to date; the master key and host key stay files of the data
directory. Every replica that serves the database needs a copy of both.`,
		Args: exactArgs(0, "no arguments"),
	}
	data := addDataFlag(cmd)
	hostKeyFile := addHostKeyFileFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := data.check(); err != nil {
			return err
		}
		d := data.storeDir()
		d.HostKeyFile = *hostKeyFile
		res, err := d.Init(cmd.Context(), data.options())
		if err != nil {
			return err
		}
		w := cmd.OutOrStdout()
		state := func(created bool) string {
			if created {
				return "created"
			}
			return "kept"
		}
		fmt.Fprintf(w, "postern data directory %s\n", d.Path)
		fmt.Fprintf(w, "  database    %s (%s)\n", d.Database(), state(res.CreatedDatabase))
		fmt.Fprintf(w, "  master key  %s (%s)\n", d.MasterKeyPath(), state(res.CreatedMasterKey))
		fmt.Fprintf(w, "  host key    %s (%s)\n", d.HostKeyPath(), state(res.CreatedHostKey))
		fmt.Fprintf(w, "              %s\n", res.HostKeyFingerprint)
		if res.CreatedMasterKey {
			fmt.Fprintf(w, "\nBack up the master key and keep it apart from the database: without it no\nstored connection key can be opened, and with the database it opens them all.\n")
		}
		fmt.Fprintf(w, `
Next steps:
  postern agent add NAME --key AGENT_KEY.pub --data %[1]s
  postern conn add ALIAS --host HOST --user USER --key-file KEY --accept-new-host-key --data %[1]s
  postern grant NAME ALIAS --data %[1]s        (read=allow, write=deny, destructive=deny)
  postern serve --data %[1]s
Agents pin the bastion's host key with this known_hosts entry (BASTION = its name):
  BASTION %[2]s
`, d.Path, res.HostPublicKey)
		return nil
	}
	return cmd
}
