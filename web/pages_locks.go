package web

import (
	"net/http"
	"strings"
	"time"

	"github.com/postern/postern/store"
)

// The Locks page: the locks that hold, a form to lock an agent or a
// connection (for a time or until unlocked, with a reason), and Unlock
// buttons. Locking and unlocking take the admin role (manage checks it) and
// apply at once.

type locksData struct {
	Flash       *flash
	CSRF        string
	Locks       []store.Lock
	Agents      []store.Agent
	Connections []store.Connection
}

func (s *Server) locksPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	locks, err := s.cfg.Manager.Locks(ctx)
	if err != nil {
		s.serverError(w, r, "listing locks", err)
		return
	}
	agents, conns, ok := s.agentsAndConnections(w, r)
	if !ok {
		return
	}
	d := locksData{Flash: flashFrom(r), CSRF: sessionFrom(ctx).CSRFToken, Locks: locks, Agents: agents, Connections: conns}
	s.render(w, r, http.StatusOK, "locks.html", page("Locks", "locks", "", d))
}

// lockForm locks what the form names: target is "agent:NAME" or
// "connection:ALIAS".
func (s *Server) lockForm(w http.ResponseWriter, r *http.Request) {
	kind, name, _ := strings.Cut(r.PostFormValue("target"), ":")
	var d time.Duration
	if f := strings.TrimSpace(r.PostFormValue("for")); f != "" {
		var err error
		if d, err = time.ParseDuration(f); err != nil || d <= 0 {
			s.redirectFlash(w, r, "/locks", flashError, "Not locked: the time must be a duration such as 30m or 2h, or empty to lock until unlocked.")
			return
		}
	}
	l, err := s.cfg.Manager.Lock(r.Context(), webActor(r), kind, name, d, strings.TrimSpace(r.PostFormValue("reason")))
	if err != nil {
		s.formStoreError(w, r, "/locks", "Not locked", err)
		return
	}
	s.cfg.Logger.Info().Str("admin", sessionFrom(r.Context()).AdminName).Str("kind", l.Kind).Str("name", l.TargetName).Msg("web: locked")
	s.redirectFlash(w, r, "/locks", flashOK, "Locked: "+l.Words()+". Its live sessions are being ended.")
}

func (s *Server) unlockForm(w http.ResponseWriter, r *http.Request) {
	kind, name := r.PathValue("kind"), r.PathValue("name")
	if _, err := s.cfg.Manager.Unlock(r.Context(), webActor(r), kind, name); err != nil {
		s.formStoreError(w, r, "/locks", "Not unlocked", err)
		return
	}
	s.cfg.Logger.Info().Str("admin", sessionFrom(r.Context()).AdminName).Str("kind", kind).Str("name", name).Msg("web: unlocked")
	s.redirectFlash(w, r, "/locks", flashOK, "Unlocked "+kind+" "+name+".")
}
