package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/postern/postern/internal/testwait"
)

// Running postern for real: the data directory's lock, backup
// and restore while serve runs, and version.

// runUntilExit runs postern as a process of its own with args and returns
// the result and whether it exited on its own before the test's deadline
// (when it is killed).
func runUntilExit(t *testing.T, args ...string) (result, bool) {
	t.Helper()
	ctx := testwait.Context(t)
	cmd := exec.CommandContext(ctx, posternBin, args...)
	cmd.Env = cliEnv()
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run postern %v: %v", args, err)
	}
	return r, ctx.Err() == nil
}

// TestDataDirLock: while a serve runs, a second serve and a demo on its
// data directory exit 1 at once naming the first one's pid, and the admin
// CLI keeps working; once the first stops, the directory is free again.
func TestDataDirLock(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	k := writeKeyFiles(t, "bot", "")
	first := startServe(t, c.data)
	pid := strconv.Itoa(first.cmd.Process.Pid)
	for _, args := range [][]string{
		{"serve", "--data", c.data, "--ssh-listen", "127.0.0.1:0"},
		{"demo", "--dir", c.data, "--ssh-listen", "127.0.0.1:0", "--http-listen", ""},
	} {
		r, ended := runUntilExit(t, args...)
		if !ended {
			t.Fatalf("postern %s kept running beside the first serve", args[0])
		}
		if r.code != 1 || !strings.Contains(r.stderr, "in use by process "+pid) {
			t.Errorf("second %s: exit %d, stderr %q; want 1 and the first serve's pid %s", args[0], r.code, r.stderr, pid)
		}
	}
	// The admin CLI takes no lock.
	c.ok("", "agent", "add", "bot", "--key", k.pub)
	if !strings.Contains(c.ok("", "agent", "list"), "bot") {
		t.Error("agent list beside serve lacks the agent just added")
	}
	if code := first.end(syscall.SIGTERM); code != 0 {
		t.Fatalf("first serve exited %d; want 0", code)
	}
	second := startServe(t, c.data)
	if code := second.end(syscall.SIGTERM); code != 0 {
		t.Errorf("serve after the first stopped: exit %d; want 0", code)
	}
}

// TestBackupRestore: postern backup takes a consistent copy while serve
// runs and agents work; restored into an empty data directory, the copy
// opens with its master key, its audit chain verifies with the same head,
// and its connection's key still proves itself.
func TestBackupRestore(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigConfig{conns: []rigConn{{"web", "dev"}}})
	c := r.cli
	srv := r.serve()
	run := r.ssh("web", "uptime")
	run.wait(t)
	if run.code != 0 {
		t.Fatalf("agent's uptime: exit %d, stderr %q", run.code, run.stderr)
	}

	dest := filepath.Join(t.TempDir(), "backup")
	out := c.ok("", "backup", dest)
	if !strings.Contains(out, "audit chain intact") {
		t.Fatalf("backup: %q; want the copy's chain verified", out)
	}
	for _, f := range []string{"postern.db", "master.key", "ssh_host_ed25519_key"} {
		st, err := os.Stat(filepath.Join(dest, f))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("backup %s: %v, mode %v; want a 0600 file", f, err, st)
		}
	}
	if r := c.run("", "backup", dest); r.code != 2 || !strings.Contains(r.stderr, "not empty") {
		t.Errorf("backup into a used directory: exit %d, %q; want 2, not empty", r.code, r.stderr)
	}
	live := c.ok("", "audit", "verify")
	if code := srv.end(syscall.SIGTERM); code != 0 {
		t.Fatalf("serve: exit %d", code)
	}

	// Restore: the backup's files into an empty data directory.
	restored := &cli{t: t, data: filepath.Join(t.TempDir(), "restored")}
	if err := os.Mkdir(restored.data, 0o700); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dest)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dest, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(restored.data, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	verified := restored.ok("", "audit", "verify")
	if !strings.Contains(verified, "intact") || headOf(verified) != headOf(live) {
		t.Errorf("restored audit verify: %q; want intact with the live head %q (nothing was written after the backup)", verified, headOf(live))
	}
	rows := restored.auditRows()
	found := false
	for _, row := range rows {
		found = found || (row.Operation == "uptime" && row.Decision == "allowed")
	}
	if !found {
		t.Error("the restored audit log lacks the agent's uptime")
	}
	if out := restored.okCheck("conn", "check", "web"); !strings.HasPrefix(out, "web: ok") {
		t.Errorf("conn check on the restored data: %q; want ok (the master key opens the sealed key)", out)
	}
}

// headOf is the head hash in `audit verify`'s output.
func headOf(verify string) string {
	_, head, _ := strings.Cut(strings.TrimSpace(verify), "head ")
	return head
}

// TestVersion: postern version and --version say the same, with the Go
// version of the toolchain that built it. (The test binary that runs them
// is never stamped with a commit: TestBuildVersionOf covers what a commit
// adds.)
func TestVersion(t *testing.T) {
	t.Parallel()
	text := runCLI(t, "", "version")
	flag := runCLI(t, "", "--version")
	if text.code != 0 || flag.code != 0 || text.stdout != flag.stdout {
		t.Fatalf("version: exit %d %q; --version: exit %d %q; want both 0 and the same", text.code, text.stdout, flag.code, flag.stdout)
	}
	var v buildVersion
	r := runCLI(t, "", "version", "-o", "json")
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatal(err)
	}
	if v.Go != runtime.Version() || !strings.Contains(text.stdout, "go:         "+runtime.Version()) {
		t.Errorf("version: Go %q, text %q; want %s (the test and the binary share the toolchain)", v.Go, text.stdout, runtime.Version())
	}
	if v != readBuildVersion() {
		t.Errorf("version -o json: %+v; want the build's %+v", v, readBuildVersion())
	}
}

// TestBuildVersionOf: what the version says of each kind of build.
func TestBuildVersionOf(t *testing.T) {
	t.Parallel()
	vcs := func(modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "0123abcd"},
			{Key: "vcs.time", Value: "2026-01-02T03:04:05Z"}, {Key: "vcs.modified", Value: modified}}
	}
	tests := []struct {
		name string
		bi   *debug.BuildInfo
		want buildVersion
		text string // in the text
	}{
		{"no build information", nil, buildVersion{Version: "(unknown)"}, "commit:     unknown (built outside a git checkout)"},
		{"outside a checkout", &debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Version: "(devel)"}},
			buildVersion{Version: "(devel)", Go: "go1.99"}, "build date: unknown (the commit's)"},
		{"a checkout", &debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Version: "(devel)"}, Settings: vcs("false")},
			buildVersion{Version: "(devel)", Commit: "0123abcd", CommitTime: "2026-01-02T03:04:05Z", Go: "go1.99"},
			"commit:     0123abcd\nbuild date: 2026-01-02T03:04:05Z (the commit's)\ngo:         go1.99\n"},
		{"uncommitted changes", &debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Version: "v1.2.3"}, Settings: vcs("true")},
			buildVersion{Version: "v1.2.3", Commit: "0123abcd", CommitTime: "2026-01-02T03:04:05Z", Modified: true, Go: "go1.99"},
			"postern v1.2.3\ncommit:     0123abcd (with uncommitted changes)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := buildVersionOf(tt.bi, tt.bi != nil)
			if got != tt.want {
				t.Errorf("got %+v; want %+v", got, tt.want)
			}
			if !strings.Contains(got.text(), tt.text) {
				t.Errorf("text %q; want it to contain %q", got.text(), tt.text)
			}
		})
	}
}

// TestServeConfigFile: serve --config takes its settings from the file's
// [serve] table (the data directory included), and a flag overrides the
// file; a file with an unknown key is refused with its line.
func TestServeConfigFile(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	dir := t.TempDir()
	file := writeFile(t, dir, "postern.toml", `[serve]
data = "`+c.data+`"
ssh_listen = "127.0.0.1:0"
http_listen = "127.0.0.1:0"
approval_ttl = "5m"
key_check_timeout = "40s"
command_rate = 7.5
max_pending_per_agent = 4
`)
	p := startPostern(t, "serve", "--config", file)
	m := p.waitLog("postern serving")
	if m["approval_ttl"] != "5m0s" || m["key_check_timeout"] != "40s" || m["data"] != c.data {
		t.Errorf("serve from the file: approval_ttl %v, key_check_timeout %v, data %v; want 5m0s, 40s and %s", m["approval_ttl"], m["key_check_timeout"], m["data"], c.data)
	}
	if m["max_pending_per_agent"] != float64(4) || m["max_pending_per_connection"] != float64(50) {
		t.Errorf("serve from the file: max_pending_per_agent %v, max_pending_per_connection %v; want 4 and the default 50",
			m["max_pending_per_agent"], m["max_pending_per_connection"])
	}
	p.waitLog("web page serving") // http_listen came from the file
	if code := p.stop(); code != 0 {
		t.Fatalf("serve: exit %d", code)
	}
	p = startPostern(t, "serve", "--config", file, "--approval-ttl", "3m")
	if m := p.waitLog("postern serving"); m["approval_ttl"] != "3m0s" {
		t.Errorf("--approval-ttl over the file: %v; want 3m0s", m["approval_ttl"])
	}
	if code := p.stop(); code != 0 {
		t.Fatalf("serve: exit %d", code)
	}
	bad := writeFile(t, dir, "bad.toml", "[serve]\nssh_listen = \"127.0.0.1:0\"\nsssh_listen = \"x\"\n")
	if r := runCLI(t, "", "serve", "--config", bad, "--data", c.data); r.code != 2 || !strings.Contains(r.stderr, "line 3: unknown key serve.sssh_listen") {
		t.Errorf("serve with a misspelt key: exit %d, %q; want 2 naming line 3", r.code, r.stderr)
	}
}
