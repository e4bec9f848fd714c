package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/postern/postern/internal/testsshd"
	"github.com/postern/postern/internal/testwait"
	"github.com/postern/postern/model"
)

// TestApprovalScopesEndToEnd drives approval scopes with the real ssh client
// through `postern serve` to a real sshd: a class scope lets the agent's
// writes run without asking inside its window and asks again once it has
// ended by itself; an operation scope covers only its exact command and is
// ended early by revoke-scope; a destructive operation on a production
// connection is never scoped.
func TestApprovalScopesEndToEnd(t *testing.T) {
	requireSSHClient(t)
	t.Parallel()
	sshd := testsshd.Start(t, testsshd.Options{})
	c := newCLI(t)
	scratch := t.TempDir()
	targetKey := filepath.Join(t.TempDir(), "target_key")
	if err := os.WriteFile(targetKey, sshd.UserKeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, conn := range []struct{ alias, env string }{{"web", "dev"}, {"db", "production"}} {
		c.ok("", "conn", "add", "--no-check", conn.alias, "--host", sshd.Host, "--port", strconv.Itoa(sshd.Port),
			"--user", sshd.User, "--key-file", targetKey, "--host-key", strings.TrimSpace(sshd.KnownHostsLine),
			"--env", conn.env)
	}
	agent := newE2EAgent(t, c, "bot")
	c.ok("", "grant", "bot", "web", "--write", "ask", "--destructive", "ask")
	c.ok("", "grant", "bot", "db", "--write", "ask", "--destructive", "ask")
	for _, name := range []string{"alice", "bob"} {
		c.ok("", "admin", "add", name, "--password-file", writePasswordFile(t, "a long admin password"))
	}
	p := startServe(t, c.data, "--approval-ttl", "10m")

	file := func(name string) string { return filepath.Join(scratch, name) }
	// run runs command through the bastion and reports whether it asked.
	run := func(alias, command string) (asked bool) {
		t.Helper()
		a := agent.ssh(t, p.sshAddr, alias, command)
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
		a := agent.ssh(t, p.sshAddr, alias, command)
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
		a := agent.ssh(t, p.sshAddr, alias, command)
		req := c.waitPending(a, command)
		c.ok("", "approvals", "deny", req.ID, "--as", "bob")
		a.wait(t)
		if a.code != 126 {
			t.Errorf("%s denied: got exit %d; want 126", command, a.code)
		}
	}

	// A class scope of 10 s: writes run without asking inside it.
	classID := approveWhenAsked("web", "touch "+file("c1"), "--scope", "class", "--for", "10s")
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
	// The scope ends by itself, on postern's clock (another process: no
	// fake time here); then writes ask again. The CLI is asked only once
	// the scope's end has passed on this machine's clock.
	var ends time.Time
	for _, a := range c.approvals(true) {
		if a.ID == classID {
			ends = time.Time(a.ScopeExpiresAt)
		}
	}
	if ends.IsZero() {
		t.Fatalf("approval %s lists no scope end", classID)
	}
	testwait.Until(t, "the 10 s class scope to end", func() bool {
		return time.Now().After(ends) && strings.Contains(c.ok("", "approvals", "scopes"), "no approval scopes")
	})
	denyWhenAsked("web", "touch "+file("c3"))

	// An operation scope covers its exact command only, until revoked.
	opID := approveWhenAsked("web", "touch "+file("o1"), "--scope", "operation", "--for", "1h")
	if run("web", "touch "+file("o1")) {
		t.Error("the same operation inside its operation scope asked")
	}
	denyWhenAsked("web", "touch "+file("o2"))
	c.ok("", "approvals", "revoke-scope", opID, "--as", "bob")
	denyWhenAsked("web", "touch "+file("o1"))

	// Production destructive: the scope is refused, the operation is two
	// admins' decision every time.
	rm := "rm -f " + file("c1")
	a := agent.ssh(t, p.sshAddr, "db", rm)
	req := c.waitPending(a, rm)
	if r := c.run("", "approvals", "approve", req.ID, "--as", "alice", "--scope", "operation", "--for", "1h"); r.code != 2 ||
		!strings.Contains(r.stderr, "two admins") {
		t.Errorf("scoped approval of a production destructive operation: exit %d, %q; want 2 and the refusal", r.code, r.stderr)
	}
	c.ok("", "approvals", "approve", req.ID, "--as", "alice")
	c.ok("", "approvals", "approve", req.ID, "--as", "bob")
	a.wait(t)
	if a.code != 0 {
		t.Fatalf("%s after two approvals: exit %d, %q", rm, a.code, a.stderr)
	}
	again := agent.ssh(t, p.sshAddr, "db", rm)
	again2 := c.waitPending(again, rm)
	c.ok("", "approvals", "deny", again2.ID, "--as", "bob")
	again.wait(t)

	// Every run under a scope is audited with the approval that made it.
	var underScope int
	for _, r := range c.auditRows() {
		if r.ApprovalID == classID && strings.Contains(r.Operation, file("c2")) ||
			r.ApprovalID == opID && strings.Contains(r.Operation, file("o1")) && strings.Contains(r.Reason, "scope") {
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
