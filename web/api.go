package web

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/postern/postern/store"
)

// The REST API under /v1 (openapi.json describes it): bearer-token
// authentication, one rate limit per token, the {"data", "request_id"}
// envelope and honest error statuses. The resources are in api_resources.go, the list
// machinery (filters, sort, cursors) in api_list.go and the decisions with
// their Idempotency-Key in api_decide.go.

// openAPIDocument is the API's OpenAPI 3.1 description, served at
// GET /v1/openapi.json. TestOpenAPIMatchesRoutes keeps it and
// apiRouteTable in step.
//
//go:embed openapi.json
var openAPIDocument []byte

// maxAPIBody bounds a request body: the largest one the API takes is a
// denial's reason, so 64 KiB is generous and stops a client from making the
// server buffer an arbitrary amount.
const maxAPIBody = 64 << 10

// apiRoute is one endpoint of the API. apiRouteTable is the only list of
// them: apiRoutes registers it on the mux, the catch-all answers 405 from
// it, and the OpenAPI test checks the document against it — so an endpoint
// cannot be served undocumented, or documented and missing.
type apiRoute struct {
	Method string
	Path   string // a ServeMux path pattern, which is also the OpenAPI path: /v1/agents/{id}
	Public bool   // served without a token (rate-limited per address)
	// Scope is what the token must allow: read for a GET unless set,
	// approve for decisions and key checks, admin for every change.
	Scope store.TokenScope
	// Statuses lists every status the route answers, including the common
	// ones (401, 429, 503) of authenticated routes; the OpenAPI test wants
	// each documented.
	Statuses []int
	handle   apiHandler
}

// apiHandler serves one endpoint. It writes a success itself; an error it
// returns is written by apiError's rules: an *apiError as it says, anything
// else logged and answered 503, since what fails under a handler is the
// database.
type apiHandler func(s *Server, w http.ResponseWriter, r *http.Request, c *apiCall) error

// apiCall is what the route wrapper learned about a request before its
// handler runs.
type apiCall struct {
	token *store.ConsoleToken // the caller; nil on public routes
	query url.Values          // the parsed query string
	keys  *keyLocks           // the server's Idempotency-Key locks
}

// authed returns the statuses of an authenticated route: its own plus 401
// (no or unknown token), 429 (rate limit) and 503 (database failure).
func apiAuthed(own ...int) []int {
	return append(own, http.StatusUnauthorized, http.StatusTooManyRequests, http.StatusServiceUnavailable)
}

// scope is the token scope the route needs.
func (rt apiRoute) scope() store.TokenScope {
	switch {
	case rt.Scope != "":
		return rt.Scope
	case rt.Method == http.MethodGet:
		return store.ScopeRead
	}
	return store.ScopeAdmin
}

// apiRouteTable lists the API. It is a function, not a variable, so that
// the package holds no mutable state.
func apiRouteTable() []apiRoute {
	const (
		ok       = http.StatusOK
		bad      = http.StatusBadRequest
		notFound = http.StatusNotFound
		// held is a change that waits for a second admin (manage's
		// HeldError): 202 with the change request.
		held = http.StatusAccepted
	)
	const (
		approve = store.ScopeApprove
		admin   = store.ScopeAdmin
	)
	routes := []apiRoute{
		{Method: "GET", Path: "/v1/openapi.json", Public: true, Statuses: []int{ok, http.StatusTooManyRequests},
			handle: (*Server).apiOpenAPI},
		{Method: "GET", Path: "/v1/recipes", Statuses: apiAuthed(ok, bad), handle: (*Server).apiListRecipes},
		{Method: "GET", Path: "/v1/recipes/{key}", Statuses: apiAuthed(ok, notFound), handle: (*Server).apiGetRecipe},
		{Method: "GET", Path: "/v1/agents", Statuses: apiAuthed(ok, bad), handle: (*Server).apiListAgents},
		{Method: "POST", Path: "/v1/agents", Scope: admin, Statuses: apiAuthed(apiWriteStatuses(http.StatusCreated)...),
			handle: apiWriteRoute((*Server).apiCreateAgent)},
		{Method: "GET", Path: "/v1/agents/{id}", Statuses: apiAuthed(ok, notFound), handle: (*Server).apiGetAgent},
		{Method: "PATCH", Path: "/v1/agents/{id}", Scope: admin, Statuses: apiAuthed(apiWriteStatuses(ok, notFound)...),
			handle: apiWriteRoute((*Server).apiUpdateAgent)},
		{Method: "DELETE", Path: "/v1/agents/{id}", Scope: admin, Statuses: apiAuthed(apiWriteStatuses(ok, notFound)...),
			handle: apiWriteRoute((*Server).apiDeleteAgent)},
		{Method: "GET", Path: "/v1/connections", Statuses: apiAuthed(ok, bad), handle: (*Server).apiListConnections},
		{Method: "POST", Path: "/v1/connections", Scope: admin,
			Statuses: apiAuthed(apiWriteStatuses(http.StatusCreated)...),
			handle:   apiWriteRoute((*Server).apiCreateConnection)},
		{Method: "GET", Path: "/v1/connections/{id}", Statuses: apiAuthed(ok, notFound), handle: (*Server).apiGetConnection},
		{Method: "PATCH", Path: "/v1/connections/{id}", Scope: admin,
			Statuses: apiAuthed(apiWriteStatuses(ok, held, notFound)...),
			handle:   apiWriteRoute((*Server).apiUpdateConnection)},
		{Method: "DELETE", Path: "/v1/connections/{id}", Scope: admin, Statuses: apiAuthed(apiWriteStatuses(ok, held, notFound)...),
			handle: apiWriteRoute((*Server).apiDeleteConnection)},
		{Method: "POST", Path: "/v1/connections/{id}/pin", Scope: admin,
			Statuses: apiAuthed(apiWriteStatuses(ok, held, notFound)...),
			handle:   apiWriteRoute((*Server).apiPinConnection)},
		{Method: "POST", Path: "/v1/connections/{id}/rotate-key", Scope: admin,
			Statuses: apiAuthed(apiWriteStatuses(ok, held, notFound)...),
			handle:   apiWriteRoute((*Server).apiRotateConnectionKey)},
		{Method: "POST", Path: "/v1/connections/{id}/check", Scope: approve, Statuses: apiAuthed(ok, notFound, http.StatusForbidden),
			handle: (*Server).apiCheckConnection},
		{Method: "GET", Path: "/v1/grants", Statuses: apiAuthed(ok, bad), handle: (*Server).apiListGrants},
		{Method: "POST", Path: "/v1/grants", Scope: admin,
			Statuses: apiAuthed(apiWriteStatuses(ok, http.StatusCreated, held, notFound)...),
			handle:   apiWriteRoute((*Server).apiSetGrant)},
		{Method: "DELETE", Path: "/v1/grants/{id}", Scope: admin, Statuses: apiAuthed(apiWriteStatuses(ok, notFound)...),
			handle: apiWriteRoute((*Server).apiDeleteGrant)},
		{Method: "GET", Path: "/v1/tokens", Statuses: apiAuthed(ok, bad), handle: (*Server).apiListTokens},
		{Method: "POST", Path: "/v1/tokens", Scope: admin, Statuses: apiAuthed(apiWriteStatuses(http.StatusCreated, held)...),
			handle: apiWriteRoute((*Server).apiCreateToken)},
		{Method: "GET", Path: "/v1/tokens/{id}", Statuses: apiAuthed(ok, notFound), handle: (*Server).apiGetToken},
		{Method: "DELETE", Path: "/v1/tokens/{id}", Scope: admin, Statuses: apiAuthed(apiWriteStatuses(ok, notFound)...),
			handle: apiWriteRoute((*Server).apiDeleteToken)},
		{Method: "GET", Path: "/v1/admins", Statuses: apiAuthed(ok, bad), handle: (*Server).apiListAdmins},
		{Method: "POST", Path: "/v1/admins", Scope: admin, Statuses: apiAuthed(apiWriteStatuses(http.StatusCreated, held)...),
			handle: apiWriteRouteSum((*Server).apiCreateAdmin, apiPasswordRequestSum)},
		{Method: "PATCH", Path: "/v1/admins/{id}", Scope: admin, Statuses: apiAuthed(apiWriteStatuses(ok, held, notFound)...),
			handle: apiWriteRoute((*Server).apiUpdateAdmin)},
		{Method: "GET", Path: "/v1/approvals", Statuses: apiAuthed(ok, bad), handle: (*Server).apiListApprovals},
		{Method: "GET", Path: "/v1/approvals/{id}", Statuses: apiAuthed(ok, notFound), handle: (*Server).apiGetApproval},
		{Method: "POST", Path: "/v1/approvals/{id}/approve", Scope: approve, Statuses: apiAuthed(apiDecideStatuses()...),
			handle: (*Server).apiApprove},
		{Method: "POST", Path: "/v1/approvals/{id}/deny", Scope: approve, Statuses: apiAuthed(apiDecideStatuses()...),
			handle: (*Server).apiDeny},
		{Method: "POST", Path: "/v1/approvals/{id}/revoke-scope", Scope: approve,
			Statuses: apiAuthed(ok, bad, http.StatusForbidden, notFound, http.StatusConflict),
			handle:   (*Server).apiRevokeScope},
		{Method: "GET", Path: "/v1/notifications", Statuses: apiAuthed(ok, bad), handle: (*Server).apiListNotifications},
		{Method: "POST", Path: "/v1/notifications", Scope: admin, Statuses: apiAuthed(apiWriteStatuses(http.StatusCreated)...),
			handle: apiWriteRoute((*Server).apiAddNotification)},
		{Method: "GET", Path: "/v1/notifications/{id}", Statuses: apiAuthed(ok, notFound), handle: (*Server).apiGetNotification},
		{Method: "PATCH", Path: "/v1/notifications/{id}", Scope: admin, Statuses: apiAuthed(apiWriteStatuses(ok, notFound)...),
			handle: apiWriteRoute((*Server).apiUpdateNotification)},
		{Method: "DELETE", Path: "/v1/notifications/{id}", Scope: admin, Statuses: apiAuthed(apiWriteStatuses(ok, notFound)...),
			handle: apiWriteRoute((*Server).apiRemoveNotification)},
		{Method: "POST", Path: "/v1/notifications/{id}/test", Scope: approve,
			Statuses: apiAuthed(ok, bad, http.StatusForbidden, notFound, http.StatusNotImplemented),
			handle:   (*Server).apiTestNotification},
		{Method: "GET", Path: "/v1/locks", Statuses: apiAuthed(ok, bad), handle: (*Server).apiListLocks},
		{Method: "POST", Path: "/v1/locks", Scope: admin, Statuses: apiAuthed(apiWriteStatuses(http.StatusCreated, notFound)...),
			handle: apiWriteRoute((*Server).apiCreateLock)},
		{Method: "DELETE", Path: "/v1/locks/{id}", Scope: admin, Statuses: apiAuthed(apiWriteStatuses(ok, notFound)...),
			handle: apiWriteRoute((*Server).apiDeleteLock)},
		{Method: "GET", Path: "/v1/audit", Statuses: apiAuthed(ok, bad), handle: (*Server).apiListAudit},
		{Method: "GET", Path: "/v1/audit/verify", Statuses: apiAuthed(ok), handle: (*Server).apiVerifyAudit},
		{Method: "GET", Path: "/v1/recordings", Scope: admin, Statuses: apiAuthed(ok, bad), handle: (*Server).apiListRecordings},
		{Method: "GET", Path: "/v1/recordings/{id}", Scope: admin, Statuses: apiAuthed(ok, notFound), handle: (*Server).apiGetRecording},
	}
	// Every state-changing route refuses a request another site's page
	// made (CrossOriginProtection in front of the mux): 403 cross_origin.
	// A route that needs more than read refuses a token whose scope is
	// narrower: 403 insufficient_scope.
	for i, rt := range routes {
		if (rt.Method != http.MethodGet || rt.scope() != store.ScopeRead) && !slices.Contains(rt.Statuses, http.StatusForbidden) {
			routes[i].Statuses = append(rt.Statuses, http.StatusForbidden)
		}
	}
	return routes
}

// apiRoutes registers the REST API under /v1, and a catch-all for /v1/ that
// answers unknown paths 404 and known paths with another method 405, both
// in the API's JSON error shape rather than ServeMux's plain text.
func (s *Server) apiRoutes(mux *http.ServeMux) {
	routes := apiRouteTable()
	keys := &keyLocks{held: map[string]chan struct{}{}}
	for _, rt := range routes {
		mux.HandleFunc(rt.Method+" "+rt.Path, s.apiServe(rt, keys))
	}
	mux.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) {
		s.apiNoRoute(w, r, routes)
	})
}

// apiServe wraps a route's handler with authentication, the rate limit and
// query parsing.
func (s *Server) apiServe(rt apiRoute, keys *keyLocks) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c := &apiCall{keys: keys}
		if rt.Public {
			if ok, wait := s.apiLimit.Allow("addr:" + clientAddr(r)); !ok {
				s.apiTooMany(w, r, wait)
				return
			}
		} else {
			tok, ok := s.apiAuthenticate(w, r)
			if !ok {
				return
			}
			if need := rt.scope(); !tokenScope(tok).Allows(need) {
				s.apiWriteError(w, r, scopeRefusal(tok, rt, need))
				return
			}
			c.token = tok
		}
		q, err := url.ParseQuery(r.URL.RawQuery)
		if err != nil {
			s.apiWriteError(w, r, &apiError{Status: http.StatusBadRequest, Code: "invalid_query",
				Message: "the query string is malformed: " + apiQueryErrText(err)})
			return
		}
		c.query = q
		if err := rt.handle(s, w, r, c); err != nil {
			s.apiWriteError(w, r, err)
		}
	}
}

// tokenScope is what a token may do now: its scope, narrowed to its
// admin's role as it stands at this call (ConsoleToken.Role), so that an
// admin whose role was lowered, or who was disabled, loses the token's
// power at once rather than when the token is revoked. A token that
// belongs to no admin (made before tokens had owners) keeps its scope: it
// may read, and every decision and change refuses it (token_without_admin).
func tokenScope(tok *store.ConsoleToken) store.TokenScope {
	if tok.AdminID == "" {
		return tok.Scope
	}
	return tok.Role().Scope()
}

// scopeRefusal is the 403 of a token that may not use route rt:
// insufficient_scope when the token's own scope is too narrow,
// insufficient_role when the scope would do but its admin's role does not.
func scopeRefusal(tok *store.ConsoleToken, rt apiRoute, need store.TokenScope) *apiError {
	if tok.Scope.Allows(need) {
		role := string(tok.AdminRole)
		if role == "" {
			role = "no role"
		}
		return &apiError{Status: http.StatusForbidden, Code: "insufficient_role",
			Message: "console token " + tok.Name + " belongs to admin " + tok.AdminName + ", who has " + role + "; " +
				rt.Method + " " + rt.Path + " needs the " + string(need.Role()) + " role"}
	}
	return &apiError{Status: http.StatusForbidden, Code: "insufficient_scope",
		Message: "console token " + tok.Name + " has scope " + string(tok.Scope) + "; " + rt.Method + " " + rt.Path +
			" needs " + string(need) + " (postern token add NAME --as ADMIN --scope " + string(need) + ")"}
}

// apiQueryErrText is url.ParseQuery's complaint without the package's prefix.
func apiQueryErrText(err error) string {
	var ee url.EscapeError
	if errors.As(err, &ee) {
		return "bad percent-escape " + strconv.Quote(string(ee))
	}
	return err.Error()
}

// apiAuthenticate finds the request's console token and takes one request
// from its rate limit. A request without a valid token is charged to its
// address, and an address that has run out is refused before the token is
// looked up, so that guessing tokens is as slow as the limit. On false the
// answer is written.
func (s *Server) apiAuthenticate(w http.ResponseWriter, r *http.Request) (*store.ConsoleToken, bool) {
	addrKey := "addr:" + clientAddr(r)
	if ok, wait := s.apiLimit.Peek(addrKey); !ok {
		s.apiTooMany(w, r, wait)
		return nil, false
	}
	tok, err := s.tokenFrom(r)
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			s.apiWriteError(w, r, fmt.Errorf("web: token lookup: %w", err))
			return nil, false
		}
		s.apiLimit.Charge(addrKey)
		msg := "a console token is needed: send Authorization: Bearer TOKEN (postern token add NAME makes one)"
		if r.Header.Get("Authorization") != "" {
			msg = "the console token is unknown or was removed"
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="postern"`)
		s.apiWriteError(w, r, &apiError{Status: http.StatusUnauthorized, Code: "unauthorized", Message: msg})
		return nil, false
	}
	if ok, wait := s.apiLimit.Allow("token:" + tok.ID); !ok {
		s.apiTooMany(w, r, wait)
		return nil, false
	}
	return tok, true
}

// apiTooMany answers 429 with the seconds to wait.
func (s *Server) apiTooMany(w http.ResponseWriter, r *http.Request, wait time.Duration) {
	secs := max(int((wait+time.Second-1)/time.Second), 1)
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	s.apiWriteError(w, r, &apiError{Status: http.StatusTooManyRequests, Code: "rate_limited",
		Message: "too many requests; retry after " + strconv.Itoa(secs) + " seconds"})
}

// apiNoRoute answers a /v1/ request that no route took: 405 with Allow
// when the path is served with other methods, else 404.
func (s *Server) apiNoRoute(w http.ResponseWriter, r *http.Request, routes []apiRoute) {
	var allow []string
	for _, rt := range routes {
		if apiPathMatches(rt.Path, r.URL.Path) && !slices.Contains(allow, rt.Method) {
			allow = append(allow, rt.Method)
		}
	}
	if len(allow) == 0 {
		s.apiWriteError(w, r, &apiError{Status: http.StatusNotFound, Code: "route_not_found",
			Message: "no API endpoint " + r.URL.Path + "; see /v1/openapi.json"})
		return
	}
	if slices.Contains(allow, "GET") {
		allow = append(allow, "HEAD")
	}
	slices.Sort(allow)
	w.Header().Set("Allow", strings.Join(allow, ", "))
	s.apiWriteError(w, r, &apiError{Status: http.StatusMethodNotAllowed, Code: "method_not_allowed",
		Message: r.Method + " is not allowed on " + r.URL.Path + "; use " + strings.Join(allow, ", ")})
}

// apiPathMatches reports whether path fits pattern, whose {name} segments
// match any one non-empty segment — ServeMux's rule for the patterns the
// route table uses.
func apiPathMatches(pattern, path string) bool {
	ps, xs := strings.Split(pattern, "/"), strings.Split(path, "/")
	if len(ps) != len(xs) {
		return false
	}
	for i, p := range ps {
		if strings.HasPrefix(p, "{") && strings.HasSuffix(p, "}") {
			if xs[i] == "" {
				return false
			}
			continue
		}
		if p != xs[i] {
			return false
		}
	}
	return true
}

func (s *Server) apiOpenAPI(w http.ResponseWriter, r *http.Request, _ *apiCall) error {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(openAPIDocument)
	return nil
}

// apiError is an error answer: {"error": {"code", "message", "field"},
// "request_id"}. Code is stable for programs; Message is for people; Field
// names the query parameter, header or body field at fault, if one is.
type apiError struct {
	Status  int
	Code    string
	Message string
	Field   string
}

func (e *apiError) Error() string {
	return fmt.Sprintf("web: %d %s: %s", e.Status, e.Code, e.Message)
}

// apiBadParam is a 400 naming the parameter at fault.
func apiBadParam(field, format string, args ...any) *apiError {
	return &apiError{Status: http.StatusBadRequest, Code: "invalid_parameter", Field: field,
		Message: field + ": " + fmt.Sprintf(format, args...)}
}

// apiNotFound is a 404 for a record that does not exist.
func apiNotFound(kind, id string) *apiError {
	return &apiError{Status: http.StatusNotFound, Code: "not_found", Message: "no " + kind + " " + strconv.Quote(id)}
}

// apiErrorBody is the JSON of an error answer.
type apiErrorBody struct {
	Error     apiErrorDetail `json:"error"`
	RequestID string         `json:"request_id"`
}

type apiErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

// apiErrorAnswer turns err into a status and body. An error that is not an
// *apiError is logged with the request id and answered 503: it is the
// database (or the engine over it) failing, and a retry may succeed. Its
// text stays in the log.
func (s *Server) apiErrorAnswer(r *http.Request, err error) (int, []byte) {
	var ae *apiError
	if !errors.As(err, &ae) {
		s.cfg.Logger.Error().Err(err).Str("request_id", requestID(r.Context())).Str("path", r.URL.Path).
			Msg("web: api")
		ae = &apiError{Status: http.StatusServiceUnavailable, Code: "unavailable",
			Message: "the database did not answer; try again (request " + requestID(r.Context()) + " is in the server log)"}
	}
	return ae.Status, apiJSON(apiErrorBody{
		Error:     apiErrorDetail{Code: ae.Code, Message: ae.Message, Field: ae.Field},
		RequestID: requestID(r.Context()),
	})
}

func (s *Server) apiWriteError(w http.ResponseWriter, r *http.Request, err error) {
	status, body := s.apiErrorAnswer(r, err)
	apiWriteBody(w, status, body)
}

// apiDataBody is the envelope of a single record's answer.
type apiDataBody struct {
	Data      any    `json:"data"`
	RequestID string `json:"request_id"`
}

// apiListBody is the envelope of a list: next_cursor is null on the last page.
type apiListBody struct {
	Data       any     `json:"data"`
	HasMore    bool    `json:"has_more"`
	NextCursor *string `json:"next_cursor"`
	RequestID  string  `json:"request_id"`
}

// apiWriteData answers 200 with one record (or result) in the envelope.
func (s *Server) apiWriteData(w http.ResponseWriter, r *http.Request, data any) error {
	apiWriteBody(w, http.StatusOK, apiJSON(apiDataBody{Data: data, RequestID: requestID(r.Context())}))
	return nil
}

// apiWriteList answers 200 with a page of a list.
func apiWriteList[T any](w http.ResponseWriter, r *http.Request, p apiPage[T]) error {
	data := p.items
	if data == nil {
		data = []T{}
	}
	apiWriteBody(w, http.StatusOK, apiJSON(apiListBody{Data: data, HasMore: p.hasMore, NextCursor: p.next,
		RequestID: requestID(r.Context())}))
	return nil
}

func apiWriteBody(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// apiJSON marshals the API's own answer types, which hold only strings,
// numbers, booleans, times and slices of them: marshalling cannot fail, and
// a failure would be a programming error worth the recovered panic's 500.
func apiJSON(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(true)
	if err := enc.Encode(v); err != nil {
		panic(fmt.Sprintf("web: marshal API answer: %v", err))
	}
	return buf.Bytes()
}
