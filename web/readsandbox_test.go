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
	// Off loosens a production connection: it waits for a second admin.
	got := edit("read_sandbox", "off", "read_sandbox_reason", "fuse mounts hang bwrap")
	id := changeIDIn(got)
	if id == "" || !strings.Contains(got, "waits for a second admin") {
		t.Fatalf("off with a reason: flash %q; want it held for a second admin", got)
	}
	if c, _ := ps.st.ConnectionByAlias(ctx, "prod"); c.ReadSandbox == store.ReadSandboxOff {
		t.Errorf("the read sandbox is off before a second admin approved")
	}
	bob := ps.admin("bob")
	if got := bob.decide(id, true); !strings.Contains(got, "Approved change "+id) {
		t.Fatalf("bob approving %s: flash %q; want it approved", id, got)
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
	// Off loosens a production connection: 202, and bob's approval makes it.
	r = as.call("PATCH", "/v1/connections/api", as.root, `{"read_sandbox": "off", "read_sandbox_reason": "breaks the app"}`)
	checkDocumented(t, doc, "PATCH", "/v1/connections/{id}", r)
	id := as.heldChange(t, r)
	as.approveChange(t, as.ops, id)
	r = as.call("GET", "/v1/connections/api", as.ci, "")
	checkDocumented(t, doc, "GET", "/v1/connections/{id}", r)
	conn = r.data(t)
	rs, _ = conn["read_sandbox"].(map[string]any)
	if rs["setting"] != "off" || rs["reason"] != "breaks the app" || !strings.Contains(fmt.Sprint(rs["warning"]), "rely on the classifier alone") {
		t.Errorf("GET after approval: %s; want the read sandbox off with its reason and warning", r.body)
	}
}
