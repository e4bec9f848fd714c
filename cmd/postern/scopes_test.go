package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/postern/postern/internal/testwait"
	"github.com/postern/postern/model"
	"github.com/postern/postern/policy"
)

// TestApprovalScopesEndToEnd drives approval scopes with the real ssh client
// through `postern serve` to a real sshd: a class scope lets the agent's
// writes run without asking inside its window and asks again once it has
// ended, early by revoke-scope or by itself; an operation scope covers only
// its exact command and is ended early by revoke-scope; a destructive
// operation on a production connection is never scoped.
//
// Scopes end on postern's real clock (serve is another process: no fake
// time here), so no step that must happen inside a scope may race its end:
// the scopes whose inside is tested last as long as a scope may
// (policy.MaxScope), and the one that ends by itself lasts a second, with
// nothing to do inside it; its end is the only thing the test waits for. (policy's tests pin a scope's end to the
// instant, on fake time.)
func TestApprovalScopesEndToEnd(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigConfig{conns: []rigConn{{"web", "dev"}, {"db", "production"}},
		grant: []string{"--write", "ask", "--destructive", "ask"}, admins: []string{"alice", "bob"}})
	c := r.cli
	r.serve("--approval-ttl", outlast(t))

	file := r.file
	// run runs command through the bastion and reports whether it asked.
	run := func(alias, command string) (asked bool) {
		t.Helper()
		a := r.ssh(alias, command)
		a.wait(t)
		if a.code != 0 {
			t.Fatalf("%s: got exit %d, stderr %q; want 0", command, a.code, a.stderr)
		}
		return strings.Contains(a.stderr, "waiting for approval")
	}
	// approveWhenAsked starts command, approves its request with args, and
	// waits for it to run.
	approveWhenAsked := func(alias, command string, args ...string) string {
		t.Helper()
		a := r.ssh(alias, command)
		req := c.waitPending(a, command)
		c.ok("", append([]string{"approvals", "approve", req.ID, "--as", "alice"}, args...)...)
		a.wait(t)
		if a.code != 0 {
			t.Fatalf("%s after approval: got exit %d, stderr %q; want 0", command, a.code, a.stderr)
		}
		return req.ID
	}
	// denyWhenAsked starts command and denies the request it must make.
	denyWhenAsked := func(alias, command string) {
		t.Helper()
		a := r.ssh(alias, command)
		req := c.waitPending(a, command)
		c.ok("", "approvals", "deny", req.ID, "--as", "bob")
		a.wait(t)
		if a.code != 126 {
			t.Errorf("%s denied: got exit %d; want 126", command, a.code)
		}
	}

	// A class scope: writes run without asking inside it, until revoked.
	classID := approveWhenAsked("web", "touch "+file("c1"), "--scope", "class", "--for", policy.MaxScope.String())
	if run("web", "touch "+file("c2")) {
		t.Error("a write inside the class scope asked")
	}
	var grants []model.Grant
	if err := json.Unmarshal([]byte(c.ok("", "grant", "list", "-o", "json")), &grants); err != nil {
		t.Fatal(err)
	}
	if !grantHasScope(grants, "web", classID) {
		t.Errorf("grant list -o json %+v; want web's grant elevated by %s", grants, classID)
	}
	c.ok("", "approvals", "revoke-scope", classID, "--as", "bob")
	denyWhenAsked("web", "touch "+file("c3"))

	// A class scope that ends by itself: then writes ask again. The CLI is
	// asked only once the scope's end has passed on this machine's clock.
	shortID := approveWhenAsked("web", "touch "+file("s1"), "--scope", "class", "--for", "1s")
	var ends time.Time
	for _, a := range c.approvals(true) {
		if a.ID == shortID {
			ends = time.Time(a.ScopeExpiresAt)
		}
	}
	if ends.IsZero() {
		t.Fatalf("approval %s lists no scope end", shortID)
	}
	testwait.Until(t, "the 1 s class scope to end", func() bool {
		return time.Now().After(ends) && strings.Contains(c.ok("", "approvals", "scopes"), "no approval scopes")
	})
	denyWhenAsked("web", "touch "+file("s2"))

	// An operation scope covers its exact command only, until revoked.
	opID := approveWhenAsked("web", "touch "+file("o1"), "--scope", "operation", "--for", policy.MaxScope.String())
	if run("web", "touch "+file("o1")) {
		t.Error("the same operation inside its operation scope asked")
	}
	denyWhenAsked("web", "touch "+file("o2"))
	c.ok("", "approvals", "revoke-scope", opID, "--as", "bob")
	denyWhenAsked("web", "touch "+file("o1"))

	// Production destructive: the scope is refused, the operation is two
	// admins' decision every time.
	rm := "rm -f " + file("c1")
	a := r.ssh("db", rm)
	req := c.waitPending(a, rm)
	if res := c.run("", "approvals", "approve", req.ID, "--as", "alice", "--scope", "operation", "--for", policy.MaxScope.String()); res.code != 2 ||
		!strings.Contains(res.stderr, "two admins") {
		t.Errorf("scoped approval of a production destructive operation: exit %d, %q; want 2 and the refusal", res.code, res.stderr)
	}
	c.ok("", "approvals", "approve", req.ID, "--as", "alice")
	c.ok("", "approvals", "approve", req.ID, "--as", "bob")
	a.wait(t)
	if a.code != 0 {
		t.Fatalf("%s after two approvals: exit %d, %q", rm, a.code, a.stderr)
	}
	again := r.ssh("db", rm)
	again2 := c.waitPending(again, rm)
	c.ok("", "approvals", "deny", again2.ID, "--as", "bob")
	again.wait(t)

	// Every run under a scope is audited with the approval that made it.
	var underScope int
	for _, row := range c.auditRows() {
		if row.ApprovalID == classID && strings.Contains(row.Operation, file("c2")) ||
			row.ApprovalID == opID && strings.Contains(row.Operation, file("o1")) && strings.Contains(row.Reason, "scope") {
			underScope++
		}
	}
	if underScope != 2 {
		t.Errorf("audit rows under a scope with its approval id: got %d; want 2", underScope)
	}
}

func grantHasScope(grants []model.Grant, alias, approvalID string) bool {
	for _, g := range grants {
		if g.Connection != alias {
			continue
		}
		for _, s := range g.Scopes {
			if s.ID == approvalID && s.Scope == "class" {
				return true
			}
		}
	}
	return false
}
