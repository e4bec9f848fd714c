package web

import (
	"errors"
	"net/http"
	"strings"

	"github.com/postern/postern/manage"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
)

// grantCell is one agent × connection cell of the grants matrix.
type grantCell struct {
	Agent  string
	Alias  string
	Env    store.Env
	Exists bool        // false: the agent cannot see the connection
	Rules  store.Rules // the grant's, or the defaults a new grant would get
	// Scopes are the approvals whose active scope elevates the grant.
	Scopes []store.Approval
}

// grantRow is one agent's row of the matrix.
type grantRow struct {
	Agent    string
	Disabled bool
	Cells    []grantCell
}

type grantsData struct {
	Flash       *flash
	CSRF        string
	Connections []store.Connection
	Rows        []grantRow
}

func (s *Server) grantsPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	agents, conns, ok := s.agentsAndConnections(w, r)
	if !ok {
		return
	}
	grants, err := s.cfg.Store.ListElevatedGrants(ctx)
	if err != nil {
		s.serverError(w, r, "listing grants", err)
		return
	}
	type pair struct{ agent, conn string }
	byPair := make(map[pair]store.ElevatedGrant, len(grants))
	for _, g := range grants {
		byPair[pair{g.AgentID, g.ConnectionID}] = g
	}
	d := grantsData{Flash: flashFrom(r), CSRF: sessionFrom(ctx).CSRFToken, Connections: conns}
	for _, a := range agents {
		row := grantRow{Agent: a.Name, Disabled: a.Disabled}
		for _, c := range conns {
			cell := grantCell{Agent: a.Name, Alias: c.Alias, Env: c.Env, Rules: store.DefaultRules()}
			if g, ok := byPair[pair{a.ID, c.ID}]; ok {
				cell.Exists, cell.Rules, cell.Scopes = true, g.Rules, g.Scopes
			}
			row.Cells = append(row.Cells, cell)
		}
		d.Rows = append(d.Rows, row)
	}
	s.render(w, r, http.StatusOK, "grants.html", page("Grants", "grants", "", d))
}

// grantForm creates or changes one grant. The store checks the rules
// against the connection's environment (store.ValidateGrant) in the same
// transaction as the write; a refusal is shown to the admin, not a 500.
func (s *Server) grantForm(w http.ResponseWriter, r *http.Request) {
	agent, alias := strings.TrimSpace(r.PostFormValue("agent")), strings.TrimSpace(r.PostFormValue("alias"))
	read, write, destructive := store.Rule(r.PostFormValue("read")), store.Rule(r.PostFormValue("write")),
		store.Rule(r.PostFormValue("destructive"))
	g, err := s.cfg.Manager.SetGrant(r.Context(), webActor(r), agent, alias,
		manage.RulesChange{Read: &read, Write: &write, Destructive: &destructive})
	if err != nil {
		s.formStoreError(w, r, "/grants", "Grant of "+agent+" on "+alias+" not saved", err)
		return
	}
	admin := sessionFrom(r.Context()).AdminName
	s.cfg.Logger.Info().Str("admin", admin).Str("agent", agent).Str("alias", alias).
		Str("read", string(g.Rules.Read)).Str("write", string(g.Rules.Write)).
		Str("destructive", string(g.Rules.Destructive)).Msg("web: grant saved")
	s.redirectFlash(w, r, "/grants", flashOK, "Saved "+agent+" on "+alias+": read="+string(g.Rules.Read)+
		", write="+string(g.Rules.Write)+", destructive="+string(g.Rules.Destructive)+".")
}

// revokeScopeForm ends an approval's scope at once: the operations it let
// through are asked again.
func (s *Server) revokeScopeForm(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	sess := sessionFrom(r.Context())
	_, err := s.cfg.Engine.RevokeScope(r.Context(), id, policy.Decider{AdminID: sess.AdminID, Name: sess.AdminName})
	switch {
	case errors.Is(err, store.ErrNotFound):
		s.redirectFlash(w, r, "/grants", flashError, "There is no approval "+id+".")
		return
	case isRoleRefusal(err):
		s.roleRefused(w, r, err)
		return
	case errors.Is(err, store.ErrInvalid), errors.Is(err, policy.ErrInvalidAdmin):
		s.redirectFlash(w, r, "/grants", flashError, "The scope of "+id+" was not revoked: it has no active scope.")
		return
	case err != nil:
		s.serverError(w, r, "revoking the scope", err)
		return
	}
	s.cfg.Logger.Info().Str("admin", sess.AdminName).Str("approval", id).Msg("web: approval scope revoked")
	s.redirectFlash(w, r, "/grants", flashOK, "Ended the scope of "+id+": its operations are asked again.")
}

// revokeForm deletes one grant: the agent can no longer see the connection.
func (s *Server) revokeForm(w http.ResponseWriter, r *http.Request) {
	agent, alias := strings.TrimSpace(r.PostFormValue("agent")), strings.TrimSpace(r.PostFormValue("alias"))
	if _, err := s.cfg.Manager.RevokeGrant(r.Context(), webActor(r), agent, alias); err != nil {
		s.formStoreError(w, r, "/grants", "Grant of "+agent+" on "+alias+" not revoked", err)
		return
	}
	s.cfg.Logger.Info().Str("admin", sessionFrom(r.Context()).AdminName).Str("agent", agent).
		Str("alias", alias).Msg("web: grant revoked")
	s.redirectFlash(w, r, "/grants", flashOK, "Revoked the grant of "+agent+" on "+alias+".")
}
