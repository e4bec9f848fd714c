package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/postern/postern/internal/testsshd"
)

// Staged key rotation against a real OpenSSH sshd (issue 25): a
// production connection's commit waits for a second admin, and --install
// rotates in one command through the current key, removing the old line.

// TestConnRotateProductionWaits: on a production connection a proved
// staged key is not switched to until a second admin approves; then it is.
func TestConnRotateProductionWaits(t *testing.T) {
	t.Parallel()
	sshd := newE2ETarget(t, testsshd.Options{})
	c := newCLI(t)
	c.okCheck("conn", "add", "prod", "--host", sshd.Host, "--port", itoa(sshd.Port), "--user", sshd.User,
		"--key-file", sshd.keyFile, "--host-key", bareKey(sshd.HostKey), "--env", "production")
	old := c.conns()["prod"].PublicKey
	c.ok("", "conn", "rotate-key", "prod", "--generate")
	line := c.conns()["prod"].StagedKey.PublicKey
	sshd.Authorize(t, line)
	r := c.run("", "conn", "rotate-key", "prod", "--commit")
	if r.code != 0 || !strings.Contains(r.stdout, "staged key check: ok") || !strings.Contains(r.stdout+r.stderr, "waits for a second admin") {
		t.Errorf("commit on production: exit %d, %q %q; want 0, the staged key proved, and that it waits for a second admin", r.code, r.stdout, r.stderr)
	}
	if x := c.conns()["prod"]; x.PublicKey != old || x.StagedKey == nil {
		t.Fatalf("before the approval: key %q, staged %+v; want the old key in use and the new one staged", x.PublicKey, x.StagedKey)
	}
	if ids := c.approveChanges(); len(ids) != 1 {
		t.Fatalf("approved %v; want the commit's change request", ids)
	}
	x := c.conns()["prod"]
	if x.PublicKey != line || x.StagedKey != nil {
		t.Errorf("after the approval: key %q, staged %+v; want %q in use, none staged", x.PublicKey, x.StagedKey, line)
	}
	sshd.Revoke(t, sshd.UserKey.PublicKey())
	if out := c.okCheck("conn", "check", "prod"); !strings.HasPrefix(out, "prod: ok") {
		t.Errorf("check with the old key revoked: %q; want ok", out)
	}
}

// TestConnRotateInstall: --generate --install adds the new line to the
// target's authorized_keys through the current key, proves it, switches,
// and removes the old key's line and no other; agents' commands through
// postern work before and after, and after it on a new upstream
// connection: the pooled one made with the old key takes no new session.
func TestConnRotateInstall(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigConfig{})
	tg := r.target
	r.serve()
	oldBlob := blobOf(tg.UserKey.PublicKey())

	// Where sshd does not read ~/.ssh/authorized_keys, the new line
	// added there proves nothing: the commit is refused, the current key
	// stays in use, and agents' commands keep working.
	res := r.cli.run("", "conn", "rotate-key", "target", "--generate", "--install")
	if res.code != 1 || !strings.Contains(res.stderr, "not proved") || !strings.Contains(res.stdout, "added the new key's line") {
		t.Errorf("--install where sshd reads another file: exit %d, %q %q; want 1, the line added, not proved", res.code, res.stdout, res.stderr)
	}
	if x := r.cli.conns()["target"]; !strings.Contains(x.PublicKey, oldBlob) || x.StagedKey == nil || x.StagedKey.CheckStatus != "rejected" {
		t.Fatalf("after the refused --install: %+v; want the old key in use, the new one staged and rejected", x)
	}
	run := r.ssh("target", "echo still")
	run.wait(t)
	if run.code != 0 || run.stdout != "still\n" {
		t.Fatalf("after the refused --install: exit %d, %q %q; want the command to work", run.code, run.stdout, run.stderr)
	}
	r.cli.ok("", "conn", "rotate-key", "target", "--abort")
	if err := os.RemoveAll(filepath.Join(tg.Home, ".ssh")); err != nil {
		t.Fatal(err)
	}

	// The target user's ~/.ssh/authorized_keys (HOME is tg.Home) is the
	// file sshd reads.
	ak := filepath.Join(tg.Dir, "authorized_keys")
	if err := os.MkdirAll(filepath.Join(tg.Home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(ak, filepath.Join(tg.Home, ".ssh", "authorized_keys")); err != nil {
		t.Fatal(err)
	}
	other := writeKeyFiles(t, "other", "")
	tg.Authorize(t, other.pubLine)
	// The upstream connection a command ran on, by its source address
	// (what sshd tells the command in SSH_CLIENT).
	upstream := func(when string) string {
		t.Helper()
		run := r.ssh("target", "echo $SSH_CLIENT")
		run.wait(t)
		if run.code != 0 || len(strings.Fields(run.stdout)) != 3 {
			t.Fatalf("%s: exit %d, %q %q; want SSH_CLIENT", when, run.code, run.stdout, run.stderr)
		}
		return strings.Join(strings.Fields(run.stdout)[:2], ":")
	}
	before := upstream("before the rotation")
	if again := upstream("before the rotation, again"); again != before {
		t.Fatalf("before the rotation the pool answered from %s, then %s; want its client reused", before, again)
	}

	out := r.cli.ok("", "conn", "rotate-key", "target", "--generate", "--install")
	// Before anything else changes the connection (a check records its
	// outcome, which retires pooled clients too).
	if after := upstream("after the rotation"); after == before {
		t.Errorf("after the rotation the command ran on the upstream connection from %s, made with the old key; want a new one", after)
	}
	x := r.cli.conns()["target"]
	if x.StagedKey != nil || strings.Contains(x.PublicKey, oldBlob) {
		t.Fatalf("after --install: %+v; want the new key in use, none staged", x)
	}
	newBlob := strings.Fields(x.PublicKey)[1]
	for _, want := range []string{"current key " + ssh.FingerprintSHA256(tg.UserKey.PublicKey()) + " works",
		"added the new key's line", "proved the new key and switched to it", "removed the old key's line",
		"connection target switched to key "} {
		if !strings.Contains(out, want) {
			t.Errorf("--install printed %q; want %q", out, want)
		}
	}
	b, err := os.ReadFile(ak)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	has := func(blob string) int {
		n := 0
		for _, l := range lines {
			if strings.Contains(l, " "+blob) {
				n++
			}
		}
		return n
	}
	if has(oldBlob) != 0 || has(newBlob) != 1 || has(blobOf(mustParse(t, other.pubLine))) != 1 {
		t.Errorf("authorized_keys after --install:\n%s\nwant the old key gone, the new once, the other lines kept", b)
	}
	if out := r.cli.okCheck("conn", "check", "target"); !strings.HasPrefix(out, "target: ok") {
		t.Errorf("check after --install: %q; want ok", out)
	}
	// The audit has the staging and the commit.
	var ops []string
	for _, row := range adminRows(r.cli.auditRows()) {
		ops = append(ops, row.Operation)
	}
	all := strings.Join(ops, "\n")
	for _, want := range []string{"conn rotate-key target: staged key ", "conn rotate-key target: key "} {
		if !strings.Contains(all, want) {
			t.Errorf("audit lacks %q:\n%s", want, all)
		}
	}
}

// TestConnRotateInstallOldLineStays: where the old key's line cannot be
// removed (the awk the old key's logins find fails), --install still
// switches to the proved new key and exits 0, says that the old line
// stays, and leaves the file as it was but for the new line, with no
// temporary file beside it.
func TestConnRotateInstallOldLineStays(t *testing.T) {
	t.Parallel()
	tg := newE2ETarget(t, testsshd.Options{})
	c := newCLI(t)
	c.addConn(tg, "web")
	// sshd reads the target user's ~/.ssh/authorized_keys.
	ak := filepath.Join(tg.Dir, "authorized_keys")
	dotSSH := filepath.Join(tg.Home, ".ssh")
	if err := os.MkdirAll(dotSSH, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(ak, filepath.Join(dotSSH, "authorized_keys")); err != nil {
		t.Fatal(err)
	}
	// The old key's logins run their command with an awk that fails first
	// in PATH: a file mode would not stop the root these tests may run as.
	shim := t.TempDir()
	if err := os.WriteFile(filepath.Join(shim, "awk"), []byte("#!/bin/sh\necho awk is broken >&2\nexit 2\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	oldLine := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(tg.UserKey.PublicKey())))
	tg.Revoke(t, tg.UserKey.PublicKey())
	tg.Authorize(t, fmt.Sprintf(`environment="HOME=%s",command="PATH=%s:$PATH; export PATH; eval \"$SSH_ORIGINAL_COMMAND\"" %s`,
		tg.Home, shim, oldLine))
	oldBlob := blobOf(tg.UserKey.PublicKey())

	out := c.ok("", "conn", "rotate-key", "web", "--generate", "--install")
	for _, want := range []string{"proved the new key and switched to it", "could not remove the old key's line",
		"awk is broken", "connection web switched to key "} {
		if !strings.Contains(out, want) {
			t.Errorf("--install printed %q; want %q", out, want)
		}
	}
	if n := strings.Count(out, "awk is broken"); n != 1 {
		t.Errorf("--install printed the failed command's output %d times; want once:\n%s", n, out)
	}
	x := c.conns()["web"]
	if x.StagedKey != nil || strings.Contains(x.PublicKey, oldBlob) {
		t.Fatalf("after --install: %+v; want the new key in use, none staged", x)
	}
	newBlob := strings.Fields(x.PublicKey)[1]
	b, err := os.ReadFile(ak)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		blob string
		want int
	}{{oldBlob, 1}, {newBlob, 1}} {
		if got := strings.Count(string(b), " "+tt.blob); got != tt.want {
			t.Errorf("authorized_keys after --install has %d lines with %s; want %d:\n%s", got, tt.blob, tt.want, b)
		}
	}
	left, err := filepath.Glob(filepath.Join(dotSSH, "authorized_keys.postern-*"))
	if err != nil || len(left) != 0 {
		t.Errorf("temporary files left in ~/.ssh: %v %v; want none", left, err)
	}
	if out := c.okCheck("conn", "check", "web"); !strings.HasPrefix(out, "web: ok") {
		t.Errorf("check after --install: %q; want ok", out)
	}
}

func blobOf(k ssh.PublicKey) string { return strings.Fields(string(ssh.MarshalAuthorizedKey(k)))[1] }

func mustParse(t *testing.T, line string) ssh.PublicKey {
	t.Helper()
	k, _, _, _, err := ssh.ParseAuthorizedKey([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	return k
}
