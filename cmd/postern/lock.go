package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/postern/postern/manage"
	"github.com/postern/postern/model"
	"github.com/postern/postern/store"
)

// newLockCmd is `postern lock agent NAME | conn ALIAS | list`: the brake
// that ends an agent's or a connection's live sessions now and refuses new
// ones until `postern unlock` or the end of --for.
func newLockCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lock",
		Short: "Lock an agent or a connection: end its live sessions now and refuse new ones",
		Args:  cobra.ArbitraryArgs,
		RunE:  groupRunE,
	}
	data := addDataFlag(cmd)
	addAsFlag(cmd, data)
	cmd.AddCommand(
		newLockTargetCmd(data, "agent NAME", store.LockAgent, "the agent NAME"),
		newLockTargetCmd(data, "conn ALIAS", store.LockConnection, "the connection ALIAS"),
		newListCmd(data, listSpec[store.Lock]{
			short:  "List the locks that hold now",
			read:   (*store.Store).ActiveLocks,
			json:   func(l store.Lock) any { return model.LockOf(l) },
			empty:  "no locks; lock with: postern lock agent NAME --reason TEXT",
			header: []string{"KIND", "NAME", "UNTIL", "BY", "REASON"},
			rows: func(l store.Lock) [][]string {
				until := "unlocked"
				if !l.ExpiresAt.IsZero() {
					until = timeText(l.ExpiresAt)
				}
				return [][]string{{l.Kind, l.TargetName, until, l.CreatedBy, l.Reason}}
			},
		}),
	)
	return cmd
}

func newLockTargetCmd(data *dataFlag, use, kind, names string) *cobra.Command {
	var d time.Duration
	var reason string
	cmd := &cobra.Command{
		Use:   use,
		Short: "Lock the " + kind + ": end its live sessions and refuse new ones",
		Args:  exactArgs(1, names),
		RunE: func(cmd *cobra.Command, args []string) error {
			if d < 0 {
				return usagef("lock: --for cannot be negative")
			}
			var l *store.Lock
			err := withManager(cmd.Context(), data, func(m *manage.Manager) error {
				var err error
				l, err = m.Lock(cmd.Context(), data.actor("cli"), kind, args[0], d, reason)
				return err
			})
			if err != nil {
				return manageErr(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "locked: %s\n", l.Words())
			return nil
		},
	}
	cmd.Flags().DurationVar(&d, "for", 0, "how long the lock holds (e.g. 30m, 2h); without it, until unlocked")
	cmd.Flags().StringVar(&reason, "reason", "", "why, told to the agents refused and kept in the audit")
	return cmd
}

// newUnlockCmd is `postern unlock agent NAME | conn ALIAS`.
func newUnlockCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "unlock",
		Short: "Remove the lock of an agent or a connection",
		Args:  cobra.ArbitraryArgs,
		RunE:  groupRunE,
	}
	data := addDataFlag(cmd)
	addAsFlag(cmd, data)
	for _, t := range []struct{ use, kind, names string }{
		{"agent NAME", store.LockAgent, "the agent NAME"},
		{"conn ALIAS", store.LockConnection, "the connection ALIAS"},
	} {
		cmd.AddCommand(&cobra.Command{
			Use:   t.use,
			Short: "Remove the lock of the " + t.kind,
			Args:  exactArgs(1, t.names),
			RunE: func(cmd *cobra.Command, args []string) error {
				err := withManager(cmd.Context(), data, func(m *manage.Manager) error {
					_, err := m.Unlock(cmd.Context(), data.actor("cli"), t.kind, args[0])
					return err
				})
				if err != nil {
					return manageErr(err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "unlocked %s %s\n", t.kind, args[0])
				return nil
			},
		})
	}
	return cmd
}
