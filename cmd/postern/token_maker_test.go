package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/postern/postern/internal/testwait"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
)

// TestTokenCommandsOnlyForTheMaker: token add and token assign make a token
// of the admin acting (--as, or --admin alone), and refuse, with exit 2 and
// one line, to make or hand one to another admin (issue 23).
func TestTokenCommandsOnlyForTheMaker(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	for _, n := range []string{"alice", "bob"} {
		c.ok("", "admin", "add", n, "--password-file", writePasswordFile(t, "a good long password"))
	}
	c.ok("", "token", "add", "bobs", "--as", "bob")
	c.ok("", "token", "add", "alices", "--admin", "alice") // --admin alone: alice acting
	c.approveChanges()                                     // approve tokens wait for a second admin
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"add for another admin", []string{"token", "add", "x1", "--as", "alice", "--admin", "bob"}, "only ever made for the admin who makes it"},
		{"add for another admin, other case", []string{"token", "add", "x2", "--as", "alice", "--admin", "BOB", "--scope", "admin"}, "alice cannot make one for bob"},
		{"add without an acting admin", []string{"token", "add", "x3"}, "give --as ADMIN"},
		{"assign another's token to oneself", []string{"token", "assign", "bobs", "--as", "alice"}, "belongs to admin bob"},
		{"assign one's token to another", []string{"token", "assign", "alices", "--as", "alice", "--admin", "bob"}, "only ever made for the admin who makes it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := c.run("", tt.args...)
			if r.code != 2 || !strings.Contains(r.stderr, tt.want) {
				t.Errorf("postern %s: got exit %d, stderr %q; want 2 and %q", strings.Join(tt.args, " "), r.code, r.stderr, tt.want)
			}
			if n := strings.Count(strings.TrimSpace(r.stderr), "\n"); n != 0 {
				t.Errorf("got %d lines on stderr; want one", n+1)
			}
		})
	}
	toks, err := openStore(t, c.data).ListConsoleTokens(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	owners := map[string]string{}
	for _, tk := range toks {
		owners[tk.Name] = tk.AdminName
	}
	if len(owners) != 2 || owners["bobs"] != "bob" || owners["alices"] != "alice" {
		t.Errorf("tokens after the refusals: %v; want bobs of bob and alices of alice only", owners)
	}
}

// TestServeNoTokenForAnotherAdmin drives postern serve as a team would
// (loopback only): alice approves a production destructive request once
// with the CLI, then asks the REST API, with her admin token, for an
// approve token of bob. The answer is 403 token_for_other_admin, and the
// request still waits for a second admin.
func TestServeNoTokenForAnotherAdmin(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	for _, n := range []string{"alice", "bob"} {
		c.ok("", "admin", "add", n, "--password-file", writePasswordFile(t, "a good long password"))
	}
	root := tokenFromOutput(t, c.ok("", "token", "add", "root", "--as", "alice", "--scope", "admin"))
	k := writeKeyFiles(t, "target", "")
	c.ok("", "conn", "add", "--no-check", "prod", "--host", "127.0.0.1", "--port", "22", "--env", "production",
		"--user", "u", "--key-file", k.priv, "--host-key", hostLine(t, "127.0.0.1"))
	c.ok("", "agent", "add", "bot", "--key", writeKeyFiles(t, "bot", "").pub)
	c.ok("", "grant", "bot", "prod", "--destructive", "ask")
	c.approveChanges() // alice's admin token and the production grant

	// The request as the bastion stores it for `rm -rf /srv/data`.
	st := openStore(t, c.data)
	ctx := testwait.Context(t)
	agent, err := st.AgentByName(ctx, "bot")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := st.ConnectionByAlias(ctx, "prod")
	if err != nil {
		t.Fatal(err)
	}
	const op = "rm -rf /srv/data"
	req, _, err := st.RequestApproval(ctx, store.Approval{AgentID: agent.ID, ConnectionID: conn.ID, Class: "destructive",
		Kind: "exec", Operation: op, OperationSHA256: policy.OperationHash(op), ApprovalsNeeded: 2}, policy.DefaultApprovalLifetime)
	if err != nil {
		t.Fatal(err)
	}

	p := startPostern(t, "serve", "--data", c.data, "--ssh-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0")
	m := p.waitLog("web page serving")
	base, _ := m["url"].(string)
	fp, _ := m["tls_fingerprint"].(string)
	c.ok("", "approvals", "approve", req.ID, "--as", "alice")

	code, body := apiCall(ctx, newWebClient(t, base, fp), root, http.MethodPost, "/v1/tokens",
		`{"name": "as-bob", "admin": "bob", "scope": "approve"}`)
	var answer struct {
		Data struct {
			Value string `json:"value"`
		} `json:"data"`
		Error struct {
			Code, Message, Field string
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &answer); err != nil {
		t.Fatalf("POST /v1/tokens: %d %q: %v", code, body, err)
	}
	if code != http.StatusForbidden || answer.Error.Code != "token_for_other_admin" || answer.Error.Field != "admin" ||
		!strings.Contains(answer.Error.Message, "bob") {
		t.Errorf("POST /v1/tokens for bob with alice's token: %d %s; want 403 token_for_other_admin naming bob", code, body)
	}
	if answer.Data.Value != "" {
		// The hole the issue found: the second approval "as bob".
		apiCall(ctx, newWebClient(t, base, fp), answer.Data.Value, http.MethodPost, "/v1/approvals/"+req.ID+"/approve", "")
	}
	a, err := st.GetApproval(ctx, req.ID)
	if err != nil {
		t.Fatal(err)
	}
	if a.Status != store.ApprovalPending {
		t.Errorf("request after alice's attempt: %s; want pending: one admin met the two-person rule", a.Status)
	}
	if code := p.stop(); code != 0 {
		t.Errorf("SIGTERM: got exit %d; want 0\nstderr:\n%s", code, p.stderrText())
	}
}
