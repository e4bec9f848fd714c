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

// TestApplyAdmins: [[admin]] adds an approver at once, an admin only
// with a second admin, lowers a role at once and raises one with a second
// admin; a file without password_file for a new admin is refused, and the
// password is in no output.
func TestApplyAdmins(t *testing.T) {
	r := newRig(t)
	const pw = "Canary-Apply-Password-1"
	r.write("pw", pw+"\nsecond line ignored\n")
	hashed := map[string]bool{}
	opts := Options{HashPassword: func(p string) (string, error) {
		hashed[p] = true
		return "$argon2id$test", nil
	}}
	if _, _, err := r.apply(`
[[admin]]
name = "carol"
`, opts); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "a new admin needs password_file") {
		t.Errorf("a new admin without password_file: %v; want ErrInvalid naming password_file", err)
	}
	file := `
[[admin]]
name = "olga"
role = "owner"
password_file = "pw"

[[admin]]
name = "pat"
password_file = "pw"
`
	out, res, err := r.apply(file, opts)
	if err != nil {
		t.Fatal(err)
	}
	// olga is the installation's first admin: an owner at once. pat is an
	// approver (the default role), at once.
	if res.Done != 2 || len(res.Held) != 0 || !hashed[pw] || len(hashed) != 1 || strings.Contains(out, pw) {
		t.Fatalf("apply: %+v, hashed %v\n%s\nwant both made, with the password's first line", res, hashed, out)
	}
	raise := strings.Replace(file, `name = "pat"`, `name = "pat"
role = "admin"`, 1) + `
[[admin]]
name = "ann"
role = "admin"
password_file = "pw"
`
	// Applied as olga, a registered owner: making deciders waits for a
	// second admin (the server's OS user, as above, makes them at once).
	olga, err := r.st.ResolveAdmin(context.Background(), "olga")
	if err != nil {
		t.Fatal(err)
	}
	opts.Actor = policy.Actor{Name: olga.Name, AdminID: olga.ID, Via: "apply", Role: store.RoleOwner}
	out, res, err = r.apply(raise, opts)
	if err != nil || len(res.Held) != 2 || res.Done != 0 {
		t.Fatalf("raising pat and adding ann as olga: %+v, %v; want both waiting\n%s", res, err, out)
	}
	if a, _ := r.st.ResolveAdmin(context.Background(), "pat"); a.Role != store.RoleApprover {
		t.Errorf("pat before a second admin: %s; want approver", a.Role)
	}
	lower := strings.Replace(file, `name = "pat"`, `name = "pat"
role = "viewer"`, 1)
	if out, res, err := r.apply(lower, opts); err != nil || res.Done != 1 || len(res.Held) != 0 {
		t.Errorf("lowering pat: %+v, %v; want it made at once\n%s", res, err, out)
	}
	if a, _ := r.st.ResolveAdmin(context.Background(), "pat"); a.Role != store.RoleViewer {
		t.Errorf("pat after lowering: %s; want viewer", a.Role)
	}
	exported, err := Export(context.Background(), r.st)
	if err != nil {
		t.Fatal(err)
	}
	if len(exported.Admins) != 2 || exported.Admins[0] != (Admin{Name: "olga", Role: "owner"}) ||
		exported.Admins[1] != (Admin{Name: "pat", Role: "viewer"}) {
		t.Errorf("exported admins %+v; want olga owner and pat viewer, without passwords", exported.Admins)
	}
}
