package web

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/postern/postern/manage"
	"github.com/postern/postern/store"
)

// Cookie names. The __Host- prefix makes the browser refuse them unless
// they are Secure, for path / and without a Domain: no other host or path
// can plant or read them.
const (
	sessionCookie    = "__Host-postern_session"
	loginCSRFCookie  = "__Host-postern_login"
	csrfField        = "csrf_token"
	csrfHeader       = "X-CSRF-Token"
	tokenPrefix      = "pst_"
	maxLoginBodySize = 16 << 10
)

// NewToken returns a new random secret (a session cookie value or a console
// token) with prefix, and the hex SHA-256 that the store keeps of it.
func NewToken(prefix string) (token, sha string) {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	token = prefix + base64.RawURLEncoding.EncodeToString(b[:])
	return token, hashToken(token)
}

// NewConsoleToken returns a new console token for the REST API and the
// hash to store: the token is shown once and never kept.
func NewConsoleToken() (token, sha string) { return manage.NewTokenValue() }

func hashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// adminKey is the context key of the logged-in admin's session.
type adminKey struct{}

// sessionFrom returns the admin session of a request that passed
// requireAdmin.
func sessionFrom(ctx context.Context) *store.AdminSession {
	s, _ := ctx.Value(adminKey{}).(*store.AdminSession)
	return s
}

// session looks up the request's session cookie.
func (s *Server) session(r *http.Request) (*store.AdminSession, error) {
	c, err := r.Cookie(sessionCookie)
	if err != nil || c.Value == "" || len(c.Value) > 256 {
		return nil, store.ErrNotFound
	}
	return s.cfg.Store.AdminSessionByToken(r.Context(), hashToken(c.Value))
}

// requireAdmin lets a request through only with a live admin session; a
// state-changing request must also carry the session's CSRF token (form
// field csrf_token or header X-CSRF-Token) and, if the browser sent one, an
// Origin of this site. Pages redirect to the login page; other requests get
// 401.
func (s *Server) requireAdmin(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sess, err := s.session(r)
		if err != nil {
			if !errors.Is(err, store.ErrNotFound) {
				s.cfg.Logger.Error().Err(err).Str("request_id", requestID(r.Context())).Msg("web: session lookup")
				http.Error(w, "session lookup failed; try again", http.StatusServiceUnavailable)
				return
			}
			if r.Method == http.MethodGet || r.Method == http.MethodHead {
				http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			http.Error(w, "not logged in", http.StatusUnauthorized)
			return
		}
		if !safeMethod(r.Method) {
			if !sameOrigin(r) {
				http.Error(w, "cross-origin request refused", http.StatusForbidden)
				return
			}
			got := r.Header.Get(csrfHeader)
			if got == "" {
				r.Body = http.MaxBytesReader(w, r.Body, maxFormSize)
				got = r.PostFormValue(csrfField)
			}
			if subtle.ConstantTimeCompare([]byte(got), []byte(sess.CSRFToken)) != 1 {
				http.Error(w, "missing or wrong CSRF token; reload the page and try again", http.StatusForbidden)
				return
			}
		}
		next(w, r.WithContext(context.WithValue(r.Context(), adminKey{}, sess)))
	}
}

// maxFormSize bounds a page form's body.
const maxFormSize = 64 << 10

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// sameOrigin accepts a request without an Origin header (older browsers and
// non-browser clients, which the CSRF token still guards) or with this
// site's origin.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && u.Scheme == "https" && strings.EqualFold(u.Host, r.Host)
}

func (s *Server) authRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /login", s.loginPage)
	mux.HandleFunc("POST /login", s.login)
	mux.HandleFunc("POST /logout", s.requireAdmin(s.logout))
}

// loginData is what the login template shows.
type loginData struct {
	CSRF  string
	Next  string
	Name  string
	Error string
}

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	if _, err := s.session(r); err == nil {
		http.Redirect(w, r, safeNext(r.URL.Query().Get("next")), http.StatusSeeOther)
		return
	}
	s.renderLogin(w, r, http.StatusOK, loginData{Next: safeNext(r.URL.Query().Get("next"))})
}

// renderLogin shows the login form with a fresh login CSRF value, set both
// in a cookie and in the form (double submit): a cross-site form cannot
// read the cookie to copy it.
func (s *Server) renderLogin(w http.ResponseWriter, r *http.Request, status int, d loginData) {
	tok, _ := NewToken("")
	http.SetCookie(w, &http.Cookie{Name: loginCSRFCookie, Value: tok, Path: "/", Secure: true, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, MaxAge: 3600})
	d.CSRF = tok
	s.render(w, r, status, "login.html", d)
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxLoginBodySize)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	name := strings.TrimSpace(r.PostFormValue("name"))
	password := r.PostFormValue("password")
	next := safeNext(r.PostFormValue("next"))
	c, err := r.Cookie(loginCSRFCookie)
	form := r.PostFormValue(csrfField)
	if err != nil || form == "" || subtle.ConstantTimeCompare([]byte(c.Value), []byte(form)) != 1 || !sameOrigin(r) {
		http.Error(w, "missing or wrong CSRF token; reload the login page and try again", http.StatusForbidden)
		return
	}
	addr := clientAddr(r)
	if ok, wait := s.logins.allow(name, addr); !ok {
		s.tooManyLogins(w, r, name, next, wait)
		return
	}
	admin, err := s.cfg.Store.AdminByName(r.Context(), name)
	var match bool
	switch {
	case err == nil && !admin.Disabled:
		match, err = VerifyPassword(admin.PasswordHash, password)
		if err != nil {
			s.cfg.Logger.Error().Err(err).Str("admin", name).Msg("web: login")
		}
	case errors.Is(err, store.ErrNotFound), err == nil:
		_, _ = VerifyPassword(dummyHash, password)
	default:
		s.cfg.Logger.Error().Err(err).Str("request_id", requestID(r.Context())).Msg("web: login")
		http.Error(w, "login failed: the database did not answer; try again", http.StatusServiceUnavailable)
		return
	}
	if !match {
		s.logins.failed(name, addr)
		s.cfg.Logger.Info().Str("admin", name).Str("addr", addr).Msg("web: failed login")
		s.renderLogin(w, r, http.StatusUnauthorized, loginData{Next: next, Name: name, Error: "Wrong name or password."})
		return
	}
	s.logins.succeeded(name, addr)
	token, sha := NewToken("")
	csrf, _ := NewToken("")
	expires := s.cfg.Now().Add(s.cfg.SessionLifetime)
	if _, err := s.cfg.Store.CreateAdminSession(r.Context(), admin.ID, sha, csrf, expires); err != nil {
		s.cfg.Logger.Error().Err(err).Str("request_id", requestID(r.Context())).Msg("web: login")
		http.Error(w, "login failed: the session could not be stored; try again", http.StatusServiceUnavailable)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: token, Path: "/", Secure: true, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Expires: expires})
	http.SetCookie(w, &http.Cookie{Name: loginCSRFCookie, Value: "", Path: "/", Secure: true, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, MaxAge: -1})
	s.cfg.Logger.Info().Str("admin", admin.Name).Str("addr", addr).Msg("web: login")
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (s *Server) tooManyLogins(w http.ResponseWriter, r *http.Request, name, next string, wait time.Duration) {
	secs := int((wait + time.Second - 1) / time.Second)
	if secs < 1 {
		secs = 1
	}
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	s.renderLogin(w, r, http.StatusTooManyRequests, loginData{Next: next, Name: name,
		Error: "Too many failed logins. Try again in " + strconv.Itoa(secs) + " seconds."})
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(sessionCookie); err == nil {
		if err := s.cfg.Store.DeleteAdminSession(r.Context(), hashToken(c.Value)); err != nil {
			s.cfg.Logger.Error().Err(err).Msg("web: logout")
			http.Error(w, "logout failed: the database did not answer; try again", http.StatusServiceUnavailable)
			return
		}
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", Secure: true, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, MaxAge: -1})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// safeNext keeps a post-login redirect on this site: a path starting with
// one slash, else "/".
func safeNext(next string) string {
	if next == "" || next[0] != '/' || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return "/"
	}
	return next
}

// tokenFrom authenticates an API request's bearer token.
func (s *Server) tokenFrom(r *http.Request) (*store.ConsoleToken, error) {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" || len(tok) > 256 {
		return nil, store.ErrNotFound
	}
	return s.cfg.Store.ConsoleTokenByHash(r.Context(), hashToken(strings.TrimSpace(tok)))
}
