package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/postern/postern/recipes"
)

// recipesJSON is the envelope the CLI prints with -o json, the REST API's.
type recipesJSON[T any] struct {
	Data      T      `json:"data"`
	RequestID string `json:"request_id"`
}

var requestIDRE = regexp.MustCompile(`^req_[0-9a-f]{16}$`)

// internalFields are the recipe fields that stay inside postern: neither
// the CLI nor the API may show them.
var internalFields = []string{"shell", "rules", "exact_reads", "key_check", "default_user", "default_port"}

func TestRecipesListJSON(t *testing.T) {
	t.Parallel()
	cat, err := recipes.Load()
	if err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, "", "recipes", "list", "-o", "json")
	if r.code != 0 {
		t.Fatalf("recipes list -o json: got exit %d; want 0\n%s", r.code, r.stderr)
	}
	var got recipesJSON[[]map[string]any]
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("recipes list -o json: %v\n%s", err, r.stdout)
	}
	if !requestIDRE.MatchString(got.RequestID) {
		t.Errorf("request_id = %q; want req_ and 16 hex digits", got.RequestID)
	}
	if len(got.Data) != len(cat.All()) {
		t.Fatalf("got %d recipes; want %d", len(got.Data), len(cat.All()))
	}
	for i, m := range got.Data {
		if m["key"] != cat.All()[i].Key {
			t.Errorf("data[%d].key = %v; want %q (sorted by key)", i, m["key"], cat.All()[i].Key)
		}
		for _, f := range internalFields {
			if _, ok := m[f]; ok {
				t.Errorf("data[%d] has %q; want it kept inside postern", i, f)
			}
		}
	}
}

func TestRecipesListFilters(t *testing.T) {
	t.Parallel()
	cat, err := recipes.Load()
	if err != nil {
		t.Fatal(err)
	}
	first := cat.All()[0]
	tests := []struct {
		name string
		args []string
		want []string // keys
	}{
		{"vendor", []string{"--vendor", strings.ToUpper(first.Vendor)}, keysOf(cat.List(recipes.Filter{Vendor: first.Vendor}))},
		{"q", []string{"--q", first.Name}, keysOf(cat.List(recipes.Filter{Q: first.Name}))},
		{"nothing", []string{"--q", "no recipe has this text"}, []string{}},
		{"unclaimed host", []string{"--host", "nobody.invalid"}, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runCLI(t, "", append([]string{"recipes", "list", "-o", "json"}, tt.args...)...)
			if r.code != 0 {
				t.Fatalf("got exit %d; want 0\n%s", r.code, r.stderr)
			}
			var got recipesJSON[[]recipes.PublicRecipe]
			if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
				t.Fatal(err)
			}
			if got.Data == nil {
				t.Errorf("data is null; want a list")
			}
			if g, w := strings.Join(keysOfPublic(got.Data), " "), strings.Join(tt.want, " "); g != w {
				t.Errorf("keys = %q; want %q", g, w)
			}
			if len(tt.want) > 0 && !strings.Contains(strings.Join(keysOfPublic(got.Data), " "), first.Key) {
				t.Errorf("keys = %q; want %q among them", keysOfPublic(got.Data), first.Key)
			}
		})
	}
}

func TestRecipesListText(t *testing.T) {
	t.Parallel()
	r := runCLI(t, "", "recipes", "list")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "KEY") {
		t.Fatalf("recipes list: got exit %d, %q; want 0 and a table", r.code, r.stdout)
	}
	r = runCLI(t, "", "recipes", "list", "--host", "nobody.invalid")
	if want := "no recipe claims nobody.invalid"; r.code != 0 || !strings.Contains(r.stdout, want) {
		t.Errorf("recipes list --host: got exit %d, %q; want 0 and %q", r.code, r.stdout, want)
	}
}

func TestRecipesShow(t *testing.T) {
	t.Parallel()
	cat, err := recipes.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, rc := range cat.All() {
		r := runCLI(t, "", "recipes", "show", rc.Key, "-o", "json")
		if r.code != 0 {
			t.Fatalf("recipes show %s: got exit %d; want 0\n%s", rc.Key, r.code, r.stderr)
		}
		var got recipesJSON[map[string]any]
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
			t.Fatal(err)
		}
		if got.Data["key"] != rc.Key || got.Data["name"] != rc.Name || !requestIDRE.MatchString(got.RequestID) {
			t.Errorf("recipes show %s: got %v; want the recipe in the envelope", rc.Key, got)
		}
		for _, f := range internalFields {
			if _, ok := got.Data[f]; ok {
				t.Errorf("recipes show %s: has %q; want it kept inside postern", rc.Key, f)
			}
		}
		text := runCLI(t, "", "recipes", "show", rc.Key)
		if text.code != 0 || !strings.Contains(text.stdout, rc.Name) || !strings.Contains(text.stdout, rc.DocsURL) {
			t.Errorf("recipes show %s: got exit %d, %q; want its name and docs URL", rc.Key, text.code, text.stdout)
		}
	}
}

func TestRecipesBadUsage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown key", []string{"recipes", "show", "no-such-recipe"}, `unknown recipe "no-such-recipe"`},
		{"no key", []string{"recipes", "show"}, "want the recipe KEY"},
		{"bad output", []string{"recipes", "list", "-o", "yaml"}, "unknown output format"},
		{"extra arg", []string{"recipes", "list", "x"}, "want no arguments"},
		{"no subcommand", []string{"recipes"}, "missing subcommand"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runCLI(t, "", tt.args...)
			if r.code != 2 || !strings.Contains(r.stderr, tt.want) {
				t.Errorf("postern %s: got exit %d, %q; want 2 and %q", strings.Join(tt.args, " "), r.code, r.stderr, tt.want)
			}
		})
	}
}

func keysOf(rs []*recipes.Recipe) []string {
	out := []string{}
	for _, r := range rs {
		out = append(out, r.Key)
	}
	return out
}

func keysOfPublic(rs []recipes.PublicRecipe) []string {
	out := []string{}
	for _, r := range rs {
		out = append(out, r.Key)
	}
	return out
}

// TestRecipesListHostMatch: --host lists the recipes claiming the host and
// marks the one Match picks.
func TestRecipesListHostMatch(t *testing.T) {
	t.Parallel()
	cat, err := recipes.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, rc := range cat.All() {
		if len(rc.Hosts) == 0 {
			continue
		}
		host := strings.Replace(rc.Hosts[0], "*", "a1", 1)
		best := cat.Match(host)
		r := runCLI(t, "", "recipes", "list", "--host", host)
		var marked string
		for _, line := range strings.Split(r.stdout, "\n") {
			if f := strings.Fields(line); len(f) > 1 && f[len(f)-1] == "*" {
				marked = f[0]
			}
		}
		if r.code != 0 || best == nil || marked != best.Key {
			t.Errorf("recipes list --host %s: got exit %d, marked %q; want 0 and %v marked\n%s", host, r.code, marked, best, r.stdout)
		}
		return
	}
	t.Skip("no recipe in the catalog claims a host yet")
}
