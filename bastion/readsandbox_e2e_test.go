package bastion

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/postern/postern/internal/e2e"
	"github.com/postern/postern/internal/testsshd"
	"github.com/postern/postern/metrics"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/readsandbox"
	"github.com/postern/postern/store"
)

// These tests run read commands through postern to a real sshd target
// whose login shell runs them in the read sandbox, with bubblewrap and
// with unshare (package readsandbox), the way `conn check` records a
// target's probe.

// needSandboxTools ends the test unless the target machine (this one) has
// bubblewrap and util-linux's unshare, mount and setpriv.
func needSandboxTools(t *testing.T) {
	t.Helper()
	e2e.Tool(t, "bwrap", "bubblewrap")
	for _, p := range []string{"unshare", "mount", "setpriv"} {
		e2e.Tool(t, p, "util-linux")
	}
}

// setProbe records what a probe of connection alias found, as conn check
// does.
func (h *harness) setProbe(alias string, found store.SandboxFound, msg string) {
	h.t.Helper()
	if _, err := h.st.SetSandboxProbe(context.Background(), alias, store.SandboxProbe{Found: found, Message: msg}); err != nil {
		h.t.Fatal(err)
	}
}

// setReadSandbox changes connection alias's read sandbox setting.
func (h *harness) setReadSandbox(alias string, rs store.ReadSandbox, reason string) {
	h.t.Helper()
	if _, err := h.st.UpdateConnection(context.Background(), store.Unaudited(), alias, store.ConnectionChange{ReadSandbox: &rs, ReadSandboxReason: reason}); err != nil {
		h.t.Fatal(err)
	}
}

// allRead is the tests' classifier that calls every command read.
func allRead(string) policy.Class { return policy.Read }

// TestSecondLineAlone: with a classifier that calls every command read and
// a grant that allows reads only, commands that write (rm, > file, the
// /dev/stdout reopening of a file opened for reading, git config, touch, a
// write inside $(…)) change nothing on a real target with the sandbox on,
// under bubblewrap and under unshare, and do change it with the read
// sandbox off: the sandbox alone stops them.
func TestSecondLineAlone(t *testing.T) {
	t.Parallel()
	needSandboxTools(t)
	e2e.Tool(t, "git", "git")
	h := newHarness(t, harnessOpts{server: func(s *Server) { s.classifyOverride = allRead }})
	dir := t.TempDir()
	path := func(name string) string { return filepath.Join(dir, name) }
	bashrc := filepath.Join(h.target.Home, ".bashrc")
	write := func(p, content string) {
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(path("victim"), "keep me\n")
	write(path("file"), "original\n")
	// A comment only: bash reads ~/.bashrc for commands sshd runs.
	write(bashrc, "# the agent must not empty this\n")
	if out, err := exec.Command("git", "init", "-q", path("repo")).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v: %s", err, out)
	}
	commands := []string{
		"rm " + path("victim"),
		"echo owned > " + path("file"),
		"cat 1<~/.bashrc >/dev/stdout",
		"git -C " + path("repo") + " config user.name agent",
		"touch " + path("new"),
		"echo $(echo x > " + path("subst") + ")",
	}
	c := h.client()
	defer c.Close()
	// runAll runs every command and returns their stderr.
	runAll := func() []string {
		var errs []string
		for _, cmd := range commands {
			_, stderr, _, err := runSession(c, "web "+cmd)
			if err != nil {
				t.Fatalf("%s: %v (stderr %q)", cmd, err, stderr)
			}
			errs = append(errs, stderr)
		}
		return errs
	}
	before := snapshotDir(t, dir) + snapshotDir(t, h.target.Home)
	for _, m := range []store.SandboxFound{store.SandboxBwrap, store.SandboxUnshare} {
		h.setProbe("web", m, string(m)+": works")
		// Each command ran in the sandbox, and its write failed there
		// (EROFS): none of them was stopped by a sandbox that did not
		// start, or by anything else.
		for i, stderr := range runAll() {
			if strings.Contains(stderr, "did not start") || !strings.Contains(stderr, "Read-only file system") {
				t.Errorf("in %s, %q: stderr %q; want the command run in the sandbox, its write failing with EROFS", m, commands[i], stderr)
			}
		}
		if after := snapshotDir(t, dir) + snapshotDir(t, h.target.Home); after != before {
			t.Errorf("in %s, the writes went through:\nbefore %s\nafter  %s", m, before, after)
		}
		// A read that runs shows it ran in the sandbox: its mounts are
		// all read-only.
		if out, _, code, _ := runSession(c, `web grep -c ' / / ro,' /proc/self/mountinfo`); code != 0 || out != "1\n" {
			t.Errorf("mounts in %s: %q, exit %d; want / read-only", m, out, code)
		}
	}

	// The same commands with the sandbox off do write: the test can fail.
	h.setReadSandbox("web", store.ReadSandboxOff, "the test shows what it stops")
	runAll()
	for p, want := range map[string]string{path("file"): "owned\n", bashrc: ""} {
		if got, err := os.ReadFile(p); err != nil || string(got) != want {
			t.Errorf("with the sandbox off, %s = %q, %v; want %q", p, got, err, want)
		}
	}
	for _, p := range []string{path("new"), path("subst")} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("with the sandbox off, %s was not made: %v", p, err)
		}
	}
	if _, err := os.Stat(path("victim")); err == nil {
		t.Errorf("with the sandbox off, rm did not remove %s", path("victim"))
	}
	if out, _ := exec.Command("git", "-C", path("repo"), "config", "user.name").Output(); string(out) != "agent\n" {
		t.Errorf("with the sandbox off, git config user.name = %q; want agent", out)
	}
	// Every command was allowed as read; those of the last round say in
	// the audit that they ran without the sandbox, and why.
	rows := h.auditRowsWhere(func(r store.AuditRow) bool { return r.ConnectionAlias == "web" })
	off := 0
	for _, r := range rows {
		if r.Decision != string(policy.Allowed) || r.Class != string(policy.Read) {
			t.Errorf("audit row %q: %s %s; want allowed read", r.Operation, r.Decision, r.Class)
		}
		if strings.Contains(r.Reason, "no read sandbox: off for this connection (the test shows what it stops)") {
			off++
		}
	}
	if off != len(commands) {
		t.Errorf("%d audit rows say the sandbox was off; want %d", off, len(commands))
	}
}

// snapshotDir describes every file under dir: name, mode, size, content
// and modification time.
func snapshotDir(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		b.WriteString(p + " " + fi.Mode().String() + " " + fi.ModTime().String())
		if fi.Mode().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			b.WriteString(" " + string(data))
		}
		b.WriteString("; ")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// auditRowsWhere returns the stored audit rows that keep. A command that
// ended is audited before its session ends (relay's beforeExit), so the
// rows of the sessions that returned are there.
func (h *harness) auditRowsWhere(keep func(store.AuditRow) bool) []store.AuditRow {
	h.t.Helper()
	rows, err := h.st.ListAudit(context.Background(), store.AuditFilter{})
	if err != nil {
		h.t.Fatal(err)
	}
	var out []store.AuditRow
	for _, r := range rows {
		if keep(r) {
			out = append(out, r)
		}
	}
	return out
}

// fakeBin makes a directory for PATH with the named programs of this
// machine linked in, and fakes given as sh scripts.
func fakeBin(t *testing.T, real []string, fakes map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range real {
		p, err := exec.LookPath(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(p, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	for name, script := range fakes {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// addPathConnection adds connection alias to h's target, logging in with a
// key whose logins have PATH path (testsshd.PathKey), in env, and grants
// the agent reads on it.
func (h *harness) addPathConnection(alias, path string, env store.Env) {
	h.t.Helper()
	keyPEM, _ := h.target.PathKey(h.t, path)
	ctx := context.Background()
	if _, err := h.st.CreateConnection(ctx, store.Unaudited(), store.NewConnection{Alias: alias, Host: h.target.Host, Port: h.target.Port,
		User: h.target.User, PrivateKey: keyPEM, HostKeys: []string{h.target.KnownHostsLine}, Env: env}); err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.st.SetGrant(ctx, store.Unaudited(), "agent1", alias, store.DefaultRules()); err != nil {
		h.t.Fatal(err)
	}
}

// TestReadSandboxRequireAndAuto: on a target where no sandbox works (its
// bwrap and unshare fail as they do without user namespaces), require
// refuses reads with the reason and runs nothing, auto runs them and the
// audit says they relied on the classifier alone; a target recorded as
// having bwrap whose bwrap no longer works fails the read closed with
// postern's line, the command not run; and a target without bubblewrap
// whose unshare works runs reads read-only under unshare. The refused read
// and the one without a sandbox are counted as such.
func TestReadSandboxRequireAndAuto(t *testing.T) {
	t.Parallel()
	needSandboxTools(t)
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	// A target of its own: path keys are authorized on it.
	h := newHarness(t, harnessOpts{target: &testsshd.Options{}, config: func(c *Config) { c.Metrics = m }})
	broken := fakeBin(t, nil, map[string]string{
		"bwrap":   `echo "bwrap: No permissions to create new namespace, likely because the kernel does not allow non-privileged user namespaces." >&2; exit 1`,
		"unshare": `echo "unshare: unshare failed: Operation not permitted" >&2; exit 1`,
	})
	h.addPathConnection("nons", broken+":/usr/local/bin:/usr/bin:/bin", store.EnvProduction)
	noBwrap := fakeBin(t, []string{"unshare", "mount", "setpriv", "cat", "grep"}, nil)
	h.addPathConnection("nobwrap", noBwrap, store.EnvDev)
	c := h.client()
	defer c.Close()
	run := func(cmd string) (string, string, int) {
		t.Helper()
		stdout, stderr, code, err := runSession(c, cmd)
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		return stdout, stderr, code
	}

	why := "bwrap: did not start: bwrap: No permissions to create new namespace; unshare: did not start: unshare: unshare failed: Operation not permitted"
	h.setProbe("nons", store.SandboxNone, why)
	h.setReadSandbox("nons", store.ReadSandboxRequire, "")
	out, errOut, code := run("nons echo RAN")
	wantRefusal := "postern: refused, nothing ran: reads on nons must run read-only (read sandbox: require), and no sandbox works on the target (" + why + ")\r\n"
	if code != ExitRefused || out != "" || errOut != wantRefusal {
		t.Errorf("require, none works: exit %d, stdout %q, stderr %q; want %d, nothing, %q", code, out, errOut, ExitRefused, wantRefusal)
	}
	if row := h.lastAudit("nons", 1); row.Decision != string(policy.Denied) || !strings.Contains(row.Reason, "must run read-only") {
		t.Errorf("audit of the refused read: %s %q; want denied, saying why", row.Decision, row.Reason)
	}

	h.setReadSandbox("nons", store.ReadSandboxAuto, "")
	out, errOut, code = run("nons echo RAN")
	if code != 0 || out != "RAN\n" || errOut != "" {
		t.Errorf("auto, none works: exit %d, stdout %q, stderr %q; want the read run", code, out, errOut)
	}
	if row := h.lastAudit("nons", 2); row.Decision != string(policy.Allowed) || !strings.Contains(row.Reason, "no read sandbox: no sandbox works on the target") {
		t.Errorf("audit of the read without a sandbox: %s %q; want allowed, saying it relied on the classifier alone", row.Decision, row.Reason)
	}

	// The refused read and the one on the classifier alone are counted
	// as such.
	for label, want := range map[string]float64{"refused": 1, "none": 1, "bwrap": 0, "unshare": 0} {
		if got := counter(t, reg, "postern_read_commands_total", label); got != want {
			t.Errorf("postern_read_commands_total{sandbox=%q} = %v; want %v", label, got, want)
		}
	}

	// A probe that is out of date: the target's bwrap no longer works.
	h.setProbe("nons", store.SandboxBwrap, "bwrap: works")
	out, errOut, code = run("nons echo RAN")
	if code != readsandbox.ExitFailed || strings.Contains(out, "RAN") ||
		!strings.Contains(errOut, "No permissions to create new namespace") ||
		!strings.HasSuffix(errOut, "postern: the read-only sandbox (bwrap) did not start on the target, so the command did not run\n") {
		t.Errorf("bwrap recorded but broken: exit %d, stdout %q, stderr %q; want %d, not run, bwrap's message then postern's line",
			code, out, errOut, readsandbox.ExitFailed)
	}

	// Without bubblewrap, unshare.
	h.setProbe("nobwrap", store.SandboxUnshare, "bwrap: not installed; unshare: works")
	out, errOut, code = run(`nobwrap cat /etc/hostname; grep -c ' / / ro,' /proc/self/mountinfo`)
	if host, _ := os.ReadFile("/etc/hostname"); code != 0 || out != string(host)+"1\n" || errOut != "" {
		t.Errorf("under unshare: exit %d, stdout %q, stderr %q; want the read's output and / read-only", code, out, errOut)
	}
}

// TestServerSideReadsInSandbox: the server side of the agent's own tools'
// reads (git clone and a shallow clone run git-upload-pack, rsync's pull
// rsync --server --sender, scp -O's download scp -f), classified read by
// the real classifier, run in the read sandbox, under bubblewrap and under
// unshare, and work there: the read-only view is enough for each of them.
// The counter of reads by sandbox says which one each ran in.
func TestServerSideReadsInSandbox(t *testing.T) {
	t.Parallel()
	needSandboxTools(t)
	requireTool(t, "git", "git")
	requireTool(t, "rsync", "rsync")
	requireTool(t, "scp", "openssh-client")
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, harnessOpts{config: func(c *Config) { c.Metrics = m }})
	base := t.TempDir()
	repo := filepath.Join(base, "repo.git")
	mustRun(t, base, gitEnv, "git", "init", "-q", "--bare", "-b", "main", repo)
	seed := filepath.Join(base, "seed")
	mustRun(t, base, gitEnv, "git", "init", "-q", "-b", "main", seed)
	for _, msg := range []string{"first", "second"} {
		mustRun(t, seed, gitEnv, "git", "commit", "-q", "--allow-empty", "-m", msg)
	}
	mustRun(t, seed, gitEnv, "git", "push", "-q", repo, "main")
	remote := filepath.Join(base, "files")
	if err := os.MkdirAll(filepath.Join(remote, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"a.txt": "alpha\n", "sub/b.txt": "beta\n"} {
		if err := os.WriteFile(filepath.Join(remote, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	before := snapshotDir(t, base)
	gitSSH := append([]string{"GIT_SSH_COMMAND=" + h.sshCommand()}, gitEnv...)
	url := "ssh://web@127.0.0.1" + repo
	for _, mech := range []store.SandboxFound{store.SandboxBwrap, store.SandboxUnshare} {
		h.setProbe("web", mech, string(mech)+": works")
		local := t.TempDir()
		mustRun(t, local, gitSSH, "git", "-c", "protocol.version=2", "clone", "-q", url, "full")
		mustRun(t, local, gitSSH, "git", "-c", "protocol.version=2", "clone", "-q", "--depth", "1", url, "shallow")
		for dir, want := range map[string]string{"full": "second\nfirst\n", "shallow": "second\n"} {
			if got := mustRun(t, filepath.Join(local, dir), gitEnv, "git", "log", "--format=%s"); got != want {
				t.Errorf("in %s, git clone %s: log %q; want %q", mech, dir, got, want)
			}
		}
		mustRun(t, local, nil, "rsync", "-a", "-e", h.sshCommand(), "web@127.0.0.1:"+remote+"/", filepath.Join(local, "rsync")+"/")
		mustRun(t, local, nil, "scp", append(append([]string{"-O"}, h.clientOpts("-P")...), "web@127.0.0.1:"+filepath.Join(remote, "a.txt"), filepath.Join(local, "scp.txt"))...)
		for name, want := range map[string]string{"rsync/a.txt": "alpha\n", "rsync/sub/b.txt": "beta\n", "scp.txt": "alpha\n"} {
			if got, err := os.ReadFile(filepath.Join(local, name)); err != nil || string(got) != want {
				t.Errorf("in %s, %s = %q, %v; want %q", mech, name, got, err, want)
			}
		}
		// Two clones, one rsync, one scp: four reads, each counted
		// before the agent sees its output.
		if got := counter(t, reg, "postern_read_commands_total", string(mech)); got != 4 {
			t.Errorf("reads counted in %s: %v; want 4", mech, got)
		}
	}
	if got := counter(t, reg, "postern_read_commands_total", "none"); got != 0 {
		t.Errorf("reads counted without a sandbox: %v; want 0", got)
	}
	if after := snapshotDir(t, base); after != before {
		t.Errorf("the reads changed the target's files:\nbefore %s\nafter  %s", before, after)
	}
}
