package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/postern/postern/internal/usererr"
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
	addAsFlag(cmd, data)
	cmd.AddCommand(
		newTokenAddCmd(data),
		newTokenAssignCmd(data),
		newTokenListCmd(data),
		newTokenRemoveCmd(data),
	)
	return cmd
}

func newTokenAddCmd(data *dataFlag) *cobra.Command {
	var as, admin, scope string
	cmd := &cobra.Command{
		Use:   "add NAME --as ADMIN [--scope read|approve|admin]",
		Short: "Make a console token of your own admin for the REST API and print it once",
		Long: `add makes a console token and prints it once, on the second line of its
output. postern keeps only its SHA-256, so a lost token cannot be shown
again: remove it and add another. The token belongs to the admin who makes
it, --as (--admin is its older spelling; naming two different admins is
refused): a token is never made for another admin. Its decisions and
changes are that admin's, so two tokens of one admin never count as the
two admins a production destructive operation needs.

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
			maker, err := tokenMaker(as, admin)
			if err != nil {
				return err
			}
			data.as = maker.Admin // the maker acts: the audit names them
			return withManager(cmd.Context(), data, func(m *manage.Manager) error {
				value, t, err := m.AddToken(cmd.Context(), data.actor("cli"), maker, name, admin, sc)
				w := cmd.OutOrStdout()
				var held *manage.HeldError
				if errors.As(err, &held) {
					// The token works once a second admin approves; its
					// value exists only in this answer.
					fmt.Fprintln(w, usererr.Message(held, held.Error()))
					fmt.Fprintln(w, value)
					_, err = fmt.Fprintf(w, "This token is shown only now, and is refused until the change is approved.\n")
					return err
				}
				if err != nil {
					return manageErr(err)
				}
				fmt.Fprintf(w, "added token %s (%s) of admin %s, scope %s\n", t.Name, t.ID, t.AdminName, t.Scope)
				fmt.Fprintln(w, value)
				_, err = fmt.Fprintf(w, "This token is shown only now: postern keeps only its SHA-256. Send it as the header: Authorization: Bearer TOKEN\n")
				return err
			})
		},
	}
	addTokenAsFlags(cmd, &as, &admin)
	cmd.Flags().StringVar(&scope, "scope", string(store.DefaultTokenScope), "what the token may do: read, approve or admin")
	return cmd
}

// newTokenAssignCmd builds `token assign NAME --as ADMIN`, for tokens made
// before tokens belonged to admins: until assigned, they cannot decide
// approvals. A token is only ever its maker's: assign gives an ownerless
// token to the admin acting, never to another, and never takes one from
// its admin.
func newTokenAssignCmd(data *dataFlag) *cobra.Command {
	var as, admin string
	cmd := &cobra.Command{
		Use:   "assign NAME --as ADMIN",
		Short: "Make a console token that belongs to no admin yours; its decisions are then yours",
		Args:  exactArgs(1, "the token NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			maker, err := tokenMaker(as, admin)
			if err != nil {
				return err
			}
			data.as = maker.Admin // the maker acts: the audit names them
			return withManager(cmd.Context(), data, func(m *manage.Manager) error {
				t, err := m.AssignToken(cmd.Context(), data.actor("cli"), maker, args[0], admin)
				if err != nil {
					return manageErr(err)
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "token %s now belongs to admin %s\n", t.Name, t.AdminName)
				return err
			})
		},
	}
	addTokenAsFlags(cmd, &as, &admin)
	return cmd
}

// addTokenAsFlags adds --as, the admin acting, whom the token belongs to, and
// --admin, its older spelling.
func addTokenAsFlags(cmd *cobra.Command, as, admin *string) {
	cmd.Flags().StringVar(as, "as", os.Getenv(envAdmin), "the registered admin acting, whom the token belongs to (required; env "+envAdmin+")")
	cmd.Flags().StringVar(admin, "admin", "", "the older spelling of --as; with --as it must name the same admin")
}

// tokenMaker is the admin a token command acts as: --as, or --admin when
// --as is not given. A token is only ever made for the admin who makes it,
// so --admin naming another admin than --as is refused (by the manager,
// which knows that alice and ALICE are one admin).
func tokenMaker(as, admin string) (manage.TokenMaker, error) {
	as, admin = strings.TrimSpace(as), strings.TrimSpace(admin)
	if as == "" {
		as = admin
	}
	if as == "" {
		return manage.TokenMaker{}, usageError{errors.New("a token belongs to the admin who makes it: give --as ADMIN (postern admin list)")}
	}
	return manage.TokenMaker{Admin: as}, nil
}

func newTokenListCmd(data *dataFlag) *cobra.Command {
	return newListCmd(data, listSpec[store.ConsoleToken]{
		short:  "List console tokens (never the tokens)",
		read:   (*store.Store).ListConsoleTokens,
		json:   func(t store.ConsoleToken) any { return model.TokenOf(t) },
		empty:  "no console tokens; add one of your own with: postern token add NAME --as ADMIN",
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
				if _, err := m.RemoveToken(cmd.Context(), data.actor("cli"), args[0]); err != nil {
					return manageErr(err)
				}
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "removed token %s\n", args[0])
				return err
			})
		},
	}
}
