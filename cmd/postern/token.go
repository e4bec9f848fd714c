package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/postern/postern/manage"
	"github.com/postern/postern/model"
	"github.com/postern/postern/store"
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
	var admin, scope string
	cmd := &cobra.Command{
		Use:   "add NAME --admin ADMIN [--scope read|approve|admin]",
		Short: "Make a console token of an admin for the REST API and print it once",
		Long: `add makes a console token and prints it once, on the second line of its
output. postern keeps only its SHA-256, so a lost token cannot be shown
again: remove it and add another. The token belongs to --admin: its
decisions and changes are that admin's, so two tokens of one admin never
count as the two admins a production destructive operation needs.

--scope says what the token may do: read (every GET), approve (also decide
approvals and re-check keys; the default) or admin (also create, change and
remove agents, connections, grants, tokens and notification channels).
Send it as

  curl -H "Authorization: Bearer TOKEN" https://HOST:8443/v1/approvals`,
		Args: exactArgs(1, "the token NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if err := store.ValidateName("token", name); err != nil {
				return storeErr(err)
			}
			sc, err := store.ParseTokenScope(scope)
			if err != nil {
				return storeErr(err)
			}
			if admin == "" {
				return usageError{errors.New("a token belongs to an admin: give --admin ADMIN (postern admin list)")}
			}
			return withManager(cmd.Context(), data, func(m *manage.Manager) error {
				value, t, err := m.AddToken(cmd.Context(), cliActor("cli"), name, admin, sc)
				if err != nil {
					return manageErr(err)
				}
				w := cmd.OutOrStdout()
				fmt.Fprintf(w, "added token %s (%s) of admin %s, scope %s\n", t.Name, t.ID, t.AdminName, t.Scope)
				fmt.Fprintln(w, value)
				_, err = fmt.Fprintf(w, "This token is shown only now: postern keeps only its SHA-256. Send it as the header: Authorization: Bearer TOKEN\n")
				return err
			})
		},
	}
	cmd.Flags().StringVar(&admin, "admin", "", "the registered admin the token belongs to (required)")
	cmd.Flags().StringVar(&scope, "scope", string(store.DefaultTokenScope), "what the token may do: read, approve or admin")
	return cmd
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
			if admin == "" {
				return usageError{errors.New("a token belongs to an admin: give --admin ADMIN (postern admin list)")}
			}
			return withManager(cmd.Context(), data, func(m *manage.Manager) error {
				t, err := m.AssignToken(cmd.Context(), cliActor("cli"), args[0], admin)
				if err != nil {
					return manageErr(err)
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "token %s now belongs to admin %s\n", t.Name, t.AdminName)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&admin, "admin", "", "the registered admin the token belongs to (required)")
	return cmd
}

func newTokenListCmd(data *dataFlag) *cobra.Command {
	return newListCmd(data, listSpec[store.ConsoleToken]{
		short:  "List console tokens (never the tokens)",
		read:   (*store.Store).ListConsoleTokens,
		json:   func(t store.ConsoleToken) any { return model.TokenOf(t) },
		empty:  "no console tokens; add one with: postern token add NAME --admin ADMIN",
		header: []string{"NAME", "ID", "ADMIN", "SCOPE", "CREATED", "LAST USED"},
		rows: func(t store.ConsoleToken) [][]string {
			owner := t.AdminName
			if owner == "" {
				owner = "none: cannot decide until `token assign`"
			}
			return [][]string{{t.Name, t.ID, owner, string(t.Scope), timeText(t.CreatedAt), timeText(t.LastUsedAt)}}
		},
	})
}

func newTokenRemoveCmd(data *dataFlag) *cobra.Command {
	return &cobra.Command{
		Use:   "remove NAME",
		Short: "Remove a console token; its bearer is refused at once",
		Args:  exactArgs(1, "the token NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withManager(cmd.Context(), data, func(m *manage.Manager) error {
				if _, err := m.RemoveToken(cmd.Context(), cliActor("cli"), args[0]); err != nil {
					return manageErr(err)
				}
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "removed token %s\n", args[0])
				return err
			})
		},
	}
}
