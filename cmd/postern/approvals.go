package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
)

// newApprovalsCmd builds `postern approvals`: list the requests that wait for
// a human, and approve or deny one. A decision made here is noticed by a
// running bastion within its watcher's poll interval (policy.DefaultPollInterval),
// because both share the database.
func newApprovalsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "approvals",
		Short: "List, approve and deny approval requests",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError{fmt.Errorf("unknown command %q for %q", args[0], cmd.CommandPath())}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	data := addDataFlag(cmd)
	admin := osUserName()
	cmd.AddCommand(
		newApprovalsListCmd(data),
		newApprovalsDecideCmd(data, true, admin),
		newApprovalsDecideCmd(data, false, admin),
	)
	return cmd
}

// osUserName is the default --as: the name of the OS user running the CLI,
// which is who an audit reader will look for. "" when it cannot be found, in
// which case --as is required.
func osUserName() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return os.Getenv("USER")
}

// withEngine opens the store and a policy engine over it for one command.
// The engine starts no goroutine unless something waits, so this is cheap.
func withEngine(ctx context.Context, data *dataFlag, fn func(*policy.Engine) error) error {
	st, err := data.open(ctx)
	if err != nil {
		return storeErr(err)
	}
	defer st.Close()
	eng, err := policy.New(policy.Options{Store: st})
	if err != nil {
		return err
	}
	defer eng.Close()
	return fn(eng)
}

func newApprovalsListCmd(data *dataFlag) *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List pending approval requests (--all for decided ones too)",
		Args:  wantNoArgs,
	}
	out := addOutputFlag(cmd)
	cmd.Flags().BoolVar(&all, "all", false, "also list approved, denied and expired requests")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		asJSON, err := out.json()
		if err != nil {
			return err
		}
		return withEngine(cmd.Context(), data, func(eng *policy.Engine) error {
			list, err := eng.Approvals(cmd.Context(), all)
			if err != nil {
				return err
			}
			if asJSON {
				rows := make([]approvalJSON, 0, len(list))
				for _, a := range list {
					rows = append(rows, toApprovalJSON(a))
				}
				return writeJSON(cmd.OutOrStdout(), rows)
			}
			return printApprovals(cmd.OutOrStdout(), list, time.Now())
		})
	}
	return cmd
}

// approvalJSON is the -o json form of an approval request. Times are RFC
// 3339 in UTC; a time that has not happened is omitted.
type approvalJSON struct {
	ID              string   `json:"id"`
	Status          string   `json:"status"`
	Agent           string   `json:"agent"`
	AgentID         string   `json:"agent_id"`
	Connection      string   `json:"connection"`
	ConnectionID    string   `json:"connection_id"`
	Class           string   `json:"class"`
	Kind            string   `json:"kind"`
	Operation       string   `json:"operation"`
	OperationSHA256 string   `json:"operation_sha256"`
	ApprovalsNeeded int      `json:"approvals_needed"`
	Approvers       []string `json:"approvers,omitempty"`
	DecidedBy       string   `json:"decided_by,omitempty"`
	Reason          string   `json:"reason,omitempty"`
	CreatedAt       string   `json:"created_at"`
	ExpiresAt       string   `json:"expires_at"`
	DecidedAt       string   `json:"decided_at,omitempty"`
	ConsumedAt      string   `json:"consumed_at,omitempty"`
}

func jsonTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func toApprovalJSON(a policy.Approval) approvalJSON {
	j := approvalJSON{
		ID: a.ID, Status: a.Status, Agent: a.AgentName, AgentID: a.AgentID,
		Connection: a.ConnectionAlias, ConnectionID: a.ConnectionID, Class: a.Class, Kind: a.Kind,
		Operation: a.Operation, OperationSHA256: a.OperationSHA256, ApprovalsNeeded: a.ApprovalsNeeded,
		Reason: a.Reason, CreatedAt: jsonTime(a.CreatedAt), ExpiresAt: jsonTime(a.ExpiresAt),
		DecidedAt: jsonTime(a.DecidedAt), ConsumedAt: jsonTime(a.ConsumedAt),
	}
	if a.Status == store.ApprovalDenied {
		j.DecidedBy = a.DecidedBy
		if a.FirstApprover != "" {
			j.Approvers = []string{a.FirstApprover}
		}
	} else {
		j.Approvers = a.Deciders()
	}
	return j
}

func printApprovals(w io.Writer, list []policy.Approval, now time.Time) error {
	if len(list) == 0 {
		_, err := fmt.Fprintln(w, "no approval requests")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tAGENT\tCONNECTION\tCLASS\tAPPROVALS\tEXPIRES\tOPERATION")
	for _, a := range list {
		approvals := fmt.Sprintf("%d/%d", len(a.Deciders()), a.ApprovalsNeeded)
		switch {
		case a.Status == store.ApprovalDenied:
			approvals = "denied by " + a.DecidedBy
		case len(a.Deciders()) > 0:
			approvals += " " + strings.Join(a.Deciders(), ",")
		}
		expires := "-"
		if a.Status == store.ApprovalPending {
			expires = "in " + a.ExpiresAt.Sub(now).Round(time.Second).String()
		}
		op := a.Kind + ": " + oneLine(a.Operation)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			a.ID, a.Status, a.AgentName, a.ConnectionAlias, a.Class, approvals, expires, op)
	}
	return tw.Flush()
}

// oneLine keeps a multi-line operation on one table row.
func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\r", `\r`)
	return strings.ReplaceAll(s, "\n", `\n`)
}

// newApprovalsDecideCmd builds `approvals approve ID` (approve true) or
// `approvals deny ID`.
func newApprovalsDecideCmd(data *dataFlag, approve bool, defaultAdmin string) *cobra.Command {
	var as, reason string
	cmd := &cobra.Command{
		Use:   "approve ID",
		Short: "Approve a pending request (production destructive needs two different admins)",
		Args:  wantOneArg("approval ID"),
	}
	if !approve {
		cmd.Use = "deny ID"
		cmd.Short = "Deny a pending request"
		cmd.Flags().StringVar(&reason, "reason", "", "why, shown to the agent")
	}
	cmd.Flags().StringVar(&as, "as", defaultAdmin, "the admin deciding, recorded in the audit log")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		id := args[0]
		if strings.TrimSpace(as) == "" {
			return usageError{errors.New("cannot tell who you are: give --as NAME")}
		}
		return withEngine(cmd.Context(), data, func(eng *policy.Engine) error {
			var a policy.Approval
			var err error
			if approve {
				a, err = eng.Approve(cmd.Context(), id, as)
			} else {
				a, err = eng.Deny(cmd.Context(), id, as, reason)
			}
			if err != nil {
				return decideErr(err)
			}
			w := cmd.OutOrStdout()
			what := fmt.Sprintf("%s on %s: %s", a.AgentName, a.ConnectionAlias, oneLine(a.Operation))
			switch {
			case a.Status == store.ApprovalPending:
				_, err = fmt.Fprintf(w, "first approval of %s recorded by %s; a second, different admin must approve (%s)\n", id, as, what)
			case approve:
				_, err = fmt.Fprintf(w, "approved %s (%s)\n", id, what)
			default:
				_, err = fmt.Fprintf(w, "denied %s (%s)\n", id, what)
			}
			return err
		})
	}
	return cmd
}

// decideErr maps the errors of a decision to exit statuses: what the admin
// got wrong (unknown id, same admin twice, a bad name) is a usage error
// (exit 2); a request that someone else decided or that expired is a plain
// failure (exit 1).
func decideErr(err error) error {
	switch {
	case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrInvalid),
		errors.Is(err, policy.ErrSameApprover), errors.Is(err, policy.ErrInvalidAdmin):
		return usageError{err}
	case errors.Is(err, policy.ErrAlreadyDecided), errors.Is(err, policy.ErrExpired):
		return err
	}
	return err
}

// wantNoArgs rejects positional arguments as a usage error (exit 2).
func wantNoArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError{fmt.Errorf("%s: unexpected argument %q", cmd.CommandPath(), args[0])}
	}
	return nil
}

// wantOneArg wants one positional argument, named what in the error.
func wantOneArg(what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != 1 {
			return usageError{fmt.Errorf("%s: want one %s, got %d arguments", cmd.CommandPath(), what, len(args))}
		}
		return nil
	}
}
