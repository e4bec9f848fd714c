package bastion

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/postern/postern/internal/testwait"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
)

// TestPendingBoundRefusesAtOnce: with as many of its requests waiting as
// the default bound allows, the agent's next write is denied at once,
// over exec (exit 126 and the reason on stderr) and over SFTP (permission
// denied with the reason), nothing runs, and each refusal is audited as a
// denial with the reason. Once an admin decides one of the waiting
// requests, the agent's write is asked again and runs when approved.
func TestPendingBoundRefusesAtOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{rules: writeAsk})
	ctx := context.Background()
	agent, err := h.st.AgentByName(ctx, "agent1")
	if err != nil {
		t.Fatal(err)
	}
	conn := h.connection("web")
	var waiting []store.Approval
	for i := range policy.DefaultMaxPendingPerAgent {
		text := fmt.Sprintf("touch /tmp/waiting-%d", i)
		a, _, err := h.st.RequestApproval(ctx, store.Approval{AgentID: agent.ID, ConnectionID: conn.ID, Class: "write",
			Kind: "exec", Operation: text, OperationSHA256: policy.OperationHash(text), ApprovalsNeeded: 1},
			testwait.Remaining(t))
		if err != nil {
			t.Fatal(err)
		}
		waiting = append(waiting, a)
	}

	dir := t.TempDir()
	file := filepath.Join(dir, "made")
	got := h.ssh("", "127.0.0.1", "web", "touch "+file)
	if got.code != ExitRefused || !strings.Contains(got.stderr, "postern: denied, nothing ran: write on web") ||
		!strings.Contains(got.stderr, policy.TooManyPendingReason) {
		t.Errorf("exec past the bound: exit %d, stderr %q; want %d and a denial with %q", got.code, got.stderr, ExitRefused, policy.TooManyPendingReason)
	}
	if strings.Contains(got.stderr, "apr_") {
		t.Errorf("exec past the bound: stderr %q names a request; want none made", got.stderr)
	}
	h.auditCountWant(policy.Denied, 1)

	local := filepath.Join(t.TempDir(), "upload")
	writeFile(t, local, "payload")
	put := h.sftpBatch("web", "put "+local+" "+dir+"/uploaded\n")
	if put.code == 0 || !strings.Contains(strings.ToLower(put.stderr), "permission denied") ||
		!strings.Contains(put.stderr, policy.TooManyPendingReason) {
		t.Errorf("sftp put past the bound: exit %d, stderr %q; want a failure, permission denied and %q", put.code, put.stderr, policy.TooManyPendingReason)
	}
	h.auditCountWant(policy.Denied, 2)
	for _, f := range []string{file, filepath.Join(dir, "uploaded")} {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Errorf("%s exists after a refusal by the bound (stat err %v)", f, err)
		}
	}
	rows := h.auditRowsWhere(func(r store.AuditRow) bool {
		return r.Decision == string(policy.Denied) && strings.Contains(r.Reason, policy.TooManyPendingReason) &&
			r.ConnectionAlias == "web" && r.Class == "write"
	})
	if len(rows) != 2 || rows[0].Kind == rows[1].Kind {
		t.Errorf("audit rows denied with the reason: %+v; want one exec and one sftp", rows)
	}
	if list, err := h.eng.Approvals(ctx, false); err != nil || len(list) != len(waiting) {
		t.Errorf("pending requests: %d, %v; want still the %d that waited", len(list), err, len(waiting))
	}

	// A decision frees a place: the write is asked, and runs once approved.
	alice := h.alice
	if _, err := h.eng.Deny(ctx, waiting[0].ID, alice, "not now"); err != nil {
		t.Fatal(err)
	}
	done := make(chan sshResult, 1)
	go func() { done <- h.ssh("", "127.0.0.1", "web", "touch "+file) }()
	id := h.waitPending()
	if _, err := h.eng.Approve(ctx, id, alice, policy.Scope{}); err != nil {
		t.Fatal(err)
	}
	if got := <-done; got.code != 0 {
		t.Fatalf("write after a place freed: exit %d, stderr %q; want 0", got.code, got.stderr)
	}
	if _, err := os.Stat(file); err != nil {
		t.Errorf("the approved write did not run: %v", err)
	}
}
