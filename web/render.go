package web

import (
	"bytes"
	"embed"
	"fmt"
	"github.com/postern/postern/model"
	"github.com/postern/postern/policy"
	"html/template"
	"io/fs"
	"net/http"
	"path"
	"time"
)

// The page templates and static files are embedded: the binary is the
// whole site, with no build step.
//
//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// pageSet holds one parsed template per page, each with the shared layout.
type pageSet struct {
	pages map[string]*template.Template
}

// templateFuncs are the helpers templates may call. None of them returns
// template.HTML: everything a page shows is escaped.
var templateFuncs = template.FuncMap{
	"rfc3339": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format(time.RFC3339)
	},
	"since": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format("2006-01-02 15:04:05 UTC")
	},
	// visible shows text an agent wrote (commands, paths, reasons) with
	// every control, bidi, zero-width or other invisible code point as an
	// escape such as <U+202E>: the admin reads the bytes that run.
	"visible": policy.Visible,
	// timeOf is a model time as a time, for rfc3339 and since.
	"timeOf": func(t model.Time) time.Time { return time.Time(t) },
}

// loadPages parses layout.html with each other template.
func loadPages() (*pageSet, error) {
	names, err := fs.Glob(templateFiles, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("web: templates: %w", err)
	}
	ps := &pageSet{pages: map[string]*template.Template{}}
	for _, n := range names {
		base := path.Base(n)
		if base == "layout.html" {
			continue
		}
		t, err := template.New("layout.html").Funcs(templateFuncs).ParseFS(templateFiles, "templates/layout.html", n)
		if err != nil {
			return nil, fmt.Errorf("web: template %s: %w", base, err)
		}
		ps.pages[base] = t
	}
	return ps, nil
}

// pageData is what the layout needs around every page's own data.
type pageData struct {
	Title  string
	Nav    string // the current section, for the navigation bar
	Admin  string // the logged-in admin, "" on the login page
	CSRF   string // the session's CSRF token, for forms and the X-CSRF-Token header
	Script string // a page's own script under /static, "" for none
	Page   any    // the page's own data
}

// render executes page name into a buffer first, so that a template error
// gives a clean 500 instead of half a page.
func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, name string, data any) {
	t, ok := s.pages.pages[name]
	if !ok {
		s.cfg.Logger.Error().Str("template", name).Msg("web: no such template")
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	pd, ok := data.(pageData)
	if !ok {
		pd = pageData{Page: data}
	}
	if sess := sessionFrom(r.Context()); sess != nil {
		pd.Admin, pd.CSRF = sess.AdminName, sess.CSRFToken
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, pd); err != nil {
		s.cfg.Logger.Error().Err(err).Str("template", name).Str("request_id", requestID(r.Context())).Msg("web: render")
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = buf.WriteTo(w)
}

// staticHandler serves the embedded /static files.
func staticHandler() http.Handler {
	sub, err := fs.Sub(staticFiles, "static")
	if err != nil {
		panic(err) // the embed pattern guarantees the directory
	}
	return http.StripPrefix("/static/", http.FileServerFS(sub))
}
