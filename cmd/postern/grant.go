package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/postern/postern/manage"
	"github.com/postern/postern/model"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
)

func newGrantCmd() *cobra.Command {
	var read, write, destructive string
	cmd := &cobra.Command{
		Use:   "grant AGENT ALIAS [--read R] [--write R] [--destructive R]",
		Short: "Let an agent use a connection, with a rule (allow|ask|deny) per class",
		Long: `grant lets AGENT use the connection ALIAS. Each class of operation gets a
rule: allow (run it), ask (run it once a human approves) or deny.

A new grant starts at read=allow, write=deny, destructive=deny; on an
existing grant only the rules given change. On a production connection
destructive cannot be allow.

  postern grant ci-bot staging-web --write ask
  postern grant list [-o json]
  postern grant revoke ci-bot staging-web`,
		Args: exactArgs(2, "AGENT and ALIAS (or the subcommand list or revoke)"),
	}
	data := addDataFlag(cmd)
	addAsFlag(cmd, data)
	fl := cmd.Flags()
	fl.StringVar(&read, "read", string(store.RuleAllow), "rule for read operations: allow, ask or deny")
	fl.StringVar(&write, "write", string(store.RuleDeny), "rule for write operations: allow, ask or deny")
	fl.StringVar(&destructive, "destructive", string(store.RuleDeny), "rule for destructive operations: allow, ask or deny")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		agent, alias := args[0], args[1]
		var ch manage.RulesChange
		for _, r := range []struct {
			name string
			val  string
			dst  **store.Rule
		}{{"read", read, &ch.Read}, {"write", write, &ch.Write}, {"destructive", destructive, &ch.Destructive}} {
			if !cmd.Flags().Changed(r.name) {
				continue
			}
			rule, err := store.ParseRule(r.val)
			if err != nil {
				return usagef("--%s %q: want allow, ask or deny", r.name, r.val)
			}
			*r.dst = &rule
		}
		return withManager(cmd.Context(), data, func(m *manage.Manager) error {
			verb := "granted"
			if _, err := m.Store().GrantByNames(cmd.Context(), agent, alias); err == nil {
				verb = "updated grant of"
			} else if !errors.Is(err, store.ErrNotFound) {
				return err
			}
			g, err := m.SetGrant(cmd.Context(), data.actor("cli"), agent, alias, ch)
			if err != nil {
				return manageErr(err)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s %s on %s (%s): %s\n", verb, g.AgentName, g.Alias, g.Env, manage.RulesText(g.Rules))
			return err
		})
	}
	cmd.AddCommand(newGrantListCmd(data), newGrantRevokeCmd(data))
	return cmd
}

// scopeText is a grant's elevation on one line: "write allowed until 15:04
// (apr_x)"; an operation scope names its operation.
func scopeText(a store.Approval) string {
	what := a.Class + " allowed"
	if a.Scope == store.ScopeOperation {
		what = a.Class + " " + strconv.Quote(policy.VisibleLine(a.Operation)) + " allowed"
	}
	return what + " until " + a.ScopeExpiresAt.UTC().Format(time.RFC3339) + " (" + a.ID + ")"
}

func newGrantListCmd(data *dataFlag) *cobra.Command {
	return newListCmd(data, listSpec[store.ElevatedGrant]{
		short:  "List grants by agent and connection",
		read:   (*store.Store).ListElevatedGrants,
		json:   func(g store.ElevatedGrant) any { return model.GrantOf(g, time.Now()) },
		empty:  "no grants; add one with: postern grant AGENT ALIAS",
		header: []string{"AGENT", "ALIAS", "ENV", "READ", "WRITE", "DESTRUCTIVE", "MODIFIED", "ELEVATED"},
		rows: func(g store.ElevatedGrant) [][]string {
			elevated := "-"
			if len(g.Scopes) > 0 {
				parts := make([]string, len(g.Scopes))
				for i, a := range g.Scopes {
					parts[i] = scopeText(a)
				}
				elevated = strings.Join(parts, "; ")
			}
			return [][]string{{g.AgentName, g.Alias, string(g.Env), string(g.Rules.Read), string(g.Rules.Write),
				string(g.Rules.Destructive), timeText(g.ModifiedAt), elevated}}
		},
	})
}

func newGrantRevokeCmd(data *dataFlag) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke AGENT ALIAS",
		Short: "Take a connection away from an agent",
		Args:  exactArgs(2, "AGENT and ALIAS"),
		RunE: func(cmd *cobra.Command, args []string) error {
			err := withManager(cmd.Context(), data, func(m *manage.Manager) error {
				_, err := m.RevokeGrant(cmd.Context(), data.actor("cli"), args[0], args[1])
				return err
			})
			if err != nil {
				return manageErr(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "revoked grant of %s on %s\n", args[0], args[1])
			return nil
		},
	}
}
