package web

import "net/http"

// pageRoutes registers the admin pages (filled in by the pages work).
func (s *Server) pageRoutes(mux *http.ServeMux) {
	mux.Handle("GET /static/", staticHandler())
}
