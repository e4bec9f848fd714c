package web

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/postern/postern/policy"
	"github.com/postern/postern/recipes"
	"github.com/postern/postern/store"
)

// The API's records. Each has a stable id and modified_at; names are
// snake_case; times are RFC 3339 in UTC (null when they never happened).
// A connection is shown by its key's status and its pinned host keys'
// fingerprints: no view here has a field that could hold a private key.

// apiTime is a time in an answer: RFC 3339 UTC, or null for the zero time.
type apiTime time.Time

// MarshalJSON writes RFC 3339 with the fraction it has, in UTC.
func (t apiTime) MarshalJSON() ([]byte, error) {
	tt := time.Time(t)
	if tt.IsZero() {
		return []byte("null"), nil
	}
	return []byte(strconv.Quote(tt.UTC().Format(time.RFC3339Nano))), nil
}

// apiRecipe is a recipe of the catalog: its public view, with the key as id.
// The catalog is compiled into postern, so a recipe has no modification
// time of its own: modified_at is always null, and version rises when a
// recipe's meaning changes.
type apiRecipe struct {
	ID string `json:"id"`
	recipes.PublicRecipe
	ModifiedAt *string `json:"modified_at"`
}

type apiAgent struct {
	ID         string        `json:"id"`
	Name       string        `json:"name"`
	Disabled   bool          `json:"disabled"`
	Keys       []apiAgentKey `json:"keys"`
	CreatedAt  apiTime       `json:"created_at"`
	ModifiedAt apiTime       `json:"modified_at"`
}

// apiAgentKey is an agent's public key: safe to show, it is what the
// agent's own authorized_keys line says.
type apiAgentKey struct {
	ID            string  `json:"id"`
	Type          string  `json:"type"`
	Fingerprint   string  `json:"fingerprint"`
	AuthorizedKey string  `json:"authorized_key"`
	CreatedAt     apiTime `json:"created_at"`
}

type apiConnection struct {
	ID           string       `json:"id"`
	Alias        string       `json:"alias"`
	Host         string       `json:"host"`
	Port         int          `json:"port"`
	User         string       `json:"user"`
	Env          string       `json:"env"`
	Recipe       string       `json:"recipe"`
	KeyStatus    string       `json:"key_status"`
	KeyMessage   string       `json:"key_message"`
	KeyCheckedAt apiTime      `json:"key_checked_at"`
	HostKeys     []apiHostKey `json:"host_keys"`
	CreatedAt    apiTime      `json:"created_at"`
	ModifiedAt   apiTime      `json:"modified_at"`
}

// apiHostKey is one pinned host key of a target, by type and fingerprint.
type apiHostKey struct {
	Type        string `json:"type"`
	Fingerprint string `json:"fingerprint"`
}

type apiGrant struct {
	ID           string  `json:"id"`
	Agent        string  `json:"agent"`
	AgentID      string  `json:"agent_id"`
	Alias        string  `json:"alias"`
	ConnectionID string  `json:"connection_id"`
	Env          string  `json:"env"`
	Read         string  `json:"read"`
	Write        string  `json:"write"`
	Destructive  string  `json:"destructive"`
	CreatedAt    apiTime `json:"created_at"`
	ModifiedAt   apiTime `json:"modified_at"`
	// Scopes are the approvals whose active scope elevates the grant.
	Scopes []apiApproval `json:"scopes"`
}

// apiApproval is an approval request. Operation and reasons are the
// redacted text the store keeps, and the agent's: untrusted.
type apiApproval struct {
	ID              string  `json:"id"`
	Status          string  `json:"status"`
	Agent           string  `json:"agent"`
	AgentID         string  `json:"agent_id"`
	Alias           string  `json:"alias"`
	ConnectionID    string  `json:"connection_id"`
	Env             string  `json:"env"`
	Class           string  `json:"class"`
	Kind            string  `json:"kind"`
	Operation       string  `json:"operation"`
	Reasons         string  `json:"reasons"`
	ApprovalsNeeded int     `json:"approvals_needed"`
	FirstApprover   string  `json:"first_approver"`
	FirstApprovedAt apiTime `json:"first_approved_at"`
	DecidedBy       string  `json:"decided_by"`
	DecidedAt       apiTime `json:"decided_at"`
	Reason          string  `json:"reason"`
	ExpiresAt       apiTime `json:"expires_at"`
	ConsumedAt      apiTime `json:"consumed_at"`
	CreatedAt       apiTime `json:"created_at"`
	ModifiedAt      apiTime `json:"modified_at"`
	AgentReason     string  `json:"agent_reason"`
	SourceAddr      string  `json:"source_addr"`
	Target          string  `json:"target"`
	Scope           string  `json:"scope"`
	ScopeExpiresAt  apiTime `json:"scope_expires_at"`
	ScopeRevokedAt  apiTime `json:"scope_revoked_at"`
	ScopeRevokedBy  string  `json:"scope_revoked_by"`
}

// apiAuditRow is one audit row; its id is its seq as a string and its
// modified_at its time, since rows are written once and never changed.
type apiAuditRow struct {
	ID           string   `json:"id"`
	Seq          int64    `json:"seq"`
	Time         apiTime  `json:"time"`
	ModifiedAt   apiTime  `json:"modified_at"`
	Agent        string   `json:"agent"`
	AgentID      string   `json:"agent_id"`
	Alias        string   `json:"alias"`
	ConnectionID string   `json:"connection_id"`
	Class        string   `json:"class"`
	Kind         string   `json:"kind"`
	Decision     string   `json:"decision"`
	Reason       string   `json:"reason"`
	ApprovalID   string   `json:"approval_id"`
	Deciders     []string `json:"deciders"`
	Operation    string   `json:"operation"`
	ExitStatus   *int     `json:"exit_status"`
	DurationMS   float64  `json:"duration_ms"`
	BytesIn      int64    `json:"bytes_in"`
	BytesOut     int64    `json:"bytes_out"`
	AgentReason  string   `json:"agent_reason"`
	SourceAddr   string   `json:"source_addr"`
	Hash         string   `json:"hash"`
}

// apiChainStatus is the audit chain's verification (policy.Verify).
type apiChainStatus struct {
	Intact     bool           `json:"intact"`
	Rows       int64          `json:"rows"`
	Head       string         `json:"head"`
	Broken     *apiChainBreak `json:"broken"`
	VerifiedAt apiTime        `json:"verified_at"`
}

type apiChainBreak struct {
	Seq      int64  `json:"seq"`
	Position int64  `json:"position"`
	Reason   string `json:"reason"`
}

// apiKeyCheck is the result of POST /v1/connections/{id}/check.
type apiKeyCheck struct {
	Status     string        `json:"status"`
	Message    string        `json:"message"`
	Connection apiConnection `json:"connection"`
}

func apiAgentView(a store.Agent) apiAgent {
	v := apiAgent{ID: a.ID, Name: a.Name, Disabled: a.Disabled, Keys: []apiAgentKey{},
		CreatedAt: apiTime(a.CreatedAt), ModifiedAt: apiTime(a.ModifiedAt)}
	for _, k := range a.Keys {
		typ := ""
		if pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(k.AuthorizedKey)); err == nil {
			typ = pub.Type()
		}
		v.Keys = append(v.Keys, apiAgentKey{ID: k.ID, Type: typ, Fingerprint: k.Fingerprint,
			AuthorizedKey: k.AuthorizedKey, CreatedAt: apiTime(k.CreatedAt)})
	}
	return v
}

func apiConnectionView(c store.Connection) apiConnection {
	v := apiConnection{ID: c.ID, Alias: c.Alias, Host: c.Host, Port: c.Port, User: c.User, Env: string(c.Env),
		Recipe: c.Recipe, KeyStatus: string(c.KeyStatus), KeyMessage: c.KeyMessage,
		KeyCheckedAt: apiTime(c.KeyCheckedAt), HostKeys: []apiHostKey{},
		CreatedAt: apiTime(c.CreatedAt), ModifiedAt: apiTime(c.ModifiedAt)}
	for _, line := range c.HostKeys {
		hk := apiHostKey{Type: "invalid"}
		if _, key, err := store.ParseHostKeyLine(line); err == nil {
			hk = apiHostKey{Type: key.Type(), Fingerprint: ssh.FingerprintSHA256(key)}
		}
		v.HostKeys = append(v.HostKeys, hk)
	}
	return v
}

func apiGrantView(g store.ElevatedGrant, now time.Time) apiGrant {
	scopes := make([]apiApproval, 0, len(g.Scopes))
	for _, a := range g.Scopes {
		scopes = append(scopes, apiApprovalView(a, now))
	}
	return apiGrant{ID: g.ID, Agent: g.AgentName, AgentID: g.AgentID, Alias: g.Alias, ConnectionID: g.ConnectionID,
		Env: string(g.Env), Read: string(g.Rules.Read), Write: string(g.Rules.Write),
		Destructive: string(g.Rules.Destructive), CreatedAt: apiTime(g.CreatedAt), ModifiedAt: apiTime(g.ModifiedAt),
		Scopes: scopes}
}

// apiApprovalView shows a request; one still pending past its expiry shows as
// expired, which it is, even before anything has marked it so.
func apiApprovalView(a store.Approval, now time.Time) apiApproval {
	status := a.Status
	if status == store.ApprovalPending && !now.Before(a.ExpiresAt) {
		status = store.ApprovalExpired
	}
	return apiApproval{ID: a.ID, Status: status, Agent: a.AgentName, AgentID: a.AgentID, Alias: a.ConnectionAlias,
		ConnectionID: a.ConnectionID, Env: string(a.ConnectionEnv), Class: a.Class, Kind: a.Kind,
		Operation: a.Operation, Reasons: a.Reasons, ApprovalsNeeded: a.ApprovalsNeeded,
		FirstApprover: a.FirstApprover, FirstApprovedAt: apiTime(a.FirstApprovedAt), DecidedBy: a.DecidedBy,
		DecidedAt: apiTime(a.DecidedAt), Reason: a.Reason, ExpiresAt: apiTime(a.ExpiresAt),
		ConsumedAt: apiTime(a.ConsumedAt), CreatedAt: apiTime(a.CreatedAt), ModifiedAt: apiTime(a.ModifiedAt),
		AgentReason: a.AgentReason, SourceAddr: a.SourceAddr, Target: approvalTarget(a), Scope: string(a.Scope),
		ScopeExpiresAt: apiTime(a.ScopeExpiresAt), ScopeRevokedAt: apiTime(a.ScopeRevokedAt), ScopeRevokedBy: a.ScopeRevokedBy}
}

// approvalTarget is the approval's target as user@host:port, or "" when
// its connection was removed.
func approvalTarget(a store.Approval) string {
	if a.TargetHost == "" {
		return ""
	}
	return a.TargetUser + "@" + net.JoinHostPort(a.TargetHost, strconv.Itoa(a.TargetPort))
}

func apiAuditView(r store.AuditRow) apiAuditRow {
	deciders := r.Deciders
	if deciders == nil {
		deciders = []string{}
	}
	return apiAuditRow{ID: strconv.FormatInt(r.Seq, 10), Seq: r.Seq, Time: apiTime(r.Time), ModifiedAt: apiTime(r.Time),
		Agent: r.AgentName, AgentID: r.AgentID, Alias: r.ConnectionAlias, ConnectionID: r.ConnectionID,
		Class: r.Class, Kind: r.Kind, Decision: r.Decision, Reason: r.Reason, ApprovalID: r.ApprovalID,
		Deciders: deciders, Operation: r.Operation, ExitStatus: r.ExitStatus,
		DurationMS: float64(r.Duration) / float64(time.Millisecond), BytesIn: r.BytesIn, BytesOut: r.BytesOut,
		AgentReason: r.AgentReason, SourceAddr: r.SourceAddr, Hash: fmt.Sprintf("%x", r.Hash)}
}

// The words each enumerated filter accepts. They are functions rather than
// package variables so that the package holds no state anything could
// change.
func apiClassWords() []string {
	return []string{string(policy.Read), string(policy.Write), string(policy.Destructive)}
}

func apiKindWords() []string { return []string{string(policy.Exec), string(policy.SFTP)} }

func apiEnvWords() []string {
	out := make([]string, 0, len(store.Envs))
	for _, e := range store.Envs {
		out = append(out, string(e))
	}
	return out
}

func apiRuleWords() []string {
	return []string{string(store.RuleAllow), string(store.RuleAsk), string(store.RuleDeny)}
}

func apiStatusWords() []string {
	return []string{store.ApprovalPending, store.ApprovalApproved, store.ApprovalDenied, store.ApprovalExpired}
}

func apiDecisionWords() []string {
	return []string{string(policy.Allowed), string(policy.Asked), string(policy.Approved),
		string(policy.Denied), string(policy.Expired), string(policy.Failed)}
}

func apiKeyStatusWords() []string {
	return []string{string(store.KeyUnknown), string(store.KeyOK), string(store.KeyRejected)}
}

// --- recipes ---

func apiRecipeList() apiListSpec {
	return apiListSpec{resource: "recipes", filters: map[string]func(string) error{"q": nil, "vendor": nil, "host": nil},
		sorts: []string{"key", "name", "vendor"}, defSort: "key"}
}

func (s *Server) apiListRecipes(w http.ResponseWriter, r *http.Request, c *apiCall) error {
	p, err := parseAPIList(c.query, apiRecipeList())
	if err != nil {
		return err
	}
	pub := s.cfg.Catalog.PublicList(recipes.Filter{Q: p.filters["q"], Vendor: p.filters["vendor"], Host: p.filters["host"]})
	views := make([]apiRecipe, 0, len(pub))
	for _, rc := range pub {
		views = append(views, apiRecipe{ID: rc.Key, PublicRecipe: rc})
	}
	return apiWriteList(w, r, apiPaginate(views, p, "recipes", apiSorter[apiRecipe]{
		id: func(v apiRecipe) string { return v.ID },
		keys: map[string]func(apiRecipe) string{
			"key":    func(v apiRecipe) string { return v.Key },
			"name":   func(v apiRecipe) string { return strings.ToLower(v.Name) },
			"vendor": func(v apiRecipe) string { return strings.ToLower(v.Vendor) },
		},
	}))
}

func (s *Server) apiGetRecipe(w http.ResponseWriter, r *http.Request, c *apiCall) error {
	if err := apiNoParams(c); err != nil {
		return err
	}
	key := r.PathValue("key")
	rc := s.cfg.Catalog.Get(key)
	if rc == nil {
		return apiNotFound("recipe", key)
	}
	return s.apiWriteData(w, r, apiRecipe{ID: rc.Key, PublicRecipe: rc.Public()})
}

// apiNoParams refuses any query parameter on an endpoint that takes none.
func apiNoParams(c *apiCall) error {
	for name := range c.query {
		return &apiError{Status: http.StatusBadRequest, Code: "unknown_parameter", Field: name,
			Message: name + ": unknown query parameter; this endpoint takes none"}
	}
	return nil
}

// --- agents ---

func apiAgentList() apiListSpec {
	return apiListSpec{resource: "agents",
		filters: map[string]func(string) error{"name": nil, "disabled": apiBoolFilter, "fingerprint": nil},
		sorts:   []string{"name", "created_at", "modified_at"}, defSort: "name"}
}

func (s *Server) apiListAgents(w http.ResponseWriter, r *http.Request, c *apiCall) error {
	p, err := parseAPIList(c.query, apiAgentList())
	if err != nil {
		return err
	}
	agents, err := s.cfg.Store.ListAgents(r.Context())
	if err != nil {
		return err
	}
	var views []apiAgent
	for _, a := range agents {
		v := apiAgentView(a)
		if f, ok := p.filters["name"]; ok && v.Name != f {
			continue
		}
		if f, ok := p.filters["disabled"]; ok && strconv.FormatBool(v.Disabled) != f {
			continue
		}
		if f, ok := p.filters["fingerprint"]; ok && !slices.ContainsFunc(v.Keys, func(k apiAgentKey) bool { return k.Fingerprint == f }) {
			continue
		}
		views = append(views, v)
	}
	return apiWriteList(w, r, apiPaginate(views, p, "agents", apiSorter[apiAgent]{
		id: func(v apiAgent) string { return v.ID },
		keys: map[string]func(apiAgent) string{
			"name":        func(v apiAgent) string { return v.Name },
			"created_at":  func(v apiAgent) string { return sortTimeKey(time.Time(v.CreatedAt)) },
			"modified_at": func(v apiAgent) string { return sortTimeKey(time.Time(v.ModifiedAt)) },
		},
	}))
}

func (s *Server) apiGetAgent(w http.ResponseWriter, r *http.Request, c *apiCall) error {
	if err := apiNoParams(c); err != nil {
		return err
	}
	id := r.PathValue("id")
	a, err := apiByIDOrName(r.Context(), id, s.cfg.Store.AgentByID, s.cfg.Store.AgentByName)
	if errors.Is(err, store.ErrNotFound) {
		return apiNotFound("agent", id)
	} else if err != nil {
		return err
	}
	return s.apiWriteData(w, r, apiAgentView(*a))
}

// apiByIDOrName looks a record up by id, then by name: both are stable, and a
// script usually knows the name.
func apiByIDOrName[T any](ctx context.Context, ref string, byID, byName func(context.Context, string) (*T, error)) (*T, error) {
	v, err := byID(ctx, ref)
	if errors.Is(err, store.ErrNotFound) {
		return byName(ctx, ref)
	}
	return v, err
}

// --- connections ---

func apiConnectionList() apiListSpec {
	return apiListSpec{resource: "connections",
		filters: map[string]func(string) error{"alias": nil, "host": nil, "env": apiEnumFilter(apiEnvWords()...),
			"recipe": nil, "key_status": apiEnumFilter(apiKeyStatusWords()...)},
		sorts:   []string{"alias", "host", "env", "created_at", "modified_at", "key_checked_at"},
		defSort: "alias"}
}

func (s *Server) apiListConnections(w http.ResponseWriter, r *http.Request, c *apiCall) error {
	p, err := parseAPIList(c.query, apiConnectionList())
	if err != nil {
		return err
	}
	conns, err := s.cfg.Store.ListConnections(r.Context())
	if err != nil {
		return err
	}
	var views []apiConnection
	for _, cn := range conns {
		v := apiConnectionView(cn)
		if !apiMatchAll(p.filters, map[string]string{"alias": v.Alias, "host": v.Host, "env": v.Env,
			"recipe": v.Recipe, "key_status": v.KeyStatus}) {
			continue
		}
		views = append(views, v)
	}
	envRank := func(e string) string { return strconv.Itoa(slices.Index(apiEnvWords(), e) + 1) }
	return apiWriteList(w, r, apiPaginate(views, p, "connections", apiSorter[apiConnection]{
		id: func(v apiConnection) string { return v.ID },
		keys: map[string]func(apiConnection) string{
			"alias":          func(v apiConnection) string { return v.Alias },
			"host":           func(v apiConnection) string { return strings.ToLower(v.Host) },
			"env":            func(v apiConnection) string { return envRank(v.Env) },
			"created_at":     func(v apiConnection) string { return sortTimeKey(time.Time(v.CreatedAt)) },
			"modified_at":    func(v apiConnection) string { return sortTimeKey(time.Time(v.ModifiedAt)) },
			"key_checked_at": func(v apiConnection) string { return sortTimeKey(time.Time(v.KeyCheckedAt)) },
		},
	}))
}

// apiMatchAll reports whether every given filter equals the record's field.
func apiMatchAll(filters, fields map[string]string) bool {
	for name, want := range filters {
		if got, ok := fields[name]; ok && got != want {
			return false
		}
	}
	return true
}

func (s *Server) connectionByRef(ctx context.Context, ref string) (*store.Connection, error) {
	cn, err := apiByIDOrName(ctx, ref, s.cfg.Store.ConnectionByID, s.cfg.Store.ConnectionByAlias)
	if errors.Is(err, store.ErrNotFound) {
		return nil, apiNotFound("connection", ref)
	}
	return cn, err
}

func (s *Server) apiGetConnection(w http.ResponseWriter, r *http.Request, c *apiCall) error {
	if err := apiNoParams(c); err != nil {
		return err
	}
	cn, err := s.connectionByRef(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return s.apiWriteData(w, r, apiConnectionView(*cn))
}

// apiCheckConnection runs the connection's key check (Config.CheckKey),
// which dials the target and records the result, and answers with the
// result and the connection as it now stands. An unreachable target is a
// result ("unknown"), not an error.
func (s *Server) apiCheckConnection(w http.ResponseWriter, r *http.Request, c *apiCall) error {
	if err := apiNoParams(c); err != nil {
		return err
	}
	if s.cfg.CheckKey == nil {
		return &apiError{Status: http.StatusNotImplemented, Code: "not_implemented",
			Message: "key checks are not enabled on this server"}
	}
	cn, err := s.connectionByRef(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	res, err := s.cfg.CheckKey(r.Context(), cn.Alias)
	if errors.Is(err, store.ErrNotFound) {
		return apiNotFound("connection", cn.Alias) // removed while we looked
	} else if err != nil {
		return fmt.Errorf("web: key check of %s: %w", cn.Alias, err)
	}
	after, err := s.connectionByRef(r.Context(), cn.ID)
	if err != nil {
		return err
	}
	return s.apiWriteData(w, r, apiKeyCheck{Status: string(res.Status), Message: res.Message,
		Connection: apiConnectionView(*after)})
}

// --- grants ---

func apiGrantList() apiListSpec {
	rule := apiEnumFilter(apiRuleWords()...)
	return apiListSpec{resource: "grants",
		filters: map[string]func(string) error{"agent": nil, "connection": nil, "env": apiEnumFilter(apiEnvWords()...),
			"read": rule, "write": rule, "destructive": rule},
		sorts: []string{"agent", "connection", "created_at", "modified_at"}, defSort: "agent"}
}

func (s *Server) apiListGrants(w http.ResponseWriter, r *http.Request, c *apiCall) error {
	p, err := parseAPIList(c.query, apiGrantList())
	if err != nil {
		return err
	}
	grants, err := s.cfg.Store.ListElevatedGrants(r.Context())
	if err != nil {
		return err
	}
	var views []apiGrant
	for _, g := range grants {
		v := apiGrantView(g, s.cfg.Now())
		if f, ok := p.filters["agent"]; ok && f != v.Agent && f != v.AgentID {
			continue
		}
		if f, ok := p.filters["connection"]; ok && f != v.Alias && f != v.ConnectionID {
			continue
		}
		if !apiMatchAll(p.filters, map[string]string{"env": v.Env, "read": v.Read, "write": v.Write,
			"destructive": v.Destructive}) {
			continue
		}
		views = append(views, v)
	}
	return apiWriteList(w, r, apiPaginate(views, p, "grants", apiSorter[apiGrant]{
		id: func(v apiGrant) string { return v.ID },
		keys: map[string]func(apiGrant) string{
			"agent":       func(v apiGrant) string { return v.Agent + "\x00" + v.Alias },
			"connection":  func(v apiGrant) string { return v.Alias + "\x00" + v.Agent },
			"created_at":  func(v apiGrant) string { return sortTimeKey(time.Time(v.CreatedAt)) },
			"modified_at": func(v apiGrant) string { return sortTimeKey(time.Time(v.ModifiedAt)) },
		},
	}))
}

// --- approvals ---

func apiApprovalList() apiListSpec {
	return apiListSpec{resource: "approvals",
		filters: map[string]func(string) error{"status": apiEnumFilter(apiStatusWords()...), "agent": nil,
			"connection": nil, "class": apiEnumFilter(apiClassWords()...), "kind": apiEnumFilter(apiKindWords()...),
			"env": apiEnumFilter(apiEnvWords()...)},
		sorts: []string{"created_at", "expires_at", "modified_at"}, defSort: "created_at"}
}

func (s *Server) apiListApprovals(w http.ResponseWriter, r *http.Request, c *apiCall) error {
	p, err := parseAPIList(c.query, apiApprovalList())
	if err != nil {
		return err
	}
	list, err := s.cfg.Engine.Approvals(r.Context(), true)
	if err != nil {
		return err
	}
	now := s.cfg.Now()
	var views []apiApproval
	for _, a := range list {
		v := apiApprovalView(a, now)
		if f, ok := p.filters["agent"]; ok && f != v.Agent && f != v.AgentID {
			continue
		}
		if f, ok := p.filters["connection"]; ok && f != v.Alias && f != v.ConnectionID {
			continue
		}
		if !apiMatchAll(p.filters, map[string]string{"status": v.Status, "class": v.Class, "kind": v.Kind, "env": v.Env}) {
			continue
		}
		views = append(views, v)
	}
	return apiWriteList(w, r, apiPaginate(views, p, "approvals", apiSorter[apiApproval]{
		id: func(v apiApproval) string { return v.ID },
		keys: map[string]func(apiApproval) string{
			"created_at":  func(v apiApproval) string { return sortTimeKey(time.Time(v.CreatedAt)) },
			"expires_at":  func(v apiApproval) string { return sortTimeKey(time.Time(v.ExpiresAt)) },
			"modified_at": func(v apiApproval) string { return sortTimeKey(time.Time(v.ModifiedAt)) },
		},
	}))
}

func (s *Server) apiGetApproval(w http.ResponseWriter, r *http.Request, c *apiCall) error {
	if err := apiNoParams(c); err != nil {
		return err
	}
	id := r.PathValue("id")
	a, err := s.cfg.Store.GetApproval(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return apiNotFound("approval", id)
	} else if err != nil {
		return err
	}
	return s.apiWriteData(w, r, apiApprovalView(a, s.cfg.Now()))
}

// apiRevokeScope ends an approval's scope: POST /v1/approvals/{id}/revoke-scope.
func (s *Server) apiRevokeScope(w http.ResponseWriter, r *http.Request, c *apiCall) error {
	if err := apiNoParams(c); err != nil {
		return err
	}
	id := r.PathValue("id")
	if c.token.AdminID == "" {
		return &apiError{Status: http.StatusForbidden, Code: "token_without_admin",
			Message: "console token " + c.token.Name + " belongs to no admin; " +
				"an admin assigns it with: postern token assign " + c.token.Name + " --admin ADMIN"}
	}
	a, err := s.cfg.Engine.RevokeScope(r.Context(), id, policy.Decider{AdminID: c.token.AdminID, Name: c.token.AdminName})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return apiNotFound("approval", id)
	case errors.Is(err, store.ErrInvalid):
		return &apiError{Status: http.StatusConflict, Code: "no_active_scope",
			Message: "approval " + id + " has no active scope: it was approved for one request, or its scope ended or was revoked"}
	case err != nil:
		return err
	}
	return s.apiWriteData(w, r, apiApprovalView(a, s.cfg.Now()))
}

// --- audit ---

func apiAuditList() apiListSpec {
	return apiListSpec{resource: "audit",
		filters: map[string]func(string) error{"agent": nil, "connection": nil,
			"class": apiEnumFilter(apiClassWords()...), "kind": apiEnumFilter(apiKindWords()...),
			"decision": apiEnumFilter(apiDecisionWords()...), "since": apiTimeFilter, "until": apiTimeFilter},
		sorts: []string{"seq"}, defSort: "-seq"}
}

// apiListAudit pages through the audit log newest first. Unlike the other
// lists, which are small enough to sort in memory, the log grows without
// bound, so the page is read from the database by seq: the cursor carries
// the last seq shown and the next page is the rows before it.
func (s *Server) apiListAudit(w http.ResponseWriter, r *http.Request, c *apiCall) error {
	p, err := parseAPIList(c.query, apiAuditList())
	if err != nil {
		return err
	}
	if p.sort != "-seq" {
		return apiBadParam("sort", "the audit log is listed newest first only; use -seq or leave sort out")
	}
	f := store.AuditFilter{Agent: p.filters["agent"], Connection: p.filters["connection"],
		Class: p.filters["class"], Kind: p.filters["kind"], Decision: p.filters["decision"], Limit: p.limit + 1}
	if v, ok := p.filters["since"]; ok {
		f.Since, _ = time.Parse(time.RFC3339, v) // checked by apiTimeFilter
	}
	if v, ok := p.filters["until"]; ok {
		f.Until, _ = time.Parse(time.RFC3339, v)
	}
	if p.cursor != nil {
		seq, err := strconv.ParseInt(p.cursor.K, 10, 64)
		if err != nil || seq < 1 || p.cursor.I != p.cursor.K {
			return apiBadParam("cursor", "not a cursor of the audit log; pass next_cursor from the previous page unchanged")
		}
		f.BeforeSeq = seq
	}
	rows, err := s.cfg.Store.ListAudit(r.Context(), f)
	if err != nil {
		return err
	}
	var pg apiPage[apiAuditRow]
	if len(rows) > p.limit { // one more than asked for: there is an older page
		rows = rows[len(rows)-p.limit:]
		last := strconv.FormatInt(rows[0].Seq, 10)
		next := apiCursor{V: cursorVersion, R: "audit", S: p.sort, K: last, I: last}.encode()
		pg.hasMore, pg.next = true, &next
	}
	for i := len(rows) - 1; i >= 0; i-- {
		pg.items = append(pg.items, apiAuditView(rows[i]))
	}
	return apiWriteList(w, r, pg)
}

// apiVerifyAudit recomputes the audit log's hash chain (as `postern audit
// verify` does) and reports whether it is intact. It is its own endpoint,
// not part of every page of GET /v1/audit, because it reads the whole log.
func (s *Server) apiVerifyAudit(w http.ResponseWriter, r *http.Request, c *apiCall) error {
	if err := apiNoParams(c); err != nil {
		return err
	}
	res, err := policy.Verify(r.Context(), s.cfg.Store)
	if err != nil {
		return err
	}
	v := apiChainStatus{Intact: res.Broken == nil, Rows: res.Rows, Head: res.Head, VerifiedAt: apiTime(s.cfg.Now())}
	if b := res.Broken; b != nil {
		v.Broken = &apiChainBreak{Seq: b.Seq, Position: b.Position, Reason: b.Reason}
	}
	return s.apiWriteData(w, r, v)
}
