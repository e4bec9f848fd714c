package bastion

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
)

// A session with a terminal is an interactive shell (issue 28): on a pty a
// read command's pager runs `!cmd`, so `ssh -t prod 'git log'` is decided
// as what it is, whatever the command.

var destructiveAsk = store.Rules{Read: store.RuleAllow, Write: store.RuleAllow, Destructive: store.RuleAsk}

// TestTerminalOnProductionNeedsTwo: a read command on a terminal on a
// production connection with destructive=ask waits for two different
// admins and refuses every scope; with destructive=deny it is denied.
func TestTerminalOnProductionNeedsTwo(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{rules: destructiveAsk, env: store.EnvProduction})
	ctx := context.Background()
	alice := h.alice
	bob := h.bob
	done := make(chan sshResult, 1)
	go func() { done <- h.ssh("", "-tt", "127.0.0.1", "web", "echo ran on a terminal") }()
	id := h.waitPending()
	a, err := h.st.GetApproval(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if a.Class != string(policy.Destructive) || a.ApprovalsNeeded != 2 || a.TerminalLife != DefaultTerminalLife ||
		a.Operation != "echo ran on a terminal" {
		t.Errorf("request: class %s, needs %d, terminal life %v, operation %q; want destructive, 2, %v, the command",
			a.Class, a.ApprovalsNeeded, a.TerminalLife, a.Operation, DefaultTerminalLife)
	}
	for _, scope := range []policy.Scope{{Kind: store.ScopeOperation, For: time.Minute}, {Kind: store.ScopeClass, For: time.Minute}} {
		if _, err := h.eng.Approve(ctx, id, alice, scope); !errors.Is(err, policy.ErrScope) {
			t.Errorf("approve with a %s scope: %v; want ErrScope", scope.Kind, err)
		}
	}
	if _, err := h.eng.Approve(ctx, id, alice, policy.Scope{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.eng.Approve(ctx, id, alice, policy.Scope{}); !errors.Is(err, policy.ErrSameApprover) {
		t.Errorf("alice's second approval: %v; want ErrSameApprover", err)
	}
	if _, err := h.eng.Approve(ctx, id, bob, policy.Scope{}); err != nil {
		t.Fatal(err)
	}
	got := <-done
	if got.code != 0 || !strings.Contains(got.stdout, "ran on a terminal") {
		t.Fatalf("the approved session: exit %d, stdout %q, stderr %q; want it run", got.code, got.stdout, got.stderr)
	}
	if !strings.Contains(got.stderr+got.stdout, "once approved, the session runs at most "+DefaultTerminalLife.String()) {
		t.Errorf("waiting line %q; want it to say the session's life", got.stderr)
	}
	h.auditCount(policy.Approved)
	rows, err := h.st.ListAudit(ctx, store.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	last := rows[0]
	if last.Decision != string(policy.Approved) || !strings.Contains(last.Reason, policy.TerminalNote) || last.Class != string(policy.Destructive) {
		t.Errorf("audit row: %s, %s, %q; want approved destructive, saying %q", last.Decision, last.Class, last.Reason, policy.TerminalNote)
	}

	deny := newHarness(t, harnessOpts{rules: store.Rules{Read: store.RuleAllow, Write: store.RuleAllow, Destructive: store.RuleDeny}, env: store.EnvProduction})
	got = deny.ssh("", "-tt", "127.0.0.1", "web", "git log --oneline")
	if got.code != ExitRefused || !strings.Contains(got.stderr+got.stdout, "an interactive shell") {
		t.Errorf("git log on a terminal with destructive=deny: exit %d, output %q; want %d naming the interactive shell",
			got.code, got.stderr+got.stdout, ExitRefused)
	}
}

// TestTerminalLifeEnds: an approved session with a terminal is ended by
// postern once it has run its life (set short here: its end is what this
// test waits for, and nothing has to happen before it), as a disconnect
// ends it, and its audit row says so.
func TestTerminalLifeEnds(t *testing.T) {
	t.Parallel()
	const life = time.Second
	h := newHarness(t, harnessOpts{rules: destructiveAsk, config: func(c *Config) { c.TerminalLife = life }})
	done := make(chan sshResult, 1)
	go func() { done <- h.ssh("", "-tt", "127.0.0.1", "web", "echo started; exec sleep 600") }()
	id := h.waitPending()
	if _, err := h.eng.Approve(context.Background(), id, h.alice, policy.Scope{}); err != nil {
		t.Fatal(err)
	}
	got := <-done
	if got.code == 0 || !strings.Contains(got.stderr+got.stdout, "approved to run at most 1s; that time is over and postern ended it") {
		t.Errorf("exit %d, output %q; want the session ended with the reason", got.code, got.stderr+got.stdout)
	}
	h.auditCount(policy.Approved)
	rows, err := h.st.ListAudit(context.Background(), store.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if r := rows[0]; !strings.Contains(r.Reason, "ended by postern when its approved life of 1s ran out") ||
		!strings.Contains(r.Reason, policy.TerminalNote) || r.Duration < life {
		t.Errorf("audit row: reason %q, duration %v; want the end, the terminal, and at least %v", r.Reason, r.Duration, life)
	}
}
