package policy

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/postern/postern/internal/fakeclock"
	"github.com/postern/postern/store"
)

// approveAsked asks for op in the background, approves the request with
// scope, and returns the request and the waiter's result.
func (te *testEnv) approveAsked(op Operation, scope Scope) (Approval, waitResult) {
	te.t.Helper()
	a, done := authorizeAsync(te.t, context.Background(), te.eng, op)
	if _, err := te.eng.Approve(context.Background(), a.ID, te.admin("alice"), scope); err != nil {
		te.t.Fatalf("Approve(%+v): %v", scope, err)
	}
	return a, result(te.t, done)
}

// authorizeNow runs Authorize and fails the test if it asks.
func (te *testEnv) authorizeNow(op Operation) (Authorization, error) {
	te.t.Helper()
	return te.eng.Authorize(context.Background(), op, func(a Approval) {
		te.t.Errorf("%q asked (%s); want it decided without asking", op.Text, a.ID)
	})
}

func TestOperationScope(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		clk := fakeclock.New()
		te := newTestEnv(t, clk.Now, Options{})
		c := te.conn("web", store.EnvDev, askAll)
		op := te.op(c, Write, "systemctl reload nginx")
		a, r := te.approveAsked(op, Scope{Kind: store.ScopeOperation, For: 30 * time.Minute})
		if r.err != nil || r.auth.Outcome != Approved {
			t.Fatalf("first run = %s, %v; want approved", r.auth.Outcome, r.err)
		}

		// The same exact operation runs without asking, audited as approved by
		// the approval that made the scope.
		auth, err := te.authorizeNow(op)
		if err != nil || auth.Outcome != Approved || auth.Approval == nil || auth.Approval.ID != a.ID {
			t.Fatalf("same operation within the scope = %s, %v; want approved by %s", auth.Outcome, err, a.ID)
		}
		rec := auth.Record(op)
		if rec.ApprovalID != a.ID || !strings.Contains(rec.Reason, "operation scope of approval "+a.ID) ||
			len(rec.Deciders) != 1 || rec.Deciders[0] != "alice" {
			t.Errorf("audit record = %+v; want approval %s, its decider and the scope named", rec, a.ID)
		}
		// Another operation of the same class still asks.
		other, done := authorizeAsync(t, context.Background(), te.eng, te.op(c, Write, "systemctl reload apache2"))
		if _, err := te.eng.Deny(context.Background(), other.ID, te.admin("alice"), "no"); err != nil {
			t.Fatal(err)
		}
		result(t, done)

		clk.Advance(31 * time.Minute)
		b, done := authorizeAsync(t, context.Background(), te.eng, op)
		if b.ID == a.ID {
			t.Fatal("after the scope ended the operation reused the old approval")
		}
		te.eng.Deny(context.Background(), b.ID, te.admin("alice"), "over")
		result(t, done)
	})
}

func TestClassScopeAndRevoke(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		te := newTestEnv(t, nil, Options{})
		c := te.conn("web", store.EnvDev, askAll)
		a, r := te.approveAsked(te.op(c, Write, "mkdir /srv/a"), Scope{Kind: store.ScopeClass, For: time.Hour})
		if r.err != nil {
			t.Fatal(r.err)
		}
		for _, text := range []string{"mkdir /srv/b", "touch /srv/b/x", "cp /etc/hosts /srv/b"} {
			auth, err := te.authorizeNow(te.op(c, Write, text))
			if err != nil || auth.Outcome != Approved || auth.Approval.ID != a.ID {
				t.Errorf("%q within the class scope = %s, %v; want approved by %s", text, auth.Outcome, err, a.ID)
			}
		}
		// Another class is not elevated.
		d, done := authorizeAsync(t, context.Background(), te.eng, te.op(c, Destructive, "rm /srv/b/x"))
		te.eng.Deny(context.Background(), d.ID, te.admin("alice"), "no")
		result(t, done)

		// A grant changed to deny outranks the scope.
		if _, err := te.st.SetGrant(context.Background(), store.Unaudited(), "bot", "web", Rules{Read: Allow, Write: Deny, Destructive: Deny}); err != nil {
			t.Fatal(err)
		}
		if _, err := te.eng.Authorize(context.Background(), te.op(c, Write, "mkdir /srv/c"), nil); !errors.Is(err, ErrDenied) {
			t.Errorf("write under a scope after the grant became deny = %v; want denied", err)
		}
		if _, err := te.st.SetGrant(context.Background(), store.Unaudited(), "bot", "web", askAll); err != nil {
			t.Fatal(err)
		}
		// ... and ended it: back at ask, writes ask again (issue 23).
		w, done := authorizeAsync(t, context.Background(), te.eng, te.op(c, Write, "mkdir /srv/c"))
		te.eng.Deny(context.Background(), w.ID, te.admin("alice"), "ask again")
		result(t, done)
		if _, err := te.eng.RevokeScope(context.Background(), a.ID, te.admin("bob")); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("RevokeScope of the scope a deny ended = %v; want ErrInvalid (nothing to revoke)", err)
		}

		b, r := te.approveAsked(te.op(c, Write, "mkdir /srv/d"), Scope{Kind: store.ScopeClass, For: time.Hour})
		if r.err != nil {
			t.Fatal(r.err)
		}
		if _, err := te.eng.RevokeScope(context.Background(), b.ID, te.admin("bob")); err != nil {
			t.Fatalf("RevokeScope: %v", err)
		}
		e, done := authorizeAsync(t, context.Background(), te.eng, te.op(c, Write, "mkdir /srv/e"))
		te.eng.Deny(context.Background(), e.ID, te.admin("alice"), "revoked")
		result(t, done)
	})
}

// TestScopeEndsWithDenyRule (issue 23): setting a rule to deny ends every
// scope of its class under the grant, class and operation scopes alike,
// and says so in the change's audit row; the rule going back to ask does
// not bring them back, a request that waited meanwhile cannot be approved
// with a scope while the rule is deny, and revoking the grant ends the
// scopes of the other classes: given again, the grant asks.
func TestScopeEndsWithDenyRule(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		ctx := context.Background()
		te := newTestEnv(t, nil, Options{})
		c := te.conn("web", store.EnvDev, askAll)
		op, r := te.approveAsked(te.op(c, Write, "systemctl reload nginx"), Scope{Kind: store.ScopeOperation, For: time.Hour})
		if r.err != nil {
			t.Fatal(r.err)
		}
		// A write that waits while the class scope is made and the rule
		// changes.
		waiting, wdone := authorizeAsync(t, ctx, te.eng, te.op(c, Write, "touch /etc/motd"))
		cls, r := te.approveAsked(te.op(c, Write, "mkdir /srv/a"), Scope{Kind: store.ScopeClass, For: time.Hour})
		if r.err != nil {
			t.Fatal(r.err)
		}
		del, r := te.approveAsked(te.op(c, Destructive, "rm /srv/a/x"), Scope{Kind: store.ScopeClass, For: time.Hour})
		if r.err != nil {
			t.Fatal(r.err)
		}
		for _, o := range []Operation{te.op(c, Write, "touch /srv/b"), te.op(c, Write, "systemctl reload nginx"), te.op(c, Destructive, "rm /srv/b")} {
			if auth, err := te.authorizeNow(o); err != nil || auth.Outcome != Approved {
				t.Fatalf("%q within its scope = %s, %v; want approved", o.Text, auth.Outcome, err)
			}
		}

		p := ChangeAudit(Change{Actor: Actor{Name: "alice", Via: "cli"}, What: "grant bot web: write=deny"})
		writeDeny := askAll
		writeDeny.Write = Deny
		if _, err := te.st.SetGrant(ctx, store.Audited(p), "bot", "web", writeDeny); err != nil {
			t.Fatal(err)
		}
		row := p.Stored()
		if row == nil {
			t.Fatal("the rule change was not audited")
		}
		for _, id := range []string{cls.ID, op.ID} {
			if !strings.Contains(row.Operation, "setting write=deny ends scopes") || !strings.Contains(row.Operation, id) {
				t.Errorf("audit row %q; want it to say that setting write=deny ends scope %s", row.Operation, id)
			}
		}
		if _, err := te.eng.Approve(ctx, waiting.ID, te.admin("alice"), Scope{Kind: store.ScopeClass, For: time.Hour}); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("class scope approved while the write rule is deny = %v; want ErrInvalid", err)
		}
		te.eng.Deny(ctx, waiting.ID, te.admin("alice"), "")
		result(t, wdone)

		if _, err := te.st.SetGrant(ctx, store.Unaudited(), "bot", "web", askAll); err != nil {
			t.Fatal(err)
		}
		for _, text := range []string{"touch /srv/c", "systemctl reload nginx"} {
			a, done := authorizeAsync(t, ctx, te.eng, te.op(c, Write, text))
			te.eng.Deny(ctx, a.ID, te.admin("alice"), "")
			result(t, done)
		}
		if auth, err := te.authorizeNow(te.op(c, Destructive, "rm /srv/c")); err != nil || auth.Approval == nil || auth.Approval.ID != del.ID {
			t.Errorf("destructive after write=deny = %s, %v; want still within scope %s", auth.Outcome, err, del.ID)
		}

		p = ChangeAudit(Change{Actor: Actor{Name: "alice", Via: "cli"}, What: "grant revoke bot web"})
		if err := te.st.RevokeGrant(ctx, store.Audited(p), "bot", "web"); err != nil {
			t.Fatal(err)
		}
		if row := p.Stored(); row == nil || !strings.Contains(row.Operation, "revoking the grant ends scope "+del.ID) {
			t.Errorf("audit row of the revoke = %+v; want it to name scope %s", row, del.ID)
		}
		if _, err := te.st.SetGrant(ctx, store.Unaudited(), "bot", "web", askAll); err != nil {
			t.Fatal(err)
		}
		a, done := authorizeAsync(t, ctx, te.eng, te.op(c, Destructive, "rm /srv/d"))
		te.eng.Deny(ctx, a.ID, te.admin("alice"), "")
		result(t, done)
		if res, err := Verify(ctx, te.st); err != nil || res.Broken != nil {
			t.Errorf("audit chain after the changes: %+v, %v; want intact", res, err)
		}
	})
}

// TestScopeRefusals: a production destructive operation is one operation,
// two people, every time; scopes are bounded by MaxScope.
func TestScopeRefusals(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		te := newTestEnv(t, nil, Options{})
		prod := te.conn("db", store.EnvProduction, askAll)
		dev := te.conn("web", store.EnvDev, askAll)
		p, pdone := authorizeAsync(t, context.Background(), te.eng, te.op(prod, Destructive, "rm -rf /srv/old"))
		w, wdone := authorizeAsync(t, context.Background(), te.eng, te.op(dev, Write, "touch /x"))
		tests := []struct {
			name  string
			id    string
			scope Scope
		}{
			{"production destructive, operation scope", p.ID, Scope{Kind: store.ScopeOperation, For: time.Minute}},
			{"production destructive, class scope", p.ID, Scope{Kind: store.ScopeClass, For: time.Minute}},
			{"longer than MaxScope", w.ID, Scope{Kind: store.ScopeClass, For: MaxScope + time.Second}},
			{"no duration", w.ID, Scope{Kind: store.ScopeClass}},
			{"request with a duration", w.ID, Scope{Kind: store.ScopeRequest, For: time.Minute}},
			{"unknown kind", w.ID, Scope{Kind: "all", For: time.Minute}},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				if _, err := te.eng.Approve(context.Background(), tc.id, te.admin("alice"), tc.scope); !errors.Is(err, ErrScope) {
					t.Errorf("Approve(%+v) = %v; want ErrScope", tc.scope, err)
				}
			})
		}
		for _, id := range []string{p.ID, w.ID} {
			if got, _ := te.st.GetApproval(context.Background(), id); got.Status != store.ApprovalPending || got.FirstApprover != "" {
				t.Errorf("%s after refused scopes = %s, first approver %q; want untouched", id, got.Status, got.FirstApprover)
			}
		}
		te.eng.Deny(context.Background(), p.ID, te.admin("alice"), "")
		te.eng.Deny(context.Background(), w.ID, te.admin("alice"), "")
		result(t, pdone)
		result(t, wdone)
	})
}

// TestScopeNeverAppliesToProductionDestructive: even a class scope that
// exists (made while the connection was dev) does not let a destructive
// operation through once the connection is production.
func TestScopeNeverAppliesToProductionDestructive(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		te := newTestEnv(t, nil, Options{})
		c := te.conn("db", store.EnvDev, askAll)
		if _, r := te.approveAsked(te.op(c, Destructive, "rm /srv/a"), Scope{Kind: store.ScopeClass, For: time.Hour}); r.err != nil {
			t.Fatal(r.err)
		}
		te.exec(`UPDATE connections SET env = 'production' WHERE id = ?`, c.ID)
		a, done := authorizeAsync(t, context.Background(), te.eng, te.op(c, Destructive, "rm /srv/b"))
		if a.ApprovalsNeeded != 2 {
			t.Errorf("request on production = %d approvals needed; want 2", a.ApprovalsNeeded)
		}
		te.eng.Deny(context.Background(), a.ID, te.admin("alice"), "")
		result(t, done)
	})
}

func TestParseScope(t *testing.T) {
	tests := []struct {
		kind, dur string
		want      Scope
		err       bool
	}{
		{"", "", Scope{Kind: store.ScopeRequest}, false},
		{"request", "0", Scope{Kind: store.ScopeRequest}, false},
		{"Operation", "30m", Scope{Kind: store.ScopeOperation, For: 30 * time.Minute}, false},
		{"class", "8h", Scope{Kind: store.ScopeClass, For: 8 * time.Hour}, false},
		{"class", "", Scope{}, true},
		{"class", "soon", Scope{}, true},
		{"everything", "1h", Scope{}, true},
	}
	for _, tc := range tests {
		got, err := ParseScope(tc.kind, tc.dur)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParseScope(%q, %q) = %+v, %v; want %+v, error %v", tc.kind, tc.dur, got, err, tc.want, tc.err)
		}
	}
}
