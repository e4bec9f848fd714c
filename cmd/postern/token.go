package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/postern/postern/store"
	"github.com/postern/postern/web"
)

func newTokenCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Manage console tokens, the bearer tokens of the REST API",
		Args:  cobra.ArbitraryArgs,
		RunE:  groupRunE,
	}
	data := addDataFlag(cmd)
	cmd.AddCommand(
		newTokenAddCmd(data),
		newTokenListCmd(data),
		newTokenRemoveCmd(data),
	)
	return cmd
}

func newTokenAddCmd(data *dataFlag) *cobra.Command {
	return &cobra.Command{
		Use:   "add NAME",
		Short: "Make a console token for the REST API and print it once",
		Long: `add makes a console token and prints it once, on the second line of its
output. postern keeps only its SHA-256, so a lost token cannot be shown
again: remove it and add another. Send it as

  curl -H "Authorization: Bearer TOKEN" https://HOST:8443/v1/approvals`,
		Args: exactArgs(1, "the token NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if err := store.ValidateName("token", name); err != nil {
				return storeErr(err)
			}
			s, err := data.open(cmd.Context())
			if err != nil {
				return storeErr(err)
			}
			defer s.Close()
			token, sha := web.NewConsoleToken()
			t, err := s.CreateConsoleToken(cmd.Context(), name, sha)
			if err != nil {
				return storeErr(err)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "added token %s (%s)\n", t.Name, t.ID)
			fmt.Fprintln(w, token)
			fmt.Fprintf(w, "This token is shown only now: postern keeps only its SHA-256. Send it as the header: Authorization: Bearer TOKEN\n")
			return nil
		},
	}
}

// tokenJSON is a console token in `token list -o json`: neither the token
// nor its hash.
type tokenJSON struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	CreatedAt  string `json:"created_at"`
	ModifiedAt string `json:"modified_at"`
	LastUsedAt string `json:"last_used_at"` // "" if never used
}

func newTokenListCmd(data *dataFlag) *cobra.Command {
	return newListCmd(data, listSpec[store.ConsoleToken]{
		short: "List console tokens (never the tokens)",
		read:  (*store.Store).ListConsoleTokens,
		json: func(t store.ConsoleToken) any {
			return tokenJSON{ID: t.ID, Name: t.Name, CreatedAt: timeJSON(t.CreatedAt),
				ModifiedAt: timeJSON(t.ModifiedAt), LastUsedAt: timeJSON(t.LastUsedAt)}
		},
		empty:  "no console tokens; add one with: postern token add NAME",
		header: []string{"NAME", "ID", "CREATED", "LAST USED"},
		rows: func(t store.ConsoleToken) [][]string {
			return [][]string{{t.Name, t.ID, timeText(t.CreatedAt), timeText(t.LastUsedAt)}}
		},
	})
}

func newTokenRemoveCmd(data *dataFlag) *cobra.Command {
	return &cobra.Command{
		Use:   "remove NAME",
		Short: "Remove a console token; its bearer is refused at once",
		Args:  exactArgs(1, "the token NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := data.open(cmd.Context())
			if err != nil {
				return storeErr(err)
			}
			defer s.Close()
			if err := s.RemoveConsoleToken(cmd.Context(), args[0]); err != nil {
				return storeErr(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "removed token %s\n", args[0])
			return nil
		},
	}
}
