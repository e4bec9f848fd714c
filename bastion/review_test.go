package bastion

import (
	"context"
	"strings"
	"testing"

	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
)

// Tests of what postern sends to a person and what it decides itself
// because no person could review it.

var askWrites = store.Rules{Read: store.RuleAllow, Write: store.RuleAsk, Destructive: store.RuleAsk}

// TestAgentReasonShownNotForwarded: POSTERN_REASON, sent with SetEnv,
// reaches the approval request and the audit row with the agent's address,
// and never the target's environment.
func TestAgentReasonShownNotForwarded(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{rules: askWrites})
	const reason = "rotate the cert, ticket 4711"
	got := h.ssh("", "-o", "SetEnv=POSTERN_REASON=\""+reason+"\"", "127.0.0.1", "web", "env")
	if got.code != 0 {
		t.Fatalf("env: exit %d, stderr %q; want 0", got.code, got.stderr)
	}
	if strings.Contains(got.stdout, "POSTERN_REASON") || strings.Contains(got.stdout, "4711") {
		t.Errorf("the target's environment holds the agent's reason:\n%s", got.stdout)
	}
	rows, err := h.st.ListAudit(context.Background(), store.AuditFilter{})
	if err != nil || len(rows) == 0 {
		t.Fatalf("ListAudit = %d rows, %v", len(rows), err)
	}
	last := rows[len(rows)-1]
	if last.AgentReason != reason || !strings.HasPrefix(last.SourceAddr, "127.0.0.1:") {
		t.Errorf("audit row reason %q, source %q; want %q from 127.0.0.1", last.AgentReason, last.SourceAddr, reason)
	}

	done := make(chan sshResult, 1)
	go func() {
		done <- h.ssh("", "-o", "SetEnv=POSTERN_REASON=\""+reason+"\"", "127.0.0.1", "web", "touch /tmp/postern-reason-test")
	}()
	id := h.waitPending()
	a, err := h.st.GetApproval(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if a.AgentReason != reason || !strings.HasPrefix(a.SourceAddr, "127.0.0.1:") {
		t.Errorf("approval reason %q, source %q; want %q from 127.0.0.1", a.AgentReason, a.SourceAddr, reason)
	}
	if _, err := h.eng.Deny(context.Background(), id, h.bob, "no"); err != nil {
		t.Fatal(err)
	}
	<-done
}

// TestUnreviewableDenied: a command the classifier refuses outright is
// denied with the reason, and no person is asked.
func TestUnreviewableDenied(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{rules: store.Rules{Read: store.RuleAsk, Write: store.RuleAsk, Destructive: store.RuleAsk}})
	long := "echo " + strings.Repeat("a", 70<<10)
	got := h.ssh("", "127.0.0.1", "web", long)
	if got.code != ExitRefused || !strings.Contains(got.stderr, "nobody can review it") || !strings.Contains(got.stderr, "longer than the limit") {
		t.Errorf("over-limit command: exit %d, stderr %.200q; want %d and why nobody can review it", got.code, got.stderr, ExitRefused)
	}
	if list, err := h.eng.Approvals(context.Background(), true); err != nil || len(list) != 0 {
		t.Errorf("approval requests = %d, %v; want none", len(list), err)
	}
	if n := h.auditCount(policy.Denied); n != 1 {
		t.Errorf("denied audit rows = %d; want 1", n)
	}
}

// TestUnknownAliasAuditedWithAgent: an unknown alias is audited under the
// agent's name, so that filtering the audit by agent shows it.
func TestUnknownAliasAuditedWithAgent(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	if got := h.ssh("", "127.0.0.1", "nosuch", "ls"); got.code != ExitUsage {
		t.Fatalf("unknown alias: exit %d; want %d", got.code, ExitUsage)
	}
	h.auditCount(policy.Denied)
	rows, err := h.st.ListAudit(context.Background(), store.AuditFilter{Agent: "agent1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Decision != string(policy.Denied) || !strings.Contains(rows[0].Reason, "unknown alias") {
		t.Errorf("audit rows of agent1 = %+v; want the denied unknown alias", rows)
	}
}

// TestCommandOnATerminalIsAShell: a read command run with a terminal is
// an interactive shell (destructive), since its pager (git log, less) runs
// what is typed; without one it stays read.
func TestCommandOnATerminalIsAShell(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	if got := h.ssh("", "-T", "127.0.0.1", "web", "uptime"); got.code != 0 {
		t.Fatalf("uptime without a terminal: exit %d, stderr %q; want 0 (read is allowed)", got.code, got.stderr)
	}
	got := h.ssh("", "-tt", "127.0.0.1", "web", "uptime")
	if got.code != ExitRefused || !strings.Contains(got.stderr+got.stdout, "destructive") || !strings.Contains(got.stderr+got.stdout, "an interactive shell") {
		t.Errorf("uptime on a terminal: exit %d, output %q; want %d, destructive (an interactive shell) denied by the default grant", got.code, got.stderr+got.stdout, ExitRefused)
	}
}
