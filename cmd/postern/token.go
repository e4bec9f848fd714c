package main

import (
	"context"
	"errors"
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
		newTokenAssignCmd(data),
		newTokenListCmd(data),
		newTokenRemoveCmd(data),
	)
	return cmd
}

func newTokenAddCmd(data *dataFlag) *cobra.Command {
	var admin string
	cmd := &cobra.Command{
		Use:   "add NAME --admin ADMIN",
		Short: "Make a console token of an admin for the REST API and print it once",
		Long: `add makes a console token and prints it once, on the second line of its
output. postern keeps only its SHA-256, so a lost token cannot be shown
again: remove it and add another. The token belongs to --admin: its
decisions are that admin's, so two tokens of one admin never count as the
two admins a production destructive operation needs. Send it as

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
			owner, err := tokenAdmin(cmd.Context(), s, admin)
			if err != nil {
				return err
			}
			token, sha := web.NewConsoleToken()
			t, err := s.CreateConsoleToken(cmd.Context(), name, sha, owner.ID)
			if err != nil {
				return storeErr(err)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "added token %s (%s) of admin %s\n", t.Name, t.ID, t.AdminName)
			fmt.Fprintln(w, token)
			fmt.Fprintf(w, "This token is shown only now: postern keeps only its SHA-256. Send it as the header: Authorization: Bearer TOKEN\n")
			return nil
		},
	}
	cmd.Flags().StringVar(&admin, "admin", "", "the registered admin the token belongs to (required)")
	return cmd
}

// tokenAdmin resolves the --admin of a token command.
func tokenAdmin(ctx context.Context, s *store.Store, name string) (*store.Admin, error) {
	if name == "" {
		return nil, usageError{errors.New("a token belongs to an admin: give --admin ADMIN (postern admin list)")}
	}
	a, err := s.ResolveAdmin(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, usageError{fmt.Errorf("no admin is named %q (postern admin list; postern admin add NAME)", name)}
	}
	if err != nil {
		return nil, storeErr(err)
	}
	return a, nil
}

// newTokenAssignCmd builds `token assign NAME --admin ADMIN`, for tokens
// made before tokens belonged to admins: until assigned, they cannot
// decide approvals.
func newTokenAssignCmd(data *dataFlag) *cobra.Command {
	var admin string
	cmd := &cobra.Command{
		Use:   "assign NAME --admin ADMIN",
		Short: "Make a console token an admin's; its decisions are then that admin's",
		Args:  exactArgs(1, "the token NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := data.open(cmd.Context())
			if err != nil {
				return storeErr(err)
			}
			defer s.Close()
			owner, err := tokenAdmin(cmd.Context(), s, admin)
			if err != nil {
				return err
			}
			t, err := s.AssignConsoleToken(cmd.Context(), args[0], owner.ID)
			if err != nil {
				return storeErr(err)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "token %s now belongs to admin %s\n", t.Name, t.AdminName)
			return err
		},
	}
	cmd.Flags().StringVar(&admin, "admin", "", "the registered admin the token belongs to (required)")
	return cmd
}

// tokenJSON is a console token in `token list -o json`: neither the token
// nor its hash.
type tokenJSON struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	Admin      string `json:"admin"` // "" for a token that belongs to no admin yet
	CreatedAt  string `json:"created_at"`
	ModifiedAt string `json:"modified_at"`
	LastUsedAt string `json:"last_used_at"` // "" if never used
}

func newTokenListCmd(data *dataFlag) *cobra.Command {
	return newListCmd(data, listSpec[store.ConsoleToken]{
		short: "List console tokens (never the tokens)",
		read:  (*store.Store).ListConsoleTokens,
		json: func(t store.ConsoleToken) any {
			return tokenJSON{ID: t.ID, Name: t.Name, Admin: t.AdminName, CreatedAt: timeJSON(t.CreatedAt),
				ModifiedAt: timeJSON(t.ModifiedAt), LastUsedAt: timeJSON(t.LastUsedAt)}
		},
		empty:  "no console tokens; add one with: postern token add NAME",
		header: []string{"NAME", "ID", "ADMIN", "CREATED", "LAST USED"},
		rows: func(t store.ConsoleToken) [][]string {
			owner := t.AdminName
			if owner == "" {
				owner = "none: cannot decide until `token assign`"
			}
			return [][]string{{t.Name, t.ID, owner, timeText(t.CreatedAt), timeText(t.LastUsedAt)}}
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
