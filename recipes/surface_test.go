package recipes

import (
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// publishedKeys pins the catalog's published surface: the recipe keys that
// GET /v1/recipes and `postern recipes list` answer with. Adding a recipe is
// one file under catalog/ plus its key here; removing or renaming one breaks
// connections made from it, so it must be a deliberate change to this list.
var publishedKeys = []string{
	"alpine", "amazon-linux", "arista-eos", "azure-devops", "bitbucket",
	"cisco-ios", "codeberg", "debian", "docker-host", "fedora",
	"fedora-coreos", "freebsd", "gitea-forgejo", "github", "gitlab",
	"gitlab-self-managed", "hetzner-storage-box", "huggingface", "juniper-junos", "kubernetes-node",
	"linux", "macos", "mikrotik-routeros", "openwrt", "oracle-linux",
	"postgresql-host", "proxmox-ve", "raspberry-pi-os", "rhel", "rsync-net",
	"sourcehut", "synology-dsm", "truenas", "ubuntu", "unraid",
}

func TestPublishedSurface(t *testing.T) {
	c := loadT(t)
	var got []string
	for _, r := range c.All() {
		got = append(got, r.Key)
	}
	if len(got) != len(publishedKeys) {
		t.Errorf("catalog has %d recipes; want %d", len(got), len(publishedKeys))
	}
	if !sort.StringsAreSorted(publishedKeys) {
		t.Error("publishedKeys is not sorted; keep it in key order")
	}
	if !reflect.DeepEqual(got, publishedKeys) {
		t.Errorf("catalog keys:\n got %q\nwant %q", got, publishedKeys)
	}
}

// TestPublicViewHidesInternals: the public JSON has exactly the published
// fields, none of the ones that stay inside postern.
func TestPublicViewHidesInternals(t *testing.T) {
	want := "adapter channel connection_domains connection_hosts create_url credential_fields docs_url hosts key name notes revoke_url vendor version"
	for _, r := range loadT(t).All() {
		b, err := json.Marshal(r.Public())
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		var keys []string
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		if got := strings.Join(keys, " "); got != want {
			t.Errorf("%s: public fields %q; want %q", r.Key, got, want)
		}
	}
}

func TestPublicListNeverNull(t *testing.T) {
	b, err := json.Marshal(Response{Data: loadT(t).PublicList(Filter{Q: "no recipe has this"}), RequestID: NewRequestID()})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), `{"data":[],"request_id":"req_`) {
		t.Errorf("empty list: got %s; want data [] in the envelope", b)
	}
}

// TestEmbeddedMatch pins a few host claims of the real catalog.
func TestEmbeddedMatch(t *testing.T) {
	c := loadT(t)
	tests := []struct{ host, want string }{
		{"github.com", "github"},
		{"ssh.github.com", "github"},
		{"GitLab.com.", "gitlab"},
		{"u123456.your-storagebox.de", "hetzner-storage-box"},
		{"zh1234.rsync.net", "rsync-net"},
		{"db.internal", ""},
		{"10.0.0.5", ""},
	}
	for _, tt := range tests {
		got := ""
		if r := c.Match(tt.host); r != nil {
			got = r.Key
		}
		if got != tt.want {
			t.Errorf("Match(%q) = %q; want %q", tt.host, got, tt.want)
		}
	}
}
