package policy

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/postern/postern/store"
)

// TestTerminalNeverScoped: a session with a terminal is approved one
// session at a time: no scope of any kind may be given to its approval, no
// scope (even a class scope of its class on a dev connection) lets it
// through, an approval of the same command without a terminal is not
// its approval, and its audit row says it had a terminal.
func TestTerminalNeverScoped(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		te := newTestEnv(t, nil, Options{})
		c := te.conn("web", store.EnvDev, askAll)
		term := te.op(c, Destructive, "git log --oneline")
		term.TerminalLife = 15 * time.Minute

		a, done := authorizeAsync(t, context.Background(), te.eng, term)
		if a.TerminalLife != 15*time.Minute {
			t.Errorf("the request's terminal life: got %v; want 15m", a.TerminalLife)
		}
		for _, scope := range []Scope{{Kind: store.ScopeOperation, For: time.Minute}, {Kind: store.ScopeClass, For: time.Minute}} {
			if _, err := te.eng.Approve(context.Background(), a.ID, te.admin("alice"), scope); !errors.Is(err, ErrScope) {
				t.Errorf("Approve with a %s scope: %v; want ErrScope", scope.Kind, err)
			}
		}
		if _, err := te.eng.Approve(context.Background(), a.ID, te.admin("alice"), Scope{}); err != nil {
			t.Fatalf("Approve of the one session: %v", err)
		}
		r := result(t, done)
		if r.err != nil || r.auth.Outcome != Approved {
			t.Fatalf("the session: %s, %v; want approved", r.auth.Outcome, r.err)
		}
		if rec := r.auth.Record(term); !strings.Contains(rec.Reason, TerminalNote) {
			t.Errorf("audit reason %q; want it to say %q", rec.Reason, TerminalNote)
		}

		// A class scope for destructive on this dev connection, made by
		// the same command without a terminal, covers that command again
		// but never the session with a terminal.
		plain := te.op(c, Destructive, "git log --oneline")
		if _, r := te.approveAsked(plain, Scope{Kind: store.ScopeClass, For: time.Hour}); r.err != nil {
			t.Fatal(r.err)
		}
		if auth, err := te.authorizeNow(plain); err != nil || auth.Outcome != Approved {
			t.Fatalf("the plain command under its class scope: %s, %v; want approved by the scope", auth.Outcome, err)
		}
		b, done := authorizeAsync(t, context.Background(), te.eng, term)
		if b.ID == a.ID {
			t.Fatalf("a second session reused the first one's approval %s", a.ID)
		}
		te.eng.Deny(context.Background(), b.ID, te.admin("alice"), "")
		if r := result(t, done); !errors.Is(r.err, ErrDenied) {
			t.Errorf("the second session with a terminal: %v; want it asked and denied", r.err)
		}

		// Nor does an operation scope for the very same command on
		// another connection.
		c2 := te.conn("api", store.EnvDev, askAll)
		plain2 := te.op(c2, Destructive, "git log --oneline")
		if _, r := te.approveAsked(plain2, Scope{Kind: store.ScopeOperation, For: time.Hour}); r.err != nil {
			t.Fatal(r.err)
		}
		if auth, err := te.authorizeNow(plain2); err != nil || auth.Outcome != Approved {
			t.Fatalf("the plain command under its operation scope: %s, %v; want approved by the scope", auth.Outcome, err)
		}
		term2 := te.op(c2, Destructive, "git log --oneline")
		term2.TerminalLife = 15 * time.Minute
		d, done := authorizeAsync(t, context.Background(), te.eng, term2)
		te.eng.Deny(context.Background(), d.ID, te.admin("alice"), "")
		if r := result(t, done); !errors.Is(r.err, ErrDenied) {
			t.Errorf("the session with a terminal under an operation scope for its command: %v; want it asked and denied", r.err)
		}
	})
}
