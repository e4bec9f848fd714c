package web

import (
	"errors"
	"net/http"
	"strings"

	"github.com/postern/postern/internal/usererr"
	"github.com/postern/postern/manage"
	"github.com/postern/postern/store"
)

// The Tokens page: the console tokens of the REST API with their owners,
// scopes and last use, a form to make one for the logged-in admin, and
// Revoke buttons. A new token is shown once, in the answer to the form that
// made it: it never travels in a redirect's URL, where browser history and
// logs would keep it, and postern keeps only its SHA-256.

type tokensData struct {
	Flash  *flash
	CSRF   string
	Tokens []store.ConsoleToken
	Scopes []store.TokenScope
	// New is the token just made and its value, shown this once.
	New      *store.ConsoleToken
	NewValue string
	// Held is a token just asked for that waits for a second admin: its
	// value is shown this once too, and opens nothing until approved.
	Held *heldTokenView
}

// heldTokenView is a token whose making waits for a second admin.
type heldTokenView struct {
	Name, Scope, Value, ChangeID string
	Text                         string // heldText: what waits, and until when
}

func (s *Server) tokensData(r *http.Request) (tokensData, error) {
	list, err := s.cfg.Store.ListConsoleTokens(r.Context())
	return tokensData{Flash: flashFrom(r), CSRF: sessionFrom(r.Context()).CSRFToken, Tokens: list,
		Scopes: store.TokenScopes}, err
}

func (s *Server) tokensPage(w http.ResponseWriter, r *http.Request) {
	d, err := s.tokensData(r)
	if err != nil {
		s.serverError(w, r, "listing tokens", err)
		return
	}
	s.render(w, r, http.StatusOK, "tokens.html", page("Tokens", "tokens", "", d))
}

// addTokenForm makes a token of the logged-in admin and shows it once.
func (s *Server) addTokenForm(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimSpace(r.PostFormValue("name"))
	sess := sessionFrom(r.Context())
	// The form names no admin: the token is the logged-in admin's, and a
	// posted "admin" field is refused, not ignored.
	value, t, err := s.cfg.Manager.AddToken(r.Context(), webActor(r), manage.TokenMaker{Admin: sess.AdminID}, name,
		strings.TrimSpace(r.PostFormValue("admin")), store.TokenScope(r.PostFormValue("scope")))
	var refused *manage.TokenRefusedError
	var held *manage.HeldError
	if errors.As(err, &held) {
		s.cfg.Logger.Info().Str("admin", sess.AdminName).Str("token", name).Str("change", held.Request.ID).
			Msg("web: token held for a second admin")
		d, err := s.tokensData(r)
		if err != nil {
			s.serverError(w, r, "listing tokens", err)
			return
		}
		d.Held = &heldTokenView{Name: name, Scope: r.PostFormValue("scope"), Value: value, ChangeID: held.Request.ID,
			Text: heldText(held)}
		s.render(w, r, http.StatusOK, "tokens.html", page("Tokens", "tokens", "", d))
		return
	}
	if errors.As(err, &refused) {
		s.redirectFlash(w, r, "/tokens", flashError, "Token "+name+" not made: "+usererr.Message(refused, "the token is refused"))
		return
	}
	if err != nil {
		s.formStoreError(w, r, "/tokens", "Token "+name+" not made", err)
		return
	}
	s.cfg.Logger.Info().Str("admin", sess.AdminName).Str("token", t.Name).Str("scope", string(t.Scope)).Msg("web: token added")
	d, err := s.tokensData(r)
	if err != nil {
		s.serverError(w, r, "listing tokens", err)
		return
	}
	d.New, d.NewValue = t, value
	s.render(w, r, http.StatusOK, "tokens.html", page("Tokens", "tokens", "", d))
}

func (s *Server) removeTokenForm(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if _, err := s.cfg.Manager.RemoveToken(r.Context(), webActor(r), name); err != nil {
		s.formStoreError(w, r, "/tokens", "Token "+name+" not revoked", err)
		return
	}
	s.cfg.Logger.Info().Str("admin", sessionFrom(r.Context()).AdminName).Str("token", name).Msg("web: token revoked")
	s.redirectFlash(w, r, "/tokens", flashOK, "Revoked token "+name+": its bearer is refused from now on.")
}
