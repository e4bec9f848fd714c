package web

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/postern/postern/store"
)

// Issue 23: admins through REST and the page, as through the CLI. An owner
// adds a viewer at once; an approver or admin waits for a second admin, who
// approves it in the approvals queue; a lowered role applies at once; any
// other role is refused (403); and the password is in no answer, audit
// row, page or log line.

// logBuffer collects the server's log lines; the page tests' server logs
// from its own goroutines.
type logBuffer struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// withLog is a Config edit that logs into buf.
func withLog(buf *logBuffer) func(*Config) {
	return func(c *Config) { c.Logger = zerolog.New(buf) }
}

// adminPasswords are the new admins' passwords: no answer, audit row, page
// or log line may hold one.
var adminPasswords = map[string]string{
	"carol": "carol-Pw-7f3a9c1e-secret",
	"dave":  "dave-Pw-52b8d0aa-secret",
	"erin":  "erin-Pw-91c4e6f2-secret",
}

// passwordIn names the admin whose password text holds, or "".
func passwordIn(text string) string {
	for name, pw := range adminPasswords {
		if strings.Contains(text, pw) {
			return name
		}
	}
	return ""
}

// adminBody is the JSON body of POST /v1/admins.
func adminBody(name, role string) string {
	return fmt.Sprintf(`{"name": %q, "password": %q, "role": %q}`, name, adminPasswords[name], role)
}

// wantAdmin checks that admin name exists in the store with role and the
// password it was given.
func wantAdmin(t *testing.T, st *store.Store, name string, role store.Role) {
	t.Helper()
	a, err := st.AdminByName(context.Background(), name)
	if err != nil {
		t.Fatalf("admin %s: %v; want it with role %s", name, err, role)
	}
	if a.Role != role {
		t.Errorf("admin %s: got role %s; want %s", name, a.Role, role)
	}
	if ok, err := VerifyPassword(a.PasswordHash, adminPasswords[name]); !ok || err != nil {
		t.Errorf("admin %s: the password given does not verify against the stored hash (%v)", name, err)
	}
}

// wantNoAdmin checks that no admin name exists.
func wantNoAdmin(t *testing.T, st *store.Store, name string) {
	t.Helper()
	if a, err := st.AdminByName(context.Background(), name); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("admin %s: got %+v, %v; want none", name, a, err)
	}
}

// wantRoleOf checks admin name's role in the store.
func wantRoleOf(t *testing.T, st *store.Store, name string, role store.Role) {
	t.Helper()
	a, err := st.AdminByName(context.Background(), name)
	if err != nil || a.Role != role {
		t.Errorf("admin %s: got %+v, %v; want role %s", name, a, err, role)
	}
}

// checkAuditHasNoPassword fails unless the audit log holds an admin row
// whose operation mentions each of wants, and unless no row holds a
// password, as the store keeps it and as GET /v1/audit shows it.
func checkAuditHasNoPassword(t *testing.T, st *store.Store, apiAudit string, wants ...string) {
	t.Helper()
	rows, err := st.ListAudit(context.Background(), store.AuditFilter{})
	if err != nil {
		t.Fatalf("ListAudit: %v", err)
	}
	all := fmt.Sprintf("%+v", rows)
	for _, want := range wants {
		if !strings.Contains(all, want) {
			t.Errorf("the audit log has no row of %q", want)
		}
		if !strings.Contains(apiAudit, want) {
			t.Errorf("GET /v1/audit shows no row of %q", want)
		}
	}
	if who := passwordIn(all); who != "" {
		t.Errorf("an audit row holds %s's password", who)
	}
	if who := passwordIn(apiAudit); who != "" {
		t.Errorf("GET /v1/audit shows %s's password", who)
	}
}

// TestAPIAdmins: alice (owner) adds carol as a viewer, made at once,
// and dave as an admin, which waits until bob approves the change; she
// lowers dave's role at once and raising carol's waits. The password is in
// no answer, audit row or log line.
func TestAPIAdmins(t *testing.T) {
	logs := &logBuffer{}
	as := newAPISite(t, withLog(logs))
	doc := loadOpenAPI(t)
	var answers []apiResp
	call := func(method, path, token, body string, hdr ...string) apiResp {
		t.Helper()
		r := as.call(method, path, token, body, hdr...)
		answers = append(answers, r)
		return r
	}

	// A viewer decides nothing: made at once. (An approver would wait:
	// a second person is not one owner's to make.)
	r := call("POST", "/v1/admins", as.root, adminBody("carol", "viewer"))
	checkDocumented(t, doc, "POST", "/v1/admins", r)
	if r.status != http.StatusCreated || r.data(t)["name"] != "carol" || r.data(t)["role"] != "viewer" {
		t.Fatalf("alice adding carol (viewer): %d %s; want 201 with carol, viewer", r.status, r.body)
	}
	wantAdmin(t, as.st, "carol", store.RoleViewer)

	r = call("POST", "/v1/admins", as.root, adminBody("dave", "admin"))
	checkDocumented(t, doc, "POST", "/v1/admins", r)
	id := as.heldChange(t, r)
	if d := r.data(t); d["requested_by"] != "alice" || !strings.Contains(fmt.Sprint(d["after"]), "dave") {
		t.Errorf("the change: %v; want alice's, adding dave", d)
	}
	wantNoAdmin(t, as.st, "dave")
	if r := call("POST", "/v1/approvals/"+id+"/approve", as.root, ""); r.status != http.StatusConflict {
		t.Errorf("alice approving her own change: %d %s; want 409", r.status, r.body)
	}
	wantNoAdmin(t, as.st, "dave")
	as.approveChange(t, as.ops, id)
	wantAdmin(t, as.st, "dave", store.RoleAdmin)
	recs, _, _ := call("GET", "/v1/admins?name=dave", as.ci, "").list(t)
	if len(recs) != 1 || recs[0]["role"] != "admin" {
		t.Errorf("GET /v1/admins?name=dave: %v; want dave, admin", recs)
	}

	// Lowered: at once, by name or by id.
	daveID := as.adminIDOf("dave")
	r = call("PATCH", "/v1/admins/"+daveID, as.root, `{"role": "viewer"}`)
	checkDocumented(t, doc, "PATCH", "/v1/admins/{id}", r)
	if r.status != http.StatusOK || r.data(t)["id"] != daveID || r.data(t)["role"] != "viewer" {
		t.Errorf("alice lowering dave (by id) to viewer: %d %s; want 200 viewer", r.status, r.body)
	}
	wantRoleOf(t, as.st, "dave", store.RoleViewer)

	// Raised: waits for a second admin.
	r = call("PATCH", "/v1/admins/carol", as.root, `{"role": "owner"}`)
	checkDocumented(t, doc, "PATCH", "/v1/admins/{id}", r)
	raise := as.heldChange(t, r)
	wantRoleOf(t, as.st, "carol", store.RoleViewer)
	as.approveChange(t, as.ops, raise)
	wantRoleOf(t, as.st, "carol", store.RoleOwner)

	// The changes are audited, and no answer, audit row or log line holds
	// a password.
	audit := call("GET", "/v1/audit?kind=admin", as.ci, "")
	if audit.status != http.StatusOK {
		t.Fatalf("GET /v1/audit?kind=admin: %d %s", audit.status, audit.body)
	}
	checkAuditHasNoPassword(t, as.st, string(audit.body), "admin add carol", "admin add dave", "admin role dave")
	call("GET", "/v1/approvals?kind=change", as.ci, "")
	for _, a := range answers {
		if who := passwordIn(string(a.body) + fmt.Sprint(a.header)); who != "" {
			t.Errorf("an answer holds %s's password: %s", who, a.body)
		}
		if bytes.Contains(a.body, []byte("$argon2id$")) {
			t.Errorf("an answer holds a password hash: %s", a.body)
		}
	}
	if !strings.Contains(logs.String(), "web: api admin added") {
		t.Errorf("the log has no line of carol's making; want one (without the password)")
	}
	if who := passwordIn(logs.String()); who != "" {
		t.Errorf("the log holds %s's password", who)
	}
}

// adminIDOf is the id of the admin called name.
func (as *apiSite) adminIDOf(name string) string {
	as.t.Helper()
	a, err := as.st.AdminByName(context.Background(), name)
	if err != nil {
		as.t.Fatalf("AdminByName(%s): %v", name, err)
	}
	return a.ID
}

// TestAPIAdminsNeedOwner: every token that is not an owner's admin token
// is refused both routes with 403 — an admin's by package manage, an
// approver's by the route, a read token by its scope — and nothing changes.
func TestAPIAdminsNeedOwner(t *testing.T) {
	as := newAPISite(t, nil)
	ctx := context.Background()
	if _, err := as.st.CreateAdmin(ctx, store.Unaudited(), "target", cheapHash(pagePassword), store.RoleApprover); err != nil {
		t.Fatal(err)
	}
	doc := loadOpenAPI(t)
	tests := []struct {
		name       string
		role       store.Role
		scope      store.TokenScope
		code       string
		addRole    string // the role POST /v1/admins asks for
		targetRole string // the role PATCH asks for
	}{
		{"admin role", store.RoleAdmin, store.ScopeAdmin, "insufficient_role", "viewer", "viewer"},
		{"admin role raising", store.RoleAdmin, store.ScopeAdmin, "insufficient_role", "owner", "owner"},
		{"approver role", store.RoleApprover, store.ScopeAdmin, "insufficient_role", "viewer", "viewer"},
		{"owner with a read token", store.RoleOwner, store.ScopeRead, "insufficient_scope", "viewer", "viewer"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			who := fmt.Sprintf("u%d", i)
			a, err := as.st.CreateAdmin(ctx, store.Unaudited(), who, "$argon2id$unused", tc.role)
			if err != nil {
				t.Fatal(err)
			}
			tok := as.addScopedToken(who, a.ID, tc.scope)
			r := as.call("POST", "/v1/admins", tok, adminBody("erin", tc.addRole))
			checkDocumented(t, doc, "POST", "/v1/admins", r)
			if code, _ := apiCode(t, r); r.status != http.StatusForbidden || code != tc.code {
				t.Errorf("%s adding erin: %d %s; want 403 %s", tc.name, r.status, r.body, tc.code)
			}
			if who := passwordIn(string(r.body)); who != "" {
				t.Errorf("the refusal holds %s's password", who)
			}
			wantNoAdmin(t, as.st, "erin")
			r = as.call("PATCH", "/v1/admins/target", tok, `{"role": "`+tc.targetRole+`"}`)
			checkDocumented(t, doc, "PATCH", "/v1/admins/{id}", r)
			if code, _ := apiCode(t, r); r.status != http.StatusForbidden || code != tc.code {
				t.Errorf("%s changing target's role: %d %s; want 403 %s", tc.name, r.status, r.body, tc.code)
			}
			wantRoleOf(t, as.st, "target", store.RoleApprover)
			recs, _, _ := as.get("/v1/approvals?kind=change").list(t)
			if len(recs) != 0 {
				t.Errorf("%s: change requests %v; want none", tc.name, recs)
			}
		})
	}
}

// TestAPIAdminsInput: what POST and PATCH refuse, with the field at fault
// and without the password.
func TestAPIAdminsInput(t *testing.T) {
	as := newAPISite(t, nil)
	const short = "tiny-pw-x9" // 10 characters
	tests := []struct {
		name, method, path, body string
		status                   int
		code, field              string
	}{
		{"short password", "POST", "/v1/admins", `{"name": "erin", "password": "` + short + `"}`,
			http.StatusBadRequest, "invalid_body", "password"},
		{"no password", "POST", "/v1/admins", `{"name": "erin"}`, http.StatusBadRequest, "invalid_body", "password"},
		{"unknown role", "POST", "/v1/admins", `{"name": "erin", "password": "` + short + short + `", "role": "root"}`,
			http.StatusBadRequest, "invalid_body", "role"},
		{"bad name", "POST", "/v1/admins", `{"name": "a b", "password": "` + short + short + `"}`,
			http.StatusBadRequest, "invalid_body", ""},
		{"name taken", "POST", "/v1/admins", `{"name": "bob", "password": "` + short + short + `", "role": "viewer"}`,
			http.StatusConflict, "already_exists", ""},
		{"name taken, held role", "POST", "/v1/admins", `{"name": "bob", "password": "` + short + short + `", "role": "owner"}`,
			http.StatusConflict, "already_exists", ""},
		{"unknown field", "POST", "/v1/admins", `{"name": "erin", "password": "` + short + short + `", "admin": "x"}`,
			http.StatusBadRequest, "invalid_body", ""},
		{"no role", "PATCH", "/v1/admins/bob", `{}`, http.StatusBadRequest, "invalid_body", "role"},
		{"unknown role", "PATCH", "/v1/admins/bob", `{"role": "root"}`, http.StatusBadRequest, "invalid_body", "role"},
		{"same role", "PATCH", "/v1/admins/bob", `{"role": "owner"}`, http.StatusBadRequest, "invalid_body", ""},
		{"unknown admin", "PATCH", "/v1/admins/nobody", `{"role": "viewer"}`, http.StatusNotFound, "not_found", ""},
	}
	for _, tc := range tests {
		t.Run(tc.method+" "+tc.name, func(t *testing.T) {
			r := as.call(tc.method, tc.path, as.root, tc.body)
			code, field := apiCode(t, r)
			if r.status != tc.status || code != tc.code || (tc.field != "" && field != tc.field) {
				t.Errorf("got %d %s (field %q); want %d %s (field %q)", r.status, code, field, tc.status, tc.code, tc.field)
			}
			if strings.Contains(string(r.body), short) {
				t.Errorf("the answer holds the password: %s", r.body)
			}
		})
	}
	wantNoAdmin(t, as.st, "erin")
	wantRoleOf(t, as.st, "bob", store.RoleOwner)
}

// TestAPIAdminsIdempotencyKey: a retry of POST /v1/admins with its
// Idempotency-Key replays the first answer, the same key with another
// password is refused 422, and what is kept to tell them apart is not the
// SHA-256 of the body, which would let a copy of the database try
// passwords at SHA-256's speed.
func TestAPIAdminsIdempotencyKey(t *testing.T) {
	as := newAPISite(t, nil)
	body := adminBody("carol", "viewer")
	first := as.call("POST", "/v1/admins", as.root, body, "Idempotency-Key", "k-carol")
	again := as.call("POST", "/v1/admins", as.root, body, "Idempotency-Key", "k-carol")
	if first.status != http.StatusCreated || again.status != http.StatusCreated ||
		again.header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(first.body, again.body) {
		t.Errorf("retry: first %d, again %d (replayed %q); want 201 twice, the second replayed with the same body",
			first.status, again.status, again.header.Get("Idempotent-Replayed"))
	}
	other := strings.Replace(body, adminPasswords["carol"], adminPasswords["dave"], 1)
	if r := as.call("POST", "/v1/admins", as.root, other, "Idempotency-Key", "k-carol"); r.status != http.StatusUnprocessableEntity {
		t.Errorf("the same key with another password: %d %s; want 422", r.status, r.body)
	}
	wantAdmin(t, as.st, "carol", store.RoleViewer)

	ctx := context.Background()
	toks, err := as.st.ListConsoleTokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var rootID string
	for _, tk := range toks {
		if tk.Name == "root" {
			rootID = tk.ID
		}
	}
	kept, err := as.st.IdempotentResponse(ctx, "token:"+rootID, "k-carol")
	if err != nil {
		t.Fatalf("IdempotentResponse: %v", err)
	}
	fast := sha256.Sum256([]byte("POST\n/v1/admins\n" + body))
	if kept.RequestSHA256 == hex.EncodeToString(fast[:]) || kept.RequestSHA256 == "" {
		t.Errorf("the kept request sum is %q, the body's SHA-256; want the slow, salted sum", kept.RequestSHA256)
	}
	if who := passwordIn(string(kept.Body) + kept.RequestSHA256); who != "" {
		t.Errorf("the kept answer holds %s's password", who)
	}
}

// pageAPI calls the REST API of the page site with token.
func (ps *pageSite) pageAPI(method, path, token, body string) (int, string) {
	ps.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, ps.ts.URL+path, rd)
	if err != nil {
		ps.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := ps.ts.Client().Do(req)
	if err != nil {
		ps.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		ps.t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestPageAdmins: on the Admins page alice (owner) sees every admin and
// the forms; she adds carol as a viewer, who can log in at once with
// her password, and dave as an admin, which waits (a notice with the
// change id) until bob approves it over REST. She lowers dave's role at
// once, and raising carol's waits. No page holds a password.
func TestPageAdmins(t *testing.T) {
	logs := &logBuffer{}
	ps := newPageSite(t, withLog(logs))
	alice := ps.admin("alice")
	ps.addAdmin("bob")
	var pages []string
	get := func(path string) string {
		t.Helper()
		status, _, body := alice.get(path)
		if status != http.StatusOK {
			t.Fatalf("GET %s: got status %d; want 200", path, status)
		}
		pages = append(pages, body)
		return body
	}
	// post posts an owner's form and returns the flash of the page it
	// goes back to, and whether the flash is a notice.
	post := func(path string, kv ...string) (string, bool) {
		t.Helper()
		status, h, body := alice.post(path, alice.form(kv...))
		pages = append(pages, body, h.Get("Location"))
		if status != http.StatusSeeOther || !strings.HasPrefix(h.Get("Location"), "/admins") {
			t.Fatalf("POST %s: got status %d to %q; want 303 to /admins\n%s", path, status, h.Get("Location"), body)
		}
		back := alice.follow(h)
		pages = append(pages, back)
		return flashText(back), strings.Contains(back, `class="flash flash-notice"`)
	}

	list := get("/admins")
	for _, want := range []string{`<a href="/admins" aria-current="page">Admins</a>`, `id="add-admin"`,
		`id="admin-alice"`, `id="admin-bob"`, `action="/admins/bob/role"`, `<td class="role" data-role="owner">owner</td>`} {
		if !strings.Contains(list, want) {
			t.Errorf("alice's /admins lacks %s", want)
		}
	}

	flash, _ := post("/admins", "name", "carol", "password", adminPasswords["carol"], "role", "viewer")
	if !strings.Contains(flash, "Added admin carol with the viewer role") {
		t.Errorf("adding carol: flash %q; want that she was added", flash)
	}
	wantAdmin(t, ps.st, "carol", store.RoleViewer)
	if status, _, body := ps.client().tryLogin("carol", adminPasswords["carol"]); status != http.StatusSeeOther {
		t.Errorf("carol logging in with her password: got status %d; want 303\n%s", status, body)
	}

	flash, notice := post("/admins", "name", "dave", "password", adminPasswords["dave"], "role", "admin")
	id := changeIDIn(flash)
	if id == "" || !notice || !strings.Contains(flash, "waits for a second admin") {
		t.Fatalf("adding dave (admin): flash %q (notice %v); want a notice that it waits, with the change id", flash, notice)
	}
	wantNoAdmin(t, ps.st, "dave")
	bobAdmin, err := ps.st.AdminByName(context.Background(), "bob")
	if err != nil {
		t.Fatal(err)
	}
	bobToken, sha := NewConsoleToken()
	if _, err := ps.st.CreateConsoleToken(context.Background(), store.Unaudited(), "bob-ops", sha, bobAdmin.ID, store.ScopeApprove); err != nil {
		t.Fatal(err)
	}
	if status, body := ps.pageAPI("POST", "/v1/approvals/"+id+"/approve", bobToken, ""); status != http.StatusOK {
		t.Fatalf("bob approving %s over REST: %d %s; want 200", id, status, body)
	}
	wantAdmin(t, ps.st, "dave", store.RoleAdmin)
	if list := get("/admins"); !strings.Contains(list, `<td class="role" data-role="admin">admin</td>`) ||
		!strings.Contains(list, `id="admin-dave"`) {
		t.Errorf("/admins after bob's approval does not show dave as an admin")
	}

	flash, notice = post("/admins/dave/role", "role", "approver")
	if notice || !strings.Contains(flash, "Admin dave now has the approver role") {
		t.Errorf("lowering dave: flash %q (notice %v); want it done", flash, notice)
	}
	wantRoleOf(t, ps.st, "dave", store.RoleApprover)

	flash, notice = post("/admins/carol/role", "role", "owner")
	if !notice || changeIDIn(flash) == "" {
		t.Errorf("raising carol: flash %q (notice %v); want a notice with the change id", flash, notice)
	}
	wantRoleOf(t, ps.st, "carol", store.RoleViewer)

	flash, _ = post("/admins", "name", "erin", "password", "tiny-pw-x9", "role", "viewer")
	if !strings.Contains(flash, "Admin erin not added") || !strings.Contains(flash, "want at least 12") {
		t.Errorf("a short password: flash %q; want it refused", flash)
	}
	wantNoAdmin(t, ps.st, "erin")

	get("/approvals")
	get("/audit")
	_, apiAudit := ps.pageAPI("GET", "/v1/audit?kind=admin", bobToken, "")
	checkAuditHasNoPassword(t, ps.st, apiAudit, "admin add carol", "admin add dave", "admin role dave")
	for _, p := range pages {
		if who := passwordIn(p); who != "" {
			t.Errorf("a page or redirect holds %s's password", who)
		}
		if strings.Contains(p, "tiny-pw-x9") {
			t.Errorf("a page or redirect holds the refused password")
		}
	}
	if !strings.Contains(logs.String(), "web: admin added") {
		t.Errorf("the log has no line of carol's making; want one (without the password)")
	}
	if who := passwordIn(logs.String()); who != "" {
		t.Errorf("the log holds %s's password", who)
	}
}

// TestPageAdminsNeedOwner: every role but owner sees the admins and their
// roles without the forms, and its posts are refused 403 and change
// nothing.
func TestPageAdminsNeedOwner(t *testing.T) {
	ps := newPageSite(t, nil)
	ps.addAdminRole("target", store.RoleApprover)
	for _, role := range []store.Role{store.RoleViewer, store.RoleApprover, store.RoleAdmin} {
		t.Run(string(role), func(t *testing.T) {
			name := "r-" + string(role)
			ps.addAdminRole(name, role)
			pc := ps.client()
			pc.loginAs(name)
			status, _, list := pc.get("/admins")
			if status != http.StatusOK {
				t.Fatalf("GET /admins: got status %d; want 200", status)
			}
			if !strings.Contains(list, `id="admin-target"`) || !strings.Contains(list, `id="admin-`+name+`"`) ||
				!strings.Contains(list, `data-role="`+string(role)+`"`) {
				t.Errorf("%s's /admins does not list the admins with their roles", role)
			}
			if strings.Contains(list, `id="add-admin"`) || strings.Contains(list, `action="/admins/`) ||
				!strings.Contains(list, `id="admins-owner-only"`) {
				t.Errorf("%s's /admins shows an owner's forms", role)
			}
			if status, _, _ := pc.post("/admins", pc.form("name", "erin", "password", adminPasswords["erin"],
				"role", "viewer")); status != http.StatusForbidden {
				t.Errorf("%s adding erin: got status %d; want 403", role, status)
			}
			wantNoAdmin(t, ps.st, "erin")
			if status, _, _ := pc.post("/admins/target/role", pc.form("role", "viewer")); status != http.StatusForbidden {
				t.Errorf("%s changing target's role: got status %d; want 403", role, status)
			}
			wantRoleOf(t, ps.st, "target", store.RoleApprover)
		})
	}
}
