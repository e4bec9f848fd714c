package web

import (
	"errors"
	"net/http"
	"time"

	"github.com/postern/postern/manage"
	"github.com/postern/postern/store"
)

// Roles on the page (issue 23). An admin's role says what the admin may do
// through every door: a viewer sees every page and decides nothing, an
// approver decides approvals and re-checks keys, an admin also changes
// configuration, an owner also manages admins. The session carries the
// role as the store has it at each request (AdminSessionByToken reads it
// with the session), so a role lowered counts at the next click.
//
// The page refuses a form the role does not allow before it reads it
// (needRole), as the API refuses a token's scope before its handler runs;
// package manage and the store check again at the change, and their
// refusal is mapped too (isRoleRefusal), so that the page's table of roles
// is a courtesy to the admin and never the only guard.

// isRoleRefusal reports whether err is a refusal because of the actor's
// role: manage's *RoleError for a change, the store's ErrForbidden for a
// decision.
func isRoleRefusal(err error) bool {
	var re *manage.RoleError
	return errors.As(err, &re) || errors.Is(err, store.ErrForbidden)
}

// needRole lets a form's POST through only for a session whose admin has
// at least role need; any other answers 403 and changes nothing. It runs
// inside requireAdmin, which has checked the session and CSRF token.
func (s *Server) needRole(need store.Role, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sess := sessionFrom(r.Context())
		if sess == nil || !sess.AdminRole.AtLeast(need) {
			have := "no role"
			if sess != nil && sess.AdminRole != "" {
				have = "the " + string(sess.AdminRole) + " role"
			}
			s.cfg.Logger.Info().Str("admin", sessionAdmin(sess)).Str("path", r.URL.Path).Str("need", string(need)).
				Str("request_id", requestID(r.Context())).Msg("web: form refused for the admin's role")
			http.Error(w, "refused: this takes the "+string(need)+" role, and you have "+have, http.StatusForbidden)
			return
		}
		next(w, r)
	}
}

// sessionAdmin is the session's admin name for a log line, "" without one.
func sessionAdmin(sess *store.AdminSession) string {
	if sess == nil {
		return ""
	}
	return sess.AdminName
}

// canDecide reports whether the session's admin may decide approvals (the
// approvals page hides the decision forms otherwise).
func canDecide(sess *store.AdminSession) bool {
	return sess != nil && sess.AdminRole.AtLeast(store.RoleApprover)
}

// roleRefused answers 403 to a form whose change manage or the store
// refused for the admin's role (a role lowered between the page and the
// click), with the refusal's words.
func (s *Server) roleRefused(w http.ResponseWriter, r *http.Request, err error) {
	msg, ok := userMessage(err)
	if !ok {
		msg = "Your role does not allow this."
	}
	s.cfg.Logger.Info().Str("admin", sessionAdmin(sessionFrom(r.Context()))).Str("path", r.URL.Path).
		Str("request_id", requestID(r.Context())).Msg("web: change refused for the admin's role")
	http.Error(w, "refused: "+msg, http.StatusForbidden)
}

// heldFlash answers a form whose change waits for a second admin with a
// notice, not an error: nothing failed, and nothing changed yet.
func (s *Server) heldFlash(w http.ResponseWriter, r *http.Request, next string, held *manage.HeldError) {
	s.cfg.Logger.Info().Str("admin", sessionAdmin(sessionFrom(r.Context()))).Str("change", held.Request.ID).
		Msg("web: change held for a second admin")
	s.redirectFlash(w, r, next, flashNotice, heldText(held))
}

// heldText says that a change waits for a second admin, and where.
func heldText(held *manage.HeldError) string {
	c := held.Request
	return "Not changed yet: " + c.Summary + " waits for a second admin as change request " + c.ID +
		" (until " + c.ExpiresAt.UTC().Format(time.RFC3339) + "). Another admin approves or denies it on the Approvals page."
}
