package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

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
	fl := cmd.Flags()
	fl.StringVar(&read, "read", string(store.RuleAllow), "rule for read operations: allow, ask or deny")
	fl.StringVar(&write, "write", string(store.RuleDeny), "rule for write operations: allow, ask or deny")
	fl.StringVar(&destructive, "destructive", string(store.RuleDeny), "rule for destructive operations: allow, ask or deny")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		agent, alias := args[0], args[1]
		given := map[string]string{}
		for name, v := range map[string]string{"read": read, "write": write, "destructive": destructive} {
			if !cmd.Flags().Changed(name) {
				continue
			}
			if _, err := store.ParseRule(v); err != nil {
				return usagef("--%s %q: want allow, ask or deny", name, v)
			}
			given[name] = v
		}
		s, err := data.open(cmd.Context())
		if err != nil {
			return storeErr(err)
		}
		defer s.Close()
		rules := store.DefaultRules()
		verb := "granted"
		if g, err := s.GrantByNames(cmd.Context(), agent, alias); err == nil {
			rules, verb = g.Rules, "updated grant of"
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		for name, v := range given {
			switch name {
			case "read":
				rules.Read = store.Rule(v)
			case "write":
				rules.Write = store.Rule(v)
			case "destructive":
				rules.Destructive = store.Rule(v)
			}
		}
		g, err := s.SetGrant(cmd.Context(), agent, alias, rules)
		if err != nil {
			return storeErr(err)
		}
		fmt.Fprintf(cmd.OutOrStdout(), "%s %s on %s (%s): %s\n", verb, g.AgentName, g.Alias, g.Env, rulesText(g.Rules))
		return nil
	}
	cmd.AddCommand(newGrantListCmd(data), newGrantRevokeCmd(data))
	return cmd
}

func rulesText(r store.Rules) string {
	return fmt.Sprintf("read=%s write=%s destructive=%s", r.Read, r.Write, r.Destructive)
}

// grantJSON is a grant in `grant list -o json`.
type grantJSON struct {
	ID          string `json:"id"`
	Agent       string `json:"agent"`
	AgentID     string `json:"agent_id"`
	Alias       string `json:"alias"`
	ConnID      string `json:"connection_id"`
	Env         string `json:"env"`
	Read        string `json:"read"`
	Write       string `json:"write"`
	Destructive string `json:"destructive"`
	CreatedAt   string `json:"created_at"`
	ModifiedAt  string `json:"modified_at"`
	// Scopes are the approvals whose active scope elevates the grant.
	Scopes []scopeJSON `json:"scopes"`
}

// scopeJSON is an approval's active scope as a grant shows it.
type scopeJSON struct {
	ApprovalID string `json:"approval_id"`
	Scope      string `json:"scope"` // operation or class
	Class      string `json:"class"`
	Operation  string `json:"operation,omitempty"` // for an operation scope
	Until      string `json:"until"`
	ApprovedBy string `json:"approved_by"`
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
		short: "List grants by agent and connection",
		read:  (*store.Store).ListElevatedGrants,
		json: func(g store.ElevatedGrant) any {
			return grantJSON{
				ID: g.ID, Agent: g.AgentName, AgentID: g.AgentID, Alias: g.Alias, ConnID: g.ConnectionID,
				Env: string(g.Env), Read: string(g.Rules.Read), Write: string(g.Rules.Write),
				Destructive: string(g.Rules.Destructive),
				CreatedAt:   timeJSON(g.CreatedAt), ModifiedAt: timeJSON(g.ModifiedAt),
				Scopes: scopesJSON(g.Scopes),
			}
		},
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

func scopesJSON(list []store.Approval) []scopeJSON {
	out := make([]scopeJSON, 0, len(list))
	for _, a := range list {
		j := scopeJSON{ApprovalID: a.ID, Scope: string(a.Scope), Class: a.Class, Until: timeJSON(a.ScopeExpiresAt),
			ApprovedBy: strings.Join(a.Deciders(), ",")}
		if a.Scope == store.ScopeOperation {
			j.Operation = a.Operation
		}
		out = append(out, j)
	}
	return out
}

func newGrantRevokeCmd(data *dataFlag) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke AGENT ALIAS",
		Short: "Take a connection away from an agent",
		Args:  exactArgs(2, "AGENT and ALIAS"),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := data.open(cmd.Context())
			if err != nil {
				return storeErr(err)
			}
			defer s.Close()
			if err := s.RevokeGrant(cmd.Context(), args[0], args[1]); err != nil {
				return storeErr(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "revoked grant of %s on %s\n", args[0], args[1])
			return nil
		},
	}
}
