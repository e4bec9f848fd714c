package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/postern/postern/internal/usererr"
	"github.com/postern/postern/model"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/recipes"
	"github.com/postern/postern/store"
)

// The API's records are package model's types, the shapes the CLI's -o
// json prints too. Each has a stable id and modified_at; names are
// snake_case; times are RFC 3339 in UTC (null when they never happened).

// connectionView is a connection in the shared shape, with the public half
// of its key.
func (s *Server) connectionView(ctx context.Context, c store.Connection) model.Connection {
	pub, _ := s.cfg.Store.ConnectionPublicKey(ctx, c.ID)
	return model.ConnectionOf(c, pub)
}

// approvalTarget is the approval's target as user@host:port, or "" when
// its connection was removed.
func approvalTarget(a store.Approval) string { return model.ApprovalOf(a, time.Time{}).Target }

// The words each enumerated filter accepts. They are functions rather than
// package variables so that the package holds no state anything could
// change.
func apiClassWords() []string {
	return []string{string(policy.Read), string(policy.Write), string(policy.Destructive)}
}

func apiKindWords() []string {
	return []string{string(policy.Exec), string(policy.SFTP), string(policy.Admin)}
}

// apiApprovalKindWords are the kinds of the approvals queue: an
// operation's (exec, sftp) or a change of configuration (change).
func apiApprovalKindWords() []string {
	return []string{string(policy.Exec), string(policy.SFTP), model.KindChange}
}

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

// apiStatusWords are the statuses of the approvals queue; failed is a
// change request's only (approved, but it could not be made).
func apiStatusWords() []string {
	return []string{store.ApprovalPending, store.ApprovalApproved, store.ApprovalDenied, store.ApprovalExpired,
		store.ChangeFailed}
}

func apiDecisionWords() []string {
	return []string{string(policy.Allowed), string(policy.Asked), string(policy.Approved),
		string(policy.Denied), string(policy.Expired), string(policy.Failed), string(policy.Changed)}
}

func apiKeyStatusWords() []string {
	out := make([]string, 0, len(store.KeyStatuses))
	for _, k := range store.KeyStatuses {
		out = append(out, string(k))
	}
	return out
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
	views := make([]model.Recipe, 0, len(pub))
	for _, rc := range pub {
		views = append(views, model.RecipeOf(rc))
	}
	return apiWriteList(w, r, apiPaginate(views, p, "recipes", apiSorter[model.Recipe]{
		id: func(v model.Recipe) string { return v.ID },
		keys: map[string]func(model.Recipe) string{
			"key":    func(v model.Recipe) string { return v.Key },
			"name":   func(v model.Recipe) string { return strings.ToLower(v.Name) },
			"vendor": func(v model.Recipe) string { return strings.ToLower(v.Vendor) },
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
	return s.apiWriteData(w, r, model.RecipeOf(rc.Public()))
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
	var views []model.Agent
	for _, a := range agents {
		v := model.AgentOf(a)
		if f, ok := p.filters["name"]; ok && v.Name != f {
			continue
		}
		if f, ok := p.filters["disabled"]; ok && strconv.FormatBool(v.Disabled) != f {
			continue
		}
		if f, ok := p.filters["fingerprint"]; ok && !slices.ContainsFunc(v.Keys, func(k model.AgentKey) bool { return k.Fingerprint == f }) {
			continue
		}
		views = append(views, v)
	}
	return apiWriteList(w, r, apiPaginate(views, p, "agents", apiSorter[model.Agent]{
		id: func(v model.Agent) string { return v.ID },
		keys: map[string]func(model.Agent) string{
			"name":        func(v model.Agent) string { return v.Name },
			"created_at":  func(v model.Agent) string { return sortTimeKey(time.Time(v.CreatedAt)) },
			"modified_at": func(v model.Agent) string { return sortTimeKey(time.Time(v.ModifiedAt)) },
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
	return s.apiWriteData(w, r, model.AgentOf(*a))
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
	var views []model.Connection
	for _, cn := range conns {
		v := s.connectionView(r.Context(), cn)
		if !apiMatchAll(p.filters, map[string]string{"alias": v.Alias, "host": v.Host, "env": v.Env,
			"recipe": v.Recipe, "key_status": v.KeyStatus}) {
			continue
		}
		views = append(views, v)
	}
	envRank := func(e string) string { return strconv.Itoa(slices.Index(apiEnvWords(), e) + 1) }
	return apiWriteList(w, r, apiPaginate(views, p, "connections", apiSorter[model.Connection]{
		id: func(v model.Connection) string { return v.ID },
		keys: map[string]func(model.Connection) string{
			"alias":          func(v model.Connection) string { return v.Alias },
			"host":           func(v model.Connection) string { return strings.ToLower(v.Host) },
			"env":            func(v model.Connection) string { return envRank(v.Env) },
			"created_at":     func(v model.Connection) string { return sortTimeKey(time.Time(v.CreatedAt)) },
			"modified_at":    func(v model.Connection) string { return sortTimeKey(time.Time(v.ModifiedAt)) },
			"key_checked_at": func(v model.Connection) string { return sortTimeKey(time.Time(v.KeyCheckedAt)) },
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
	return s.apiWriteData(w, r, s.connectionView(r.Context(), *cn))
}

// apiCheckConnection runs the connection's key check, which dials the
// target and records the result, and answers with the result and the
// connection as it now stands. A key not proved is a result, not an error.
func (s *Server) apiCheckConnection(w http.ResponseWriter, r *http.Request, c *apiCall) error {
	if err := apiNoParams(c); err != nil {
		return err
	}
	cn, err := s.connectionByRef(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	res, err := s.cfg.Manager.CheckConnection(r.Context(), cn.Alias, 0)
	if errors.Is(err, store.ErrNotFound) {
		return apiNotFound("connection", cn.Alias) // removed while we looked
	} else if err != nil {
		return fmt.Errorf("web: key check of %s: %w", cn.Alias, err)
	}
	return s.apiWriteData(w, r, res.Model())
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
	var views []model.Grant
	for _, g := range grants {
		v := model.GrantOf(g, s.cfg.Now())
		if f, ok := p.filters["agent"]; ok && f != v.Agent && f != v.AgentID {
			continue
		}
		if f, ok := p.filters["connection"]; ok && f != v.Connection && f != v.ConnectionID {
			continue
		}
		if !apiMatchAll(p.filters, map[string]string{"env": v.Env, "read": v.Read, "write": v.Write,
			"destructive": v.Destructive}) {
			continue
		}
		views = append(views, v)
	}
	return apiWriteList(w, r, apiPaginate(views, p, "grants", apiSorter[model.Grant]{
		id: func(v model.Grant) string { return v.ID },
		keys: map[string]func(model.Grant) string{
			"agent":       func(v model.Grant) string { return v.Agent + "\x00" + v.Connection },
			"connection":  func(v model.Grant) string { return v.Connection + "\x00" + v.Agent },
			"created_at":  func(v model.Grant) string { return sortTimeKey(time.Time(v.CreatedAt)) },
			"modified_at": func(v model.Grant) string { return sortTimeKey(time.Time(v.ModifiedAt)) },
		},
	}))
}

// --- approvals ---

func apiApprovalList() apiListSpec {
	return apiListSpec{resource: "approvals",
		filters: map[string]func(string) error{"status": apiEnumFilter(apiStatusWords()...), "agent": nil,
			"connection": nil, "class": apiEnumFilter(apiClassWords()...), "kind": apiEnumFilter(apiApprovalKindWords()...),
			"env": apiEnumFilter(apiEnvWords()...)},
		sorts: []string{"created_at", "expires_at", "modified_at"}, defSort: "created_at"}
}

// apiListApprovals lists the approvals queue: operations' approval
// requests and changes of configuration that wait for a second admin
// (kind change), every status unless the status filter says one.

func (s *Server) apiListApprovals(w http.ResponseWriter, r *http.Request, c *apiCall) error {
	p, err := parseAPIList(c.query, apiApprovalList())
	if err != nil {
		return err
	}
	list, err := s.cfg.Engine.Approvals(r.Context(), true)
	if err != nil {
		return err
	}
	changes, err := s.cfg.Manager.Changes(r.Context(), true)
	if err != nil {
		return err
	}
	now := s.cfg.Now()
	all := make([]model.Approval, 0, len(list)+len(changes))
	for _, a := range list {
		all = append(all, model.ApprovalOf(a, now))
	}
	for _, ch := range changes {
		all = append(all, model.ChangeApprovalOf(ch, now))
	}
	var views []model.Approval
	for _, v := range all {
		if f, ok := p.filters["agent"]; ok && f != v.Agent && f != v.AgentID {
			continue
		}
		if f, ok := p.filters["connection"]; ok && f != v.Connection && f != v.ConnectionID {
			continue
		}
		if !apiMatchAll(p.filters, map[string]string{"status": v.Status, "class": v.Class, "kind": v.Kind, "env": v.Env}) {
			continue
		}
		views = append(views, v)
	}
	return apiWriteList(w, r, apiPaginate(views, p, "approvals", apiSorter[model.Approval]{
		id: func(v model.Approval) string { return v.ID },
		keys: map[string]func(model.Approval) string{
			"created_at":  func(v model.Approval) string { return sortTimeKey(time.Time(v.CreatedAt)) },
			"expires_at":  func(v model.Approval) string { return sortTimeKey(time.Time(v.ExpiresAt)) },
			"modified_at": func(v model.Approval) string { return sortTimeKey(time.Time(v.ModifiedAt)) },
		},
	}))
}

func (s *Server) apiGetApproval(w http.ResponseWriter, r *http.Request, c *apiCall) error {
	if err := apiNoParams(c); err != nil {
		return err
	}
	id := r.PathValue("id")
	if store.IsChangeID(id) {
		// The request's payload (what it would write) stays in the
		// store: ChangeApprovalOf shows its summary, before and after.
		ch, err := s.cfg.Store.ChangeRequestShown(r.Context(), id)
		if errors.Is(err, store.ErrNotFound) {
			return apiNotFound("change request", id)
		} else if err != nil {
			return err
		}
		return s.apiWriteData(w, r, model.ChangeApprovalOf(ch, s.cfg.Now()))
	}
	a, err := s.cfg.Store.GetApproval(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return apiNotFound("approval", id)
	} else if err != nil {
		return err
	}
	return s.apiWriteData(w, r, model.ApprovalOf(a, s.cfg.Now()))
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
				"an admin assigns it with: postern token assign " + c.token.Name + " --as ADMIN"}
	}
	a, err := s.cfg.Engine.RevokeScope(r.Context(), id, policy.Decider{AdminID: c.token.AdminID, Name: c.token.AdminName})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return apiNotFound("approval", id)
	case isRoleRefusal(err):
		return &apiError{Status: http.StatusForbidden, Code: "insufficient_role",
			Message: usererr.Message(err, c.token.AdminName+" may not revoke scopes")}
	case errors.Is(err, store.ErrInvalid):
		return &apiError{Status: http.StatusConflict, Code: "no_active_scope",
			Message: "approval " + id + " has no active scope: it was approved for one request, or its scope ended or was revoked"}
	case err != nil:
		return err
	}
	return s.apiWriteData(w, r, model.ApprovalOf(a, s.cfg.Now()))
}

// --- audit ---

// apiAuditList takes the audit page's filters (auditFilters), under the
// same names; the ones not listed in checks take any text.
func apiAuditList() apiListSpec {
	checks := map[string]func(string) error{
		"class": apiEnumFilter(apiClassWords()...), "kind": apiEnumFilter(apiKindWords()...),
		"decision": apiEnumFilter(apiDecisionWords()...), "since": apiTimeFilter, "until": apiTimeFilter}
	filters := map[string]func(string) error{}
	for _, fl := range new(auditFilters).fields() {
		filters[fl.name] = checks[fl.name]
	}
	return apiListSpec{resource: "audit", filters: filters, sorts: []string{"seq"}, defSort: "-seq"}
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
	// since and until are RFC 3339 (apiTimeFilter), which storeFilter reads.
	f, err := auditFiltersOf(func(name string) string { return p.filters[name] }).storeFilter()
	if err != nil {
		return err
	}
	f.Limit = p.limit + 1
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
	var pg apiPage[model.AuditRow]
	if len(rows) > p.limit { // one more than asked for: there is an older page
		rows = rows[len(rows)-p.limit:]
		last := strconv.FormatInt(rows[0].Seq, 10)
		next := apiCursor{V: cursorVersion, R: "audit", S: p.sort, K: last, I: last}.encode()
		pg.hasMore, pg.next = true, &next
	}
	for i := len(rows) - 1; i >= 0; i-- {
		pg.items = append(pg.items, model.AuditRowOf(rows[i]))
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
	v := model.ChainStatus{Intact: res.Broken == nil, Rows: res.Rows, Head: res.Head, VerifiedAt: model.Time(s.cfg.Now())}
	if b := res.Broken; b != nil {
		v.Broken = &model.ChainBreak{Seq: b.Seq, Position: b.Position, Reason: b.Reason}
	}
	return s.apiWriteData(w, r, v)
}

// --- tokens and admins ---

func apiTokenList() apiListSpec {
	scopes := make([]string, 0, len(store.TokenScopes))
	for _, sc := range store.TokenScopes {
		scopes = append(scopes, string(sc))
	}
	return apiListSpec{resource: "tokens",
		filters: map[string]func(string) error{"name": nil, "admin": nil, "scope": apiEnumFilter(scopes...)},
		sorts:   []string{"name", "created_at", "last_used_at"}, defSort: "name"}
}

// apiListTokens lists console tokens: names, owners, scopes and last use,
// never a token or its hash.
func (s *Server) apiListTokens(w http.ResponseWriter, r *http.Request, c *apiCall) error {
	p, err := parseAPIList(c.query, apiTokenList())
	if err != nil {
		return err
	}
	list, err := s.cfg.Store.ListConsoleTokens(r.Context())
	if err != nil {
		return err
	}
	var views []model.Token
	for _, t := range list {
		v := model.TokenOf(t)
		if f, ok := p.filters["admin"]; ok && f != v.Admin && f != v.AdminID {
			continue
		}
		if !apiMatchAll(p.filters, map[string]string{"name": v.Name, "scope": v.Scope}) {
			continue
		}
		views = append(views, v)
	}
	return apiWriteList(w, r, apiPaginate(views, p, "tokens", apiSorter[model.Token]{
		id: func(v model.Token) string { return v.ID },
		keys: map[string]func(model.Token) string{
			"name":         func(v model.Token) string { return v.Name },
			"created_at":   func(v model.Token) string { return sortTimeKey(time.Time(v.CreatedAt)) },
			"last_used_at": func(v model.Token) string { return sortTimeKey(time.Time(v.LastUsedAt)) },
		},
	}))
}

func (s *Server) apiGetToken(w http.ResponseWriter, r *http.Request, c *apiCall) error {
	if err := apiNoParams(c); err != nil {
		return err
	}
	t, err := s.tokenByRef(r)
	if err != nil {
		return err
	}
	return s.apiWriteData(w, r, model.TokenOf(*t))
}

func apiAdminList() apiListSpec {
	return apiListSpec{resource: "admins", filters: map[string]func(string) error{"name": nil, "disabled": apiBoolFilter},
		sorts: []string{"name", "created_at"}, defSort: "name"}
}

// apiListAdmins lists the admins: names and ids, never a password hash.
func (s *Server) apiListAdmins(w http.ResponseWriter, r *http.Request, c *apiCall) error {
	p, err := parseAPIList(c.query, apiAdminList())
	if err != nil {
		return err
	}
	list, err := s.cfg.Store.ListAdmins(r.Context())
	if err != nil {
		return err
	}
	var views []model.Admin
	for _, a := range list {
		v := model.AdminOf(a)
		if !apiMatchAll(p.filters, map[string]string{"name": v.Name, "disabled": strconv.FormatBool(v.Disabled)}) {
			continue
		}
		views = append(views, v)
	}
	return apiWriteList(w, r, apiPaginate(views, p, "admins", apiSorter[model.Admin]{
		id: func(v model.Admin) string { return v.ID },
		keys: map[string]func(model.Admin) string{
			"name":       func(v model.Admin) string { return strings.ToLower(v.Name) },
			"created_at": func(v model.Admin) string { return sortTimeKey(time.Time(v.CreatedAt)) },
		},
	}))
}
