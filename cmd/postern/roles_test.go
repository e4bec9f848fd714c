package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/postern/postern/model"
)

// changeID is the change request a command's output says waits.
var changeID = regexp.MustCompile(`change request (chg_[a-z0-9]+)`)

// TestRolesOnTheCLI: each role is refused, with exit 2 and the role it
// lacks, what it may not do through the CLI's --as, and a change that
// loosens production waits for a second admin, whom --as cannot make of
// the first (issue 23; the page's and REST's doors are package web's
// tests).
func TestRolesOnTheCLI(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	pw := writePasswordFile(t, "a good long password")
	c.ok("", "admin", "add", "olga", "--password-file", pw) // the first: an owner
	for _, a := range []struct{ name, role string }{{"vic", "viewer"}, {"pat", "approver"}} {
		c.ok("", "admin", "add", a.name, "--role", a.role, "--password-file", pw)
	}
	// An admin waits for a second admin; pat approves olga's request.
	out := c.ok("", "admin", "add", "ada", "--role", "admin", "--password-file", pw, "--as", "olga")
	m := changeID.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("admin add --role admin: %q; want it to wait for a second admin", out)
	}
	if r := c.run("", "approvals", "approve", m[1], "--as", "olga"); r.code != 2 || !strings.Contains(r.stderr, "a different admin must decide it") {
		t.Errorf("olga approving her own request: exit %d, %q; want 2 and the refusal", r.code, r.stderr)
	}
	c.ok("", "approvals", "approve", m[1], "--as", "pat")
	if list := c.ok("", "admin", "list"); !regexp.MustCompile(`(?m)^ada\s+adm_\S+\s+admin\s`).MatchString(list) {
		t.Fatalf("admin list after the approval:\n%s\nwant ada with the admin role", list)
	}

	k := writeKeyFiles(t, "bot", "")
	c.ok("", "agent", "add", "bot", "--key", k.pub)
	c.ok("", "conn", "add", "--no-check", "web", "--host", "h", "--user", "u", "--key-file", k.priv, "--host-key", hostLine(t, "h"))
	c.ok("", "conn", "add", "--no-check", "prod", "--host", "h", "--user", "u", "--key-file", k.priv, "--host-key", hostLine(t, "h"), "--env", "production")

	tests := []struct {
		as   string
		args []string
		want string // "" for done, else the refusal on stderr (exit 2)
	}{
		{"vic", []string{"grant", "bot", "web", "--write", "ask"}, "vic may not change configuration: that takes the admin role, and vic has viewer"},
		{"pat", []string{"grant", "bot", "web", "--write", "ask"}, "pat may not change configuration: that takes the admin role, and pat has approver"},
		{"ada", []string{"grant", "bot", "web", "--write", "ask"}, ""},
		{"vic", []string{"conn", "remove", "web"}, "vic may not change configuration"},
		{"ada", []string{"admin", "add", "zed", "--password-file", pw}, "ada may not add an admin: that takes the owner role"},
		{"pat", []string{"admin", "role", "vic", "approver"}, "pat may not change an admin's role"},
		{"vic", []string{"token", "add", "vt", "--scope", "approve"}, "admin vic has the viewer role and cannot hold a token of scope approve"},
		{"vic", []string{"token", "add", "vt", "--scope", "read"}, ""},
		{"olga", []string{"admin", "role", "vic", "viewer"}, "admin vic already has the viewer role"},
	}
	for _, tt := range tests {
		args := append(append([]string{}, tt.args...), "--as", tt.as)
		r := c.run("", args...)
		switch {
		case tt.want == "" && r.code != 0:
			t.Errorf("postern %s: exit %d, %q; want done", strings.Join(args, " "), r.code, r.stderr)
		case tt.want != "" && (r.code != 2 || !strings.Contains(r.stderr, tt.want)):
			t.Errorf("postern %s: exit %d, stderr %q; want 2 and %q", strings.Join(args, " "), r.code, r.stderr, tt.want)
		}
	}

	// A viewer decides nothing, not even a change.
	out = c.ok("", "conn", "update", "prod", "--env", "staging", "--as", "ada")
	m = changeID.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("conn update prod --env staging: %q; want it to wait for a second admin", out)
	}
	if r := c.run("", "approvals", "approve", m[1], "--as", "vic"); r.code != 2 || !strings.Contains(r.stderr, "that takes the approver role") {
		t.Errorf("vic approving: exit %d, %q; want 2 and the approver role named", r.code, r.stderr)
	}
	if r := c.run("", "approvals", "approve", m[1], "--as", "ADA"); r.code != 2 {
		t.Errorf("ada approving her own change as ADA: exit %d; want 2", r.code)
	}
	env := func() string {
		var conns []model.Connection
		if err := json.Unmarshal([]byte(c.ok("", "conn", "list", "-o", "json")), &conns); err != nil {
			t.Fatal(err)
		}
		for _, cn := range conns {
			if cn.Alias == "prod" {
				return cn.Env
			}
		}
		return ""
	}
	if got := env(); got != "production" {
		t.Fatalf("prod before a second admin: env %s; want production", got)
	}
	c.ok("", "approvals", "approve", m[1], "--as", "pat")
	if got := env(); got != "staging" {
		t.Errorf("prod after pat approved: env %s; want staging", got)
	}
	rows := adminRows(c.auditRows())
	last := rows[len(rows)-1]
	if strings.Join(last.Deciders, ",") != "ada,pat" || !strings.Contains(last.Operation, "env production -> staging") {
		t.Errorf("the last admin row: %q by %v; want the env change by ada,pat", last.Operation, last.Deciders)
	}
}
