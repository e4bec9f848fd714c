package web

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/postern/postern/store"
)

// Issue 23: a console token is only ever made for the admin who makes it.
// Were alice able to make an approve token of bob, she could approve a
// production destructive request twice, once as herself and once "as bob",
// and meet the two-person rule alone.

// TestAPINoTokenForAnotherAdmin: over REST, alice's admin token asking
// POST /v1/tokens for bob, however bob is named, is 403
// token_for_other_admin, and alice cannot complete the second approval of
// a production destructive request with whatever the door gave her.
func TestAPINoTokenForAnotherAdmin(t *testing.T) {
	as := newAPISite(t, nil)
	tests := []struct {
		name  string
		body  string
		other bool // names another admin: refused
	}{
		{"bob by name", `{"name": "t-name", "admin": "bob"}`, true},
		{"bob in another case", `{"name": "t-case", "admin": "BOB"}`, true},
		{"bob by id", `{"name": "t-id", "admin": "` + as.bob + `"}`, true},
		{"bob, scope read", `{"name": "t-read", "admin": "bob", "scope": "read"}`, true},
		{"bob, scope admin", `{"name": "t-admin", "admin": "bob", "scope": "admin"}`, true},
		{"herself by name", `{"name": "t-self", "admin": "alice"}`, false},
		{"no admin named", `{"name": "t-none"}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := as.ask(as.db, "destructive", "rm -rf /srv/"+tt.name, 2)
			approve := "/v1/approvals/" + a.ID + "/approve"
			if d := as.call("POST", approve, as.ci, "").data(t); d["status"] != "pending" {
				t.Fatalf("alice's first approval: %v; want pending, 1 of 2", d)
			}
			r := as.call("POST", "/v1/tokens", as.root, tt.body)
			var value string
			if tt.other {
				code, field := r.errCode(t)
				if r.status != http.StatusForbidden || code != "token_for_other_admin" || field != "admin" {
					t.Errorf("POST /v1/tokens %s: %d %s (field %q); want 403 token_for_other_admin on admin", tt.body, r.status, code, field)
				}
				if msg := r.errMessage(t); !strings.Contains(msg, "only ever made for the admin who makes it") ||
					!strings.Contains(msg, "bob") {
					t.Errorf("refusal message %q; want it to say a token is only made for its maker, and name bob", msg)
				}
				if r.status == http.StatusCreated {
					value, _ = r.data(t)["value"].(string)
				}
			} else {
				// An approve token waits for a second admin (202): its
				// value is shown, and the change names alice as its admin.
				if r.status != http.StatusAccepted {
					t.Fatalf("POST /v1/tokens %s: %d %s; want 202", tt.body, r.status, r.body)
				}
				d := r.data(t)
				if ch, _ := d["change"].(map[string]any); !strings.Contains(fmt.Sprint(ch["after"]), "of alice") {
					t.Errorf("token for herself: change %v; want alice's token", d["change"])
				}
				value, _ = d["value"].(string)
			}
			// Whatever token the door gave, alice's second approval with
			// it does not make the request approved.
			if value != "" {
				as.call("POST", approve, value, "")
			}
			if got := as.get("/v1/approvals/" + a.ID).data(t)["status"]; got != "pending" {
				t.Errorf("request after alice's attempt is %v; want pending: one admin met the two-person rule", got)
			}
		})
	}
	toks, err := as.st.ListConsoleTokens(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range toks {
		if tk.AdminName == "bob" && tk.Name != "ops" {
			t.Errorf("token %s of bob was made by alice", tk.Name)
		}
	}
}

// TestPageNoTokenForAnotherAdmin: the Tokens form makes a token of the
// logged-in admin only; a posted admin field naming another admin is
// refused with a message, and no token is made or shown. Driven over the
// site's own HTTPS server (loopback), as a browser and an API client would.
func TestPageNoTokenForAnotherAdmin(t *testing.T) {
	ps := newPageSite(t, nil)
	prod, _ := ps.addConnection("prod1", store.EnvProduction)
	ps.addAdmin("bob")
	alice := ps.admin("alice")
	a := ps.ask(prod, "destructive", "rm -rf /srv/old", 2)
	alice.post("/approvals/"+a.ID+"/approve", alice.form())
	if got := ps.approval(a.ID).Status; got != store.ApprovalPending {
		t.Fatalf("after alice's approval: %s; want pending", got)
	}

	status, h, page := alice.post("/tokens", alice.form("name", "as-bob", "admin", "bob", "scope", "approve"))
	if status == http.StatusSeeOther {
		page = alice.follow(h)
	}
	if f := flashText(page); !strings.Contains(f, "only ever made for the admin who makes it") {
		t.Errorf("make a token for bob: flash %q; want it refused for being another admin's", f)
	}
	if m := regexp.MustCompile(`id="new-token-value"[^>]*value="(pst_[^"]+)"`).FindStringSubmatch(page); m != nil {
		req, err := http.NewRequest("POST", ps.ts.URL+"/v1/approvals/"+a.ID+"/approve", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+m[1])
		c := ps.ts.Client()
		if resp, err := c.Do(req); err == nil {
			resp.Body.Close()
		}
		t.Error("the page made and showed a token (as-bob) when asked for bob's")
	}
	if _, err := ps.st.ConsoleTokenByName(context.Background(), "as-bob"); err == nil {
		t.Error("token as-bob was stored")
	}
	if got := ps.approval(a.ID).Status; got != store.ApprovalPending {
		t.Errorf("request after alice's attempt: %s; want pending: one admin met the two-person rule", got)
	}

	// Without an admin field, the form still makes alice's own token (of
	// scope read: an approve token would wait for a second admin).
	alice.post("/tokens", alice.form("name", "mine", "scope", "read"))
	if tk, err := ps.st.ConsoleTokenByName(context.Background(), "mine"); err != nil || tk.AdminName != "alice" {
		t.Errorf("token mine: %+v, %v; want alice's", tk, err)
	}
}
