package recipes

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
)

// TestLoadEmbedded is what makes an invalid recipe fail the build's tests:
// every file under catalog/ must load.
func TestLoadEmbedded(t *testing.T) {
	c, err := Load()
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if len(c.All()) == 0 {
		t.Fatal("Load: got an empty catalog")
	}
	for _, r := range c.All() {
		if got := c.Get(r.Key); got != r {
			t.Errorf("Get(%q) = %v; want the listed recipe", r.Key, got)
		}
	}
	if got := c.Get("no-such-recipe"); got != nil {
		t.Errorf("Get(no-such-recipe) = %v; want nil", got)
	}
}

// TestLoadFresh: each Load builds its own catalog, so no caller can change
// another's.
func TestLoadFresh(t *testing.T) {
	a, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	b, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if a.All()[0] == b.All()[0] {
		t.Error("two Loads share a *Recipe; want a fresh catalog each time")
	}
}

// sample is a valid recipe file as a map, for tests to change one field.
func sample(key string) map[string]any {
	return map[string]any{
		"key": key, "name": "Sample " + key, "vendor": "Example", "version": 1,
		"channel": "ssh", "adapter": "ssh-key",
		"hosts":            []string{},
		"connection_hosts": []string{}, "connection_domains": []string{},
		"credential_fields": []map[string]any{
			{"name": "private_key", "label": "SSH private key", "secret": true, "required": true},
		},
		"docs_url": "https://example.com/docs", "create_url": "", "revoke_url": "",
		"notes": "", "shell": "bash", "default_user": "", "default_port": 22,
		"exact_reads": []string{}, "rules": []map[string]any{},
		"key_check": map[string]any{"command": "true"},
	}
}

// catalogOf builds an in-memory catalog directory from sample maps.
func catalogOf(t *testing.T, files map[string]map[string]any) fstest.MapFS {
	t.Helper()
	fsys := fstest.MapFS{}
	for name, m := range files {
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		fsys["catalog/"+name+".json"] = &fstest.MapFile{Data: b}
	}
	return fsys
}

func TestLoadInvalid(t *testing.T) {
	tests := []struct {
		name   string
		change func(m map[string]any)
		want   string // part of the error
	}{
		{"key not file name", func(m map[string]any) { m["key"] = "other" }, `want the file name`},
		{"bad key", func(m map[string]any) { m["key"] = "Bad_Key" }, `key "Bad_Key"`},
		{"missing name", func(m map[string]any) { m["name"] = "" }, "name is required"},
		{"missing vendor", func(m map[string]any) { delete(m, "vendor") }, "vendor is required"},
		{"version zero", func(m map[string]any) { m["version"] = 0 }, "version 0"},
		{"channel", func(m map[string]any) { m["channel"] = "https" }, `channel "https"`},
		{"adapter", func(m map[string]any) { m["adapter"] = "password" }, `adapter "password"`},
		{"unknown field", func(m map[string]any) { m["clas"] = "read" }, `unknown field "clas"`},
		{"shell", func(m map[string]any) { m["shell"] = "sh" }, `shell "sh"`},
		{"http docs", func(m map[string]any) { m["docs_url"] = "http://example.com" }, "docs_url"},
		{"no docs", func(m map[string]any) { m["docs_url"] = "" }, "docs_url: is required"},
		{"bad revoke", func(m map[string]any) { m["revoke_url"] = "ftp://x" }, "revoke_url"},
		{"port", func(m map[string]any) { m["default_port"] = 0 }, "default_port 0"},
		{"user", func(m map[string]any) { m["default_user"] = "a b" }, "default_user"},
		{"host upper", func(m map[string]any) { m["hosts"] = []string{"Example.com"} }, "hosts"},
		{"host inner wildcard", func(m map[string]any) { m["hosts"] = []string{"a.*.com"} }, "hosts"},
		{"bare wildcard", func(m map[string]any) { m["hosts"] = []string{"*."} }, "hosts"},
		{"connection host wildcard", func(m map[string]any) { m["connection_hosts"] = []string{"*.x.com"} }, "connection_hosts"},
		{"no credential fields", func(m map[string]any) { m["credential_fields"] = []any{} }, "credential_fields"},
		{"credential field name", func(m map[string]any) {
			m["credential_fields"] = []map[string]any{{"name": "Key", "label": "k"}}
		}, `name "Key"`},
		{"empty exact read", func(m map[string]any) { m["exact_reads"] = []string{""} }, "exact_reads"},
		{"double space exact read", func(m map[string]any) { m["exact_reads"] = []string{"show  version"} }, "exact_reads"},
		{"control exact read", func(m map[string]any) { m["exact_reads"] = []string{"show\tversion"} }, "exact_reads"},
		{"duplicate exact read", func(m map[string]any) { m["exact_reads"] = []string{"a b", "a b"} }, "twice"},
		{"bad regex", func(m map[string]any) {
			m["rules"] = []map[string]any{{"match": "regex", "value": "(", "why": "x"}}
		}, "rules[0]: regex"},
		{"bad match", func(m map[string]any) {
			m["rules"] = []map[string]any{{"match": "glob", "value": "x", "why": "x"}}
		}, `match "glob"`},
		{"rule class field", func(m map[string]any) {
			m["rules"] = []map[string]any{{"match": "word", "value": "x", "why": "x", "class": "destructive"}}
		}, `unknown field "class"`},
		{"rule without why", func(m map[string]any) {
			m["rules"] = []map[string]any{{"match": "word", "value": "x"}}
		}, "why is required"},
		{"rule without value", func(m map[string]any) {
			m["rules"] = []map[string]any{{"match": "word", "why": "x"}}
		}, "value is required"},
		{"exact read a rule raises", func(m map[string]any) {
			m["exact_reads"] = []string{"show configure"}
			m["rules"] = []map[string]any{{"match": "word", "value": "configure", "why": "x"}}
		}, "rules[0] raises it"},
		{"host twice", func(m map[string]any) { m["hosts"] = []string{"a.example", "a.example"} }, "listed twice"},
		{"file too large", func(m map[string]any) { m["notes"] = strings.Repeat("n", maxFileBytes) }, "want at most 65536"},
		{"notes too long", func(m map[string]any) { m["notes"] = strings.Repeat("n", maxTextBytes+1) }, "notes: 4097 bytes"},
		{"regex too long", func(m map[string]any) {
			m["rules"] = []map[string]any{{"match": "regex", "value": strings.Repeat("a", maxValueBytes+1), "why": "x"}}
		}, "value: 1025 bytes"},
		{"regex too large to compile", func(m map[string]any) {
			m["rules"] = []map[string]any{{"match": "regex", "value": "((a{1000}){1000}){1000}", "why": "x"}}
		}, "rules[0]: regex"},
		{"too many rules", func(m map[string]any) {
			rules := make([]map[string]any, maxRules+1)
			for i := range rules {
				rules[i] = map[string]any{"match": "word", "value": "x", "why": "x"}
			}
			m["rules"] = rules
		}, "rules: 65"},
		{"too many exact reads", func(m map[string]any) {
			reads := make([]string, maxExactReads+1)
			for i := range reads {
				reads[i] = "show " + strconv.Itoa(i)
			}
			m["exact_reads"] = reads
		}, "exact_reads: 257"},
		{"too many hosts", func(m map[string]any) {
			hosts := make([]string, maxHosts+1)
			for i := range hosts {
				hosts[i] = "h" + strconv.Itoa(i) + ".example"
			}
			m["hosts"] = hosts
		}, "want at most 64"},
		{"no key check", func(m map[string]any) { delete(m, "key_check") }, "key_check is required"},
		{"empty key check", func(m map[string]any) { m["key_check"] = map[string]any{} }, "key_check"},
		{"both key checks", func(m map[string]any) {
			m["key_check"] = map[string]any{"command": "true", "auth_only": true}
		}, "exclude"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := sample("one")
			tt.change(m)
			_, err := load(catalogOf(t, map[string]map[string]any{"one": m}), catalogGlob)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "recipes: ") {
				t.Errorf("load: got %v; want an error with %q", err, tt.want)
			}
		})
	}
}

func TestLoadDuplicateHostPattern(t *testing.T) {
	a, b := sample("a"), sample("b")
	a["hosts"] = []string{"*.example.net"}
	b["hosts"] = []string{"*.example.net"}
	_, err := load(catalogOf(t, map[string]map[string]any{"a": a, "b": b}), catalogGlob)
	if err == nil || !strings.Contains(err.Error(), `already claimed by "a"`) {
		t.Errorf("load: got %v; want the pattern refused as already claimed", err)
	}
}

func TestLoadTrailingData(t *testing.T) {
	b, _ := json.Marshal(sample("one"))
	fsys := fstest.MapFS{"catalog/one.json": &fstest.MapFile{Data: append(b, []byte(` {}`)...)}}
	if _, err := load(fsys, catalogGlob); err == nil {
		t.Error("load: got nil; want an error for a second object in the file")
	}
}

// matchCatalog claims hosts in overlapping ways, to pin the precedence.
func matchCatalog(t *testing.T) *Catalog {
	t.Helper()
	files := map[string]map[string]any{}
	for key, hosts := range map[string][]string{
		"wide":   {"*.example.net"},
		"narrow": {"*.core.example.net"},
		"exact":  {"edge1.core.example.net", "github.example"},
		"other":  {"*.example.org"},
		"none":   {},
	} {
		m := sample(key)
		m["hosts"] = hosts
		m["vendor"] = "V-" + key
		files[key] = m
	}
	c, err := load(catalogOf(t, files), catalogGlob)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestMatch(t *testing.T) {
	c := matchCatalog(t)
	tests := []struct {
		name, host, want string // want "" for nil
	}{
		{"wildcard", "r1.example.net", "wide"},
		{"longer suffix beats shorter", "r1.core.example.net", "narrow"},
		{"exact beats wildcard", "edge1.core.example.net", "exact"},
		{"exact second pattern", "github.example", "exact"},
		{"case and root dot", "R1.Core.Example.NET.", "narrow"},
		{"wildcard needs a label", "example.net", ""},
		{"suffix must be at a dot", "badexample.net", ""},
		{"no claim", "db.internal", ""},
		{"empty", "", ""},
		{"other domain", "a.b.example.org", "other"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ""
			if r := c.Match(tt.host); r != nil {
				got = r.Key
			}
			if got != tt.want {
				t.Errorf("Match(%q) = %q; want %q", tt.host, got, tt.want)
			}
		})
	}
}

func TestList(t *testing.T) {
	c := matchCatalog(t)
	tests := []struct {
		name string
		f    Filter
		want string // keys joined by spaces
	}{
		{"all", Filter{}, "exact narrow none other wide"},
		{"vendor any case", Filter{Vendor: "v-WIDE"}, "wide"},
		{"q in name", Filter{Q: "SAMPLE OTHER"}, "other"},
		{"q in hosts", Filter{Q: "core.example"}, "exact narrow"},
		{"host: every claim, not only the best", Filter{Host: "edge1.core.example.net"}, "exact narrow wide"},
		{"host unclaimed", Filter{Host: "db.internal"}, ""},
		{"combined", Filter{Host: "x.core.example.net", Vendor: "v-wide"}, "wide"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var keys []string
			for _, r := range c.List(tt.f) {
				keys = append(keys, r.Key)
			}
			if got := strings.Join(keys, " "); got != tt.want {
				t.Errorf("List(%+v) = %q; want %q", tt.f, got, tt.want)
			}
		})
	}
}

func TestForConnection(t *testing.T) {
	cat, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		key, host string
		want      string // recipe key, "" for none
		wantErr   bool
	}{
		{"", "github.com", "github", false},
		{"linux", "github.com", "linux", false}, // the connection's own recipe wins
		{"", "host.example.internal", "", false},
		{"no-such", "github.com", "", true},
	}
	for _, tt := range tests {
		r, err := cat.ForConnection(tt.key, tt.host)
		got := ""
		if r != nil {
			got = r.Key
		}
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("ForConnection(%q, %q) = %q, %v; want %q, error %v", tt.key, tt.host, got, err, tt.want, tt.wantErr)
		}
	}
}
