package web

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"

	"github.com/postern/postern/internal/usererr"
	"github.com/postern/postern/manage"
	"github.com/postern/postern/model"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
)

// Deciding approvals over the API: POST /v1/approvals/{id}/approve and
// /deny. The decision goes through policy.Engine, which keeps the
// two-person rule and lets exactly one of several concurrent decisions win.
// The decider recorded (and shown to the agent and in the audit log) is
// "token:" and the console token's name.

// maxIdempotencyKeyLen bounds an Idempotency-Key; a UUID is 36.
const maxIdempotencyKeyLen = 255

// apiDecideStatuses are the statuses a decision answers besides the common ones.
func apiDecideStatuses() []int {
	return []int{http.StatusOK, http.StatusBadRequest, http.StatusForbidden, http.StatusNotFound, http.StatusConflict,
		http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType, http.StatusUnprocessableEntity}
}

func (s *Server) apiApprove(w http.ResponseWriter, r *http.Request, c *apiCall) error {
	return s.apiDecide(w, r, c, true)
}

func (s *Server) apiDeny(w http.ResponseWriter, r *http.Request, c *apiCall) error {
	return s.apiDecide(w, r, c, false)
}

// apiDecide approves or denies with the Idempotency-Key machinery.
func (s *Server) apiDecide(w http.ResponseWriter, r *http.Request, c *apiCall, approve bool) error {
	if err := apiNoParams(c); err != nil {
		return err
	}
	return s.apiIdempotent(w, r, c, apiRequestSum, func(body []byte) (int, []byte, []byte) {
		status, out := s.decideAnswer(r, c, approve, body)
		return status, out, out
	})
}

// apiWriteStatuses are the statuses of a change besides the common ones:
// own (its success and 404 if it names a record) and 400 (bad body), 403
// (token scope, cross-origin), 409 (a name taken), 413, 415 and 422
// (Idempotency-Key reused; a key check that proved nothing).
func apiWriteStatuses(own ...int) []int {
	return append(own, http.StatusBadRequest, http.StatusForbidden, http.StatusConflict,
		http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType, http.StatusUnprocessableEntity)
}

// apiWriteFunc makes one change from a request's body and returns the
// status and record to answer with, or an error (an *apiError, or a store
// or manage error that apiChangeError maps).
type apiWriteFunc func(s *Server, r *http.Request, c *apiCall, body []byte) (int, any, error)

// apiWriteRoute makes a change route of fn: the body read, the token's
// owner required, the Idempotency-Key kept and replayed, and the answer in
// the envelope.
func apiWriteRoute(fn apiWriteFunc) apiHandler {
	return apiWriteRouteSum(fn, apiRequestSum)
}

// apiWriteRouteSum is apiWriteRoute with its own binding of an
// Idempotency-Key to the request (apiRequestSumFunc), for a body that
// holds a secret a fast hash must not keep (apiPasswordRequestSum).
func apiWriteRouteSum(fn apiWriteFunc, sum apiRequestSumFunc) apiHandler {
	return func(s *Server, w http.ResponseWriter, r *http.Request, c *apiCall) error {
		if err := apiNoParams(c); err != nil {
			return err
		}
		return s.apiIdempotent(w, r, c, sum, func(body []byte) (int, []byte, []byte) {
			if c.token.AdminID == "" {
				status, out := s.apiErrorAnswer(r, &apiError{Status: http.StatusForbidden, Code: "token_without_admin",
					Message: "console token " + c.token.Name + " belongs to no admin and cannot change anything; " +
						"an admin assigns it with: postern token assign " + c.token.Name + " --as ADMIN"})
				return status, out, out
			}
			status, data, err := fn(s, r, c, body)
			var held *manage.HeldError
			if errors.As(err, &held) {
				// Not made: it waits for a second admin. The answer is
				// the request as the approvals queue shows it.
				status, data, err = http.StatusAccepted, model.ChangeApprovalOf(held.Request, s.cfg.Now()), nil
				s.cfg.Logger.Info().Str("change", held.Request.ID).Str("admin", c.token.AdminName).
					Str("token", c.token.Name).Str("request_id", requestID(r.Context())).Msg("web: api change held")
			}
			if err != nil {
				status, out := s.apiErrorAnswer(r, apiChangeError(err))
				return status, out, out
			}
			out := apiJSON(apiDataBody{Data: data, RequestID: requestID(r.Context())})
			kept := out
			// A new token's value is shown once and rests nowhere: a
			// replay shows the token without it.
			switch nt := data.(type) {
			case model.NewToken:
				nt.Value = ""
				kept = apiJSON(apiDataBody{Data: nt, RequestID: requestID(r.Context())})
			case apiHeldToken:
				nt.Value = ""
				kept = apiJSON(apiDataBody{Data: nt, RequestID: requestID(r.Context())})
			}
			return status, out, kept
		})
	}
}

// apiIdempotent reads the body, and with an Idempotency-Key replays the
// answer to an earlier identical request instead of acting again. A retry
// of a change whose answer was lost (a timeout, a dropped connection) then
// gets that answer, not a 409 about its own earlier success.
//
// The key is scoped to the token (principal "token:" + its id) and bound to
// the SHA-256 of method, path and body: the same key with a different
// request is refused with 422 rather than answered with another request's
// result. Answers below 500 are kept (for idempotencyKeep); a 5xx is not,
// so that a retry after a failure tries again. answer returns the status,
// the body to send and the body to keep for a replay, which leaves out what
// must not rest in the database (a new token's value); sum binds the key to
// the request (apiRequestSum, or apiPasswordRequestSum for a body with a
// password).
func (s *Server) apiIdempotent(w http.ResponseWriter, r *http.Request, c *apiCall, sum apiRequestSumFunc,
	answer func(body []byte) (int, []byte, []byte)) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAPIBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return &apiError{Status: http.StatusRequestEntityTooLarge, Code: "body_too_large",
				Message: "the request body is larger than 64 KiB"}
		}
		return &apiError{Status: http.StatusBadRequest, Code: "invalid_body", Message: "the request body could not be read"}
	}
	key := r.Header.Get("Idempotency-Key")
	_, hasKey := r.Header["Idempotency-Key"]
	if !hasKey {
		status, out, _ := answer(body)
		apiWriteBody(w, status, out)
		return nil
	}
	if err := apiCheckIdempotencyKey(key); err != nil {
		return err
	}
	principal := "token:" + c.token.ID
	reqSum := sum(r, principal+"\x00"+key, body)
	unlock, err := c.keys.lock(r.Context(), principal+"\x00"+key)
	if err != nil {
		return fmt.Errorf("web: waiting for another request with the same Idempotency-Key: %w", err)
	}
	defer unlock()
	prev, err := s.cfg.Store.IdempotentResponse(r.Context(), principal, key)
	switch {
	case err == nil:
		return apiReplay(w, prev, reqSum)
	case !errors.Is(err, store.ErrNotFound):
		return err
	}
	status, out, keep := answer(body)
	if status < 500 {
		kept, stored, err := s.cfg.Store.PutIdempotentResponse(r.Context(), principal, key,
			store.IdempotentResponse{RequestSHA256: reqSum, Status: status, Body: keep})
		switch {
		case err != nil:
			// The change is made; failing to remember its answer must
			// not hide it. A retry will be told what the change met.
			s.cfg.Logger.Warn().Err(err).Str("request_id", requestID(r.Context())).Msg("web: keeping idempotent answer")
		case !stored:
			// A concurrent request with the same key, in another postern
			// process, kept its answer first.
			return apiReplay(w, kept, reqSum)
		}
	}
	apiWriteBody(w, status, out)
	return nil
}

// keyLocks makes requests with the same principal and Idempotency-Key wait
// for each other. Without it two copies of one request sent together (a
// client that retries on a short timeout) would both miss the kept answer
// and both decide: one would win, the other get 409 already_decided, and
// whichever kept its answer first would be replayed to every later retry —
// possibly the 409, hiding the client's own success. Held in turn, the
// second finds the first's kept answer and replays it. It covers one
// process; PutIdempotentResponse keeps the first answer across processes.
type keyLocks struct {
	mu   sync.Mutex               // guards held
	held map[string]chan struct{} // key → closed when its holder unlocks
}

// lock waits until no other request holds key (or ctx ends), then holds it
// until the returned func is called.
func (k *keyLocks) lock(ctx context.Context, key string) (func(), error) {
	for {
		k.mu.Lock()
		busy, ok := k.held[key]
		if !ok {
			ch := make(chan struct{})
			k.held[key] = ch
			k.mu.Unlock()
			return func() {
				k.mu.Lock()
				delete(k.held, key)
				k.mu.Unlock()
				close(ch)
			}, nil
		}
		k.mu.Unlock()
		select {
		case <-busy:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// apiCheckIdempotencyKey accepts 1 to 255 printable ASCII characters.
func apiCheckIdempotencyKey(key string) error {
	ok := key != "" && len(key) <= maxIdempotencyKeyLen && !strings.ContainsFunc(key, func(r rune) bool {
		return r < 0x21 || r > 0x7e
	})
	if !ok {
		return apiBadParam("Idempotency-Key", "want 1 to %d printable ASCII characters without spaces, such as a UUID",
			maxIdempotencyKeyLen)
	}
	return nil
}

// apiRequestSumFunc binds an Idempotency-Key to one request: what it
// returns is kept with the answer, and a later request with the same key
// is replayed only if its sum is the same. keyed is the principal and the
// key, for a sum that needs a salt of its own.
type apiRequestSumFunc func(r *http.Request, keyed string, body []byte) string

// apiRequestSum binds an Idempotency-Key to one request: the SHA-256 of
// method, path and body.
func apiRequestSum(r *http.Request, _ string, body []byte) string {
	h := sha256.New()
	h.Write([]byte(r.Method + "\n" + r.URL.Path + "\n"))
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

// replay answers with a kept answer, or 422 when the key was first used for
// a different request.
func apiReplay(w http.ResponseWriter, prev *store.IdempotentResponse, reqSum string) error {
	if prev.RequestSHA256 != reqSum {
		return &apiError{Status: http.StatusUnprocessableEntity, Code: "idempotency_key_reused", Field: "Idempotency-Key",
			Message: "this Idempotency-Key was used for a different request (method, path or body); use a new key for a new request"}
	}
	w.Header().Set("Idempotent-Replayed", "true")
	apiWriteBody(w, prev.Status, prev.Body)
	return nil
}

// apiDecideBody is the optional JSON body of a decision: a denial's reason,
// or an approval's scope ("request", "operation" or "class") and, for a
// wider scope, how long it lasts ("30m", at most policy.MaxScope).
type apiDecideBody struct {
	Reason *string `json:"reason"`
	Scope  string  `json:"scope"`
	For    string  `json:"for"`
}

// decideAnswer makes the decision and returns its answer, success or error,
// as the status and body to send (and to keep for an Idempotency-Key).
func (s *Server) decideAnswer(r *http.Request, c *apiCall, approve bool, body []byte) (int, []byte) {
	fail := func(err error) (int, []byte) { return s.apiErrorAnswer(r, err) }
	var in apiDecideBody
	if len(bytes.TrimSpace(body)) > 0 {
		if err := apiCheckJSONType(r); err != nil {
			return fail(err)
		}
		if err := apiDecodeStrict(body, &in); err != nil {
			return fail(err)
		}
	}
	reason := ""
	if in.Reason != nil {
		if approve {
			return fail(&apiError{Status: http.StatusBadRequest, Code: "invalid_body", Field: "reason",
				Message: "reason: only a denial takes a reason"})
		}
		// Its rules (policy.CheckAdminText) are kept by Engine.Deny for
		// every door; apiDecideError answers a refusal.
		reason = *in.Reason
	}
	if !approve && (in.Scope != "" || in.For != "") {
		return fail(&apiError{Status: http.StatusBadRequest, Code: "invalid_body", Field: "scope",
			Message: "scope: only an approval takes a scope"})
	}
	scope, err := policy.ParseScope(in.Scope, in.For)
	if err != nil {
		return fail(&apiError{Status: http.StatusBadRequest, Code: "invalid_body", Field: "scope",
			Message: usererr.Message(err, "scope: want request, operation or class")})
	}
	id := r.PathValue("id")
	if c.token.AdminID == "" {
		// A token made before tokens had owners: its decisions would be
		// nobody's, and two such tokens could pass the two-person rule.
		return fail(&apiError{Status: http.StatusForbidden, Code: "token_without_admin",
			Message: "console token " + c.token.Name + " belongs to no admin and cannot decide; " +
				"an admin assigns it with: postern token assign " + c.token.Name + " --as ADMIN"})
	}
	if store.IsChangeID(id) {
		if scope.Kind != store.ScopeRequest || scope.For != 0 {
			return fail(&apiError{Status: http.StatusBadRequest, Code: "invalid_body", Field: "scope",
				Message: "scope: a change request is approved for itself only; leave scope out or give request"})
		}
		return s.decideChangeAnswer(r, c, id, approve, reason)
	}
	by := policy.Decider{AdminID: c.token.AdminID, Name: c.token.AdminName}
	var a policy.Approval
	if approve {
		a, err = s.cfg.Engine.Approve(r.Context(), id, by, scope)
	} else {
		a, err = s.cfg.Engine.Deny(r.Context(), id, by, reason)
	}
	if err != nil {
		return fail(apiDecideError(id, by.Name, err))
	}
	s.cfg.Logger.Info().Str("approval", id).Str("admin", by.Name).Str("token", c.token.Name).Str("status", a.Status).
		Str("request_id", requestID(r.Context())).Msg("web: api decision")
	return http.StatusOK, apiJSON(apiDataBody{Data: model.ApprovalOf(a, s.cfg.Now()), RequestID: requestID(r.Context())})
}

// decideChangeAnswer approves or denies change request id (a change of
// configuration that waits for a second admin) as the token's admin,
// through manage, which refuses the admin who asked and makes an approved
// change at once.
func (s *Server) decideChangeAnswer(r *http.Request, c *apiCall, id string, approve bool, reason string) (int, []byte) {
	ch, err := s.cfg.Manager.DecideChange(r.Context(), apiActor(r, c), id, approve, reason)
	if err != nil && ch.Status != store.ChangeFailed {
		return s.apiErrorAnswer(r, apiChangeDecideError(id, c.token.AdminName, err))
	}
	if err != nil {
		// Approved, but what it changes could no longer be changed: the
		// request is failed, with the reason.
		return s.apiErrorAnswer(r, &apiError{Status: http.StatusUnprocessableEntity, Code: "change_failed",
			Message: "change " + id + " was approved but could not be made: " + ch.Reason})
	}
	s.cfg.Logger.Info().Str("change", id).Str("admin", c.token.AdminName).Str("token", c.token.Name).
		Str("status", ch.Status).Str("request_id", requestID(r.Context())).Msg("web: api change decision")
	return http.StatusOK, apiJSON(apiDataBody{Data: model.ChangeApprovalOf(ch, s.cfg.Now()), RequestID: requestID(r.Context())})
}

// apiChangeDecideError maps manage's and the store's refusals of a change
// decision to answers, as apiDecideError does for an operation's: the admin
// who asked is refused as a second approval by the same admin is (409
// same_approver), a request decided or expired is 409 already_decided, a
// role below approver 403 insufficient_role.
func apiChangeDecideError(id, decider string, err error) error {
	msg, shown := userMessage(err)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return apiNotFound("change request", id)
	case isRoleRefusal(err):
		return &apiError{Status: http.StatusForbidden, Code: "insufficient_role", Message: msg}
	case errors.Is(err, store.ErrSameRequester):
		return &apiError{Status: http.StatusConflict, Code: "same_approver",
			Message: decider + " asked for change " + id + "; a different admin must decide it (another token of the same admin does not count)"}
	case errors.Is(err, store.ErrChangeDecided):
		return &apiError{Status: http.StatusConflict, Code: "already_decided", Message: msg}
	case errors.Is(err, policy.ErrInvalidText):
		return &apiError{Status: http.StatusBadRequest, Code: "invalid_body", Field: "reason", Message: msg}
	case shown:
		return &apiError{Status: http.StatusBadRequest, Code: "invalid_body", Message: msg}
	}
	return err
}

// apiDecideError maps the engine's refusals to answers; anything else (the
// database) stays an error for apiErrorAnswer's 503.
//
// An expired request is 409 with code approval_expired, not 410 Gone: the
// request still exists (GET shows it, with status expired); what conflicts
// is the decision with its state, as for one already decided.
func apiDecideError(id, decider string, err error) error {
	var done *policy.AlreadyDecidedError
	switch {
	case errors.Is(err, store.ErrNotFound):
		return apiNotFound("approval", id)
	case isRoleRefusal(err):
		return &apiError{Status: http.StatusForbidden, Code: "insufficient_role",
			Message: usererr.Message(err, decider+" may not decide approvals")}
	case errors.As(err, &done) && done.Status == store.ApprovalExpired, errors.Is(err, policy.ErrExpired):
		return &apiError{Status: http.StatusConflict, Code: "approval_expired",
			Message: "approval " + id + " expired before it was decided; the agent must ask again"}
	case errors.As(err, &done):
		msg := "approval " + id + " was already " + done.Status
		if len(done.Deciders) > 0 {
			msg += " by " + strings.Join(done.Deciders, " and ")
		}
		return &apiError{Status: http.StatusConflict, Code: "already_decided", Message: msg}
	case errors.Is(err, policy.ErrSameApprover):
		return &apiError{Status: http.StatusConflict, Code: "same_approver",
			Message: decider + " already gave the first of the two approvals " + id +
				" needs; the second must come from a different admin (another token of the same admin does not count)"}
	case errors.Is(err, policy.ErrScope):
		return &apiError{Status: http.StatusUnprocessableEntity, Code: "scope_not_allowed", Field: "scope",
			Message: usererr.Message(err, "the scope is not allowed")}
	case errors.Is(err, policy.ErrInvalidText):
		return &apiError{Status: http.StatusBadRequest, Code: "invalid_body", Field: "reason",
			Message: usererr.Message(err, "reason: not allowed")}
	}
	return err
}

// apiCheckJSONType refuses a body sent as something other than JSON. A body
// without a Content-Type is read as JSON, for curl's sake.
func apiCheckJSONType(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return &apiError{Status: http.StatusUnsupportedMediaType, Code: "unsupported_media_type", Field: "Content-Type",
			Message: "send the body as application/json"}
	}
	return nil
}

// apiDecodeStrict reads one JSON object into v, refusing unknown fields and
// trailing data, and names the field at fault where it can.
func apiDecodeStrict(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("more than one JSON value")
	} else if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			err = errors.New("data after the JSON object")
		}
	}
	if err == nil {
		return nil
	}
	ae := &apiError{Status: http.StatusBadRequest, Code: "invalid_body", Message: "the body is not a valid JSON object: " + err.Error()}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		ae.Field = te.Field
		ae.Message = te.Field + ": want a " + te.Type.String()
	} else if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		ae.Field = strings.Trim(name, `"`)
		ae.Message = ae.Field + ": unknown field"
	}
	return ae
}
