package web

import (
	"context"
	"errors"
	"github.com/postern/postern/recipes"
	"net/http"
	"strconv"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/postern/postern/store"
)

// recheckTimeout bounds a Re-check button's key check, on top of the
// check's own dial and handshake deadlines: the admin waits for the answer.
const recheckTimeout = 30 * time.Second

// connectionRow is one connection as the page shows it. It copies the
// fields to show rather than embedding store.Connection, so that nothing
// but fingerprints of the pinned host keys can reach the template; the
// private key is never read in this package.
type connectionRow struct {
	Alias        string
	Addr         string
	User         string
	Env          store.Env
	Recipe       string // the recipe's key, "" when none was chosen
	RecipeName   string
	KeyStatus    store.KeyStatus
	KeyMessage   string
	KeyCheckedAt time.Time
	Fingerprints []string // SHA256 fingerprints of the pinned host keys
	HostKeyError string   // why a pinned key could not be read, if one could not
	Grants       int
}

type connectionsData struct {
	Flash    *flash
	Rows     []connectionRow
	CanCheck bool // Config.CheckKey is set: show the Re-check buttons
	CSRF     string
}

func (s *Server) connectionsPage(w http.ResponseWriter, r *http.Request) {
	conns, err := s.cfg.Store.ListConnections(r.Context())
	if err != nil {
		s.serverError(w, r, "listing connections", err)
		return
	}
	grants, err := s.cfg.Store.ListGrants(r.Context())
	if err != nil {
		s.serverError(w, r, "listing grants", err)
		return
	}
	perConn := map[string]int{}
	for _, g := range grants {
		perConn[g.ConnectionID]++
	}
	d := connectionsData{Flash: flashFrom(r), CanCheck: s.cfg.CheckKey != nil, CSRF: sessionFrom(r.Context()).CSRFToken}
	for _, c := range conns {
		row := connectionRow{
			Alias: c.Alias, Addr: c.Addr(), User: c.User, Env: c.Env, Recipe: c.Recipe,
			KeyStatus: c.KeyStatus, KeyMessage: c.KeyMessage, KeyCheckedAt: c.KeyCheckedAt,
			Grants: perConn[c.ID],
		}
		if rc := s.cfg.Catalog.Get(c.Recipe); rc != nil {
			row.RecipeName = rc.Name
		}
		keys, err := c.PinnedKeys()
		if err != nil {
			row.HostKeyError = "a pinned host key cannot be read"
		}
		for _, k := range keys {
			row.Fingerprints = append(row.Fingerprints, ssh.FingerprintSHA256(k))
		}
		d.Rows = append(d.Rows, row)
	}
	s.render(w, r, http.StatusOK, "connections.html", page("Connections", "connections", "", d))
}

// recheckForm runs the connection's key check (the Re-check button) and
// shows what it proved. Config.CheckKey records the result itself.
func (s *Server) recheckForm(w http.ResponseWriter, r *http.Request) {
	alias := r.PathValue("alias")
	if s.cfg.CheckKey == nil {
		s.redirectFlash(w, r, "/connections", flashError, "Key checks are not available on this server.")
		return
	}
	if _, err := s.cfg.Store.ConnectionByAlias(r.Context(), alias); err != nil {
		if msg, ok := userMessage(err); ok {
			s.redirectFlash(w, r, "/connections", flashError, msg)
			return
		}
		s.serverError(w, r, "reading the connection", err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), recheckTimeout)
	defer cancel()
	res, err := s.cfg.CheckKey(ctx, alias)
	if err != nil {
		if r.Context().Err() != nil {
			return
		}
		s.cfg.Logger.Warn().Err(err).Str("alias", alias).Msg("web: key check")
		msg := err.Error()
		if errors.Is(err, context.DeadlineExceeded) {
			msg = "no answer within " + strconv.Itoa(int(recheckTimeout/time.Second)) + " seconds"
		}
		s.redirectFlash(w, r, "/connections", flashError, "Key check of "+alias+" failed: "+msg)
		return
	}
	kind := flashOK
	if res.Status != recipes.StatusOK {
		kind = flashError
	}
	text := "Key check of " + alias + ": " + string(res.Status)
	if res.Message != "" {
		text += " — " + res.Message
	}
	s.redirectFlash(w, r, "/connections", kind, text)
}

// agentRow is one agent as the agents page shows it.
type agentRow struct {
	Name         string
	Disabled     bool
	Fingerprints []string
	Grants       int
	CreatedAt    time.Time
}

type agentsData struct {
	Rows []agentRow
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
	var d agentsData
	for _, a := range agents {
		row := agentRow{Name: a.Name, Disabled: a.Disabled, Grants: perAgent[a.ID], CreatedAt: a.CreatedAt}
		for _, k := range a.Keys {
			row.Fingerprints = append(row.Fingerprints, k.Fingerprint)
		}
		d.Rows = append(d.Rows, row)
	}
	s.render(w, r, http.StatusOK, "agents.html", page("Agents", "agents", "", d))
}
