package web

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"unicode"
	"unicode/utf8"

	"github.com/postern/postern/internal/usererr"
	"github.com/postern/postern/store"
)

// pageRoutes registers the admin pages. Every page and every form needs an
// admin session (requireAdmin); forms are POSTs that carry the session's
// CSRF token and answer with a 303 back to the page they came from, with the
// result in a flash message, so that a reload never posts twice. Every page
// is shown to every role; every form needs one (needRole, roles.go): the
// approver role for decisions, key checks, tokens and test messages, the
// admin role for configuration, the owner role for admins and their roles.
// A viewer posts nothing but logout.
func (s *Server) pageRoutes(mux *http.ServeMux) {
	const (
		approver = store.RoleApprover
		admin    = store.RoleAdmin
		owner    = store.RoleOwner
	)
	mux.Handle("GET /static/", staticHandler())
	mux.HandleFunc("GET /{$}", s.requireAdmin(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/approvals", http.StatusSeeOther)
	}))

	mux.HandleFunc("GET /approvals", s.requireAdmin(s.approvalsPage))
	mux.HandleFunc("GET /approvals/list", s.requireAdmin(s.approvalsFragment))
	mux.HandleFunc("GET /approvals/{id}", s.requireAdmin(s.approvalPage))
	mux.HandleFunc("POST /approvals/{id}/approve", s.requireAdmin(s.needRole(approver, s.approveForm)))
	mux.HandleFunc("POST /approvals/{id}/deny", s.requireAdmin(s.needRole(approver, s.denyForm)))
	mux.HandleFunc("GET /events", s.requireAdmin(s.eventStream))

	mux.HandleFunc("GET /connections", s.requireAdmin(s.connectionsPage))
	mux.HandleFunc("POST /connections", s.requireAdmin(s.needRole(admin, s.addConnectionForm)))
	mux.HandleFunc("POST /connections/{alias}/check", s.requireAdmin(s.needRole(approver, s.recheckForm)))
	mux.HandleFunc("POST /connections/{alias}/update", s.requireAdmin(s.needRole(admin, s.editConnectionForm)))
	mux.HandleFunc("POST /connections/{alias}/pin", s.requireAdmin(s.needRole(admin, s.pinConnectionForm)))
	mux.HandleFunc("POST /connections/{alias}/rotate-key", s.requireAdmin(s.needRole(admin, s.rotateKeyForm)))
	mux.HandleFunc("POST /connections/{alias}/remove", s.requireAdmin(s.needRole(admin, s.removeConnectionForm)))
	mux.HandleFunc("GET /agents", s.requireAdmin(s.agentsPage))
	mux.HandleFunc("POST /agents", s.requireAdmin(s.needRole(admin, s.addAgentForm)))
	mux.HandleFunc("POST /agents/{name}/keys", s.requireAdmin(s.needRole(admin, s.addAgentKeyForm)))
	mux.HandleFunc("POST /agents/{name}/keys/remove", s.requireAdmin(s.needRole(admin, s.removeAgentKeyForm)))
	mux.HandleFunc("POST /agents/{name}/disable", s.requireAdmin(s.needRole(admin, s.agentDisableForm(true))))
	mux.HandleFunc("POST /agents/{name}/enable", s.requireAdmin(s.needRole(admin, s.agentDisableForm(false))))
	mux.HandleFunc("POST /agents/{name}/remove", s.requireAdmin(s.needRole(admin, s.removeAgentForm)))
	mux.HandleFunc("GET /tokens", s.requireAdmin(s.tokensPage))
	mux.HandleFunc("POST /tokens", s.requireAdmin(s.needRole(approver, s.addTokenForm)))
	mux.HandleFunc("POST /tokens/{name}/remove", s.requireAdmin(s.needRole(approver, s.removeTokenForm)))
	mux.HandleFunc("GET /locks", s.requireAdmin(s.locksPage))
	mux.HandleFunc("POST /locks", s.requireAdmin(s.needRole(admin, s.lockForm)))
	mux.HandleFunc("POST /locks/{kind}/{name}/remove", s.requireAdmin(s.needRole(admin, s.unlockForm)))
	mux.HandleFunc("GET /admins", s.requireAdmin(s.adminsPage))
	mux.HandleFunc("POST /admins", s.requireAdmin(s.needRole(owner, s.addAdminForm)))
	mux.HandleFunc("POST /admins/{name}/role", s.requireAdmin(s.needRole(owner, s.adminRoleForm)))
	mux.HandleFunc("GET /grants", s.requireAdmin(s.grantsPage))
	mux.HandleFunc("POST /grants", s.requireAdmin(s.needRole(admin, s.grantForm)))
	mux.HandleFunc("POST /grants/revoke", s.requireAdmin(s.needRole(admin, s.revokeForm)))
	mux.HandleFunc("POST /scopes/{id}/revoke", s.requireAdmin(s.needRole(approver, s.revokeScopeForm)))
	mux.HandleFunc("GET /audit", s.requireAdmin(s.auditPage))
	mux.HandleFunc("GET /audit/export", s.requireAdmin(s.auditExport))
	mux.HandleFunc("GET /recipes", s.requireAdmin(s.recipesPage))
	mux.HandleFunc("GET /recordings", s.requireAdmin(s.needRole(admin, s.recordingsPage)))
	mux.HandleFunc("GET /recordings/{id}", s.requireAdmin(s.needRole(admin, s.recordingPage)))
	mux.HandleFunc("GET /notifications", s.requireAdmin(s.notificationsPage))
	mux.HandleFunc("POST /notifications", s.requireAdmin(s.needRole(admin, s.addNotificationForm)))
	mux.HandleFunc("POST /notifications/{name}/remove", s.requireAdmin(s.needRole(admin, s.removeNotificationForm)))
	mux.HandleFunc("POST /notifications/{name}/test", s.requireAdmin(s.needRole(approver, s.testNotificationForm)))
}

// flash is the one-line result of a form post, shown at the top of the page
// the post redirects to.
type flash struct {
	Kind string // "ok", "notice" or "error": the page styles them apart
	Text string
}

// Flash kinds. A notice is neither success nor failure: a change that was
// not made but waits for a second admin.
const (
	flashOK     = "ok"
	flashNotice = "notice"
	flashError  = "error"
)

// Query parameters that carry a flash across a redirect.
const (
	flashParam    = "flash"
	flashKindParm = "flash_kind"
	flashSigParam = "flash_sig"
)

// flashSig signs a flash with the session's CSRF token. A flash travels in
// the redirect's query string; without the signature anyone could send an
// admin a link to the real site that shows a message of their choosing
// ("postern moved to ...") in the page's trusted status line.
func flashSig(csrf, kind, text string) string {
	m := hmac.New(sha256.New, []byte(csrf))
	m.Write([]byte("postern flash\x00" + kind + "\x00" + text))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// flashFrom returns the request's flash if its signature matches the
// session, else nil.
func flashFrom(r *http.Request) *flash {
	q := r.URL.Query()
	text, kind, sig := q.Get(flashParam), q.Get(flashKindParm), q.Get(flashSigParam)
	sess := sessionFrom(r.Context())
	if text == "" || sess == nil || (kind != flashOK && kind != flashNotice && kind != flashError) {
		return nil
	}
	if !hmac.Equal([]byte(sig), []byte(flashSig(sess.CSRFToken, kind, text))) {
		return nil
	}
	return &flash{Kind: kind, Text: text}
}

// redirectFlash answers a form post with a 303 to next (a path on this
// site; "/" otherwise) carrying a signed flash.
func (s *Server) redirectFlash(w http.ResponseWriter, r *http.Request, next, kind, text string) {
	u, err := url.Parse(safeNext(next))
	if err != nil {
		u = &url.URL{Path: "/"}
	}
	q := u.Query()
	q.Del(flashParam)
	q.Del(flashKindParm)
	q.Del(flashSigParam)
	if sess := sessionFrom(r.Context()); sess != nil && text != "" {
		q.Set(flashKindParm, kind)
		q.Set(flashParam, text)
		q.Set(flashSigParam, flashSig(sess.CSRFToken, kind, text))
	}
	u.RawQuery = q.Encode()
	http.Redirect(w, r, u.String(), http.StatusSeeOther)
}

// page wraps a page's own data for the layout.
func page(title, nav, script string, data any) pageData {
	return pageData{Title: title, Nav: nav, Script: script, Page: data}
}

// renderFragment executes one named template of page file, without the
// layout, for the parts of a page that scripts fetch and swap in. Like
// render it executes into a buffer first, so an error gives a clean 500.
func (s *Server) renderFragment(w http.ResponseWriter, r *http.Request, file, name string, data any) {
	t, ok := s.pages.pages[file]
	if !ok {
		s.cfg.Logger.Error().Str("template", file).Msg("web: no such template")
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, name, data); err != nil {
		s.cfg.Logger.Error().Err(err).Str("template", file+"/"+name).Str("request_id", requestID(r.Context())).Msg("web: render")
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set(fragmentHeader, name)
	_, _ = buf.WriteTo(w)
}

// fragmentHeader names the fragment in a fragment's answer. A script that
// fetched a fragment checks it: an expired session answers with the login
// page instead (after a redirect), which must not be pasted into the page.
const fragmentHeader = "X-Postern-Fragment"

// serverError logs err and answers 500 without showing the error, which may
// name internals; the request id in the answer finds the log line.
func (s *Server) serverError(w http.ResponseWriter, r *http.Request, what string, err error) {
	if r.Context().Err() != nil {
		return // the client went away; nobody reads the answer
	}
	s.cfg.Logger.Error().Err(err).Str("request_id", requestID(r.Context())).Msg("web: " + what)
	http.Error(w, what+" failed; try again (request "+requestID(r.Context())+")", http.StatusInternalServerError)
}

// agentsAndConnections lists the agents and the connections, for the pages
// that offer both (grants, locks). false: it failed and answered w.
func (s *Server) agentsAndConnections(w http.ResponseWriter, r *http.Request) ([]store.Agent, []store.Connection, bool) {
	agents, err := s.cfg.Store.ListAgents(r.Context())
	if err != nil {
		s.serverError(w, r, "listing agents", err)
		return nil, nil, false
	}
	conns, err := s.cfg.Store.ListConnections(r.Context())
	if err != nil {
		s.serverError(w, r, "listing connections", err)
		return nil, nil, false
	}
	return agents, conns, true
}

// userMessage is the message a person may read in err: that of the
// *usererr.Error in its chain (a name not found or taken, input refused),
// with its first letter capitalised for a sentence of its own. false for
// any other error, which may name internals: the caller logs it and shows
// a generic message.
func userMessage(err error) (string, bool) {
	e, ok := usererr.As(err)
	if !ok || e.Error() == "" {
		return "", false
	}
	msg := e.Error()
	first, size := utf8.DecodeRuneInString(msg)
	return string(unicode.ToUpper(first)) + msg[size:], true
}
