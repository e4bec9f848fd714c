package manage

import (
	"context"
	"errors"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/postern/postern/internal/testpg"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/recipes"
	"github.com/postern/postern/store"
)

// TestStagedRotation: staging switches nothing; a commit proves the staged
// key and switches only when the target accepts it; abort drops it; each
// change is audited; the checks of both keys are recorded.
func TestStagedRotation(t *testing.T) {
	testpg.ForEachDB(t, func(t *testing.T) {
		m, st, chk := newTestManager(t)
		ctx := context.Background()
		key, pub := newKey(t)
		if _, err := m.AddConnection(ctx, alice, ConnectionSpec{Alias: "web", Host: "h", User: "u", PrivateKey: key,
			HostKeys: []string{hostKeyLine(t)}}, CheckOptions{}); err != nil {
			t.Fatal(err)
		}
		next, nextPub := newKey(t)
		calls := chk.calls
		res, err := m.StageKey(ctx, alice, "web", next, false)
		if err != nil {
			t.Fatal(err)
		}
		if chk.calls != calls || res.Rotation != RotationStaged || res.Conn.Staged == nil ||
			res.Conn.Staged.Fingerprint() != ssh.FingerprintSHA256(nextPub) {
			t.Fatalf("stage: %d checks, %+v; want none, the key staged", chk.calls-calls, res.Conn.Staged)
		}
		if got, _ := st.ConnectionPublicKey(ctx, res.Conn.ID); ssh.FingerprintSHA256(got) != ssh.FingerprintSHA256(pub) {
			t.Error("staging switched the key")
		}
		if _, err := m.StageKey(ctx, alice, "web", key, false); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("staging the key in use: %v; want ErrInvalid", err)
		}

		// Refused while the target rejects it; the outcome is recorded.
		chk.result = recipes.Result{Status: recipes.StatusRejected, Message: "Permission denied (publickey)"}
		res, err = m.CommitStagedKey(ctx, alice, "web", 0)
		var nc *NotCommittedError
		if !errors.As(err, &nc) || res.Stored || !strings.Contains(err.Error(), "rejected") {
			t.Fatalf("commit of a rejected key: %v, stored %v; want a NotCommittedError", err, res.Stored)
		}
		if c, _ := st.ConnectionByAlias(ctx, "web"); c.Staged == nil || c.Staged.Check.Status != store.KeyRejected {
			t.Errorf("staged check after the refused commit: %+v; want rejected recorded", c.Staged)
		}
		// A key check proves both and records both.
		chk.result = recipes.Result{Status: recipes.StatusOK, Message: "ran true"}
		res, err = m.CheckConnection(ctx, "web", 0)
		if err != nil || !res.StagedChecked || res.StagedCheck.Status != recipes.StatusOK || res.Conn.Staged.Check.Status != store.KeyOK {
			t.Fatalf("check: %v, staged %v %+v; want both ok", err, res.StagedChecked, res.StagedCheck)
		}
		res, err = m.CommitStagedKey(ctx, alice, "web", 0)
		if err != nil || !res.Stored || res.Conn.Staged != nil {
			t.Fatalf("commit: %v, %+v; want stored, none staged", err, res.Conn)
		}
		if got, _ := st.ConnectionPublicKey(ctx, res.Conn.ID); ssh.FingerprintSHA256(got) != ssh.FingerprintSHA256(nextPub) {
			t.Error("the commit did not switch the key")
		}
		if _, err := m.CommitStagedKey(ctx, alice, "web", 0); !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), "no staged key") {
			t.Errorf("commit with nothing staged: %v; want ErrInvalid naming it", err)
		}
		if _, err := m.AbortStagedKey(ctx, alice, "web"); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("abort with nothing staged: %v; want ErrInvalid", err)
		}
		if _, err := m.StageKey(ctx, alice, "web", nil, true); err != nil {
			t.Fatal(err)
		}
		if res, err = m.AbortStagedKey(ctx, alice, "web"); err != nil || res.Conn.Staged != nil {
			t.Fatalf("abort: %v %+v; want none staged", err, res.Conn)
		}
		var ops []string
		for _, r := range adminOps(t, st) {
			ops = append(ops, r.Operation)
		}
		all := strings.Join(ops, "\n")
		for _, want := range []string{"conn rotate-key web: staged key " + ssh.FingerprintSHA256(nextPub),
			"conn rotate-key web: key " + ssh.FingerprintSHA256(pub) + " -> " + ssh.FingerprintSHA256(nextPub),
			"(generated)", "dropped the staged key"} {
			if !strings.Contains(all, want) {
				t.Errorf("audit lacks %q:\n%s", want, all)
			}
		}
		if strings.Contains(all, "PRIVATE KEY") {
			t.Error("the audit holds a private key")
		}
	})
}

// TestStagedRotationProduction: on production the commit waits for a
// second admin and is made on approval; a key staged again meanwhile is
// not the one approved, and the approval fails.
func TestStagedRotationProduction(t *testing.T) {
	testpg.ForEachDB(t, func(t *testing.T) {
		r := newDualRig(t)
		ctx := context.Background()
		next, nextPub := newKey(t)
		if _, err := r.m.StageKey(ctx, r.alice, "web", next, false); err != nil {
			t.Fatal(err)
		}
		_, err := r.m.CommitStagedKey(ctx, r.alice, "web", 0)
		held(t, "commit on production", err)
		c, _ := r.st.ConnectionByAlias(ctx, "web")
		if got, _ := r.st.ConnectionPublicKey(ctx, c.ID); ssh.FingerprintSHA256(got) == ssh.FingerprintSHA256(nextPub) {
			t.Fatal("the key switched before a second admin approved")
		}
		approveHeld(t, r.m, r.bob, err)
		if got, _ := r.st.ConnectionPublicKey(ctx, c.ID); ssh.FingerprintSHA256(got) != ssh.FingerprintSHA256(nextPub) {
			t.Error("the approved commit did not switch the key")
		}

		// Staged again after the request: the approval is refused.
		other, _ := newKey(t)
		if _, err := r.m.StageKey(ctx, r.alice, "web", other, false); err != nil {
			t.Fatal(err)
		}
		_, err = r.m.CommitStagedKey(ctx, r.alice, "web", 0)
		req := held(t, "second commit", err)
		if _, err := r.m.StageKey(ctx, r.alice, "web", nil, true); err != nil {
			t.Fatal(err)
		}
		if _, err := r.m.DecideChange(ctx, r.bob, req.ID, true, ""); err == nil {
			t.Error("approving the commit of a key staged over: no error; want it refused")
		}
	})
}

// TestInstallKeyCommands: the remote commands of --install touch only the
// line of the key they name, quote nothing from outside, and keep the file
// private.
func TestInstallKeyCommands(t *testing.T) {
	_, pub := newKey(t)
	blob := keyBlob(pub)
	add := appendKeyCommand(pub, "ssh-ed25519 "+blob+" postern:web")
	rm := removeKeyCommand(pub)
	for _, tt := range []struct {
		name, cmd string
		want      []string
	}{
		{"append", add, []string{"umask 077", "mkdir -p ~/.ssh", "-v b='" + blob + "'", "printf '%s\\n' 'ssh-ed25519 " + blob + " postern:web' >>"}},
		{"remove", rm, []string{"umask 077", "-v b='" + blob + "'", "if($i==b) next", `cat "$t" > "$f"`}},
	} {
		for _, w := range tt.want {
			if !strings.Contains(tt.cmd, w) {
				t.Errorf("%s command %q lacks %q", tt.name, tt.cmd, w)
			}
		}
	}
}

// TestRotationRoles: a viewer or an approver can take no step of a
// rotation; nothing is staged by their attempts.
func TestRotationRoles(t *testing.T) {
	r := newDualRig(t)
	ctx := context.Background()
	next, _ := newKey(t)
	for _, who := range []policy.Actor{r.vera, r.pat} {
		for _, tt := range []struct {
			name string
			step func() (ConnectionResult, error)
		}{
			{"stage", func() (ConnectionResult, error) { return r.m.StageKey(ctx, who, "web", next, false) }},
			{"commit", func() (ConnectionResult, error) { return r.m.CommitStagedKey(ctx, who, "web", 0) }},
			{"abort", func() (ConnectionResult, error) { return r.m.AbortStagedKey(ctx, who, "web") }},
			{"install", func() (ConnectionResult, error) { return r.m.InstallKey(ctx, who, "web", 0) }},
		} {
			if _, err := tt.step(); !errorsAsRole(err) {
				t.Errorf("%s by %s: got %v; want a RoleError", tt.name, who.Name, err)
			}
		}
	}
	if c, err := r.st.ConnectionByAlias(ctx, "web"); err != nil || c.Staged != nil {
		t.Errorf("after the refused steps: staged %+v, %v; want none", c.Staged, err)
	}
}

// fakeRunner is a key checker that also runs commands, as InstallKey
// needs: it records them and fails those that contain fail. With
// rejectNew, a check of any key but current says rejected (the target has
// not taken the new line).
type fakeRunner struct {
	*fakeChecker
	fail      string
	ran       []string
	rejectNew bool
	current   ssh.PublicKey
}

func (f *fakeRunner) Check(ctx context.Context, t recipes.Target, signer ssh.Signer, r *recipes.Recipe) recipes.Result {
	if f.rejectNew && ssh.FingerprintSHA256(signer.PublicKey()) != ssh.FingerprintSHA256(f.current) {
		return recipes.Result{Status: recipes.StatusRejected, Message: "Permission denied (publickey)"}
	}
	return f.fakeChecker.Check(ctx, t, signer, r)
}

func (f *fakeRunner) Run(_ context.Context, _ recipes.Target, _ ssh.Signer, command string) error {
	f.ran = append(f.ran, command)
	if f.fail != "" && strings.Contains(command, f.fail) {
		return errors.New("recipes: the command failed: exit status 1: no awk")
	}
	return nil
}

// TestInstallKeySteps: each step of --install that fails stops it with
// the connection on a working key; only the removal of the old line may
// fail after the switch, which then stands and says so; on production the
// switch waits and the old line stays.
func TestInstallKeySteps(t *testing.T) {
	ok := recipes.Result{Status: recipes.StatusOK, Message: "ran true"}
	rejected := recipes.Result{Status: recipes.StatusRejected, Message: "Permission denied (publickey)"}
	for _, tt := range []struct {
		name      string
		env       store.Env
		check     recipes.Result // every key check's answer
		fail      string         // commands containing it fail
		rejectNew bool           // checks of the new key say rejected
		wantErr   bool
		switched  bool
		staged    bool
		wantRan   int    // commands run on the target
		wantSteps string // in the last step
	}{
		{name: "current key rejected", check: rejected, wantErr: true},
		{name: "append fails", check: ok, fail: "printf", wantErr: true, staged: true, wantRan: 1},
		{name: "new key not proved", check: ok, rejectNew: true, wantErr: true, staged: true, wantRan: 1},
		{name: "all", check: ok, switched: true, wantRan: 2, wantSteps: "removed the old key's line"},
		{name: "removal fails", check: ok, fail: "cmp -s", switched: true, wantRan: 2,
			wantSteps: "could not remove the old key's line (recipes: the command failed: exit status 1: no awk)"},
		{name: "production", env: store.EnvProduction, check: ok, wantErr: true, staged: true, wantRan: 1,
			wantSteps: "the switch waits for a second admin"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m, st, chk := newTestManager(t)
			ctx := context.Background()
			key, pub := newKey(t)
			run := &fakeRunner{fakeChecker: chk, fail: tt.fail, rejectNew: tt.rejectNew, current: pub}
			m.chk = run
			if _, err := m.AddConnection(ctx, alice, ConnectionSpec{Alias: "web", Host: "h", User: "u", PrivateKey: key,
				HostKeys: []string{hostKeyLine(t)}, Env: tt.env}, CheckOptions{}); err != nil {
				t.Fatal(err)
			}
			chk.result = tt.check
			res, err := m.InstallKey(ctx, alice, "web", 0)
			if (err != nil) != tt.wantErr {
				t.Fatalf("InstallKey: %v; want an error %v", err, tt.wantErr)
			}
			c, err := st.ConnectionByAlias(ctx, "web")
			if err != nil {
				t.Fatal(err)
			}
			inUse, err := st.ConnectionPublicKey(ctx, c.ID)
			if err != nil {
				t.Fatal(err)
			}
			if switched := ssh.FingerprintSHA256(inUse) != ssh.FingerprintSHA256(pub); switched != tt.switched {
				t.Errorf("switched to the new key: %v; want %v", switched, tt.switched)
			}
			if staged := c.Staged != nil; staged != tt.staged {
				t.Errorf("a key staged: %v; want %v", staged, tt.staged)
			}
			if len(run.ran) != tt.wantRan {
				t.Errorf("ran %d commands on the target; want %d: %q", len(run.ran), tt.wantRan, run.ran)
			}
			if tt.wantSteps != "" && (len(res.Steps) == 0 || !strings.Contains(res.Steps[len(res.Steps)-1], tt.wantSteps)) {
				t.Errorf("steps %q; want the last to say %q", res.Steps, tt.wantSteps)
			}
		})
	}
}
