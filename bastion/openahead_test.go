package bastion

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/postern/postern/internal/testwait"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
	"golang.org/x/crypto/ssh"
)

// This file pins the guarantee of openAhead: an upstream channel opened
// before the decision runs nothing unless the decision allows, and is given
// back to the pool whatever the decision.

// waitPoolSessions waits until the pool carries want sessions for conn.
// The pool announces nothing: this polls.
func (h *harness) waitPoolSessions(conn *store.Connection, want int) {
	h.t.Helper()
	testwait.Until(h.t, fmt.Sprintf("%d pool sessions for %s", want, conn.Alias), func() bool {
		return h.srv.pool.Stats(conn).Sessions == want
	})
}

// TestOpenAheadRefusedRunsNothing: the connection's cached grant still
// allows writes, so the upstream channel opens while the policy decides;
// the grant now denies (or asks, and the admin denies), and the command
// does not run, and the channel is closed.
func TestOpenAheadRefusedRunsNothing(t *testing.T) {
	t.Parallel()
	allowAll := store.Rules{Read: store.RuleAllow, Write: store.RuleAllow, Destructive: store.RuleDeny}
	tests := []struct {
		name  string
		write store.Rule
	}{
		{name: "grant now denies", write: store.RuleDeny},
		{name: "grant now asks, admin denies", write: store.RuleAsk},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, harnessOpts{rules: allowAll})
			conn := h.connection("web")
			c := h.client()
			defer c.Close()
			// The first command caches the grant (write allow) on this
			// connection and warms the pool.
			s, err := c.NewSession()
			if err != nil {
				t.Fatal(err)
			}
			if out, err := s.Output("web echo cached"); err != nil || string(out) != "cached\n" {
				t.Fatalf("first command: %q, %v; want cached", out, err)
			}
			s.Close()

			ctx := context.Background()
			rules := allowAll
			rules.Write = tt.write
			if _, err := h.st.SetGrant(ctx, store.Unaudited(), "agent1", "web", rules); err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(t.TempDir(), "made")
			s, err = c.NewSession()
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := s.Start("web touch " + file); err != nil {
				t.Fatal(err)
			}
			if tt.write == store.RuleAsk {
				id := h.waitPending()
				// No channel is held for the target while an admin decides.
				h.waitPoolSessions(conn, 0)
				if _, err := h.eng.Deny(ctx, id, h.alice, "not now"); err != nil {
					t.Fatal(err)
				}
			}
			err = s.Wait()
			var ee *ssh.ExitError
			if !errors.As(err, &ee) || ee.ExitStatus() != ExitRefused {
				t.Fatalf("refused command: %v; want exit status %d", err, ExitRefused)
			}
			if _, err := os.Stat(file); !os.IsNotExist(err) {
				t.Errorf("file %s exists after a refused command (stat err %v)", file, err)
			}
			h.waitPoolSessions(conn, 0)
			if n := h.auditCount(policy.Denied); n != 1 {
				t.Errorf("denied audit rows = %d; want 1", n)
			}
		})
	}
}
