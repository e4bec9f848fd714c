package bastion

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/postern/postern/internal/e2e"
	"github.com/postern/postern/internal/testwait"
	"github.com/postern/postern/store"
)

// sshCommand is the ssh client line git, rsync and scp use to reach the
// bastion as alias web.
func (h *harness) sshCommand() string {
	return "ssh " + strings.Join(h.clientOpts("-p"), " ")
}

func requireTool(t testing.TB, name, pkg string) {
	t.Helper()
	e2e.Tool(t, name, pkg)
}

func runTool(t *testing.T, dir string, env []string, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(testwait.Context(t), name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func mustRun(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	out, err := runTool(t, dir, env, name, args...)
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return out
}

var gitEnv = []string{"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_NOSYSTEM=1", "HOME=/nonexistent"}

// TestGitThroughBastion: clone is read (allowed by the default grant), push
// is write (denied, then allowed), and git keeps protocol v2 because
// GIT_PROTOCOL is forwarded.
func TestGitThroughBastion(t *testing.T) {
	t.Parallel()
	requireTool(t, "git", "git")
	for _, allowWrite := range []bool{false, true} {
		rules := store.DefaultRules()
		if allowWrite {
			rules.Write = store.RuleAllow
		}
		h := newHarness(t, harnessOpts{rules: rules}) // the shared target accepts GIT_PROTOCOL
		base := t.TempDir()
		repo := filepath.Join(base, "repo.git")
		mustRun(t, base, gitEnv, "git", "init", "-q", "--bare", "-b", "main", repo)
		seed := filepath.Join(base, "seed")
		mustRun(t, base, gitEnv, "git", "init", "-q", "-b", "main", seed)
		mustRun(t, seed, gitEnv, "git", "commit", "-q", "--allow-empty", "-m", "first")
		mustRun(t, seed, gitEnv, "git", "push", "-q", repo, "main")

		env := append([]string{"GIT_SSH_COMMAND=" + h.sshCommand()}, gitEnv...)
		url := "ssh://web@127.0.0.1" + repo
		clone := filepath.Join(base, "clone")
		trace := mustRun(t, base, append(env, "GIT_TRACE_PACKET=1"), "git", "-c", "protocol.version=2", "clone", url, clone)
		if !strings.Contains(trace, "version 2") {
			t.Errorf("clone did not speak protocol v2 (GIT_PROTOCOL not forwarded?); trace:\n%.2000s", trace)
		}
		mustRun(t, clone, gitEnv, "git", "commit", "-q", "--allow-empty", "-m", "second")
		out, err := runTool(t, clone, env, "git", "push", "-q", "origin", "main")
		head := strings.TrimSpace(mustRun(t, repo, gitEnv, "git", "log", "--format=%s", "-1", "main"))
		if allowWrite {
			if err != nil || head != "second" {
				t.Errorf("allowed push: err %v, remote head %q; want nil and %q\n%s", err, head, "second", out)
			}
		} else {
			if err == nil || head != "first" {
				t.Errorf("denied push: err %v, remote head %q; want an error and %q unchanged", err, head, "first")
			}
			if !strings.Contains(out, "denied") {
				t.Errorf("denied push output %q; want postern's denial", out)
			}
		}
	}
}

// TestRsyncThroughBastion: pulling is read, pushing is write.
func TestRsyncThroughBastion(t *testing.T) {
	t.Parallel()
	requireTool(t, "rsync", "rsync")
	h := newHarness(t, harnessOpts{rules: store.Rules{Read: store.RuleAllow, Write: store.RuleAllow, Destructive: store.RuleDeny}})
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "a.txt"), []byte("alpha\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	mustRun(t, dst, nil, "rsync", "-a", "-e", h.sshCommand(), "web@127.0.0.1:"+src+"/", dst+"/")
	if b, err := os.ReadFile(filepath.Join(dst, "a.txt")); err != nil || string(b) != "alpha\n" {
		t.Fatalf("pulled a.txt = %q, %v; want alpha", b, err)
	}
	up := t.TempDir()
	if err := os.WriteFile(filepath.Join(dst, "b.txt"), []byte("beta\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, dst, nil, "rsync", "-a", "-e", h.sshCommand(), dst+"/", "web@127.0.0.1:"+up+"/")
	if b, err := os.ReadFile(filepath.Join(up, "b.txt")); err != nil || string(b) != "beta\n" {
		t.Fatalf("pushed b.txt = %q, %v; want beta", b, err)
	}
	// --delete is destructive: denied, and nothing on the target goes.
	os.Remove(filepath.Join(dst, "a.txt"))
	if out, err := runTool(t, dst, nil, "rsync", "-a", "--delete", "-e", h.sshCommand(), dst+"/", "web@127.0.0.1:"+up+"/"); err == nil {
		t.Fatalf("rsync --delete succeeded; want it denied\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(up, "a.txt")); err != nil {
		t.Errorf("a.txt gone from the target after a denied rsync --delete: %v", err)
	}
}

// TestLegacySCPThroughBastion: scp -O uses scp -f (read) and scp -t (write)
// on the target.
func TestLegacySCPThroughBastion(t *testing.T) {
	t.Parallel()
	requireTool(t, "scp", "openssh-client")
	h := newHarness(t, harnessOpts{})
	remote := t.TempDir()
	if err := os.WriteFile(filepath.Join(remote, "r.txt"), []byte("remote\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	local := t.TempDir()
	args := append([]string{"-O"}, h.clientOpts("-P")...)
	mustRun(t, local, nil, "scp", append(args, "web@127.0.0.1:"+filepath.Join(remote, "r.txt"), local+"/")...)
	if b, err := os.ReadFile(filepath.Join(local, "r.txt")); err != nil || string(b) != "remote\n" {
		t.Fatalf("scp -O download = %q, %v; want remote", b, err)
	}
	// Upload is write: the default grant denies it.
	if err := os.WriteFile(filepath.Join(local, "l.txt"), []byte("local\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := runTool(t, local, nil, "scp", append(args, filepath.Join(local, "l.txt"), "web@127.0.0.1:"+remote+"/")...); err == nil {
		t.Fatalf("scp -O upload succeeded under a read-only grant\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(remote, "l.txt")); !os.IsNotExist(err) {
		t.Errorf("l.txt exists on the target after a denied upload (stat err %v)", err)
	}
}
