package recipes

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"path"
	"regexp"
	"sort"
	"strings"
	"unicode"

	"github.com/postern/postern/shellclass"
)

// catalogFS holds the recipe files. It is read-only, so it is the one
// package-level value; Load builds a fresh Catalog from it each time.
//
//go:embed catalog/*.json
var catalogFS embed.FS

// catalogGlob names the recipe files inside catalogFS.
const catalogGlob = "catalog/*.json"

// Catalog is a loaded, validated set of recipes. It is read-only and safe for
// concurrent use.
type Catalog struct {
	recipes []*Recipe // sorted by key
	byKey   map[string]*Recipe
}

// Load parses and validates the embedded catalog. An error names the file and
// the field at fault; the package's tests make sure it never happens in a
// released binary.
func Load() (*Catalog, error) {
	return load(catalogFS, catalogGlob)
}

// load reads every file matching glob in fsys; tests call it with a
// fstest.MapFS to prove the validation.
func load(fsys fs.FS, glob string) (*Catalog, error) {
	names, err := fs.Glob(fsys, glob)
	if err != nil {
		return nil, fmt.Errorf("recipes: %w", err)
	}
	c := &Catalog{byKey: make(map[string]*Recipe, len(names))}
	claimed := map[string]string{} // host pattern → recipe key
	for _, name := range names {
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("recipes: %w", err)
		}
		r, err := Parse(strings.TrimSuffix(path.Base(name), ".json"), b)
		if err != nil {
			return nil, err
		}
		if _, dup := c.byKey[r.Key]; dup {
			return nil, fmt.Errorf("recipes: %s: key %q is used twice", name, r.Key)
		}
		// Two recipes claiming the same pattern would make Match depend on
		// file order; an admin could not tell which rules apply.
		for _, h := range r.Hosts {
			if other, ok := claimed[h]; ok {
				return nil, fmt.Errorf("recipes: %s: host pattern %q is already claimed by %q", name, h, other)
			}
			claimed[h] = r.Key
		}
		c.byKey[r.Key] = r
		c.recipes = append(c.recipes, r)
	}
	sort.Slice(c.recipes, func(i, j int) bool { return c.recipes[i].Key < c.recipes[j].Key })
	return c, nil
}

// file is a recipe file as written. Unknown fields are refused, so that a
// misspelt field fails the tests instead of silently meaning nothing.
type file struct {
	PublicRecipe
	Shell       string    `json:"shell"`
	DefaultUser string    `json:"default_user"`
	DefaultPort int       `json:"default_port"`
	ExactReads  []string  `json:"exact_reads"`
	Rules       []Rule    `json:"rules"`
	KeyCheck    *KeyCheck `json:"key_check"`
}

// keyRE is a recipe key: lower-case words joined by hyphens, as used in
// URLs and on the command line.
var keyRE = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// fieldRE is a credential field name, as the web form and API use it.
var fieldRE = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// parseShell maps the catalog's shell names to dialects. Only the canonical
// names are accepted (not shellclass.ParseDialect's "sh" or "ash"), so that
// the catalog reads the same everywhere.
func parseShell(s string) (shellclass.Dialect, bool) {
	switch s {
	case "bash":
		return shellclass.Bash, true
	case "posix":
		return shellclass.POSIX, true
	case "none":
		return shellclass.None, true
	}
	return shellclass.Bash, false
}

// Limits on one recipe file. The catalog is embedded and reviewed, but
// Parse is also the way in for a recipe an operator writes, and nothing in
// it should let a file make postern spend unbounded time or memory: the
// exact-read check below is rules × exact reads regex matches, and a regular
// expression's compiled size grows with its text. The largest file in the
// catalog is under 4 KiB with 14 rules and 26 exact reads.
const (
	maxFileBytes  = 64 << 10 // one recipe file
	maxRules      = 64
	maxExactReads = 256
	maxHosts      = 64   // hosts, and connection hosts with domains
	maxFields     = 16   // credential fields
	maxValueBytes = 1024 // one rule's value (a regex included)
	maxTextBytes  = 4096 // notes; every other string is smaller
)

// Parse parses and validates one recipe file's bytes, the way Load does for
// each file of the catalog; key is the file's name without ".json", which
// the recipe's key must equal. An error starts with "recipes: KEY.json: "
// and names the field at fault. The recipe is checked on its own: that no
// two recipes claim the same host pattern is Load's check.
func Parse(key string, b []byte) (*Recipe, error) {
	r, err := parse(b)
	if err != nil {
		return nil, fmt.Errorf("recipes: %s.json: %w", key, err)
	}
	if r.Key != key {
		return nil, fmt.Errorf("recipes: %s.json: key %q: want the file name, %q", key, r.Key, key)
	}
	return r, nil
}

func parse(b []byte) (*Recipe, error) {
	if len(b) > maxFileBytes {
		return nil, fmt.Errorf("file is %d bytes: want at most %d", len(b), maxFileBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var f file
	if err := dec.Decode(&f); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("trailing data after the recipe object")
	}
	r := &Recipe{
		PublicRecipe: f.PublicRecipe,
		DefaultUser:  f.DefaultUser, DefaultPort: f.DefaultPort,
		ExactReads: f.ExactReads, Rules: f.Rules,
		exact: map[string]bool{},
	}
	if !keyRE.MatchString(f.Key) {
		return nil, fmt.Errorf("key %q: want lower-case letters, digits and hyphens", f.Key)
	}
	if strings.TrimSpace(f.Name) == "" || hasControl(f.Name, false) {
		return nil, errors.New("name is required, on one line")
	}
	if strings.TrimSpace(f.Vendor) == "" || hasControl(f.Vendor, false) {
		return nil, errors.New("vendor is required, on one line")
	}
	if hasControl(f.Notes, true) {
		return nil, errors.New("notes have a control character")
	}
	if len(f.Notes) > maxTextBytes {
		return nil, fmt.Errorf("notes: %d bytes: want at most %d", len(f.Notes), maxTextBytes)
	}
	switch {
	case len(f.Rules) > maxRules:
		return nil, fmt.Errorf("rules: %d: want at most %d", len(f.Rules), maxRules)
	case len(f.ExactReads) > maxExactReads:
		return nil, fmt.Errorf("exact_reads: %d: want at most %d", len(f.ExactReads), maxExactReads)
	case len(f.Hosts) > maxHosts || len(f.ConnectionHosts)+len(f.ConnectionDomains) > maxHosts:
		return nil, fmt.Errorf("hosts, connection_hosts and connection_domains: want at most %d each", maxHosts)
	case len(f.CredentialFields) > maxFields:
		return nil, fmt.Errorf("credential_fields: %d: want at most %d", len(f.CredentialFields), maxFields)
	}
	if f.Version < 1 {
		return nil, fmt.Errorf("version %d: want 1 or more", f.Version)
	}
	if f.Channel != "ssh" {
		return nil, fmt.Errorf("channel %q: want ssh", f.Channel)
	}
	if f.Adapter != "ssh-key" && f.Adapter != "ssh-cert" {
		return nil, fmt.Errorf("adapter %q: want ssh-key or ssh-cert", f.Adapter)
	}
	seenHost := map[string]bool{}
	for _, h := range f.Hosts {
		if err := checkHost(h, true); err != nil {
			return nil, fmt.Errorf("hosts: %w", err)
		}
		// Load refuses a pattern claimed twice across recipes; within one
		// recipe it is as surely a mistake.
		if seenHost[h] {
			return nil, fmt.Errorf("hosts: %q is listed twice", h)
		}
		seenHost[h] = true
	}
	for _, h := range append(append([]string{}, f.ConnectionHosts...), f.ConnectionDomains...) {
		if err := checkHost(h, false); err != nil {
			return nil, fmt.Errorf("connection_hosts/connection_domains: %w", err)
		}
	}
	if err := checkFields(f.CredentialFields); err != nil {
		return nil, err
	}
	if err := checkURL(f.DocsURL, true); err != nil {
		return nil, fmt.Errorf("docs_url: %w", err)
	}
	if err := checkURL(f.CreateURL, false); err != nil {
		return nil, fmt.Errorf("create_url: %w", err)
	}
	if err := checkURL(f.RevokeURL, false); err != nil {
		return nil, fmt.Errorf("revoke_url: %w", err)
	}
	d, ok := parseShell(f.Shell)
	if !ok {
		return nil, fmt.Errorf("shell %q: want bash, posix or none", f.Shell)
	}
	r.Shell = d
	if hasControl(f.DefaultUser, false) || strings.ContainsAny(f.DefaultUser, " @") {
		return nil, fmt.Errorf("default_user %q: want a plain user name", f.DefaultUser)
	}
	if f.DefaultPort < 1 || f.DefaultPort > 65535 {
		return nil, fmt.Errorf("default_port %d: want 1 to 65535", f.DefaultPort)
	}
	for _, e := range f.ExactReads {
		// The classifier hands the hook the command's words; they are
		// compared joined by single spaces, so a read written any other
		// way could never match and would only mislead a reader.
		if e == "" || hasControl(e, false) || strings.Join(strings.Fields(e), " ") != e {
			return nil, fmt.Errorf("exact_reads: %q: want words separated by single spaces, no control characters", e)
		}
		if r.exact[e] {
			return nil, fmt.Errorf("exact_reads: %q is listed twice", e)
		}
		r.exact[e] = true
	}
	for i, rule := range f.Rules {
		cr, err := compileRule(rule)
		if err != nil {
			return nil, fmt.Errorf("rules[%d]: %w", i, err)
		}
		r.rules = append(r.rules, cr)
	}
	// The classifier lets an exact read win over a rule that raised the
	// same command; a recipe that says both contradicts itself.
	for _, e := range f.ExactReads {
		for i := range r.rules {
			if r.rules[i].matches(strings.Fields(e)) {
				return nil, fmt.Errorf("exact_reads: %q: rules[%d] raises it to write; a command cannot be both", e, i)
			}
		}
	}
	if f.KeyCheck == nil {
		return nil, errors.New("key_check is required")
	}
	kc := *f.KeyCheck
	switch {
	case kc.AuthOnly && kc.Command != "":
		return nil, errors.New("key_check: command and auth_only exclude each other")
	case !kc.AuthOnly && (strings.TrimSpace(kc.Command) == "" || hasControl(kc.Command, false)):
		return nil, errors.New("key_check: want a command without control characters, or auth_only")
	}
	r.KeyCheck = kc
	return r, nil
}

func compileRule(rule Rule) (compiledRule, error) {
	cr := compiledRule{Rule: rule}
	if rule.Value == "" {
		return cr, errors.New("value is required")
	}
	if len(rule.Value) > maxValueBytes {
		return cr, fmt.Errorf("value: %d bytes: want at most %d", len(rule.Value), maxValueBytes)
	}
	if len(rule.Why) > maxTextBytes {
		return cr, fmt.Errorf("why: %d bytes: want at most %d", len(rule.Why), maxTextBytes)
	}
	if strings.TrimSpace(rule.Why) == "" {
		return cr, errors.New("why is required: it is the reason an admin and an agent read")
	}
	switch rule.Match {
	case MatchWord, MatchPrefix, MatchCommand:
	case MatchRegex:
		re, err := regexp.Compile(rule.Value)
		if err != nil {
			return cr, fmt.Errorf("regex %q: %w", rule.Value, err)
		}
		cr.re = re
	default:
		return cr, fmt.Errorf("match %q: want word, prefix, command or regex", rule.Match)
	}
	return cr, nil
}

func checkFields(fields []CredentialField) error {
	if len(fields) == 0 {
		return errors.New("credential_fields: want at least one")
	}
	seen := map[string]bool{}
	for _, cf := range fields {
		if !fieldRE.MatchString(cf.Name) {
			return fmt.Errorf("credential_fields: name %q: want lower_snake_case", cf.Name)
		}
		if seen[cf.Name] {
			return fmt.Errorf("credential_fields: name %q is used twice", cf.Name)
		}
		seen[cf.Name] = true
		if strings.TrimSpace(cf.Label) == "" || hasControl(cf.Label, false) {
			return fmt.Errorf("credential_fields: %s: label is required", cf.Name)
		}
	}
	return nil
}

// checkHost accepts a lower-case host name, or with wildcard also
// "*.suffix". Lower case only, because Match lower-cases the host it is
// given and a pattern in capitals would never match.
func checkHost(h string, wildcard bool) error {
	name := h
	if wildcard {
		name = strings.TrimPrefix(h, "*.")
	}
	if name == "" || len(name) > 253 || strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".") || strings.Contains(name, "..") {
		return fmt.Errorf("%q: want a host name or *.suffix", h)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '.') {
			return fmt.Errorf("%q: want a lower-case host name or *.suffix", h)
		}
	}
	return nil
}

func checkURL(s string, required bool) error {
	if s == "" {
		if required {
			return errors.New("is required")
		}
		return nil
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "https" || u.Host == "" || hasControl(s, false) {
		return fmt.Errorf("%q: want an https URL", s)
	}
	return nil
}

// hasControl reports a control character; newlines and tabs are allowed in
// free text (multiline is true) and nowhere else.
func hasControl(s string, multiline bool) bool {
	return strings.IndexFunc(s, func(r rune) bool {
		if multiline && (r == '\n' || r == '\t') {
			return false
		}
		return unicode.IsControl(r)
	}) >= 0
}

// Get returns the recipe with the given key, or nil.
func (c *Catalog) Get(key string) *Recipe {
	return c.byKey[key]
}

// All returns every recipe, sorted by key. The slice is the caller's.
func (c *Catalog) All() []*Recipe {
	return append([]*Recipe(nil), c.recipes...)
}

// Filter narrows List. Empty fields match everything.
type Filter struct {
	// Q is matched, case-insensitively, as a substring of the key, name,
	// vendor, notes and host patterns.
	Q string
	// Vendor is compared case-insensitively with the whole vendor name.
	Vendor string
	// Host keeps the recipes with a host pattern that matches it (any of
	// them, not only the most specific; Match picks that one).
	Host string
}

// List returns the recipes that pass f, sorted by key; never nil.
func (c *Catalog) List(f Filter) []*Recipe {
	q := strings.ToLower(strings.TrimSpace(f.Q))
	host := normHost(f.Host)
	out := []*Recipe{}
	for _, r := range c.recipes {
		if f.Vendor != "" && !strings.EqualFold(strings.TrimSpace(f.Vendor), r.Vendor) {
			continue
		}
		if q != "" && !strings.Contains(strings.ToLower(r.searchText()), q) {
			continue
		}
		if host != "" && r.hostScore(host) == 0 {
			continue
		}
		out = append(out, r)
	}
	return out
}

func (r *Recipe) searchText() string {
	return strings.Join(append([]string{r.Key, r.Name, r.Vendor, r.Notes}, r.Hosts...), "\n")
}

// Match returns the recipe for a host when the connection names none: the
// recipe whose host pattern matches most specifically. An exact host beats
// any wildcard, and a longer wildcard suffix beats a shorter one. It returns
// nil when no recipe claims the host; such a host is classified by the
// built-in rules alone ((*Recipe)(nil).Options()). Load refuses two recipes
// with the same pattern, so the answer never depends on file order.
func (c *Catalog) Match(host string) *Recipe {
	h := normHost(host)
	if h == "" {
		return nil
	}
	var best *Recipe
	bestScore := 0
	for _, r := range c.recipes {
		if s := r.hostScore(h); s > bestScore {
			best, bestScore = r, s
		}
	}
	return best
}

// ForConnection returns the recipe a connection uses: the one it was made
// from (key), else the one whose host pattern matches host most
// specifically, else nil for the built-in rules. A key the catalog does not
// hold is an error: the connection was made with another catalog.
func (c *Catalog) ForConnection(key, host string) (*Recipe, error) {
	if key == "" {
		return c.Match(host), nil
	}
	if r := c.Get(key); r != nil {
		return r, nil
	}
	return nil, fmt.Errorf("recipes: recipe %q is not in this catalog", key)
}

// hostScore rates how specifically the recipe claims the normalised host h:
// 0 for not at all, the suffix length for a wildcard, and above any suffix
// length for an exact host.
func (r *Recipe) hostScore(h string) int {
	const exact = 1 << 16 // longer than any host name
	best := 0
	for _, p := range r.Hosts {
		switch {
		case p == h:
			return exact
		case strings.HasPrefix(p, "*."):
			suffix := p[1:] // ".example.net"
			if strings.HasSuffix(h, suffix) && len(h) > len(suffix) && len(suffix) > best {
				best = len(suffix)
			}
		}
	}
	return best
}

// normHost lower-cases a host and drops a trailing root dot, so that
// "Router1.Example.NET." matches "*.example.net".
func normHost(h string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(h)), ".")
}
