package web

import (
	"net/http"
	"slices"

	"github.com/postern/postern/recipes"
)

// recipesData is the recipe catalog page.
type recipesData struct {
	Filter  recipes.Filter
	Vendors []string
	Recipes []recipes.PublicRecipe
	Total   int
}

func (s *Server) recipesPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := recipes.Filter{Q: q.Get("q"), Vendor: q.Get("vendor"), Host: q.Get("host")}
	all := s.cfg.Catalog.All()
	d := recipesData{Filter: f, Recipes: s.cfg.Catalog.PublicList(f), Total: len(all)}
	for _, rc := range all {
		if !slices.Contains(d.Vendors, rc.Vendor) {
			d.Vendors = append(d.Vendors, rc.Vendor)
		}
	}
	slices.Sort(d.Vendors)
	s.render(w, r, http.StatusOK, "recipes.html", page("Recipes", "recipes", "", d))
}
