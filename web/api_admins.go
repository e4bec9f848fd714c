package web

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"golang.org/x/crypto/argon2"

	"github.com/postern/postern/model"
	"github.com/postern/postern/store"
)

// Admins over the API (issue 23): POST /v1/admins adds an admin and
// PATCH /v1/admins/{id} changes an admin's role, so that REST, the page and
// `postern admin add NAME --role R` agree. Both go through package manage,
// which wants the owner role (403 insufficient_role otherwise), audits the
// change as the token's admin, and holds for a second admin what widens
// power: a new admin or owner, a raised role (202 with the change). A new
// approver or viewer, and a lowered role, apply at once.
//
// The password is hashed here (HashPassword) as soon as it is read, and
// goes nowhere else: not into an answer, a log line, an error or the
// Idempotency-Key's kept request sum (apiPasswordRequestSum).

// apiAdminBody is the body of POST /v1/admins.
type apiAdminBody struct {
	Name     string `json:"name"`
	Password string `json:"password"` // at least MinPasswordLength characters; never shown again
	Role     string `json:"role"`     // viewer, approver (the default), admin or owner
}

// apiAdminPatch is the body of PATCH /v1/admins/{id}.
type apiAdminPatch struct {
	Role string `json:"role"`
}

// apiCheckPassword refuses a password HashPassword would refuse, with the
// CLI's words and the field's name, and without the password.
func apiCheckPassword(pw string) error {
	switch n := len(pw); {
	case n == 0:
		return apiBadBody("password", "give the new admin's password")
	case n < MinPasswordLength:
		return apiBadBody("password", fmt.Sprintf("the password has %d characters; want at least %d", n, MinPasswordLength))
	case n > maxPasswordLength:
		return apiBadBody("password", fmt.Sprintf("the password is longer than %d bytes", maxPasswordLength))
	}
	return nil
}

func (s *Server) apiCreateAdmin(r *http.Request, c *apiCall, body []byte) (int, any, error) {
	var in apiAdminBody
	if err := apiDecodeBody(r, body, &in); err != nil {
		return 0, nil, err
	}
	// The cheap checks come before the hash, which costs tens of
	// milliseconds and 19 MiB.
	role, err := store.ParseRole(in.Role)
	if err != nil {
		return 0, nil, apiBadBody("role", "want viewer, approver, admin or owner")
	}
	if err := apiCheckPassword(in.Password); err != nil {
		return 0, nil, err
	}
	hash, err := HashPassword(in.Password)
	if err != nil {
		// apiCheckPassword has refused every password HashPassword
		// refuses; its error names no password either way.
		return 0, nil, apiBadBody("password", "the password is refused")
	}
	a, err := s.cfg.Manager.AddAdmin(r.Context(), apiActor(r, c), in.Name, hash, role)
	if err != nil {
		return 0, nil, err
	}
	s.cfg.Logger.Info().Str("new_admin", a.Name).Str("role", string(a.Role)).Str("admin", c.token.AdminName).
		Str("token", c.token.Name).Str("request_id", requestID(r.Context())).Msg("web: api admin added")
	return http.StatusCreated, model.AdminOf(*a), nil
}

func (s *Server) apiUpdateAdmin(r *http.Request, c *apiCall, body []byte) (int, any, error) {
	var in apiAdminPatch
	if err := apiDecodeBody(r, body, &in); err != nil {
		return 0, nil, err
	}
	if in.Role == "" {
		return 0, nil, apiBadBody("role", "give the admin's new role: viewer, approver, admin or owner")
	}
	role, err := store.ParseRole(in.Role)
	if err != nil {
		return 0, nil, apiBadBody("role", "want viewer, approver, admin or owner")
	}
	ref := r.PathValue("id")
	cur, err := s.cfg.Store.ResolveAdmin(r.Context(), ref)
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil, apiNotFound("admin", ref)
	} else if err != nil {
		return 0, nil, err
	}
	a, err := s.cfg.Manager.SetAdminRole(r.Context(), apiActor(r, c), cur.Name, role)
	if err != nil {
		return 0, nil, err
	}
	s.cfg.Logger.Info().Str("target_admin", a.Name).Str("role", string(a.Role)).Str("admin", c.token.AdminName).
		Str("token", c.token.Name).Str("request_id", requestID(r.Context())).Msg("web: api admin role changed")
	return http.StatusOK, model.AdminOf(*a), nil
}

// apiPasswordRequestSum binds an Idempotency-Key to a POST /v1/admins
// without keeping a fast hash of the password. apiRequestSum's SHA-256 of
// the body, kept in the database for idempotencyKeep, would let whoever
// reads a copy of it try a dictionary of passwords at SHA-256's speed,
// around the argon2id that protects the admin's own hash. Here the
// password's value is replaced by its argon2id (HashPassword's cost) salted
// with the principal and the key, so that a retry with the same body still
// matches and a guess costs what a guess against the admin's hash does.
// A body that is not a JSON object holds no field to find: it is bound as
// "unreadable", and is refused 400 whatever it is.
func apiPasswordRequestSum(r *http.Request, keyed string, body []byte) string {
	h := sha256.New()
	h.Write([]byte(r.Method + "\n" + r.URL.Path + "\n"))
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		h.Write([]byte("unreadable"))
		return hex.EncodeToString(h.Sum(nil))
	}
	if pw, ok := fields["password"]; ok {
		salt := sha256.Sum256([]byte("postern idempotency password\x00" + keyed))
		key := argon2.IDKey(pw, salt[:], argonTime, argonMemoryKiB, argonThreads, argonKeyLen)
		fields["password"], _ = json.Marshal(hex.EncodeToString(key))
	}
	canon, _ := json.Marshal(fields) // keys sorted; RawMessage values as sent
	h.Write(canon)
	return hex.EncodeToString(h.Sum(nil))
}
