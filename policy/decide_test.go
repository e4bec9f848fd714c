package policy

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/postern/postern/store"
)

func TestDecide(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		te := newTestEnv(t, nil, Options{})
		ctx := context.Background()
		dflt := te.conn("web", store.EnvDev, DefaultRules())
		open := te.conn("open", store.EnvStaging, Rules{Read: Allow, Write: Ask, Destructive: Allow})
		prod := te.conn("prod", store.EnvProduction, Rules{Read: Allow, Write: Allow, Destructive: Ask})
		tampered := te.conn("tampered", store.EnvProduction, Rules{Read: Allow, Write: Allow, Destructive: Deny})
		te.exec(`UPDATE grants SET destructive_rule = 'allow' WHERE connection_id = ?`, tampered.ID)
		badWord := te.conn("badword", store.EnvDev, DefaultRules())
		db := te.sql()
		unchecked := `PRAGMA ignore_check_constraints = 1`
		if onPostgres(t) {
			unchecked = `ALTER TABLE grants DROP CONSTRAINT grants_read_rule_check`
		}
		if _, err := db.Exec(unchecked); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`UPDATE grants SET read_rule = 'yes' WHERE connection_id = ?`, badWord.ID); err != nil {
			t.Fatal(err)
		}
		kp := newKeyPair(t)
		if _, err := te.st.CreateConnection(ctx, store.Unaudited(), store.NewConnection{Alias: "ungranted", Host: "h", User: "u",
			PrivateKey: kp.PrivatePEM, HostKeys: []string{"h " + kp.Authorized}}); err != nil {
			t.Fatal(err)
		}

		tests := []struct {
			name    string
			op      Operation
			want    Rule
			noGrant bool
			needed  int
			failed  bool // Err set: a fail-closed denial
		}{
			{name: "default read allowed", op: te.op(dflt, Read, "uptime"), want: Allow},
			{name: "default write denied", op: te.op(dflt, Write, "touch x"), want: Deny},
			{name: "default destructive denied", op: te.op(dflt, Destructive, "rm -rf /srv"), want: Deny},
			{name: "write ask", op: te.op(open, Write, "touch x"), want: Ask, needed: 1},
			{name: "staging destructive allow", op: te.op(open, Destructive, "rm x"), want: Allow},
			{name: "production destructive ask needs two", op: te.op(prod, Destructive, "rm x"), want: Ask, needed: 2},
			{name: "production write allow", op: te.op(prod, Write, "touch x"), want: Allow},
			{name: "stored production allow read as ask", op: te.op(tampered, Destructive, "rm x"), want: Ask, needed: 2},
			{name: "unknown rule word fails closed", op: te.op(badWord, Read, "ls"), want: Deny, failed: true},
			{name: "by alias", op: Operation{AgentID: te.agent.ID, ConnectionAlias: "web", Class: Read, Kind: SFTP, Text: "stat /"}, want: Allow},
			{name: "no grant", op: Operation{AgentID: te.agent.ID, ConnectionAlias: "ungranted", Class: Read, Kind: Exec, Text: "ls"}, want: Deny, noGrant: true},
			{name: "no such alias", op: Operation{AgentID: te.agent.ID, ConnectionAlias: "nope", Class: Read, Kind: Exec, Text: "ls"}, want: Deny, noGrant: true},
			{name: "no such agent", op: Operation{AgentID: "agt_none", ConnectionID: dflt.ID, Class: Read, Kind: Exec, Text: "ls"}, want: Deny, noGrant: true},
			{name: "empty class", op: te.op(dflt, "", "ls"), want: Deny, failed: true},
			{name: "bad kind", op: Operation{AgentID: te.agent.ID, ConnectionID: dflt.ID, Class: Read, Kind: "x11", Text: "ls"}, want: Deny, failed: true},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				d := te.eng.Decide(ctx, tt.op)
				if d.Rule != tt.want {
					t.Errorf("Rule = %q (reason %q, err %v); want %q", d.Rule, d.Reason, d.Err, tt.want)
				}
				if d.NoGrant != tt.noGrant {
					t.Errorf("NoGrant = %v; want %v", d.NoGrant, tt.noGrant)
				}
				if d.ApprovalsNeeded != tt.needed {
					t.Errorf("ApprovalsNeeded = %d; want %d", d.ApprovalsNeeded, tt.needed)
				}
				if (d.Err != nil) != tt.failed {
					t.Errorf("Err = %v; want error %v", d.Err, tt.failed)
				}
				if d.Rule == Deny && d.Reason == "" {
					t.Error("Reason is empty for a denial")
				}
			})
		}

		t.Run("disabled agent", func(t *testing.T) {
			if _, err := te.st.SetAgentDisabled(ctx, store.Unaudited(), "bot", true); err != nil {
				t.Fatal(err)
			}
			defer te.st.SetAgentDisabled(ctx, store.Unaudited(), "bot", false)
			d := te.eng.Decide(ctx, te.op(dflt, Read, "uptime"))
			if d.Rule != Deny {
				t.Errorf("Rule = %q; want deny", d.Rule)
			}
		})

		// A lock denies with its words (issue 24): an agent's lock on
		// every connection, before the grant check; a connection's only
		// where the agent holds a grant, so that an agent learns nothing
		// of a connection it may not see.
		ungranted := Operation{AgentID: te.agent.ID, ConnectionAlias: "ungranted", Class: Read, Kind: Exec, Text: "ls"}
		for _, tc := range []struct {
			name       string
			kind, what string
			op         Operation
			reason     string
			noGrant    bool
		}{
			{"agent lock", store.LockAgent, "bot", te.op(dflt, Read, "uptime"), "agent bot is locked: incident 3", false},
			{"agent lock, no grant", store.LockAgent, "bot", ungranted, "agent bot is locked: incident 3", false},
			{"connection lock", store.LockConnection, "web", te.op(dflt, Read, "uptime"), "connection web is locked: incident 3", false},
			{"connection lock, no grant", store.LockConnection, "ungranted", ungranted, "no such connection", true},
			{"lock of another connection", store.LockConnection, "open", te.op(dflt, Read, "uptime"), "", false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				if _, err := te.st.SetLock(ctx, store.Unaudited(), store.LockInput{Kind: tc.kind, Name: tc.what, Reason: "incident 3", CreatedBy: "alice"}); err != nil {
					t.Fatal(err)
				}
				defer func() {
					if _, err := te.st.RemoveLock(ctx, store.Unaudited(), tc.kind, tc.what); err != nil {
						t.Fatal(err)
					}
				}()
				d := te.eng.Decide(ctx, tc.op)
				if tc.reason == "" {
					if d.Rule != Allow {
						t.Errorf("Rule = %q (reason %q); want allow", d.Rule, d.Reason)
					}
					return
				}
				if d.Rule != Deny || d.Reason != tc.reason || d.NoGrant != tc.noGrant {
					t.Errorf("Decide = %q, reason %q, NoGrant %v; want deny, %q, NoGrant %v", d.Rule, d.Reason, d.NoGrant, tc.reason, tc.noGrant)
				}
			})
		}
	})
}

// failingStore fails every call, to prove that errors deny.
type failingStore struct{ Store }

var errBroken = errors.New("disk on fire")

func (failingStore) PolicyFacts(context.Context, string, string, string) (store.PolicyFacts, error) {
	return store.PolicyFacts{}, errBroken
}

func TestDecideFailsClosed(t *testing.T) {
	e, err := New(Options{Store: failingStore{}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	op := Operation{AgentID: "agt_a", ConnectionID: "con_c", Class: Read, Kind: Exec, Text: "ls"}
	d := e.Decide(context.Background(), op)
	if d.Rule != Deny || !errors.Is(d.Err, errBroken) {
		t.Errorf("Decide = %q, err %v; want deny wrapping the store error", d.Rule, d.Err)
	}
	auth, err := e.Authorize(context.Background(), op, nil)
	if !errors.Is(err, ErrDenied) || auth.Outcome != Failed {
		t.Errorf("Authorize = %s, %v; want failed, ErrDenied", auth.Outcome, err)
	}
	if r := auth.Record(op); r.Reason == "" || r.Outcome != Failed {
		t.Errorf("Record = %+v; want outcome failed with a reason", r)
	}
}

func TestNewDefaults(t *testing.T) {
	e, err := New(Options{Store: failingStore{}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if got := e.ApprovalLifetime(); got != 2*time.Minute {
		t.Errorf("ApprovalLifetime = %v; want 2m", got)
	}
	if _, err := New(Options{}); err == nil {
		t.Error("New without a store: got nil error; want one")
	}
}

// TestConnectionChangedRefusesBeforeDeciding: an operation that names the
// version of the connection row it was classified with is decided only
// while that row is current. A stale version refuses with
// ErrConnectionChanged, and nothing is journaled or asked, so the caller
// can classify again and retry; the current version, or none, decides.
func TestConnectionChangedRefusesBeforeDeciding(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		te := newTestEnv(t, nil, Options{})
		ctx := context.Background()
		c := te.conn("web", store.EnvDev, Rules{Read: Allow, Write: Ask, Destructive: Deny})
		stale := c.ModifiedAt
		hk := newKeyPair(t)
		moved, err := te.st.UpdateConnectionAddress(ctx, store.Unaudited(), "web", "10.0.0.2", 22, []string{"10.0.0.2 " + hk.Authorized})
		if err != nil {
			t.Fatal(err)
		}
		if moved.ModifiedAt.Equal(stale) {
			t.Fatalf("modified_at %v did not move on update", stale)
		}
		tests := []struct {
			name    string
			version time.Time
			class   Class
			changed bool
		}{
			{"stale read", stale, Read, true},
			{"stale write (would ask)", stale, Write, true},
			{"current read", moved.ModifiedAt, Read, false},
			{"no version", time.Time{}, Read, false},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				op := te.op(c, tt.class, "uptime")
				op.ConnectionModifiedAt = tt.version
				auth, err := te.eng.Authorize(ctx, op, func(Approval) { t.Error("asked for an approval; want a refusal first") })
				if got := errors.Is(err, ErrConnectionChanged); got != tt.changed {
					t.Fatalf("Authorize: got err %v; want ErrConnectionChanged %v", err, tt.changed)
				}
				if tt.changed {
					if auth.Outcome == Allowed || auth.Approval != nil {
						t.Errorf("Authorize: got outcome %q, approval %v; want a refusal with no approval", auth.Outcome, auth.Approval)
					}
					if n := te.countInflight(); n != 0 {
						t.Errorf("journal rows after a refusal: got %d; want 0", n)
					}
					return
				}
				if auth.Outcome != Allowed {
					t.Errorf("Authorize: got outcome %q; want allowed", auth.Outcome)
				}
				if _, err := te.eng.Audit(ctx, auth.Record(op)); err != nil {
					t.Fatal(err)
				}
			})
		}
	})
}
