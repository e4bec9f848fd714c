package manage

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/postern/postern/internal/usererr"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
)

// Dual control over loosening production (issue 23).
//
// A change that loosens the protection of a production connection —
// its environment away from production, a rule loosened or a new grant,
// its host key re-pinned, its key rotated, its target or read sandbox
// changed, its removal — and, anywhere, adding an owner or admin, raising
// a role, or making an approve or admin token, is not made when asked. It
// is stored as a change request (store.ChangeRequest) that waits in the
// approvals queue for a second admin, and made, audited with both names,
// when that admin approves it. Tightening applies at once. Otherwise one
// admin alone could move a connection to staging, or loosen its
// destructive rule, and the two-person rule would need one person.

// DefaultChangeLifetime is how long a change request waits for a second
// admin unless Config.ChangeLifetime says otherwise.
const DefaultChangeLifetime = 24 * time.Hour

// HeldError says that a change was not made but waits for a second admin
// as Request. It is not a failure: doors show it as the request it is (the
// API answers 202 with the request, the CLI prints it and exits 0, apply
// lists it).
type HeldError struct{ Request store.ChangeRequest }

func (e *HeldError) words() string {
	return fmt.Sprintf("%s waits for a second admin: change request %s, until %s (another admin approves it with: postern approvals approve %s)",
		e.Request.Summary, e.Request.ID, e.Request.ExpiresAt.UTC().Format(time.RFC3339), e.Request.ID)
}

func (e *HeldError) Error() string { return "manage: " + e.words() }

// Unwrap is the message in the admin's words.
func (e *HeldError) Unwrap() error { return usererr.New(e.words()) }

// The kinds of change that wait, and their payloads.
const (
	changeGrant      = "grant"
	changeConnUpdate = "conn-update"
	changeConnRemove = "conn-remove"
	changeAdminAdd   = "admin-add"
	changeAdminRole  = "admin-role"
	changeTokenAdd   = "token-add"
)

// heldChange is a change request's payload: exactly one field is set.
type heldChange struct {
	Grant      *heldGrant              `json:"grant,omitempty"`
	ConnUpdate *store.ConnectionChange `json:"conn_update,omitempty"`
	ConnRemove bool                    `json:"conn_remove,omitempty"`
	Admin      *heldAdmin              `json:"admin,omitempty"`
	Token      *heldToken              `json:"token,omitempty"`
}

type heldGrant struct {
	Agent, Alias string
	Rules        store.Rules
	Was          string
}

type heldAdmin struct {
	Name, PasswordHash string // PasswordHash "" for a role change
	Role               store.Role
}

type heldToken struct {
	Name, SHA256, AdminID, AdminName string
	Scope                            store.TokenScope
}

// hold stores the change r (its payload h) as a request for a second
// admin, audited as requested, and returns the *HeldError that says so.
func (m *Manager) hold(ctx context.Context, by policy.Actor, r store.ChangeRequest, h heldChange) error {
	payload, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("manage: %s: %w", r.Summary, err)
	}
	r.Payload, r.RequestedBy, r.RequestedByID, r.RequestedVia = payload, by.Name, by.AdminID, by.Via
	aud, p := audited(policy.Change{Actor: by, Outcome: policy.Requested, What: r.Summary,
		AgentID: r.AgentID, AgentName: r.AgentName, ConnectionID: r.ConnectionID, ConnectionAlias: r.ConnectionAlias})
	req, err := m.st.CreateChangeRequest(ctx, aud, r, m.changeLife)
	if err != nil {
		return err
	}
	if err := checkAudited(p, "change request"); err != nil {
		return err
	}
	return &HeldError{Request: req}
}

// Changes lists the change requests waiting for a second admin (all of
// them with all), newest first.
func (m *Manager) Changes(ctx context.Context, all bool) ([]store.ChangeRequest, error) {
	return m.st.ListChangeRequests(ctx, all)
}

// DecideChange approves or denies change request id as by, who must be an
// approver or more and not the admin who asked. An approved change is made
// at once, audited with both names; if it can no longer be made (what it
// changes was removed meanwhile, the admin who asked lost the role it
// needs) the request is marked failed with the reason, and the error says
// so. A denial's reason follows the rules of an operation's
// (policy.CheckAdminText).
func (m *Manager) DecideChange(ctx context.Context, by policy.Actor, id string, approve bool, reason string) (store.ChangeRequest, error) {
	if err := m.requireRole(ctx, by, store.RoleApprover, "decide a change request"); err != nil {
		return store.ChangeRequest{}, err
	}
	if by.AdminID == "" {
		return store.ChangeRequest{}, store.Invalidf("a change request is decided by a registered admin: name yourself (--as ADMIN)")
	}
	reason = strings.TrimSpace(reason)
	if approve && reason != "" {
		return store.ChangeRequest{}, store.Invalidf("an approval has no reason")
	}
	if err := policy.CheckAdminText("reason", reason, policy.MaxDenyReason); err != nil {
		return store.ChangeRequest{}, err
	}
	cur, err := m.st.ChangeRequestShown(ctx, id)
	if err != nil {
		return cur, err
	}
	verb, outcome := "approved", policy.Approved
	if !approve {
		verb, outcome = "denied", policy.Denied
	}
	aud, p := audited(policy.Change{Actor: by, Outcome: outcome,
		What:    fmt.Sprintf("change %s %s (asked by %s): %s", id, verb, cur.RequestedBy, cur.Summary),
		AgentID: cur.AgentID, AgentName: cur.AgentName, ConnectionID: cur.ConnectionID, ConnectionAlias: cur.ConnectionAlias,
		Result: reasonText(reason)})
	c, err := m.st.DecideChangeRequest(ctx, aud, id, store.ChangeDecision{AdminID: by.AdminID, Name: by.Name, Approve: approve, Reason: reason})
	if err != nil {
		return c, err
	}
	if err := checkAudited(p, "change decision"); err != nil || !approve {
		return c, err
	}
	if err := m.apply(ctx, by, c); err != nil {
		why := usererr.Message(err, "the change could not be made")
		if ferr := m.st.FailChangeRequest(ctx, id, why); ferr != nil {
			return c, fmt.Errorf("manage: change %s approved but not made (%w), and not marked failed: %w", id, err, ferr)
		}
		c.Status, c.Reason = store.ChangeFailed, why
		return c, fmt.Errorf("manage: change %s was approved but could not be made: %w", id, err)
	}
	return c, nil
}

func reasonText(reason string) string {
	if reason == "" {
		return ""
	}
	return "reason: " + reason
}

// apply makes the approved change c, as the admin who asked it with
// approver as the second decider.
func (m *Manager) apply(ctx context.Context, approver policy.Actor, c store.ChangeRequest) error {
	var h heldChange
	if err := json.Unmarshal(c.Payload, &h); err != nil {
		return fmt.Errorf("manage: change %s: payload: %w", c.ID, err)
	}
	asker := policy.Actor{Name: c.RequestedBy, AdminID: c.RequestedByID, Via: c.RequestedVia, Role: store.RoleOwner}
	if err := m.requireRole(ctx, asker, neededRole(c.Kind, h), "make change "+c.ID); err != nil {
		return err
	}
	change := policy.Change{Actor: asker, Approver: approver.Name,
		AgentID: c.AgentID, AgentName: c.AgentName, ConnectionID: c.ConnectionID, ConnectionAlias: c.ConnectionAlias,
		What: c.Summary + " (change " + c.ID + ")"}
	aud, p := audited(change)
	var err error
	switch {
	case h.Grant != nil:
		if err = m.sameConnection(ctx, c); err == nil {
			_, err = m.st.SetGrant(ctx, aud, h.Grant.Agent, h.Grant.Alias, h.Grant.Rules)
		}
	case h.ConnUpdate != nil:
		if err = m.sameConnection(ctx, c); err == nil {
			_, err = m.st.UpdateConnection(ctx, aud, c.ConnectionAlias, *h.ConnUpdate)
		}
	case h.ConnRemove:
		if err = m.sameConnection(ctx, c); err == nil {
			err = m.st.RemoveConnection(ctx, aud, c.ConnectionAlias)
		}
	case h.Admin != nil && h.Admin.PasswordHash != "":
		_, err = m.st.CreateAdmin(ctx, aud, h.Admin.Name, h.Admin.PasswordHash, h.Admin.Role)
	case h.Admin != nil:
		_, err = m.st.SetAdminRole(ctx, aud, h.Admin.Name, h.Admin.Role)
	case h.Token != nil:
		_, err = m.st.CreateConsoleToken(ctx, aud, h.Token.Name, h.Token.SHA256, h.Token.AdminID, h.Token.Scope)
	default:
		err = fmt.Errorf("manage: change %s: empty payload", c.ID)
	}
	if err != nil {
		return err
	}
	return checkAudited(p, "change "+c.ID)
}

// neededRole is the role the admin who asked for a change must still have
// when it is made.
func neededRole(kind string, h heldChange) store.Role {
	switch {
	case kind == changeAdminAdd || kind == changeAdminRole:
		return store.RoleOwner
	case h.Token != nil:
		return h.Token.Scope.Role()
	}
	return store.RoleAdmin
}

// sameConnection refuses to make a change to a connection that was
// removed, or removed and added again under its alias, since it was asked
// for: the second admin approved a change to that connection, not to
// whatever holds its alias now.
func (m *Manager) sameConnection(ctx context.Context, c store.ChangeRequest) error {
	cur, err := m.st.ConnectionByAlias(ctx, c.ConnectionAlias)
	if err != nil {
		return err
	}
	if cur.ID != c.ConnectionID {
		return store.Invalidf("connection %s was removed and added again since change %s was asked for", c.ConnectionAlias, c.ID)
	}
	return nil
}

// loosens reports whether rules after let through anything before did not.
func loosens(before, after store.Rules) bool {
	rank := map[store.Rule]int{store.RuleDeny: 0, store.RuleAsk: 1, store.RuleAllow: 2}
	return rank[after.Read] > rank[before.Read] || rank[after.Write] > rank[before.Write] ||
		rank[after.Destructive] > rank[before.Destructive]
}
