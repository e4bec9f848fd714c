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

	"github.com/postern/postern/manage"
	"github.com/postern/postern/model"
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
	admin := os.Getenv(envAdmin)
	if admin == "" {
		admin = osUserName()
	}
	cmd.AddCommand(
		newApprovalsListCmd(data),
		newApprovalsDecideCmd(data, true, admin),
		newApprovalsDecideCmd(data, false, admin),
		newScopesCmd(data, admin),
		newRevokeScopeCmd(data, admin),
	)
	return cmd
}

// osUserName is the default --as without POSTERN_ADMIN: the name of the OS
// user running the CLI, which is who an audit reader will look for. "" when
// it cannot be found, in which case --as is required.
func osUserName() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return os.Getenv("USER")
}

// withEngine opens the store and a policy engine over it for one command.
// The engine starts no goroutine unless something waits, so this is cheap.
func withEngine(ctx context.Context, data *dataFlag, fn func(*store.Store, *policy.Engine) error) error {
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
	return fn(st, eng)
}

// resolveAs turns --as into a registered admin's identity: a decision is
// an admin's, and the two-person rule compares admins, not the strings
// typed after --as.
func resolveAs(ctx context.Context, st *store.Store, as string) (policy.Decider, error) {
	if strings.TrimSpace(as) == "" {
		return policy.Decider{}, usageError{errors.New("cannot tell who you are: give --as ADMIN (postern admin list)")}
	}
	a, err := st.ResolveAdmin(ctx, strings.TrimSpace(as))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return policy.Decider{}, usageError{fmt.Errorf("no admin is named %q: give --as with a registered admin (postern admin list; postern admin add NAME)", as)}
	case err != nil:
		return policy.Decider{}, storeErr(err)
	case a.Disabled:
		return policy.Decider{}, usageError{fmt.Errorf("admin %s is disabled and cannot decide", a.Name)}
	}
	return policy.Decider{AdminID: a.ID, Name: a.Name}, nil
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
		return withEngine(cmd.Context(), data, func(st *store.Store, eng *policy.Engine) error {
			list, err := eng.Approvals(cmd.Context(), all)
			if err != nil {
				return err
			}
			changes, err := st.ListChangeRequests(cmd.Context(), all)
			if err != nil {
				return storeErr(err)
			}
			now := time.Now()
			if asJSON {
				out := approvalsJSON(list, now)
				for _, c := range changes {
					out = append(out, model.ChangeApprovalOf(c, now))
				}
				return writeJSON(cmd.OutOrStdout(), out)
			}
			if len(changes) > 0 && len(list) == 0 {
				return printChanges(cmd.OutOrStdout(), changes, now)
			}
			if err := printApprovals(cmd.OutOrStdout(), list, now); err != nil || len(changes) == 0 {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout())
			return printChanges(cmd.OutOrStdout(), changes, now)
		})
	}
	return cmd
}

// approvalsJSON is a list of approvals in the shared JSON shape.
func approvalsJSON(list []policy.Approval, now time.Time) []model.Approval {
	out := make([]model.Approval, 0, len(list))
	for _, a := range list {
		out = append(out, model.ApprovalOf(a, now))
	}
	return out
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
		op := kindOp(a.Kind, a.Operation)
		if a.TerminalLife > 0 {
			op = fmt.Sprintf("[with a terminal: an interactive shell, at most %v] %s", a.TerminalLife, op)
		}
		if ext := policy.ExtentOf(a.Operation); ext.Lines > 1 || ext.MoreBytes > 0 {
			// The whole command is on the line (newlines escaped), and
			// its size before it says how far to read.
			op = "[" + ext.String() + "] " + op
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			a.ID, a.Status, a.AgentName, a.ConnectionAlias, a.Class, approvals, expires, op)
	}
	return tw.Flush()
}

// printChanges lists the changes of configuration that wait for (or were
// decided by) a second admin: the other half of the approvals queue.
func printChanges(w io.Writer, list []store.ChangeRequest, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CHANGE\tSTATUS\tASKED BY\tDECIDED BY\tEXPIRES\tCHANGE\tBEFORE\tAFTER")
	for _, c := range list {
		expires := "-"
		if c.Status == store.ChangePending {
			expires = "in " + c.ExpiresAt.Sub(now).Round(time.Second).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.ID, c.Status, policy.VisibleLine(c.RequestedBy),
			orDash(policy.VisibleLine(c.DecidedBy)), expires, policy.VisibleLine(c.Summary),
			policy.VisibleLine(c.Before), policy.VisibleLine(c.After))
	}
	return tw.Flush()
}

// decideChange approves or denies the change request id as the admin
// --as names: a change of configuration waiting for a second admin.
func decideChange(cmd *cobra.Command, data *dataFlag, id, as string, approve bool, reason string, scope policy.Scope) error {
	if scope.Kind != "" && scope.Kind != store.ScopeRequest {
		return usagef("a change request is approved once; it has no --scope")
	}
	return withManager(cmd.Context(), data, func(m *manage.Manager) error {
		by, err := resolveAs(cmd.Context(), m.Store(), as)
		if err != nil {
			return err
		}
		actor := policy.Actor{Name: by.Name, AdminID: by.AdminID, Via: "cli", Role: store.RoleOwner}
		c, err := m.DecideChange(cmd.Context(), actor, id, approve, reason)
		if err != nil {
			return decideErr(manageErr(err))
		}
		verb := "denied"
		if approve {
			verb = "approved and made"
		}
		_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s change %s (asked by %s): %s\n", verb, c.ID,
			policy.VisibleLine(c.RequestedBy), policy.VisibleLine(c.Summary))
		return err
	})
}

// newApprovalsDecideCmd builds `approvals approve ID` (approve true) or
// `approvals deny ID`.
func newApprovalsDecideCmd(data *dataFlag, approve bool, defaultAdmin string) *cobra.Command {
	var as, reason, scopeKind, scopeFor string
	cmd := &cobra.Command{
		Use:   "approve ID",
		Short: "Approve a pending request (production destructive needs two different admins)",
		Long: `approve lets the request's operation run once. With --scope operation the
same exact operation of the same agent on the same connection also runs
without asking until --for has passed; with --scope class every operation
of its class there does (a time-boxed elevation of the grant, listed by
` + "`approvals scopes`" + ` and ended early by ` + "`approvals revoke-scope ID`" + `). --for is at
most 8h. A destructive operation on a production connection is never
scoped: one operation, two different admins, every time.`,
		Args: wantOneArg("approval ID"),
	}
	if approve {
		cmd.Flags().StringVar(&scopeKind, "scope", "request", "what the approval covers: request, operation or class")
		cmd.Flags().StringVar(&scopeFor, "for", "", "how long a wider --scope lasts, such as 30m (at most 8h)")
	} else {
		cmd.Use = "deny ID"
		cmd.Short = "Deny a pending request"
		cmd.Long = ""
		cmd.Flags().StringVar(&reason, "reason", "", "why, shown to the agent: one line of at most 1000 bytes, every character visible")
	}
	cmd.Flags().StringVar(&as, "as", defaultAdmin, "the registered admin deciding (default: "+envAdmin+", else your OS user name), recorded in the audit log")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		id := args[0]
		scope, err := policy.ParseScope(scopeKind, scopeFor)
		if err != nil {
			return usageError{userError{err}}
		}
		if store.IsChangeID(id) {
			return decideChange(cmd, data, id, as, approve, reason, scope)
		}
		return withEngine(cmd.Context(), data, func(st *store.Store, eng *policy.Engine) error {
			by, err := resolveAs(cmd.Context(), st, as)
			if err != nil {
				return err
			}
			var a policy.Approval
			if approve {
				a, err = eng.Approve(cmd.Context(), id, by, scope)
			} else {
				a, err = eng.Deny(cmd.Context(), id, by, reason)
			}
			if err != nil {
				return decideErr(err)
			}
			w := cmd.OutOrStdout()
			what := fmt.Sprintf("%s on %s: %s", a.AgentName, a.ConnectionAlias, policy.VisibleLine(a.Operation))
			switch {
			case a.Status == store.ApprovalPending:
				_, err = fmt.Fprintf(w, "first approval of %s recorded by %s; a second, different admin must approve (%s)\n", id, by.Name, what)
			case approve && a.Scope != store.ScopeRequest:
				_, err = fmt.Fprintf(w, "approved %s (%s), with %s scope until %s\n", id, what, a.Scope, a.ScopeExpiresAt.UTC().Format(time.RFC3339))
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

// newScopesCmd builds `approvals scopes`: the approvals whose scope lets
// further operations through without asking.
func newScopesCmd(data *dataFlag, _ string) *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "scopes",
		Short: "List approvals whose scope lets operations run without asking (--all for ended ones)",
		Args:  wantNoArgs,
	}
	out := addOutputFlag(cmd)
	cmd.Flags().BoolVar(&all, "all", false, "also list ended and revoked scopes")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		asJSON, err := out.json()
		if err != nil {
			return err
		}
		return withEngine(cmd.Context(), data, func(st *store.Store, _ *policy.Engine) error {
			list, err := st.ListScopes(cmd.Context(), !all)
			if err != nil {
				return storeErr(err)
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), approvalsJSON(list, time.Now()))
			}
			return printScopes(cmd.OutOrStdout(), list, time.Now())
		})
	}
	return cmd
}

func printScopes(w io.Writer, list []policy.Approval, now time.Time) error {
	if len(list) == 0 {
		_, err := fmt.Fprintln(w, "no approval scopes")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "APPROVAL\tSCOPE\tAGENT\tCONNECTION\tCLASS\tAPPROVED BY\tUNTIL\tOPERATION")
	for _, a := range list {
		until := a.ScopeExpiresAt.UTC().Format(time.RFC3339)
		switch {
		case !a.ScopeRevokedAt.IsZero():
			until = "revoked by " + a.ScopeRevokedBy
		case !now.Before(a.ScopeExpiresAt):
			until = "ended " + until
		}
		op := "any " + a.Class
		if a.Scope == store.ScopeOperation {
			op = kindOp(a.Kind, a.Operation)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			a.ID, a.Scope, a.AgentName, a.ConnectionAlias, a.Class, strings.Join(a.Deciders(), ","), until, op)
	}
	return tw.Flush()
}

// newRevokeScopeCmd builds `approvals revoke-scope ID`: the scope ends at
// once and its operations are asked again.
func newRevokeScopeCmd(data *dataFlag, defaultAdmin string) *cobra.Command {
	var as string
	cmd := &cobra.Command{
		Use:   "revoke-scope ID",
		Short: "End an approval's scope now: its operations are asked again",
		Args:  wantOneArg("approval ID"),
	}
	cmd.Flags().StringVar(&as, "as", defaultAdmin, "the registered admin revoking (default: "+envAdmin+", else your OS user name)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		return withEngine(cmd.Context(), data, func(st *store.Store, eng *policy.Engine) error {
			by, err := resolveAs(cmd.Context(), st, as)
			if err != nil {
				return err
			}
			a, err := eng.RevokeScope(cmd.Context(), args[0], by)
			if err != nil {
				return decideErr(err)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "revoked the %s scope of %s (%s on %s)\n", a.Scope, a.ID, a.AgentName, a.ConnectionAlias)
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
	case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrInvalid), errors.Is(err, policy.ErrSameApprover),
		errors.Is(err, policy.ErrInvalidAdmin), errors.Is(err, policy.ErrScope), errors.Is(err, policy.ErrInvalidText):
		return usageError{userError{err}}
	case errors.Is(err, policy.ErrAlreadyDecided), errors.Is(err, policy.ErrExpired):
		return userError{err}
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
