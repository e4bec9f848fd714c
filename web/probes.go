package web

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// The probes a load balancer or an orchestrator polls: GET /healthz (the
// process is up) and GET /readyz (it can do its work: the database takes
// writes and the master key is loaded). They are outside /v1 and its
// rate limit, need no login or token, and being GETs are untouched by the
// cross-origin protection, so that a probe every second from one address
// is never refused. They answer plain text, and a failed check names what
// failed, not the error behind it, which the log has: the probes are
// unauthenticated.

// DefaultReadyTimeout bounds one readiness check. A database that cannot
// take a write within it is not ready, whatever the cause (a lock held for
// long, a lost connection, a standby).
const DefaultReadyTimeout = 2 * time.Second

// probeRouteTable lists the probes for the OpenAPI document's test, as
// apiRouteTable lists the API.
func probeRouteTable() []apiRoute {
	return []apiRoute{
		{Method: "GET", Path: "/healthz", Public: true, Statuses: []int{http.StatusOK}},
		{Method: "GET", Path: "/readyz", Public: true, Statuses: []int{http.StatusOK, http.StatusServiceUnavailable}},
	}
}

// probeRoutes registers the probes.
func (s *Server) probeRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
}

// NotReadyError is a readiness check's failure: Reason is what the probe
// answers, Err the cause, for the log.
type NotReadyError struct {
	Reason string
	Err    error
}

func (e *NotReadyError) Error() string {
	if e.Err == nil {
		return "web: not ready: " + e.Reason
	}
	return "web: not ready: " + e.Reason + ": " + e.Err.Error()
}

func (e *NotReadyError) Unwrap() error { return e.Err }

// checkReady is the default readiness check: the master key is loaded, the
// database answers, and it takes a write (store.CheckWritable, which
// writes nothing).
func (s *Server) checkReady(ctx context.Context) error {
	if err := s.cfg.Store.CheckMasterKey(); err != nil {
		return &NotReadyError{Reason: "the master key is not loaded", Err: err}
	}
	if err := s.cfg.Store.Ping(ctx); err != nil {
		// The words agents read in the outage banner (bastion.OutageBanner).
		return &NotReadyError{Reason: "the database cannot be reached", Err: err}
	}
	if err := s.cfg.Store.CheckWritable(ctx); err != nil {
		return &NotReadyError{Reason: "the database does not take writes", Err: err}
	}
	return nil
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write([]byte("ok\n"))
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.ReadyTimeout)
	defer cancel()
	err := s.cfg.Ready(ctx)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if err == nil {
		w.Write([]byte("ok\n"))
		return
	}
	reason := "the readiness check failed"
	var nr *NotReadyError
	if errors.As(err, &nr) {
		reason = nr.Reason
	}
	if ctx.Err() != nil && r.Context().Err() == nil {
		reason += " (no answer within " + s.cfg.ReadyTimeout.String() + ")"
	}
	s.cfg.Logger.Warn().Err(err).Str("request_id", requestID(r.Context())).Msg("web: not ready")
	w.WriteHeader(http.StatusServiceUnavailable)
	w.Write([]byte("not ready: " + reason + "\n"))
}
