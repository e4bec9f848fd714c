package recipes

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

// FuzzLoadRecipe feeds arbitrary bytes to the validation every recipe file
// goes through (Parse, which Load calls per file). Nothing may panic, and a
// recipe that is accepted must hold what the rest of postern relies on:
// a key usable as a file name and in URLs, host patterns that Match finds
// again, exact reads that the hook calls read and no rule raises, and a
// public view that survives JSON unchanged.
func FuzzLoadRecipe(f *testing.F) {
	for _, r := range mustLoad(f).All() {
		b, err := fsFile(r.Key)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		``, `{}`, `null`, `[]`, `{"key":"x"} {}`,
		`{"key":"a","rules":[{"match":"regex","value":"((((a*)*)*)*)*$","why":"w"}]}`,
		`{"key":"a","rules":[{"match":"regex","value":"(a{1000}){1000}","why":"w"}]}`,
		`{"key":"a","hosts":["*.","*.*.a","A.B",".a","a..b"]}`,
	} {
		f.Add([]byte(s))
	}
	sampleJSON, err := json.Marshal(sample("one"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(sampleJSON)

	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := parse(b)
		if err != nil {
			if r != nil {
				t.Fatalf("parse returned a recipe with error %v", err)
			}
			return
		}
		checkAccepted(t, r, b)
	})
}

// checkAccepted asserts the invariants of a recipe parse accepted from b.
func checkAccepted(t *testing.T, r *Recipe, b []byte) {
	t.Helper()
	if len(b) > maxFileBytes {
		t.Fatalf("accepted a %d-byte file; want at most %d", len(b), maxFileBytes)
	}
	if !keyRE.MatchString(r.Key) || strings.ContainsAny(r.Key, "/.\\") {
		t.Fatalf("accepted key %q; want lower-case words and hyphens", r.Key)
	}
	// The same bytes under the key's file name load as a catalog of one,
	// through Load's own path.
	c, err := load(fstest.MapFS{"catalog/" + r.Key + ".json": &fstest.MapFile{Data: b}}, catalogGlob)
	if err != nil {
		t.Fatalf("parse accepted the recipe but load refused it: %v", err)
	}
	if got := c.Get(r.Key); got == nil || got.Key != r.Key {
		t.Fatalf("Get(%q) = %v; want the recipe", r.Key, got)
	}
	for _, h := range r.Hosts {
		if h != strings.ToLower(h) || strings.TrimSpace(h) != h || strings.HasSuffix(h, ".") {
			t.Fatalf("accepted host pattern %q; want lower case, no spaces, no trailing dot", h)
		}
		host := h
		if suffix, ok := strings.CutPrefix(h, "*."); ok {
			host = "x." + suffix
		}
		if got := c.Match(host); got == nil || got.Key != r.Key {
			t.Fatalf("pattern %q: Match(%q) = %v; want %q", h, host, got, r.Key)
		}
		if got := c.Match(strings.ToUpper(host) + "."); got == nil || got.Key != r.Key {
			t.Fatalf("pattern %q: Match(%q) = %v; want %q", h, strings.ToUpper(host)+".", got, r.Key)
		}
		if l := c.List(Filter{Host: host}); len(l) != 1 {
			t.Fatalf("pattern %q: List(host %q) has %d recipes; want 1", h, host, len(l))
		}
	}
	if strings.HasPrefix(r.Key, "*") {
		t.Fatalf("key %q looks like a pattern", r.Key)
	}
	if len(r.Rules) > maxRules || len(r.ExactReads) > maxExactReads || len(r.Hosts) > maxHosts {
		t.Fatalf("accepted %d rules, %d exact reads, %d hosts; want at most %d, %d, %d",
			len(r.Rules), len(r.ExactReads), len(r.Hosts), maxRules, maxExactReads, maxHosts)
	}
	h := hook{r}
	for _, e := range r.ExactReads {
		words := strings.Fields(e)
		if !h.ExactRead(words) {
			t.Fatalf("exact read %q: ExactRead(%q) = false; want true", e, words)
		}
		if why, raised := h.Raise(words); raised {
			t.Fatalf("exact read %q is also raised by a rule (%q)", e, why)
		}
	}
	for _, rule := range r.Rules {
		if len(rule.Value) > maxValueBytes || strings.TrimSpace(rule.Why) == "" {
			t.Fatalf("accepted rule %+v; want a value of at most %d bytes and a why", rule, maxValueBytes)
		}
	}
	// The public view, as the API sends it, reads back the same.
	pub := r.Public()
	out, err := json.Marshal(pub)
	if err != nil {
		t.Fatalf("marshal public view: %v", err)
	}
	var back PublicRecipe
	if err := json.Unmarshal(out, &back); err != nil {
		t.Fatalf("unmarshal public view: %v", err)
	}
	if back.Key != r.Key || !slices.Equal(back.Hosts, r.Hosts) || back.Name != r.Name || back.Vendor != r.Vendor {
		t.Fatalf("public view round trip: got key %q hosts %q; want %q %q", back.Key, back.Hosts, r.Key, r.Hosts)
	}
}

// mustLoad loads the embedded catalog or stops the test.
func mustLoad(tb testing.TB) *Catalog {
	tb.Helper()
	c, err := Load()
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// fsFile returns the embedded file of the recipe key.
func fsFile(key string) ([]byte, error) {
	return catalogFS.ReadFile("catalog/" + key + ".json")
}
