package web

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/postern/postern/recipes"
	"github.com/postern/postern/store"
)

// TestConnectionsPageReadSandbox: the page shows how each connection's
// reads run, warns about a production connection whose reads rely on the
// classifier alone, and its edit form sets the read sandbox (off only with
// a reason).
func TestConnectionsPageReadSandbox(t *testing.T) {
	ok := func(recipes.Target) recipes.Result { return recipes.Result{Status: recipes.StatusOK} }
	ps := newPageSite(t, withChecker(t, ok))
	ctx := context.Background()
	if _, err := ps.st.SetSandboxProbe(ctx, "web1", store.SandboxProbe{Found: store.SandboxBwrap, Message: "bwrap: works"}); err != nil {
		t.Fatal(err)
	}
	ps.addConnection("prod", store.EnvProduction)
	if _, err := ps.st.SetSandboxProbe(ctx, "prod", store.SandboxProbe{Found: store.SandboxNone, Message: "bwrap: not installed"}); err != nil {
		t.Fatal(err)
	}
	ps.addAdmin("alice")
	pc := ps.client()
	pc.loginAs("alice")
	_, _, body := pc.get("/connections")
	for _, want := range []string{
		`<td class="reads" data-reads="bwrap">`, `read-only (bwrap)`,
		`<td class="reads" data-reads="classifier">`,
		`reads on production connection prod rely on the classifier alone: no sandbox works on the target (bwrap: not installed)`,
		`<select name="read_sandbox">`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/connections lacks %q", want)
		}
	}
	if strings.Count(body, "read-sandbox-warning") != 1 {
		t.Errorf("/connections has %d read sandbox warnings; want one, for prod", strings.Count(body, "read-sandbox-warning"))
	}

	edit := func(fields ...string) string {
		_, h, _ := pc.post("/connections/prod/update", pc.form(append([]string{"host", "127.0.0.1", "port", "2022", "user", "deploy",
			"env", "production"}, fields...)...))
		return flashText(pc.follow(h))
	}
	if got := edit("read_sandbox", "off"); !strings.Contains(got, "say why the read sandbox is off") {
		t.Errorf("off without a reason: flash %q; want the reason asked for", got)
	}
	if got := edit("read_sandbox", "off", "read_sandbox_reason", "fuse mounts hang bwrap"); !strings.Contains(got, "Changed connection prod") ||
		!strings.Contains(got, "the read sandbox is off (fuse mounts hang bwrap)") {
		t.Errorf("off with a reason: flash %q; want it changed, with the warning", got)
	}
	if c, _ := ps.st.ConnectionByAlias(ctx, "prod"); c.ReadSandbox != store.ReadSandboxOff || c.ReadSandboxReason != "fuse mounts hang bwrap" {
		t.Errorf("stored %q (%q); want off with the reason", c.ReadSandbox, c.ReadSandboxReason)
	}
	if got := edit("read_sandbox", "require"); !strings.Contains(got, "Changed connection prod") {
		t.Errorf("require: flash %q; want it changed", got)
	}
	if c, _ := ps.st.ConnectionByAlias(ctx, "prod"); c.ReadSandbox != store.ReadSandboxRequire || c.ReadSandboxReason != "" {
		t.Errorf("stored %q (%q); want require, no reason", c.ReadSandbox, c.ReadSandboxReason)
	}
}

// TestAPIReadSandbox: REST reads and writes the read sandbox: a connection
// carries it, POST and PATCH set it (off only with a reason), and an
// unknown setting is a bad body.
func TestAPIReadSandbox(t *testing.T) {
	as := newAPISite(t, withChecker(t, func(recipes.Target) recipes.Result { return recipes.Result{Status: recipes.StatusOK} }))
	doc := loadOpenAPI(t)
	key, host := newTestKeyPair(t), newTestKeyPair(t)
	as.keys = append(as.keys, key.PrivatePEM)
	keyJSON, _ := json.Marshal(string(key.PrivatePEM))
	body := fmt.Sprintf(`{"alias": "api", "host": "127.0.0.1", "port": 2022, "user": "deploy", "env": "production", "host_keys": [%q],
		"private_key": %s, "read_sandbox": "require"}`, host.Authorized, keyJSON)
	r := as.call("POST", "/v1/connections", as.root, body)
	checkDocumented(t, doc, "POST", "/v1/connections", r)
	d := r.data(t)
	conn, _ := d["connection"].(map[string]any)
	rs, _ := conn["read_sandbox"].(map[string]any)
	if r.status != 201 || rs["setting"] != "require" || rs["reads"] != "refused" || rs["found"] != "unprobed" {
		t.Fatalf("create with require: %d %s", r.status, r.body)
	}
	for _, tc := range []struct{ body, code string }{
		{`{"read_sandbox": "off"}`, "invalid_body"},
		{`{"read_sandbox": "sometimes"}`, "invalid_body"},
		{`{"read_sandbox_reason": "alone"}`, "invalid_body"},
	} {
		r := as.call("PATCH", "/v1/connections/api", as.root, tc.body)
		checkDocumented(t, doc, "PATCH", "/v1/connections/{id}", r)
		if code, _ := apiCode(t, r); r.status != 400 || code != tc.code {
			t.Errorf("PATCH %s: %d %s; want 400 %s", tc.body, r.status, r.body, tc.code)
		}
	}
	r = as.call("PATCH", "/v1/connections/api", as.root, `{"read_sandbox": "off", "read_sandbox_reason": "breaks the app"}`)
	checkDocumented(t, doc, "PATCH", "/v1/connections/{id}", r)
	conn, _ = r.data(t)["connection"].(map[string]any)
	rs, _ = conn["read_sandbox"].(map[string]any)
	if r.status != 200 || rs["setting"] != "off" || rs["reason"] != "breaks the app" || !strings.Contains(rs["warning"].(string), "rely on the classifier alone") {
		t.Errorf("PATCH off with a reason: %d %s", r.status, r.body)
	}
	r = as.call("GET", "/v1/connections/api", as.ci, "")
	checkDocumented(t, doc, "GET", "/v1/connections/{id}", r)
	conn = r.data(t)
	if rs, _ := conn["read_sandbox"].(map[string]any); rs["setting"] != "off" {
		t.Errorf("GET: %s; want the read sandbox off", r.body)
	}
}
