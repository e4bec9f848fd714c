package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// newRootCmd builds the command tree. Every subcommand is constructed here
// rather than registered from init functions, so the tree is plain data that a
// test can build twice without shared state.
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "postern",
		Short:         "An SSH and SFTP bastion for AI agents",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       readBuildVersion().Version,
	}
	// --version prints what `postern version` does.
	root.SetVersionTemplate(readBuildVersion().text())
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return usageError{err}
	})
	root.AddCommand(
		newClassifyCmd(),
		newApprovalsCmd(),
		newAuditCmd(),
		newInitCmd(),
		newAgentCmd(),
		newConnCmd(),
		newGrantCmd(),
		newServeCmd(),
		newDemoCmd(),
		newRecipesCmd(),
		newAdminCmd(),
		newTokenCmd(),
		newNotifyCmd(),
		newMigrateCmd(),
		newVersionCmd(),
		newBackupCmd(),
		newApplyCmd(),
		newExportCmd(),
		newRecordingCmd(),
		newLockCmd(),
		newUnlockCmd(),
	)
	return root
}

// usageError marks an error caused by how postern was called (bad flag, bad
// argument, unknown name). main exits with status 2 for it, 1 otherwise.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func asUsageError(err error, target *usageError) bool {
	return errors.As(err, target)
}
