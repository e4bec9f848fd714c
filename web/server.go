package web

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"github.com/postern/postern/internal/ratelimit"
	"log"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/postern/postern/manage"
	"github.com/postern/postern/notify"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/recipes"
	"github.com/postern/postern/store"
)

// Defaults of Config's zero fields.
const (
	// DefaultSessionLifetime is how long an admin stays logged in.
	DefaultSessionLifetime = 12 * time.Hour
	// DefaultAPIRate and DefaultAPIBurst limit each console token (and each
	// address before it authenticates): 20 requests a second, bursts of 40.
	DefaultAPIRate  = 20
	DefaultAPIBurst = 40
	// DefaultEventPoll is how often live pages check the database for
	// changes, which is what lets a decision made by the CLI or another
	// postern process reach an open page.
	DefaultEventPoll = 250 * time.Millisecond
	// shutdownGrace bounds how long Serve waits for requests in flight.
	shutdownGrace = 5 * time.Second
	// idempotencyKeep is how long an Idempotency-Key's answer is replayed.
	idempotencyKeep = 24 * time.Hour
	// janitorEvery is how often expired sessions and idempotency answers go.
	janitorEvery = 10 * time.Minute
	// maxLimiterKeys bounds each rate limiter's table.
	maxLimiterKeys = 10000
)

// Config configures New.
type Config struct {
	Store   *store.Store     // required
	Engine  *policy.Engine   // required: approvals are decided through it
	Catalog *recipes.Catalog // required: the recipe catalog pages and /v1/recipes show
	// Manager makes admins' changes (the forms, the API's writes) and key
	// checks (the Re-check button, POST /v1/connections/{id}/check); nil
	// builds one over Store and Catalog with the default key checker.
	Manager *manage.Manager
	// Notifier sends the notification pages' test messages (the Test
	// button, POST /v1/notifications/{id}/test); nil answers those 501.
	// Channels are listed, added and removed through Store without it.
	Notifier *notify.Dispatcher
	Logger   zerolog.Logger
	Now      func() time.Time // time.Now if nil

	SessionLifetime time.Duration // DefaultSessionLifetime if zero
	APIRate         float64       // requests a second per token; DefaultAPIRate if zero
	APIBurst        int           // DefaultAPIBurst if zero
	EventPoll       time.Duration // DefaultEventPoll if zero

	// Ready is GET /readyz's check: nil when postern can do its work.
	// Nil checks that the master key is loaded and that Store takes a
	// write; a *NotReadyError's Reason is what the probe answers.
	Ready        func(ctx context.Context) error
	ReadyTimeout time.Duration // bounds Ready; DefaultReadyTimeout if zero
}

// Server is the admin web page and REST API. Create it with New; serve it
// with Serve, or mount Handler in a test server.
type Server struct {
	cfg     Config
	handler http.Handler
	pages   *pageSet

	logins   *loginLimiter
	apiLimit *ratelimit.Keyed

	events *eventHub
}

// New checks cfg and builds the server.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil || cfg.Engine == nil || cfg.Catalog == nil {
		return nil, errors.New("web: Config needs Store, Engine and Catalog")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Manager == nil {
		m, err := manage.New(manage.Config{Store: cfg.Store, Catalog: cfg.Catalog})
		if err != nil {
			return nil, fmt.Errorf("web: %w", err)
		}
		cfg.Manager = m
	}
	if cfg.SessionLifetime <= 0 {
		cfg.SessionLifetime = DefaultSessionLifetime
	}
	if cfg.APIRate <= 0 {
		cfg.APIRate = DefaultAPIRate
	}
	if cfg.APIBurst <= 0 {
		cfg.APIBurst = DefaultAPIBurst
	}
	if cfg.EventPoll <= 0 {
		cfg.EventPoll = DefaultEventPoll
	}
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = DefaultReadyTimeout
	}
	pages, err := loadPages()
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg:      cfg,
		pages:    pages,
		logins:   newLoginLimiter(cfg.Now),
		apiLimit: ratelimit.New(cfg.APIRate, cfg.APIBurst, maxLimiterKeys, cfg.Now),
		events:   newEventHub(cfg.Store, cfg.EventPoll, cfg.Logger),
	}
	if s.cfg.Ready == nil {
		s.cfg.Ready = s.checkReady
	}
	mux := http.NewServeMux()
	s.authRoutes(mux)
	s.apiRoutes(mux)
	s.pageRoutes(mux)
	s.probeRoutes(mux)
	// Cross-origin protection in front of every state-changing route, beside
	// the CSRF tokens of the forms: a browser says where a request comes
	// from (Sec-Fetch-Site, Origin), and a POST, PUT, PATCH or DELETE that
	// another site's page made is refused before any handler runs. Clients
	// that are not browsers (curl, scripts with a console token) send
	// neither header and are not affected.
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(s.crossOrigin))
	s.handler = s.withRecover(s.withRequestID(s.withHeaders(cop.Handler(mux))))
	return s, nil
}

// crossOrigin answers a state-changing request that another site's page
// made: 403, in the API's JSON shape under /v1.
func (s *Server) crossOrigin(w http.ResponseWriter, r *http.Request) {
	const msg = "cross-origin request refused: a page of another site may not change anything here"
	if strings.HasPrefix(r.URL.Path, "/v1/") {
		s.apiWriteError(w, r, &apiError{Status: http.StatusForbidden, Code: "cross_origin", Message: msg})
		return
	}
	http.Error(w, msg, http.StatusForbidden)
}

// Handler is the whole site, for httptest servers. Live pages need Serve (or
// Run) for their change notifications.
func (s *Server) Handler() http.Handler { return s.handler }

// Run runs the server's background work — the change watcher behind live
// pages and the janitor of expired sessions — until ctx ends. Serve calls
// it; tests that mount Handler call it themselves.
func (s *Server) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		s.events.run(ctx)
	}()
	go func() {
		defer wg.Done()
		s.janitor(ctx)
	}()
	wg.Wait()
}

// Serve answers HTTPS on ln until ctx ends, then lets requests in flight
// finish for up to five seconds. Live event streams end with ctx.
func (s *Server) Serve(ctx context.Context, ln net.Listener, cert tls.Certificate) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hs := &http.Server{
		Handler:           s.handler,
		TLSConfig:         TLSConfig(cert),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          log.New(logWriter{s.cfg.Logger}, "", 0),
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		s.Run(ctx)
	}()
	go func() {
		defer wg.Done()
		<-ctx.Done()
		sctx, scancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer scancel()
		if err := hs.Shutdown(sctx); err != nil {
			hs.Close()
		}
	}()
	err := hs.ServeTLS(ln, "", "")
	cancel()
	wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("web: serve: %w", err)
}

// janitor removes expired sessions and old idempotency answers.
func (s *Server) janitor(ctx context.Context) {
	t := time.NewTicker(janitorEvery)
	defer t.Stop()
	for {
		if _, err := s.cfg.Store.DeleteExpiredWebRecords(ctx, idempotencyKeep); err != nil && ctx.Err() == nil {
			s.cfg.Logger.Warn().Err(err).Msg("web: removing expired sessions")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// logWriter sends net/http's own messages (TLS handshake errors from
// clients, mostly) to the logger at debug level.
type logWriter struct{ log zerolog.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	w.log.Debug().Msg(strings.TrimSpace(string(p)))
	return len(p), nil
}

// requestIDKey is the context key of the request id.
type requestIDKey struct{}

// requestID is the id of the request being served: in every API answer, in
// the X-Request-Id header and in log lines, so that an admin's report
// can be found in the log.
func requestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

func (s *Server) withRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := recipes.NewRequestID()
		w.Header().Set("X-Request-Id", id)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestIDKey{}, id)))
	})
}

// contentSecurityPolicy allows only the site's own scripts, styles and
// connections: no inline script, no framing, forms only to the site.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

func (s *Server) withHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		// same-origin, not no-referrer: with no-referrer Chromium sends
		// "Origin: null" on same-origin form posts, which sameOrigin refuses.
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Strict-Transport-Security", "max-age=31536000")
		if !strings.HasPrefix(r.URL.Path, "/static/") {
			h.Set("Cache-Control", "no-store")
		}
		next.ServeHTTP(w, r)
	})
}

// withRecover turns a panic in a handler into a 500 and a log line, so that
// no input can take the server down.
func (s *Server) withRecover(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.cfg.Logger.Error().Str("request_id", requestID(r.Context())).Str("path", r.URL.Path).
					Str("panic", fmt.Sprint(v)).Bytes("stack", debug.Stack()).Msg("web: handler panicked")
				http.Error(w, "internal error", http.StatusInternalServerError)
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// clientAddr is the peer's IP address. Forwarding headers are not trusted:
// postern is meant to be reached directly.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
