package web

import "net/http"

// apiRoutes registers the REST API under /v1 (filled in by the API work).
func (s *Server) apiRoutes(mux *http.ServeMux) {}
