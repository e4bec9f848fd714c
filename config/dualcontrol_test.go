package config

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
)

// TestApplyHoldsLoosening: apply makes what does not loosen production at
// once, prints each change that waits for a second admin and counts it in
// its summary; once a second admin approves, the same file has nothing
// left to change (issue 23).
func TestApplyHoldsLoosening(t *testing.T) {
	r := newRig(t)
	prod := agentBot + connWeb + `env = "production"
` + grantBotWeb
	out, res, err := r.apply(prod, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Done != 2 || res.Failed != 0 || len(res.Held) != 1 {
		t.Fatalf("apply: %+v; want the agent and the connection made and the grant waiting\n%s", res, out)
	}
	id := res.Held[0]
	for _, want := range []string{"WAITS for a second admin: change request " + id,
		"1 waiting for a second admin (" + id + ")"} {
		if !strings.Contains(out, want) {
			t.Errorf("apply printed:\n%s\nwant %q", out, want)
		}
	}
	if _, err := r.st.GrantByNames(context.Background(), "bot", "web"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("grant before a second admin: %v; want none", err)
	}
	bob, err := r.st.CreateAdmin(context.Background(), store.Unaudited(), "bob", "$argon2id$x", store.RoleApprover)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.m.DecideChange(context.Background(), policy.Actor{Name: bob.Name, AdminID: bob.ID, Via: "test",
		Role: store.RoleOwner}, id, true, ""); err != nil {
		t.Fatal(err)
	}
	if out, res, err := r.apply(prod, Options{}); err != nil || res.Planned != 0 {
		t.Errorf("apply after the approval: %+v, %v; want nothing to change\n%s", res, err, out)
	}
	// Tightening applies at once: the grant's write rule back to deny.
	if out, res, err := r.apply(strings.Replace(prod, `write = "ask"`, `write = "deny"`, 1), Options{}); err != nil ||
		res.Done != 1 || len(res.Held) != 0 {
		t.Errorf("tightening by apply: %+v, %v; want it made at once\n%s", res, err, out)
	}
}
