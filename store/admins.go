package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Prefixes of the web records' ids.
const (
	prefixAdmin        = "adm"
	prefixAdminSession = "ses"
	prefixConsoleToken = "tok"
)

// Admin is a person who decides approvals and edits grants on the web page.
// PasswordHash is an argon2id PHC string made by package web; the store
// never sees a password.
type Admin struct {
	ID           string
	Name         string
	PasswordHash string
	Role         Role
	Disabled     bool
	CreatedAt    time.Time
	ModifiedAt   time.Time
}

// AdminSession is one logged-in browser. Only the SHA-256 of its cookie
// value is stored, so a copy of the database logs nobody in.
type AdminSession struct {
	ID          string
	TokenSHA256 string
	AdminID     string
	AdminName   string
	AdminRole   Role
	CSRFToken   string
	CreatedAt   time.Time
	ExpiresAt   time.Time
}

// ConsoleToken is a bearer token for the REST API. Only its SHA-256 is
// stored; the token itself is shown once, when it is made. A token belongs
// to an admin, whose decisions its calls make; one made before tokens had
// owners has AdminID "" and cannot decide until it is assigned.
type ConsoleToken struct {
	ID          string
	Name        string
	AdminID     string
	AdminName   string // "" when AdminID is
	AdminRole   Role   // the admin's role now; "" when AdminID is "" or the admin is disabled
	Scope       TokenScope
	TokenSHA256 string
	CreatedAt   time.Time
	ModifiedAt  time.Time
	LastUsedAt  time.Time // zero until first used
}

// IdempotentResponse is the remembered first answer to a state-changing API
// call made with an Idempotency-Key.
type IdempotentResponse struct {
	RequestSHA256 string
	Status        int
	Body          []byte
	CreatedAt     time.Time
}

// CreateAdmin adds an admin account of role ("" for DefaultRole) with an
// already hashed password.
func (s *Store) CreateAdmin(ctx context.Context, audit Audit, name, passwordHash string, role Role) (*Admin, error) {
	ctx, err := audit.bind(ctx)
	if err != nil {
		return nil, err
	}
	if err := ValidateName("admin", name); err != nil {
		return nil, err
	}
	role, err = ParseRole(string(role))
	if err != nil {
		return nil, err
	}
	if passwordHash == "" {
		return nil, invalid("admin %s: empty password hash", name)
	}
	now := formatTime(s.nowUTC())
	id := newID(prefixAdmin)
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		// Names are one identity whatever their case: "alice" and "ALICE"
		// must never be two admins for the two-person rule.
		var taken string
		err := tx.QueryRowContext(ctx, `SELECT name FROM admins WHERE lower(name) = lower(?)`, name).Scan(&taken)
		if err == nil {
			return &ConflictError{Kind: "admin", Value: taken}
		} else if !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("store: add admin %s: %w", name, err)
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO admins (id, name, password_hash, disabled, created_at, modified_at, role)
			VALUES (?, ?, ?, 0, ?, ?, ?)`, id, name, passwordHash, now, now, string(role))
		if err != nil {
			if isUniqueViolation(err) {
				return &ConflictError{Kind: "admin", Value: name}
			}
			return fmt.Errorf("store: add admin %s: %w", name, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s.AdminByName(ctx, name)
}

// ResolveAdmin returns the one admin named name, compared without regard to
// case, or with that id. It is how a name typed by a person (`approvals
// approve --as alice`) becomes an identity: an error wrapping ErrNotFound
// when no admin matches, and an invalid-input error when two admins made
// before names were unique without regard to case both match.
func (s *Store) ResolveAdmin(ctx context.Context, name string) (*Admin, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+adminColumns+` FROM admins
		WHERE id = ? OR lower(name) = lower(?) ORDER BY name`, name, name)
	found, err := collect(rows, err, "admin "+name, scanAdmin)
	if err != nil {
		return nil, err
	}
	switch len(found) {
	case 0:
		return nil, notFound("admin", name)
	case 1:
		return found[0], nil
	}
	for _, a := range found {
		if a.Name == name || a.ID == name {
			return a, nil
		}
	}
	return nil, invalid("admin name %q matches %d admins that differ only in case; use the exact name", name, len(found))
}

// SetAdminPassword replaces an admin's password hash and ends all of the
// admin's sessions, as a password change should.
func (s *Store) SetAdminPassword(ctx context.Context, audit Audit, name, passwordHash string) (*Admin, error) {
	ctx, err := audit.bind(ctx)
	if err != nil {
		return nil, err
	}
	if passwordHash == "" {
		return nil, invalid("admin %s: empty password hash", name)
	}
	now := formatTime(s.nowUTC())
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		var id string
		err := tx.QueryRowContext(ctx, `SELECT id FROM admins WHERE name = ?`, name).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("admin", name)
		} else if err != nil {
			return fmt.Errorf("store: admin %s: %w", name, err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE admins SET password_hash = ?, modified_at = ? WHERE id = ?`,
			passwordHash, now, id); err != nil {
			return fmt.Errorf("store: admin %s: %w", name, err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM admin_sessions WHERE admin_id = ?`, id); err != nil {
			return fmt.Errorf("store: admin %s: %w", name, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s.AdminByName(ctx, name)
}

const adminColumns = `id, name, password_hash, disabled, created_at, modified_at, role`

func scanAdmin(r rowScanner) (*Admin, error) {
	var a Admin
	var created, modified, role string
	if err := r.Scan(&a.ID, &a.Name, &a.PasswordHash, &a.Disabled, &created, &modified, &role); err != nil {
		return nil, err
	}
	a.Role = Role(role)
	var err error
	if a.CreatedAt, err = parseTime(created); err != nil {
		return nil, err
	}
	if a.ModifiedAt, err = parseTime(modified); err != nil {
		return nil, err
	}
	return &a, nil
}

// AdminByName returns the named admin, or an error wrapping ErrNotFound.
func (s *Store) AdminByName(ctx context.Context, name string) (*Admin, error) {
	a, err := scanAdmin(s.db.QueryRowContext(ctx, `SELECT `+adminColumns+` FROM admins WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("admin", name)
	} else if err != nil {
		return nil, fmt.Errorf("store: admin %s: %w", name, err)
	}
	return a, nil
}

// ListAdmins returns every admin, ordered by name.
func (s *Store) ListAdmins(ctx context.Context) ([]Admin, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+adminColumns+` FROM admins ORDER BY name`)
	return collect(rows, err, "list admins", deref(scanAdmin))
}

// CreateAdminSession stores a new session for admin adminID. tokenSHA256 is
// the hex SHA-256 of the cookie value.
func (s *Store) CreateAdminSession(ctx context.Context, adminID, tokenSHA256, csrfToken string, expires time.Time) (*AdminSession, error) {
	if len(tokenSHA256) != 64 || csrfToken == "" {
		return nil, invalid("admin session: want a 64-digit token hash and a CSRF token")
	}
	now := s.nowUTC()
	id := newID(prefixAdminSession)
	_, err := s.db.ExecContext(ctx, `INSERT INTO admin_sessions (id, token_sha256, admin_id, csrf_token, created_at, expires_at)
		VALUES (?, ?, ?, ?, ?, ?)`, id, tokenSHA256, adminID, csrfToken, formatTime(now), formatTime(expires))
	if err != nil {
		return nil, fmt.Errorf("store: add admin session: %w", err)
	}
	return s.AdminSessionByToken(ctx, tokenSHA256)
}

// AdminSessionByToken returns the unexpired session whose token hashes to
// tokenSHA256, for an admin who is not disabled; otherwise an error wrapping
// ErrNotFound.
func (s *Store) AdminSessionByToken(ctx context.Context, tokenSHA256 string) (*AdminSession, error) {
	var ss AdminSession
	var created, expires string
	err := s.db.QueryRowContext(ctx, `
		SELECT s.id, s.token_sha256, s.admin_id, a.name, a.role, s.csrf_token, s.created_at, s.expires_at
		FROM admin_sessions s JOIN admins a ON a.id = s.admin_id
		WHERE s.token_sha256 = ? AND s.expires_at > ? AND a.disabled = 0`,
		tokenSHA256, formatTime(s.nowUTC())).Scan(&ss.ID, &ss.TokenSHA256, &ss.AdminID, &ss.AdminName, &ss.AdminRole,
		&ss.CSRFToken, &created, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: admin session %w", ErrNotFound)
	} else if err != nil {
		return nil, fmt.Errorf("store: admin session: %w", err)
	}
	if ss.CreatedAt, err = parseTime(created); err != nil {
		return nil, err
	}
	if ss.ExpiresAt, err = parseTime(expires); err != nil {
		return nil, err
	}
	return &ss, nil
}

// DeleteAdminSession ends the session whose token hashes to tokenSHA256 (a
// logout). Deleting a session that does not exist is not an error.
func (s *Store) DeleteAdminSession(ctx context.Context, tokenSHA256 string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM admin_sessions WHERE token_sha256 = ?`, tokenSHA256); err != nil {
		return fmt.Errorf("store: delete admin session: %w", err)
	}
	return nil
}

// DeleteExpiredWebRecords removes expired sessions and idempotency answers
// older than keepIdempotency, and returns how many rows went.
func (s *Store) DeleteExpiredWebRecords(ctx context.Context, keepIdempotency time.Duration) (int64, error) {
	now := s.nowUTC()
	var n int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, `DELETE FROM admin_sessions WHERE expires_at <= ?`, formatTime(now))
		if err != nil {
			return fmt.Errorf("store: expire sessions: %w", err)
		}
		a, _ := r.RowsAffected()
		r, err = tx.ExecContext(ctx, `DELETE FROM idempotency_keys WHERE created_at < ?`, formatTime(now.Add(-keepIdempotency)))
		if err != nil {
			return fmt.Errorf("store: expire idempotency keys: %w", err)
		}
		b, _ := r.RowsAffected()
		n = a + b
		return nil
	})
	return n, err
}

// TokenScope is what a console token may do. Each scope includes the ones
// before it.
type TokenScope string

// The scopes, narrowest first.
const (
	ScopeRead    TokenScope = "read"    // read every resource
	ScopeApprove TokenScope = "approve" // also decide approvals and re-check keys
	ScopeAdmin   TokenScope = "admin"   // also change agents, connections, grants, tokens, channels
)

// TokenScopes lists the scopes, narrowest first.
var TokenScopes = []TokenScope{ScopeRead, ScopeApprove, ScopeAdmin}

// DefaultTokenScope is a new token's scope unless asked otherwise: it can
// do what tokens did before scopes existed, and no more. Changing postern's
// configuration over the API takes a token made for it.
const DefaultTokenScope = ScopeApprove

// ParseTokenScope checks a scope word; "" is DefaultTokenScope.
func ParseTokenScope(s string) (TokenScope, error) {
	if s == "" {
		return DefaultTokenScope, nil
	}
	for _, sc := range TokenScopes {
		if string(sc) == s {
			return sc, nil
		}
	}
	return "", invalid("token scope %q: want read, approve or admin", s)
}

// Allows reports whether a token of scope t may do what needs scope need.
func (t TokenScope) Allows(need TokenScope) bool {
	rank := func(s TokenScope) int {
		for i, x := range TokenScopes {
			if x == s {
				return i
			}
		}
		return -1
	}
	return rank(t) >= 0 && rank(t) >= rank(need)
}

// CreateConsoleToken stores a console token of admin adminID by the hex
// SHA-256 of its value, with scope ("" for DefaultTokenScope).
func (s *Store) CreateConsoleToken(ctx context.Context, audit Audit, name, tokenSHA256, adminID string, scope TokenScope) (*ConsoleToken, error) {
	ctx, err := audit.bind(ctx)
	if err != nil {
		return nil, err
	}
	if err := ValidateName("token", name); err != nil {
		return nil, err
	}
	if len(tokenSHA256) != 64 {
		return nil, invalid("token %s: want a 64-digit token hash", name)
	}
	if adminID == "" {
		return nil, invalid("token %s: a token belongs to an admin", name)
	}
	scope, err = ParseTokenScope(string(scope))
	if err != nil {
		return nil, err
	}
	now := formatTime(s.nowUTC())
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO console_tokens (id, name, token_sha256, created_at, modified_at, admin_id, scope)
			VALUES (?, ?, ?, ?, ?, ?, ?)`, newID(prefixConsoleToken), name, tokenSHA256, now, now, adminID, string(scope))
		switch {
		case isUniqueViolation(err):
			return &ConflictError{Kind: "token", Value: name}
		case err != nil && isForeignKeyViolation(err):
			return notFound("admin", adminID)
		case err != nil:
			return fmt.Errorf("store: add token %s: %w", name, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s.consoleToken(ctx, `t.name = ?`, name)
}

// AssignConsoleToken makes the named token admin adminID's, so that its
// decisions are that admin's.
func (s *Store) AssignConsoleToken(ctx context.Context, audit Audit, name, adminID string) (*ConsoleToken, error) {
	ctx, err := audit.bind(ctx)
	if err != nil {
		return nil, err
	}
	now := formatTime(s.nowUTC())
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, `UPDATE console_tokens SET admin_id = ?, modified_at = ? WHERE name = ?`, adminID, now, name)
		if err != nil {
			if isForeignKeyViolation(err) {
				return notFound("admin", adminID)
			}
			return fmt.Errorf("store: assign token %s: %w", name, err)
		}
		if n, _ := r.RowsAffected(); n == 0 {
			return notFound("token", name)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s.consoleToken(ctx, `t.name = ?`, name)
}

// ConsoleTokenByName returns the named token (hash only).
func (s *Store) ConsoleTokenByName(ctx context.Context, name string) (*ConsoleToken, error) {
	t, err := s.consoleToken(ctx, `t.name = ?`, name)
	if errors.Is(err, ErrNotFound) {
		return nil, notFound("token", name)
	}
	return t, err
}

// ConsoleTokenByHash returns the token whose value hashes to tokenSHA256 and
// records that it was used; an unknown hash is an error wrapping ErrNotFound.
func (s *Store) ConsoleTokenByHash(ctx context.Context, tokenSHA256 string) (*ConsoleToken, error) {
	t, err := s.consoleToken(ctx, `t.token_sha256 = ?`, tokenSHA256)
	if err != nil {
		return nil, err
	}
	now := s.nowUTC()
	// Best effort: a failure to note the use must not refuse the call.
	if _, err := s.db.ExecContext(ctx, `UPDATE console_tokens SET last_used_at = ? WHERE id = ?`, formatTime(now), t.ID); err == nil {
		t.LastUsedAt = now
	}
	return t, nil
}

// RemoveConsoleToken deletes the named token; its bearer is refused at once.
func (s *Store) RemoveConsoleToken(ctx context.Context, audit Audit, name string) error {
	ctx, err := audit.bind(ctx)
	if err != nil {
		return err
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, `DELETE FROM console_tokens WHERE name = ?`, name)
		if err != nil {
			return fmt.Errorf("store: remove token %s: %w", name, err)
		}
		if n, _ := r.RowsAffected(); n == 0 {
			return notFound("token", name)
		}
		return nil
	})
}

// ListConsoleTokens returns every console token (hashes only), by name.
func (s *Store) ListConsoleTokens(ctx context.Context) ([]ConsoleToken, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+tokenColumns+tokenFrom+` ORDER BY t.name`)
	return collect(rows, err, "list tokens", deref(scanToken))
}

const tokenColumns = `t.id, t.name, t.token_sha256, t.created_at, t.modified_at, t.last_used_at,
	COALESCE(t.admin_id, ''), COALESCE(a.name, ''), t.scope,
	CASE WHEN a.disabled = 1 THEN '' ELSE COALESCE(a.role, '') END`

const tokenFrom = ` FROM console_tokens t LEFT JOIN admins a ON a.id = t.admin_id`

func scanToken(r rowScanner) (*ConsoleToken, error) {
	var t ConsoleToken
	var created, modified, used, scope, role string
	if err := r.Scan(&t.ID, &t.Name, &t.TokenSHA256, &created, &modified, &used, &t.AdminID, &t.AdminName, &scope, &role); err != nil {
		return nil, err
	}
	t.AdminRole = Role(role)
	t.Scope = TokenScope(scope)
	var err error
	if t.CreatedAt, err = parseTime(created); err != nil {
		return nil, err
	}
	if t.ModifiedAt, err = parseTime(modified); err != nil {
		return nil, err
	}
	if t.LastUsedAt, err = parseTime(used); err != nil {
		return nil, err
	}
	return &t, nil
}

func (s *Store) consoleToken(ctx context.Context, where string, arg string) (*ConsoleToken, error) {
	t, err := scanToken(s.db.QueryRowContext(ctx, `SELECT `+tokenColumns+tokenFrom+` WHERE `+where, arg))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: token %w", ErrNotFound)
	} else if err != nil {
		return nil, fmt.Errorf("store: token: %w", err)
	}
	return t, nil
}

// IdempotentResponse returns the remembered answer for (principal, key), or
// an error wrapping ErrNotFound when there is none.
func (s *Store) IdempotentResponse(ctx context.Context, principal, key string) (*IdempotentResponse, error) {
	var r IdempotentResponse
	var created string
	err := s.db.QueryRowContext(ctx, `SELECT request_sha256, status, body, created_at FROM idempotency_keys
		WHERE principal = ? AND key = ?`, principal, key).Scan(&r.RequestSHA256, &r.Status, &r.Body, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: idempotency key %w", ErrNotFound)
	} else if err != nil {
		return nil, fmt.Errorf("store: idempotency key: %w", err)
	}
	if r.CreatedAt, err = parseTime(created); err != nil {
		return nil, err
	}
	return &r, nil
}

// PutIdempotentResponse remembers the first answer for (principal, key). If
// an answer is already stored (a concurrent retry won), it returns that one
// and false; otherwise r and true.
func (s *Store) PutIdempotentResponse(ctx context.Context, principal, key string, r IdempotentResponse) (*IdempotentResponse, bool, error) {
	res, err := s.db.ExecContext(ctx, `INSERT INTO idempotency_keys (principal, key, request_sha256, status, body, created_at)
		VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (principal, key) DO NOTHING`,
		principal, key, r.RequestSHA256, r.Status, r.Body, formatTime(s.nowUTC()))
	if err != nil {
		return nil, false, fmt.Errorf("store: idempotency key: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		prev, err := s.IdempotentResponse(ctx, principal, key)
		return prev, false, err
	}
	return &r, true, nil
}
