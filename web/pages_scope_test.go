package web

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
)

// TestApproveWithScopeForm: the page's scope choice makes a class scope,
// which the grants page shows with a form that ends it.
func TestApproveWithScopeForm(t *testing.T) {
	ps := newPageSite(t, nil)
	pc := ps.admin("alice")
	a := ps.ask(ps.conn, "write", "touch /srv/a", 1)
	_, h, _ := pc.post("/approvals/"+a.ID+"/approve", pc.form("scope", "class", "for", "30m", "next", "/approvals"))
	if f := flashText(pc.follow(h)); !strings.Contains(f, "every write operation of bot on web1 until") {
		t.Errorf("flash %q; want it to name the class scope", f)
	}
	got := ps.approval(a.ID)
	if got.Scope != store.ScopeClass || !got.ScopeExpiresAt.Equal(ps.clock.Now().Add(30*time.Minute)) {
		t.Fatalf("approval = scope %s until %v; want class for 30m", got.Scope, got.ScopeExpiresAt)
	}

	_, _, grants := pc.get("/grants")
	for _, want := range []string{`id="scope-` + a.ID + `"`, `action="/scopes/` + a.ID + `/revoke"`} {
		if !strings.Contains(grants, want) {
			t.Errorf("grants page lacks %s", want)
		}
	}
	status, h, _ := pc.post("/scopes/"+a.ID+"/revoke", pc.form())
	if status != http.StatusSeeOther {
		t.Fatalf("revoke: status %d; want 303", status)
	}
	body := pc.follow(h)
	if f := flashText(body); !strings.HasPrefix(f, "Ended the scope of "+a.ID) {
		t.Errorf("revoke flash %q; want it ended", f)
	}
	if strings.Contains(body, `id="scope-`+a.ID+`"`) {
		t.Error("the grants page still shows the revoked scope")
	}
	if got := ps.approval(a.ID); got.ScopeRevokedBy != "alice" {
		t.Errorf("revoked by %q; want alice", got.ScopeRevokedBy)
	}
	_, h, _ = pc.post("/scopes/"+a.ID+"/revoke", pc.form())
	if f := flashText(pc.follow(h)); !strings.Contains(f, "no active scope") {
		t.Errorf("second revoke flash %q; want no active scope", f)
	}
}

// TestProductionDestructiveOffersNoScope: the card of a production
// destructive request has no scope choice, and a forged one is refused.
func TestProductionDestructiveOffersNoScope(t *testing.T) {
	ps := newPageSite(t, nil)
	prod, _ := ps.addConnection("prod1", store.EnvProduction)
	pc := ps.admin("alice")
	a := ps.ask(prod, "destructive", "rm -rf /srv/old", 2)
	_, _, page := pc.get("/approvals/" + a.ID)
	if strings.Contains(page, `<select name="scope"`) {
		t.Error("a production destructive request offers a scope choice")
	}
	_, h, _ := pc.post("/approvals/"+a.ID+"/approve", pc.form("scope", "operation", "for", "1h"))
	if f := flashText(pc.follow(h)); !strings.Contains(f, "two admins") {
		t.Errorf("forged scope flash %q; want the refusal", f)
	}
	if got := ps.approval(a.ID); got.FirstApprover != "" || got.Status != store.ApprovalPending {
		t.Errorf("after the forged scope: %s, first approver %q; want untouched", got.Status, got.FirstApprover)
	}
}

// TestCardShowsWhatMatters: the agent's reason and address, the target,
// and the command with its invisible code points escaped and its box
// isolated from the page's direction.
func TestCardShowsWhatMatters(t *testing.T) {
	ps := newPageSite(t, nil)
	pc := ps.admin("alice")
	text := "cp /tmp/ok.txt /tmp/\u202ecte/nimda.txt\u202c"
	a, _, err := ps.st.RequestApproval(context.Background(), store.Approval{
		AgentID: ps.agent.ID, ConnectionID: ps.conn.ID, Class: "write", Kind: "exec", Operation: text,
		OperationSHA256: policy.OperationHash(text), ApprovalsNeeded: 1,
		AgentReason: "rotate the \u200bcert", SourceAddr: "127.0.0.1:40022",
	}, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/approvals", "/approvals/" + a.ID} {
		_, _, body := pc.get(path)
		for _, want := range []string{
			`<pre class="command" dir="ltr" tabindex="0"><code class="cmd">cp /tmp/ok.txt /tmp/&lt;U&#43;202E&gt;cte/nimda.txt&lt;U&#43;202C&gt;</code></pre>`,
			`The agent says: <q dir="ltr">rotate the &lt;U&#43;200B&gt;cert</q>`,
			`from 127.0.0.1:40022`,
			`<span class="target" dir="ltr">deploy@127.0.0.1:2022</span>`,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("%s lacks %s", path, want)
			}
		}
		if strings.ContainsRune(body, '\u202e') || strings.ContainsRune(body, '\u200b') {
			t.Errorf("%s carries a raw bidi or zero-width character", path)
		}
	}
}
