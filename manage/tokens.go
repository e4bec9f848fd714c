package manage

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"

	"github.com/postern/postern/internal/usererr"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
)

// TokenPrefix starts every console token, so that a leaked one is easy to
// recognise (and to search for in logs and repositories).
const TokenPrefix = "pst_"

// NewTokenValue makes a console token: 256 random bits with TokenPrefix, and
// the hex SHA-256 that is all the store keeps.
func NewTokenValue() (token, sha string) {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	token = TokenPrefix + base64.RawURLEncoding.EncodeToString(b)
	sum := sha256.Sum256([]byte(token))
	return token, hex.EncodeToString(sum[:])
}

// TokenMaker is who makes a console token: the admin doing it (a name or
// an id: the logged-in admin of the web page, the owner of the token of a
// REST call, the CLI's --as), and, when the token is made with a token, that
// token's scope. A token is only ever made for its maker, and never with
// more power than the token that made it: otherwise one admin could make an
// approve token of another and meet the two-person rule alone (issue 23).
type TokenMaker struct {
	Admin string
	// Scope is the scope of the token making this one; "" when no token
	// makes it (a web session, the CLI), which bounds nothing.
	Scope store.TokenScope
}

// TokenRefusedError is a token its maker may not make: one for another
// admin, or one wider than the token that makes it. The REST API answers it
// with 403 and Code; the CLI exits with status 2.
type TokenRefusedError struct {
	// Code is the API's error code: token_for_other_admin or
	// scope_too_wide.
	Code string
	// Field is the request field at fault: admin or scope.
	Field string
	msg   string
}

func (e *TokenRefusedError) Error() string { return "manage: " + e.msg }

// Unwrap is the refusal in the admin's words, a *usererr.Error, which the
// doors show.
func (e *TokenRefusedError) Unwrap() error { return usererr.New(e.msg) }

// AddToken makes a console token named name with scope ("" for
// store.DefaultTokenScope) for its maker, and returns its value, which
// exists only in the answer. admin, if not "", names the admin the caller
// asked the token for (a name without regard to case, or an id): naming
// anyone but the maker is refused with a *TokenRefusedError, as is a scope
// wider than the maker's token.
func (m *Manager) AddToken(ctx context.Context, by policy.Actor, maker TokenMaker, name, admin string, scope store.TokenScope) (string, *store.ConsoleToken, error) {
	if err := store.ValidateName("token", name); err != nil {
		return "", nil, err
	}
	scope, err := store.ParseTokenScope(string(scope))
	if err != nil {
		return "", nil, err
	}
	owner, err := m.tokenOwner(ctx, maker, admin)
	if err != nil {
		return "", nil, err
	}
	if !owner.Role.Scope().Allows(scope) {
		return "", nil, &TokenRefusedError{Code: "scope_too_wide", Field: "scope",
			msg: "admin " + owner.Name + " has the " + string(owner.Role) + " role and cannot hold a token of scope " +
				string(scope) + ": a token carries at most its admin's role"}
	}
	if maker.Scope != "" && !maker.Scope.Allows(scope) {
		return "", nil, &TokenRefusedError{Code: "scope_too_wide", Field: "scope",
			msg: "a token of scope " + string(maker.Scope) + " cannot make a token of scope " + string(scope) +
				": a token has at most the powers of the token that makes it"}
	}
	if err := m.requireRole(ctx, by, scope.Role(), "make a token of scope "+string(scope)); err != nil {
		return "", nil, err
	}
	if _, err := m.st.ConsoleTokenByName(ctx, name); err == nil {
		return "", nil, &store.ConflictError{Kind: "token", Value: name}
	}
	value, sha := NewTokenValue()
	what := "token add " + name + ": of admin " + owner.Name + ", scope " + string(scope)
	if scope != store.ScopeRead {
		// The value is the maker's alone, now: the second admin approves
		// the token's existence, never sees it, and an unapproved value
		// opens nothing (only its hash waits, sealed).
		err := m.hold(ctx, by, store.ChangeRequest{Kind: changeTokenAdd, Summary: what, Before: "no token " + name,
			After: "token " + name + " of " + owner.Name + ", scope " + string(scope)},
			heldChange{Token: &heldToken{Name: name, SHA256: sha, AdminID: owner.ID, AdminName: owner.Name, Scope: scope}})
		return value, nil, err
	}
	aud, p := audited(policy.Change{Actor: by, What: what})
	t, err := m.st.CreateConsoleToken(ctx, aud, name, sha, owner.ID, scope)
	if err != nil {
		return "", nil, err
	}
	return value, t, checkAudited(p, "token add")
}

// AssignToken makes a console token that belongs to no admin (one made
// before tokens had owners) its maker's. admin, if not "", names the admin
// asked for, which must be the maker; a token that already belongs to an
// admin is not handed to another (*TokenRefusedError).
func (m *Manager) AssignToken(ctx context.Context, by policy.Actor, maker TokenMaker, name, admin string) (*store.ConsoleToken, error) {
	owner, err := m.tokenOwner(ctx, maker, admin)
	if err != nil {
		return nil, err
	}
	cur, err := m.st.ConsoleTokenByName(ctx, name)
	if err != nil {
		return nil, err
	}
	if !owner.Role.Scope().Allows(cur.Scope) {
		return nil, &TokenRefusedError{Code: "scope_too_wide", Field: "scope",
			msg: "token " + name + " has scope " + string(cur.Scope) + ", more than admin " + owner.Name +
				"'s " + string(owner.Role) + " role: a token carries at most its admin's role"}
	}
	if err := m.requireRole(ctx, by, cur.Scope.Role(), "take a token of scope "+string(cur.Scope)); err != nil {
		return nil, err
	}
	if cur.AdminID != "" && cur.AdminID != owner.ID {
		return nil, &TokenRefusedError{Code: "token_for_other_admin", Field: "admin",
			msg: "token " + name + " belongs to admin " + cur.AdminName + " and cannot be given to " + owner.Name +
				": a token is only ever its maker's; " + owner.Name + " makes one with: postern token add NAME --as " + owner.Name}
	}
	aud, p := audited(policy.Change{Actor: by, What: "token assign " + name + ": to admin " + owner.Name})
	t, err := m.st.AssignConsoleToken(ctx, aud, name, owner.ID)
	if err != nil {
		return nil, err
	}
	return t, checkAudited(p, "token assign")
}

// RemoveToken revokes a console token: its bearer is refused at once.
//
// Any admin may revoke their own tokens; another admin's takes the admin
// role.
func (m *Manager) RemoveToken(ctx context.Context, by policy.Actor, name string) (*store.ConsoleToken, error) {
	cur, err := m.st.ConsoleTokenByName(ctx, name)
	if err != nil {
		return nil, err
	}
	need := store.RoleAdmin
	if by.AdminID != "" && cur.AdminID == by.AdminID {
		need = store.RoleViewer
	}
	if err := m.requireRole(ctx, by, need, "revoke another admin's token"); err != nil {
		return nil, err
	}
	aud, p := audited(policy.Change{Actor: by,
		What: "token remove " + name + ": of admin " + orNone(cur.AdminName) + ", scope " + string(cur.Scope)})
	if err := m.st.RemoveConsoleToken(ctx, aud, name); err != nil {
		return nil, err
	}
	return cur, checkAudited(p, "token remove")
}

// tokenOwner is the admin a token is made for: its maker, who must be a
// registered admin, and whom admin, if not "", must name.
func (m *Manager) tokenOwner(ctx context.Context, maker TokenMaker, admin string) (*store.Admin, error) {
	owner, err := m.resolveAdmin(ctx, maker.Admin)
	if err != nil {
		return nil, err
	}
	if admin == "" {
		return owner, nil
	}
	asked, err := m.st.ResolveAdmin(ctx, admin)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, store.Invalidf("no admin is named %q (postern admin list; postern admin add NAME)", admin)
	case err != nil:
		return nil, err
	case asked.ID != owner.ID:
		return nil, &TokenRefusedError{Code: "token_for_other_admin", Field: "admin",
			msg: "a token is only ever made for the admin who makes it: " + owner.Name + " cannot make one for " +
				asked.Name + "; " + asked.Name + " makes their own"}
	}
	return owner, nil
}

// resolveAdmin finds the admin a token is for.
func (m *Manager) resolveAdmin(ctx context.Context, name string) (*store.Admin, error) {
	if name == "" {
		return nil, store.Invalidf("a token belongs to the admin who makes it: name one (postern admin list)")
	}
	a, err := m.st.ResolveAdmin(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, store.Invalidf("no admin is named %q (postern admin list; postern admin add NAME)", name)
	}
	return a, err
}

// peopleWait reports whether making an admin of role (or raising one to
// it) by by waits for a second admin: when a registered admin asks for
// anyone who can decide (an approver or more). An approver is a second
// person for the two-person rule, so an owner who could make one alone
// could make a sock puppet and meet the rule alone. The server's CLI
// without --as (no AdminID) makes people at once: whoever runs it holds
// the data directory and could do anything anyway (SECURITY.md), and an
// installation gets its first people that way.
func peopleWait(by policy.Actor, role store.Role) bool {
	return by.AdminID != "" && role.AtLeast(store.RoleApprover)
}

// AddAdmin adds an admin of role ("" for store.DefaultRole) with an
// already hashed password; by must be an owner. One who can decide waits
// for a second admin (*HeldError) when a registered admin asks
// (peopleWait), except the installation's first admin, made at once and
// an owner unless role says otherwise: there is nobody yet to ask.
func (m *Manager) AddAdmin(ctx context.Context, by policy.Actor, name, passwordHash string, role store.Role) (*store.Admin, error) {
	if err := m.requireRole(ctx, by, store.RoleOwner, "add an admin"); err != nil {
		return nil, err
	}
	existing, err := m.st.ListAdmins(ctx)
	if err != nil {
		return nil, err
	}
	first := len(existing) == 0
	if first && role == "" {
		role = store.RoleOwner
	}
	role, err = store.ParseRole(string(role))
	if err != nil {
		return nil, err
	}
	if err := store.ValidateName("admin", name); err != nil {
		return nil, err
	}
	if passwordHash == "" {
		return nil, store.Invalidf("admin %s: empty password hash", name)
	}
	what := "admin add " + name + ": role " + string(role)
	if peopleWait(by, role) && !first {
		if _, err := m.st.ResolveAdmin(ctx, name); err == nil {
			return nil, &store.ConflictError{Kind: "admin", Value: name}
		}
		return nil, m.hold(ctx, by, store.ChangeRequest{Kind: changeAdminAdd, Summary: what, Before: "no admin " + name,
			After: "admin " + name + ", role " + string(role)},
			heldChange{Admin: &heldAdmin{Name: name, PasswordHash: passwordHash, Role: role}})
	}
	aud, p := audited(policy.Change{Actor: by, What: what})
	a, err := m.st.CreateAdmin(ctx, aud, name, passwordHash, role)
	if err != nil {
		return nil, err
	}
	return a, checkAudited(p, "admin add")
}

// SetAdminPassword replaces an admin's password hash and ends the admin's
// sessions.
func (m *Manager) SetAdminPassword(ctx context.Context, by policy.Actor, name, passwordHash string) (*store.Admin, error) {
	if err := m.requireRole(ctx, by, store.RoleOwner, "set an admin's password"); err != nil {
		return nil, err
	}
	aud, p := audited(policy.Change{Actor: by, What: "admin passwd " + name})
	a, err := m.st.SetAdminPassword(ctx, aud, name, passwordHash)
	if err != nil {
		return nil, err
	}
	return a, checkAudited(p, "admin passwd")
}

// SetAdminRole changes an admin's role; by must be an owner. Lowering a
// role applies at once; raising one to approver or more waits for a
// second admin (*HeldError) when a registered admin asks (peopleWait), so
// that no owner alone makes another decider.
func (m *Manager) SetAdminRole(ctx context.Context, by policy.Actor, name string, role store.Role) (*store.Admin, error) {
	if err := m.requireRole(ctx, by, store.RoleOwner, "change an admin's role"); err != nil {
		return nil, err
	}
	if role == "" {
		return nil, store.Invalidf("admin %s: give a role: viewer, approver, admin or owner", name)
	}
	if _, err := store.ParseRole(string(role)); err != nil {
		return nil, err
	}
	cur, err := m.st.ResolveAdmin(ctx, name)
	if err != nil {
		return nil, err
	}
	if cur.Role == role {
		return nil, store.Invalidf("admin %s already has the %s role", cur.Name, role)
	}
	what := "admin role " + cur.Name + ": " + string(cur.Role) + " -> " + string(role)
	if role.AtLeast(cur.Role) && peopleWait(by, role) {
		return nil, m.hold(ctx, by, store.ChangeRequest{Kind: changeAdminRole, Summary: what,
			Before: string(cur.Role), After: string(role)}, heldChange{Admin: &heldAdmin{Name: cur.Name, Role: role}})
	}
	aud, p := audited(policy.Change{Actor: by, What: what})
	a, err := m.st.SetAdminRole(ctx, aud, cur.Name, role)
	if err != nil {
		return nil, err
	}
	return a, checkAudited(p, "admin role")
}
