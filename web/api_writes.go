package web

import (
	"errors"
	"net/http"
	"strings"

	"github.com/postern/postern/internal/usererr"
	"github.com/postern/postern/manage"
	"github.com/postern/postern/model"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
)

// Changes over the API: agents, connections (with pin, rotate
// and generated keys), grants, tokens and notification channels. Every one
// needs a token of scope admin that belongs to an admin, takes an
// Idempotency-Key (apiWriteRoute), and goes through package manage, which
// checks it, makes it and audits it in the same transaction, as for the CLI
// and the page. The audit row names the token's admin, "via api" and the
// token.

// apiActor is who a change over the API is audited as, and what it may
// do: the token's admin, with the token's scope narrowed to that admin's
// role (apiRole; manage narrows it again to the role it reads at the
// change).
func apiActor(r *http.Request, c *apiCall) policy.Actor {
	return policy.Actor{Name: c.token.AdminName, AdminID: c.token.AdminID, Role: apiRole(c.token), Via: "api",
		Token: c.token.Name, Addr: clientAddr(r)}
}

// apiRole is what a change made with tok may do: ConsoleToken.Role, the
// narrower of its scope and its admin's role, except that an owner's token
// of scope admin, the widest scope there is, acts as an owner. Without it
// no token could reach the owner role (scope admin alone means the admin
// role), and POST /v1/admins and PATCH /v1/admins/{id} would refuse every
// caller, so that REST could not do what `postern admin add` and the page
// do. It widens nothing else: every other change needs the admin role at
// most, and manage bounds the role again by the one it reads at the change,
// so an owner lowered since the call began no longer acts as one.
func apiRole(tok *store.ConsoleToken) store.Role {
	if tok.Scope == store.ScopeAdmin && tok.AdminRole == store.RoleOwner {
		return store.RoleOwner
	}
	return tok.Role()
}

// apiDecodeBody reads a change's JSON body into v: the media type checked,
// unknown fields refused. An empty body is an empty object.
func apiDecodeBody(r *http.Request, body []byte, v any) error {
	if len(strings.TrimSpace(string(body))) == 0 {
		body = []byte("{}")
	}
	if err := apiCheckJSONType(r); err != nil {
		return err
	}
	return apiDecodeStrict(body, v)
}

// apiChangeError maps what a change met to an answer: input the store or
// manager refused is 400 (409 for a name taken, 404 for a record that is
// not there), a change refused after its key check 422, one the caller's
// role does not allow 403 insufficient_role; anything else stays an error
// for apiErrorAnswer's 503. A change held for a second admin is no error:
// apiWriteRoute answers it 202 before it gets here.
func apiChangeError(err error) error {
	var ae *apiError
	var ns *manage.NotStoredError
	var scan *manage.HostKeyScanError
	var refused *manage.TokenRefusedError
	var nc *manage.NotCommittedError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &nc):
		return &apiError{Status: http.StatusUnprocessableEntity, Code: "staged_key_not_proved", Message: usererr.Message(nc, "the staged key is not proved")}
	case isRoleRefusal(err):
		return &apiError{Status: http.StatusForbidden, Code: "insufficient_role",
			Message: usererr.Message(err, "your role does not allow this")}
	case errors.As(err, &refused):
		return &apiError{Status: http.StatusForbidden, Code: refused.Code, Field: refused.Field,
			Message: usererr.Message(refused, "the token is refused")}
	case errors.As(err, &ns):
		code := "key_not_proved"
		if ns.Mismatch() {
			code = "host_key_mismatch"
		}
		msg := usererr.Message(ns, "nothing was stored")
		if !ns.Mismatch() {
			msg += "; allow_unverified stores a connection whose target is not ready yet"
		}
		return &apiError{Status: http.StatusUnprocessableEntity, Code: code, Message: msg}
	case errors.As(err, &scan):
		return &apiError{Status: http.StatusUnprocessableEntity, Code: "host_key_unavailable",
			Field: "accept_new_host_key", Message: usererr.Message(scan, "the host key could not be fetched")}
	case errors.Is(err, policy.ErrInvalidText):
		// Text one person types for another: policy's words exactly, as
		// every door shows them (the deny route, the CLI, apply).
		return &apiError{Status: http.StatusBadRequest, Code: "invalid_body", Message: usererr.Message(err, "the text is refused")}
	}
	msg, ok := userMessage(err)
	switch {
	case !ok:
		return err
	case errors.Is(err, store.ErrDuplicate):
		return &apiError{Status: http.StatusConflict, Code: "already_exists", Message: msg}
	case errors.Is(err, store.ErrNotFound):
		return &apiError{Status: http.StatusNotFound, Code: "not_found", Message: msg}
	}
	return &apiError{Status: http.StatusBadRequest, Code: "invalid_body", Message: msg}
}

// --- agents ---

// apiAgentBody is the body of POST /v1/agents.
type apiAgentBody struct {
	Name string   `json:"name"`
	Keys []string `json:"keys"` // authorized_keys lines, at least one
}

// apiAgentPatch is the body of PATCH /v1/agents/{id}.
type apiAgentPatch struct {
	Disabled *bool     `json:"disabled"`
	Keys     *[]string `json:"keys"` // the agent's keys from now on: missing ones added, others removed
}

func (s *Server) apiCreateAgent(r *http.Request, c *apiCall, body []byte) (int, any, error) {
	var in apiAgentBody
	if err := apiDecodeBody(r, body, &in); err != nil {
		return 0, nil, err
	}
	if len(in.Keys) == 0 {
		return 0, nil, apiBadBody("keys", "give at least one public key (an authorized_keys line)")
	}
	a, err := s.cfg.Manager.AddAgent(r.Context(), apiActor(r, c), in.Name, in.Keys)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, model.AgentOf(*a), nil
}

// agentByRef reads the agent named by the path's {id} (its id or name).
func (s *Server) agentByRef(r *http.Request) (*store.Agent, error) {
	ref := r.PathValue("id")
	a, err := apiByIDOrName(r.Context(), ref, s.cfg.Store.AgentByID, s.cfg.Store.AgentByName)
	if errors.Is(err, store.ErrNotFound) {
		return nil, apiNotFound("agent", ref)
	}
	return a, err
}

func (s *Server) apiUpdateAgent(r *http.Request, c *apiCall, body []byte) (int, any, error) {
	var in apiAgentPatch
	if err := apiDecodeBody(r, body, &in); err != nil {
		return 0, nil, err
	}
	a, err := s.agentByRef(r)
	if err != nil {
		return 0, nil, err
	}
	if in.Disabled == nil && in.Keys == nil {
		return 0, nil, apiBadBody("", "nothing to change: give disabled or keys")
	}
	if in.Keys != nil {
		if a, err = s.cfg.Manager.SetAgentKeys(r.Context(), apiActor(r, c), a.Name, *in.Keys); err != nil {
			return 0, nil, err
		}
	}
	if in.Disabled != nil && *in.Disabled != a.Disabled {
		if a, err = s.cfg.Manager.SetAgentDisabled(r.Context(), apiActor(r, c), a.Name, *in.Disabled); err != nil {
			return 0, nil, err
		}
	}
	return http.StatusOK, model.AgentOf(*a), nil
}

func (s *Server) apiDeleteAgent(r *http.Request, c *apiCall, body []byte) (int, any, error) {
	if err := apiNoBody(body); err != nil {
		return 0, nil, err
	}
	a, err := s.agentByRef(r)
	if err != nil {
		return 0, nil, err
	}
	if a, err = s.cfg.Manager.RemoveAgent(r.Context(), apiActor(r, c), a.Name); err != nil {
		return 0, nil, err
	}
	return http.StatusOK, model.AgentOf(*a), nil
}

// --- connections ---

// apiConnectionBody is the body of POST /v1/connections.
type apiConnectionBody struct {
	Alias             string   `json:"alias"`
	Host              string   `json:"host"`
	Port              int      `json:"port"`
	User              string   `json:"user"`
	Env               string   `json:"env"`
	Recipe            string   `json:"recipe"`
	HostKeys          []string `json:"host_keys"`
	AcceptNewHostKey  bool     `json:"accept_new_host_key"`
	PrivateKey        string   `json:"private_key"`
	GenerateKey       bool     `json:"generate_key"`
	ReadSandbox       string   `json:"read_sandbox"`
	ReadSandboxReason string   `json:"read_sandbox_reason"`
	Record            string   `json:"record"`
	AllowUnverified   bool     `json:"allow_unverified"`
}

// apiConnectionPatch is the body of PATCH /v1/connections/{id}.
type apiConnectionPatch struct {
	Host              *string `json:"host"`
	Port              *int    `json:"port"`
	User              *string `json:"user"`
	Env               *string `json:"env"`
	Recipe            *string `json:"recipe"`
	ReadSandbox       *string `json:"read_sandbox"`
	ReadSandboxReason string  `json:"read_sandbox_reason"`
	Record            *string `json:"record"`
	AllowUnverified   bool    `json:"allow_unverified"`
}

// apiPinBody is the body of POST /v1/connections/{id}/pin.
type apiPinBody struct {
	HostKeys         []string `json:"host_keys"`
	AcceptNewHostKey bool     `json:"accept_new_host_key"`
	AllowUnverified  bool     `json:"allow_unverified"`
}

// apiRotateBody is the body of POST /v1/connections/{id}/rotate-key:
// stage a key (private_key or generate), commit or abort the staged one,
// or all of it with generate and install.
type apiRotateBody struct {
	PrivateKey string `json:"private_key"`
	Generate   bool   `json:"generate"`
	Install    bool   `json:"install"`
	Commit     bool   `json:"commit"`
	Abort      bool   `json:"abort"`
}

func (s *Server) apiCreateConnection(r *http.Request, c *apiCall, body []byte) (int, any, error) {
	var in apiConnectionBody
	if err := apiDecodeBody(r, body, &in); err != nil {
		return 0, nil, err
	}
	env := store.EnvDev
	if in.Env != "" {
		e, err := store.ParseEnv(in.Env)
		if err != nil {
			return 0, nil, apiBadBody("env", "want dev, test, staging or production")
		}
		env = e
	}
	rs := store.ReadSandboxAuto
	if in.ReadSandbox != "" {
		var err error
		if rs, err = store.ParseReadSandbox(in.ReadSandbox); err != nil {
			return 0, nil, apiBadBody("read_sandbox", "want auto, require or off")
		}
	}
	rec := store.RecordOff
	if in.Record != "" {
		var err error
		if rec, err = store.ParseRecord(in.Record); err != nil {
			return 0, nil, apiBadBody("record", "want off, exec or all")
		}
	}
	spec := manage.ConnectionSpec{Alias: in.Alias, Host: in.Host, Port: in.Port, User: in.User, Env: env,
		Recipe: in.Recipe, HostKeys: in.HostKeys, AcceptNewHostKey: in.AcceptNewHostKey,
		PrivateKey: []byte(in.PrivateKey), GenerateKey: in.GenerateKey,
		ReadSandbox: rs, ReadSandboxReason: in.ReadSandboxReason, Record: rec}
	defer clear(spec.PrivateKey)
	res, err := s.cfg.Manager.AddConnection(r.Context(), apiActor(r, c), spec,
		manage.CheckOptions{AllowUnverified: in.AllowUnverified})
	if err != nil {
		return 0, nil, err
	}
	s.cfg.Logger.Info().Str("alias", in.Alias).Str("admin", c.token.AdminName).Str("token", c.token.Name).
		Str("key_status", string(res.Conn.KeyStatus)).Str("request_id", requestID(r.Context())).Msg("web: api connection added")
	return http.StatusCreated, res.Model(), nil
}

// apiEditConnection makes an edit of the connection the path names.
func (s *Server) apiEditConnection(r *http.Request, c *apiCall, e manage.ConnectionEdit, allow bool) (int, any, error) {
	cn, err := s.connectionByRef(r.Context(), r.PathValue("id"))
	if err != nil {
		return 0, nil, err
	}
	res, err := s.cfg.Manager.UpdateConnection(r.Context(), apiActor(r, c), cn.Alias, e,
		manage.CheckOptions{AllowUnverified: allow})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, res.Model(), nil
}

func (s *Server) apiUpdateConnection(r *http.Request, c *apiCall, body []byte) (int, any, error) {
	var in apiConnectionPatch
	if err := apiDecodeBody(r, body, &in); err != nil {
		return 0, nil, err
	}
	e := manage.ConnectionEdit{Host: in.Host, Port: in.Port, User: in.User, Recipe: in.Recipe, ReadSandboxReason: in.ReadSandboxReason}
	if in.Env != nil {
		env, err := store.ParseEnv(*in.Env)
		if err != nil {
			return 0, nil, apiBadBody("env", "want dev, test, staging or production")
		}
		e.Env = &env
	}
	if in.ReadSandbox != nil {
		rs, err := store.ParseReadSandbox(*in.ReadSandbox)
		if err != nil {
			return 0, nil, apiBadBody("read_sandbox", "want auto, require or off")
		}
		e.ReadSandbox = &rs
	}
	if in.Record != nil {
		rec, err := store.ParseRecord(*in.Record)
		if err != nil {
			return 0, nil, apiBadBody("record", "want off, exec or all")
		}
		e.Record = &rec
	}
	if e.Host == nil && e.Port == nil && e.User == nil && e.Env == nil && e.Recipe == nil && e.ReadSandbox == nil && e.Record == nil {
		return 0, nil, apiBadBody("", "nothing to change: give host, port, user, env, recipe, read_sandbox or record")
	}
	return s.apiEditConnection(r, c, e, in.AllowUnverified)
}

func (s *Server) apiPinConnection(r *http.Request, c *apiCall, body []byte) (int, any, error) {
	var in apiPinBody
	if err := apiDecodeBody(r, body, &in); err != nil {
		return 0, nil, err
	}
	if (len(in.HostKeys) > 0) == in.AcceptNewHostKey {
		return 0, nil, apiBadBody("host_keys", "give host_keys or accept_new_host_key, one of them")
	}
	return s.apiEditConnection(r, c, manage.ConnectionEdit{HostKeys: in.HostKeys, AcceptNewHostKey: in.AcceptNewHostKey},
		in.AllowUnverified)
}

func (s *Server) apiRotateConnectionKey(r *http.Request, c *apiCall, body []byte) (int, any, error) {
	var in apiRotateBody
	if err := apiDecodeBody(r, body, &in); err != nil {
		return 0, nil, err
	}
	n := 0
	for _, b := range []bool{in.PrivateKey != "", in.Generate, in.Commit, in.Abort} {
		if b {
			n++
		}
	}
	if n != 1 {
		return 0, nil, apiBadBody("private_key", "give one of private_key, generate, commit or abort")
	}
	if in.Install && !in.Generate {
		return 0, nil, apiBadBody("install", "install goes with generate")
	}
	key := []byte(in.PrivateKey)
	defer clear(key)
	cn, err := s.connectionByRef(r.Context(), r.PathValue("id"))
	if err != nil {
		return 0, nil, err
	}
	ctx, by := r.Context(), apiActor(r, c)
	var res manage.ConnectionResult
	switch {
	case in.Commit:
		res, err = s.cfg.Manager.CommitStagedKey(ctx, by, cn.Alias, 0)
	case in.Abort:
		res, err = s.cfg.Manager.AbortStagedKey(ctx, by, cn.Alias)
	case in.Install:
		res, err = s.cfg.Manager.InstallKey(ctx, by, cn.Alias, 0)
	default:
		res, err = s.cfg.Manager.StageKey(ctx, by, cn.Alias, key, in.Generate)
	}
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, res.Model(), nil
}

func (s *Server) apiDeleteConnection(r *http.Request, c *apiCall, body []byte) (int, any, error) {
	if err := apiNoBody(body); err != nil {
		return 0, nil, err
	}
	cn, err := s.connectionByRef(r.Context(), r.PathValue("id"))
	if err != nil {
		return 0, nil, err
	}
	pub, _ := s.cfg.Store.ConnectionPublicKey(r.Context(), cn.ID)
	if cn, err = s.cfg.Manager.RemoveConnection(r.Context(), apiActor(r, c), cn.Alias); err != nil {
		return 0, nil, err
	}
	return http.StatusOK, model.ConnectionOf(*cn, pub), nil
}

// --- grants ---

// apiGrantBody is the body of POST /v1/grants: the rules left out keep the
// grant's, or a new grant's defaults (read allow, write and destructive
// deny).
type apiGrantBody struct {
	Agent       string  `json:"agent"`
	Connection  string  `json:"connection"`
	Read        *string `json:"read"`
	Write       *string `json:"write"`
	Destructive *string `json:"destructive"`
}

func (s *Server) apiSetGrant(r *http.Request, c *apiCall, body []byte) (int, any, error) {
	var in apiGrantBody
	if err := apiDecodeBody(r, body, &in); err != nil {
		return 0, nil, err
	}
	var ch manage.RulesChange
	for _, x := range []struct {
		field string
		in    *string
		dst   **store.Rule
	}{{"read", in.Read, &ch.Read}, {"write", in.Write, &ch.Write}, {"destructive", in.Destructive, &ch.Destructive}} {
		if x.in == nil {
			continue
		}
		rule, err := store.ParseRule(*x.in)
		if err != nil {
			return 0, nil, apiBadBody(x.field, "want allow, ask or deny")
		}
		*x.dst = &rule
	}
	ctx := r.Context()
	a, err := apiByIDOrName(ctx, in.Agent, s.cfg.Store.AgentByID, s.cfg.Store.AgentByName)
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil, apiNotFound("agent", in.Agent)
	} else if err != nil {
		return 0, nil, err
	}
	cn, err := s.connectionByRef(ctx, in.Connection)
	if err != nil {
		return 0, nil, err
	}
	status := http.StatusOK
	if _, err := s.cfg.Store.GrantFor(ctx, a.ID, cn.ID); errors.Is(err, store.ErrNotFound) {
		status = http.StatusCreated
	} else if err != nil {
		return 0, nil, err
	}
	if _, err := s.cfg.Manager.SetGrant(ctx, apiActor(r, c), a.Name, cn.Alias, ch); err != nil {
		return 0, nil, err
	}
	g, err := s.elevatedGrant(r, a.ID, cn.ID)
	if err != nil {
		return 0, nil, err
	}
	return status, model.GrantOf(*g, s.cfg.Now()), nil
}

// elevatedGrant reads one grant with its scopes.
func (s *Server) elevatedGrant(r *http.Request, agentID, connectionID string) (*store.ElevatedGrant, error) {
	all, err := s.cfg.Store.ListElevatedGrants(r.Context())
	if err != nil {
		return nil, err
	}
	for _, g := range all {
		if g.AgentID == agentID && g.ConnectionID == connectionID {
			return &g, nil
		}
	}
	return nil, apiNotFound("grant", agentID+"/"+connectionID)
}

func (s *Server) apiDeleteGrant(r *http.Request, c *apiCall, body []byte) (int, any, error) {
	if err := apiNoBody(body); err != nil {
		return 0, nil, err
	}
	id := r.PathValue("id")
	all, err := s.cfg.Store.ListElevatedGrants(r.Context())
	if err != nil {
		return 0, nil, err
	}
	for _, g := range all {
		if g.ID != id {
			continue
		}
		if _, err := s.cfg.Manager.RevokeGrant(r.Context(), apiActor(r, c), g.AgentName, g.Alias); err != nil {
			return 0, nil, err
		}
		return http.StatusOK, model.GrantOf(g, s.cfg.Now()), nil
	}
	return 0, nil, apiNotFound("grant", id)
}

// --- tokens ---

// apiTokenBody is the body of POST /v1/tokens.
type apiTokenBody struct {
	Name string `json:"name"`
	// Admin, if given, must name the caller's own admin: a token is only
	// ever made for the admin who makes it (403 token_for_other_admin).
	Admin string `json:"admin"`
	Scope string `json:"scope"` // read, approve (the default) or admin
}

func (s *Server) apiCreateToken(r *http.Request, c *apiCall, body []byte) (int, any, error) {
	var in apiTokenBody
	if err := apiDecodeBody(r, body, &in); err != nil {
		return 0, nil, err
	}
	scope, err := store.ParseTokenScope(in.Scope)
	if err != nil {
		return 0, nil, apiBadBody("scope", "want read, approve or admin")
	}
	// The new token is the calling token's admin's, and has at most what
	// the calling token may do now (its scope within its admin's role).
	maker := manage.TokenMaker{Admin: c.token.AdminID, Scope: tokenScope(c.token)}
	value, t, err := s.cfg.Manager.AddToken(r.Context(), apiActor(r, c), maker, in.Name, in.Admin, scope)
	var held *manage.HeldError
	if errors.As(err, &held) {
		// An approve or admin token waits for a second admin; its value
		// is its maker's now, and opens nothing until then.
		s.cfg.Logger.Info().Str("token", in.Name).Str("scope", string(scope)).Str("change", held.Request.ID).
			Str("admin", c.token.AdminName).Str("request_id", requestID(r.Context())).Msg("web: api token held")
		return http.StatusAccepted, apiHeldToken{Value: value, Change: model.ChangeApprovalOf(held.Request, s.cfg.Now())}, nil
	}
	if err != nil {
		return 0, nil, err
	}
	s.cfg.Logger.Info().Str("token", t.Name).Str("scope", string(t.Scope)).Str("owner", t.AdminName).
		Str("admin", c.token.AdminName).Str("request_id", requestID(r.Context())).Msg("web: api token added")
	return http.StatusCreated, model.NewToken{Token: model.TokenOf(*t), Value: value}, nil
}

// apiHeldToken is the answer (202) to POST /v1/tokens for a token that
// waits for a second admin: its value, shown this once as for any new
// token, and the change request that a second admin approves before the
// value opens anything.
type apiHeldToken struct {
	Value  string         `json:"value"`
	Change model.Approval `json:"change"`
}

// tokenByRef reads the token the path's {id} names (its id or name).
func (s *Server) tokenByRef(r *http.Request) (*store.ConsoleToken, error) {
	ref := r.PathValue("id")
	list, err := s.cfg.Store.ListConsoleTokens(r.Context())
	if err != nil {
		return nil, err
	}
	for _, t := range list {
		if t.ID == ref || t.Name == ref {
			return &t, nil
		}
	}
	return nil, apiNotFound("token", ref)
}

func (s *Server) apiDeleteToken(r *http.Request, c *apiCall, body []byte) (int, any, error) {
	if err := apiNoBody(body); err != nil {
		return 0, nil, err
	}
	t, err := s.tokenByRef(r)
	if err != nil {
		return 0, nil, err
	}
	if t, err = s.cfg.Manager.RemoveToken(r.Context(), apiActor(r, c), t.Name); err != nil {
		return 0, nil, err
	}
	return http.StatusOK, model.TokenOf(*t), nil
}

// apiBadBody is a 400 naming the body field at fault ("" for the body).
func apiBadBody(field, msg string) *apiError {
	if field != "" {
		msg = field + ": " + msg
	}
	return &apiError{Status: http.StatusBadRequest, Code: "invalid_body", Field: field, Message: msg}
}

// apiNoBody refuses a body on a change that takes none (DELETE).
func apiNoBody(body []byte) error {
	if len(strings.TrimSpace(string(body))) > 0 {
		return apiBadBody("", "this request takes no body")
	}
	return nil
}
