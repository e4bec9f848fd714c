package manage

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/postern/postern/internal/testpg"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
)

// dualRig is a manager with a production connection web, an agent bot,
// and three registered admins: alice and bob (admins), vera (viewer) and
// pat (approver).
type dualRig struct {
	m                     *Manager
	st                    *store.Store
	alice, bob, vera, pat policy.Actor
}

func newDualRig(t *testing.T) *dualRig {
	t.Helper()
	m, st, _ := newTestManager(t)
	ctx := context.Background()
	r := &dualRig{m: m, st: st}
	admins := registered(t, st, store.RoleAdmin, "alice", "bob")
	r.alice, r.bob = admins[0], admins[1]
	r.vera = registered(t, st, store.RoleViewer, "vera")[0]
	r.pat = registered(t, st, store.RoleApprover, "pat")[0]
	key, _ := newKey(t)
	if _, err := m.AddConnection(ctx, r.alice, ConnectionSpec{Alias: "web", Host: "h", User: "u", PrivateKey: key,
		HostKeys: []string{hostKeyLine(t)}, Env: store.EnvProduction}, CheckOptions{}); err != nil {
		t.Fatal(err)
	}
	_, agentPub := newKey(t)
	if _, err := m.AddAgent(ctx, r.alice, "bot", []string{strings.TrimSpace(string(ssh.MarshalAuthorizedKey(agentPub)))}); err != nil {
		t.Fatal(err)
	}
	return r
}

// held wants err to be a change that waits, and returns its request.
func held(t *testing.T, what string, err error) store.ChangeRequest {
	t.Helper()
	var h *HeldError
	if !errors.As(err, &h) {
		t.Fatalf("%s: got %v; want it to wait for a second admin", what, err)
	}
	return h.Request
}

// TestDualControl: no single admin loosens a production connection or
// raises a role alone, through any sequence manage offers; a second admin
// makes it, audited with both names; tightening applies at once (issue
// 23).
func TestDualControl(t *testing.T) {
	testpg.ForEachDB(t, func(t *testing.T) {
		r := newDualRig(t)
		ctx := context.Background()
		ask, allow, deny := store.RuleAsk, store.RuleAllow, store.RuleDeny

		// A new grant on production waits; alice cannot approve it,
		// under any spelling of her name.
		_, err := r.m.SetGrant(ctx, r.alice, "bot", "web", RulesChange{Write: &ask, Destructive: &ask})
		req := held(t, "new grant", err)
		if _, err := r.st.GrantByNames(ctx, "bot", "web"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("grant before approval: %v; want none", err)
		}
		for _, self := range []policy.Actor{r.alice, {Name: "ALICE", AdminID: r.alice.AdminID, Via: "api", Role: store.RoleAdmin}} {
			if _, err := r.m.DecideChange(ctx, self, req.ID, true, ""); !errors.Is(err, store.ErrSameRequester) {
				t.Errorf("%s approving her own change: %v; want ErrSameRequester", self.Name, err)
			}
		}
		if _, err := r.m.DecideChange(ctx, r.vera, req.ID, true, ""); !errorsAsRole(err) {
			t.Errorf("a viewer approving: %v; want a RoleError", err)
		}
		c, err := r.m.DecideChange(ctx, r.pat, req.ID, true, "")
		if err != nil || c.Status != store.ChangeApproved {
			t.Fatalf("pat approving: %s, %v; want approved", c.Status, err)
		}
		g, err := r.st.GrantByNames(ctx, "bot", "web")
		if err != nil || g.Rules.Write != store.RuleAsk || g.Rules.Destructive != store.RuleAsk {
			t.Fatalf("grant after approval: %+v, %v; want write=ask destructive=ask", g, err)
		}
		if _, err := r.m.DecideChange(ctx, r.bob, req.ID, false, "late"); !errors.Is(err, store.ErrChangeDecided) {
			t.Errorf("deciding it again: %v; want ErrChangeDecided", err)
		}
		last := adminOps(t, r.st)
		made := last[len(last)-1]
		if strings.Join(made.Deciders, ",") != "alice,pat" || !strings.Contains(made.Operation, req.ID) {
			t.Errorf("audit row of the made change: %q by %v; want it by alice,pat naming %s", made.Operation, made.Deciders, req.ID)
		}

		// Tightening applies at once; loosening waits.
		if _, err := r.m.SetGrant(ctx, r.alice, "bot", "web", RulesChange{Write: &deny}); err != nil {
			t.Fatalf("tightening write: %v; want it made", err)
		}
		held(t, "write deny -> allow", func() error {
			_, err := r.m.SetGrant(ctx, r.alice, "bot", "web", RulesChange{Write: &allow})
			return err
		}())

		// Environment away from production, host key, removal: each waits.
		staging := store.EnvStaging
		_, err = r.m.UpdateConnection(ctx, r.alice, "web", ConnectionEdit{Env: &staging}, CheckOptions{})
		envReq := held(t, "env production -> staging", err)
		if envReq.Before == envReq.After || !strings.Contains(envReq.Before, "env=production") ||
			!strings.Contains(envReq.After, "env=staging") {
			t.Errorf("env change before %q after %q; want production then staging", envReq.Before, envReq.After)
		}
		_, err = r.m.UpdateConnection(ctx, r.alice, "web", ConnectionEdit{HostKeys: []string{hostKeyLine(t)}}, CheckOptions{})
		held(t, "re-pin", err)
		_, err = r.m.RemoveConnection(ctx, r.alice, "web")
		held(t, "remove", err)
		if c, err := r.st.ConnectionByAlias(ctx, "web"); err != nil || c.Env != store.EnvProduction {
			t.Fatalf("web after three waiting changes: %+v, %v; want it production still", c, err)
		}
		require := store.ReadSandboxRequire
		if _, err := r.m.UpdateConnection(ctx, r.alice, "web", ConnectionEdit{ReadSandbox: &require}, CheckOptions{}); err != nil {
			t.Errorf("requiring the read sandbox: %v; want it made at once", err)
		}

		// Denial: the reason's rules are the operations' ones.
		if _, err := r.m.DecideChange(ctx, r.bob, envReq.ID, false, "no\x1b[31m"); !errors.Is(err, policy.ErrInvalidText) {
			t.Errorf("a denial with ESC: %v; want ErrInvalidText", err)
		}
		if c, err := r.m.DecideChange(ctx, r.bob, envReq.ID, false, "stays production"); err != nil || c.Status != store.ChangeDenied {
			t.Errorf("bob denying: %s, %v; want denied", c.Status, err)
		}
		if c, _ := r.st.ConnectionByAlias(ctx, "web"); c.Env != store.EnvProduction {
			t.Errorf("env after the denial: %s; want production", c.Env)
		}

		// Roles: a viewer and an approver change no configuration.
		for _, who := range []policy.Actor{r.vera, r.pat} {
			if _, err := r.m.RevokeGrant(ctx, who, "bot", "web"); !errorsAsRole(err) {
				t.Errorf("%s revoking a grant: %v; want a RoleError", who.Name, err)
			}
		}
		// A door's vouching is bounded by the store's role: bob's token
		// of scope admin after bob is lowered to approver.
		if _, err := r.st.SetAdminRole(ctx, store.Unaudited(), "bob", store.RoleApprover); err != nil {
			t.Fatal(err)
		}
		if _, err := r.m.RevokeGrant(ctx, policy.Actor{Name: "bob", AdminID: r.bob.AdminID, Via: "api", Role: store.RoleAdmin},
			"bot", "web"); !errorsAsRole(err) {
			t.Errorf("lowered bob revoking: %v; want a RoleError", err)
		}
	})
}

// TestDualControlAdmins: raising a role and adding an admin or owner wait;
// lowering applies at once; a change whose asker lost the role meanwhile
// is not made; an expired one is refused; the CLI's OS user asks, and any
// registered admin is the second person.
func TestDualControlAdmins(t *testing.T) {
	r := newDualRig(t)
	ctx := context.Background()
	owner := registered(t, r.st, store.RoleOwner, "olga")[0]
	if _, err := r.m.AddAdmin(ctx, r.alice, "eve", "$argon2id$x", store.RoleViewer); !errorsAsRole(err) {
		t.Errorf("an admin adding an admin: %v; want a RoleError (owners manage admins)", err)
	}
	_, err := r.m.AddAdmin(ctx, owner, "eve", "$argon2id$x", store.RoleOwner)
	add := held(t, "a new owner", err)
	if _, err := r.st.ResolveAdmin(ctx, "eve"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("eve before approval: %v; want not found", err)
	}
	// A viewer decides nothing: made at once. An approver is a second
	// person: no owner makes one alone (a sock puppet would meet the
	// two-person rule), but the server's CLI without --as does.
	if _, err := r.m.AddAdmin(ctx, owner, "ann", "$argon2id$x", store.RoleViewer); err != nil {
		t.Errorf("adding a viewer: %v; want it made at once", err)
	}
	_, err = r.m.AddAdmin(ctx, owner, "amy", "$argon2id$x", store.RoleApprover)
	held(t, "an owner adding an approver", err)
	if _, err := r.m.AddAdmin(ctx, policy.Actor{Name: "cli:root", Via: "cli", Role: store.RoleOwner}, "abe", "$argon2id$x",
		store.RoleApprover); err != nil {
		t.Errorf("the CLI's OS user adding an approver: %v; want it made at once", err)
	}
	_, err = r.m.SetAdminRole(ctx, owner, "pat", store.RoleOwner)
	raise := held(t, "approver -> owner", err)
	if a, err := r.m.SetAdminRole(ctx, owner, "bob", store.RoleViewer); err != nil || a.Role != store.RoleViewer {
		t.Errorf("lowering bob: %+v, %v; want viewer at once", a, err)
	}
	// pat approves her own raise: two people (olga asked), allowed.
	if _, err := r.m.DecideChange(ctx, r.pat, raise.ID, true, ""); err != nil {
		t.Errorf("pat approving olga's raise of pat: %v", err)
	}
	if a, _ := r.st.ResolveAdmin(ctx, "pat"); a.Role != store.RoleOwner {
		t.Errorf("pat's role after approval: %s; want owner", a.Role)
	}
	// olga is lowered before eve's addition is approved: not made.
	if _, err := r.m.SetAdminRole(ctx, r.pat, "olga", store.RoleApprover); err != nil {
		t.Fatal(err)
	}
	c, err := r.m.DecideChange(ctx, r.alice, add.ID, true, "")
	if err == nil || c.Status != store.ChangeFailed {
		t.Errorf("approving a change whose asker lost the role: %s, %v; want failed", c.Status, err)
	}
	if _, err := r.st.ResolveAdmin(ctx, "eve"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("eve after the failed change: %v; want not found", err)
	}

	// The CLI's OS user asks (no registered admin): any admin approves,
	// but the OS user decides nothing.
	cli := policy.Actor{Name: "cli:root", Via: "cli", Role: store.RoleOwner}
	_, err = r.m.RemoveConnection(ctx, cli, "web")
	rm := held(t, "remove by the CLI", err)
	if _, err := r.m.DecideChange(ctx, cli, rm.ID, true, ""); err == nil {
		t.Error("the CLI's OS user deciding a change: no error; want refused (no registered admin)")
	}
	if _, err := r.m.DecideChange(ctx, r.alice, rm.ID, true, ""); err != nil {
		t.Errorf("alice approving the CLI's removal: %v", err)
	}
	if _, err := r.st.ConnectionByAlias(ctx, "web"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("web after the approved removal: %v; want removed", err)
	}
}

// TestChangeExpires: a change not decided within its lifetime is refused
// and listed expired.
func TestChangeExpires(t *testing.T) {
	m, st, _ := newTestManager(t)
	m.changeLife = time.Nanosecond
	ctx := context.Background()
	admins := registered(t, st, store.RoleOwner, "alice", "bob")
	_, err := m.AddAdmin(ctx, admins[0], "carl", "$argon2id$x", store.RoleAdmin)
	req := held(t, "add carl", err)
	if _, err := m.DecideChange(ctx, admins[1], req.ID, true, ""); !errors.Is(err, store.ErrChangeDecided) {
		t.Errorf("approving an expired change: %v; want ErrChangeDecided", err)
	}
	if _, err := st.ResolveAdmin(ctx, "carl"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("carl after the refused approval: %v; want not found", err)
	}
	list, err := m.Changes(ctx, true)
	if err != nil || len(list) != 1 || list[0].Status != store.ChangeExpired {
		t.Errorf("changes: %+v, %v; want the one, expired", list, err)
	}
}

func errorsAsRole(err error) bool {
	var re *RoleError
	return errors.As(err, &re)
}
