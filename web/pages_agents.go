package web

import (
	"net/http"
	"strings"
	"time"

	"github.com/postern/postern/model"
)

// The Agents page: every agent with its keys, and forms to register one
// (pasting its public key), give it another key, remove a key, disable or
// enable it and remove it. Changes go through package manage and are
// audited as the logged-in admin.

// agentRow is one agent as the agents page shows it.
type agentRow struct {
	Name      string
	Disabled  bool
	Keys      []model.AgentKey
	Grants    int
	CreatedAt time.Time
}

type agentsData struct {
	Flash *flash
	CSRF  string
	Rows  []agentRow
}

func (s *Server) agentsPage(w http.ResponseWriter, r *http.Request) {
	agents, err := s.cfg.Store.ListAgents(r.Context())
	if err != nil {
		s.serverError(w, r, "listing agents", err)
		return
	}
	grants, err := s.cfg.Store.ListGrants(r.Context())
	if err != nil {
		s.serverError(w, r, "listing grants", err)
		return
	}
	perAgent := map[string]int{}
	for _, g := range grants {
		perAgent[g.AgentID]++
	}
	d := agentsData{Flash: flashFrom(r), CSRF: sessionFrom(r.Context()).CSRFToken}
	for _, a := range agents {
		d.Rows = append(d.Rows, agentRow{Name: a.Name, Disabled: a.Disabled, Keys: model.AgentOf(a).Keys,
			Grants: perAgent[a.ID], CreatedAt: a.CreatedAt})
	}
	s.render(w, r, http.StatusOK, "agents.html", page("Agents", "agents", "", d))
}

func (s *Server) addAgentForm(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimSpace(r.PostFormValue("name"))
	keys := formLines(r.PostFormValue("keys"))
	if len(keys) == 0 {
		s.redirectFlash(w, r, "/agents", flashError, "Agent "+name+" not added: paste its public key (an id_ed25519.pub line).")
		return
	}
	a, err := s.cfg.Manager.AddAgent(r.Context(), webActor(r), name, keys)
	if err != nil {
		s.formStoreError(w, r, "/agents", "Agent "+name+" not added", err)
		return
	}
	s.cfg.Logger.Info().Str("admin", sessionFrom(r.Context()).AdminName).Str("agent", a.Name).Msg("web: agent added")
	s.redirectFlash(w, r, "/agents", flashOK, "Added agent "+a.Name+" with key "+a.Keys[0].Fingerprint+
		". Grant it connections on the Grants page.")
}

func (s *Server) addAgentKeyForm(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	keys := formLines(r.PostFormValue("key"))
	if len(keys) != 1 {
		s.redirectFlash(w, r, "/agents", flashError, "No key added to "+name+": paste one public key.")
		return
	}
	a, err := s.cfg.Manager.AddAgentKey(r.Context(), webActor(r), name, keys[0])
	if err != nil {
		s.formStoreError(w, r, "/agents", "No key added to "+name, err)
		return
	}
	s.redirectFlash(w, r, "/agents", flashOK, "Added key "+a.Keys[len(a.Keys)-1].Fingerprint+" to agent "+name+".")
}

func (s *Server) removeAgentKeyForm(w http.ResponseWriter, r *http.Request) {
	name, fp := r.PathValue("name"), r.PostFormValue("fingerprint")
	if _, err := s.cfg.Manager.RemoveAgentKey(r.Context(), webActor(r), name, fp); err != nil {
		s.formStoreError(w, r, "/agents", "Key of "+name+" not removed", err)
		return
	}
	s.redirectFlash(w, r, "/agents", flashOK, "Removed key "+fp+" from agent "+name+".")
}

// agentDisableForm disables (disable true) or enables an agent.
func (s *Server) agentDisableForm(disable bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		done := map[bool]string{true: "Disabled", false: "Enabled"}[disable]
		if _, err := s.cfg.Manager.SetAgentDisabled(r.Context(), webActor(r), name, disable); err != nil {
			s.formStoreError(w, r, "/agents", "Agent "+name+" not changed", err)
			return
		}
		s.redirectFlash(w, r, "/agents", flashOK, done+" agent "+name+".")
	}
}

func (s *Server) removeAgentForm(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if !formBool(r, "confirm") {
		s.redirectFlash(w, r, "/agents", flashError, "Agent "+name+" not removed: tick the box to confirm.")
		return
	}
	if _, err := s.cfg.Manager.RemoveAgent(r.Context(), webActor(r), name); err != nil {
		s.formStoreError(w, r, "/agents", "Agent "+name+" not removed", err)
		return
	}
	s.cfg.Logger.Info().Str("admin", sessionFrom(r.Context()).AdminName).Str("agent", name).Msg("web: agent removed")
	s.redirectFlash(w, r, "/agents", flashOK, "Removed agent "+name+" with its keys and grants.")
}
