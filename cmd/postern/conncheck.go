package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/postern/postern/recipes"
)

// connCheckJSON is one key check in -o json output.
type connCheckJSON struct {
	Alias   string `json:"alias"`
	Recipe  string `json:"recipe"` // the recipe used, "" for none
	Status  string `json:"status"` // ok, rejected or unknown
	Message string `json:"message"`
	// Recorded is false for an unknown result: the stored status was left
	// as it was.
	Recorded     bool   `json:"recorded"`
	KeyCheckedAt string `json:"key_checked_at"`
}

// errCheckFailed makes conn check exit 1 after its answer is printed, for
// a key that is rejected or a check that proved nothing, so that scripts
// can tell them from ok.
var errCheckFailed = errors.New("conn check: the key was not proved to work")

func newConnCheckCmd(data *dataFlag) *cobra.Command {
	var timeout = recipes.DefaultCheckTimeout
	cmd := &cobra.Command{
		Use:   "check ALIAS",
		Short: "Prove a connection's key works: connect and run its recipe's harmless read",
		Long: `check connects to the target with the sealed key, accepting only the pinned
host key, and runs the recipe's harmless read (for git hosting, only
authenticates). The recipe is the connection's own, or else the one whose
host pattern claims the host; without one, check runs true.

ok and rejected are recorded and shown by conn list; a result that proves
nothing (timeout, network error, a failed read, a changed host key) leaves
the recorded status alone. check exits 0 only for ok.`,
		Args: exactArgs(1, "the connection ALIAS"),
	}
	cmd.Flags().DurationVar(&timeout, "timeout", recipes.DefaultCheckTimeout, "bound on the whole check")
	out := addOutputFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		asJSON, err := out.json()
		if err != nil {
			return err
		}
		if timeout <= 0 {
			return usagef("conn check: --timeout must be positive")
		}
		ctx := cmd.Context()
		s, err := data.open(ctx)
		if err != nil {
			return storeErr(err)
		}
		defer s.Close()
		if err := s.CheckMasterKey(); err != nil {
			return err
		}
		cat, err := recipes.Load()
		if err != nil {
			return err
		}
		kc, err := checkConnectionKey(ctx, s, cat, args[0], timeout)
		if err != nil {
			return storeErr(err)
		}
		c, res, record, recipeKey := kc.Conn, kc.Result, kc.Recorded, kc.Recipe
		w := cmd.OutOrStdout()
		if asJSON {
			err = writeJSON(w, connCheckJSON{
				Alias: c.Alias, Recipe: recipeKey, Status: string(res.Status), Message: res.Message,
				Recorded: record, KeyCheckedAt: timeJSON(c.KeyCheckedAt),
			})
		} else {
			note := ""
			if !record {
				note = " (nothing recorded)"
			}
			_, err = fmt.Fprintf(w, "%s: %s: %s%s\n", c.Alias, res.Status, res.Message, note)
		}
		if err != nil {
			return err
		}
		if res.Status != recipes.StatusOK {
			return errCheckFailed
		}
		return nil
	}
	return cmd
}
