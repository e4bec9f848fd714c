package manage

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"

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

// AddToken makes a console token of admin (a name, without regard to
// case) with scope ("" for store.DefaultTokenScope), and returns its value,
// which exists only in the answer.
func (m *Manager) AddToken(ctx context.Context, by policy.Actor, name, admin string, scope store.TokenScope) (string, *store.ConsoleToken, error) {
	if err := store.ValidateName("token", name); err != nil {
		return "", nil, err
	}
	scope, err := store.ParseTokenScope(string(scope))
	if err != nil {
		return "", nil, err
	}
	owner, err := m.resolveAdmin(ctx, admin)
	if err != nil {
		return "", nil, err
	}
	value, sha := NewTokenValue()
	actx, p := audited(ctx, policy.Change{Actor: by,
		What: "token add " + name + ": of admin " + owner.Name + ", scope " + string(scope)})
	t, err := m.st.CreateConsoleToken(actx, name, sha, owner.ID, scope)
	if err != nil {
		return "", nil, err
	}
	return value, t, checkAudited(p, "token add")
}

// AssignToken makes a console token admin's.
func (m *Manager) AssignToken(ctx context.Context, by policy.Actor, name, admin string) (*store.ConsoleToken, error) {
	owner, err := m.resolveAdmin(ctx, admin)
	if err != nil {
		return nil, err
	}
	actx, p := audited(ctx, policy.Change{Actor: by, What: "token assign " + name + ": to admin " + owner.Name})
	t, err := m.st.AssignConsoleToken(actx, name, owner.ID)
	if err != nil {
		return nil, err
	}
	return t, checkAudited(p, "token assign")
}

// RemoveToken revokes a console token: its bearer is refused at once.
func (m *Manager) RemoveToken(ctx context.Context, by policy.Actor, name string) (*store.ConsoleToken, error) {
	cur, err := m.st.ConsoleTokenByName(ctx, name)
	if err != nil {
		return nil, err
	}
	actx, p := audited(ctx, policy.Change{Actor: by,
		What: "token remove " + name + ": of admin " + orNone(cur.AdminName) + ", scope " + string(cur.Scope)})
	if err := m.st.RemoveConsoleToken(actx, name); err != nil {
		return nil, err
	}
	return cur, checkAudited(p, "token remove")
}

// resolveAdmin finds the admin a token is for.
func (m *Manager) resolveAdmin(ctx context.Context, name string) (*store.Admin, error) {
	if name == "" {
		return nil, store.Invalidf("a token belongs to an admin: name one (postern admin list)")
	}
	a, err := m.st.ResolveAdmin(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, store.Invalidf("no admin is named %q (postern admin list; postern admin add NAME)", name)
	}
	return a, err
}

// AddAdmin adds an admin with an already hashed password.
func (m *Manager) AddAdmin(ctx context.Context, by policy.Actor, name, passwordHash string) (*store.Admin, error) {
	actx, p := audited(ctx, policy.Change{Actor: by, What: "admin add " + name})
	a, err := m.st.CreateAdmin(actx, name, passwordHash)
	if err != nil {
		return nil, err
	}
	return a, checkAudited(p, "admin add")
}

// SetAdminPassword replaces an admin's password hash and ends the admin's
// sessions.
func (m *Manager) SetAdminPassword(ctx context.Context, by policy.Actor, name, passwordHash string) (*store.Admin, error) {
	actx, p := audited(ctx, policy.Change{Actor: by, What: "admin passwd " + name})
	a, err := m.st.SetAdminPassword(actx, name, passwordHash)
	if err != nil {
		return nil, err
	}
	return a, checkAudited(p, "admin passwd")
}
