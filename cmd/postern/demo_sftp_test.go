package main

import (
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/postern/postern/internal/e2e"
	"github.com/postern/postern/internal/testwait"
)

// TestDemoSFTP runs the README's quick-start sftp and scp lines against
// `postern demo` with the real OpenSSH clients: a listing and a get run at
// once (read), the scp upload waits for an approval (write), lands in the
// demo target's scratch directory once approved, and every operation is
// audited with the target's answer.
func TestDemoSFTP(t *testing.T) {
	t.Parallel()
	requireSSHClient(t)
	for _, tool := range []string{"sftp", "scp"} {
		e2e.Tool(t, tool, "openssh-client")
	}
	dir := filepath.Join(t.TempDir(), "demo")
	d := startDemo(t, dir)
	_, port, err := net.SplitHostPort(d.addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testwait.Context(t)
	// The README's options, plus what a test needs: no user config, no
	// prompt.
	opts := []string{"-F", "/dev/null", "-o", "BatchMode=yes", "-i", filepath.Join(dir, "agent_ed25519"), "-P", port,
		"-o", "IdentitiesOnly=yes", "-o", "UserKnownHostsFile=" + filepath.Join(dir, "known_hosts")}
	run := func(name string, args ...string) (string, int) {
		cmd := exec.CommandContext(ctx, name, append(append([]string{}, opts...), args...)...)
		cmd.Env = cliEnv()
		cmd.Dir = t.TempDir()
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return string(out), ee.ExitCode()
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return string(out), 0
	}

	root := filepath.Join(dir, "target-root")
	if err := os.WriteFile(filepath.Join(root, "readme.txt"), []byte("on the target\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	local := t.TempDir()
	batch := filepath.Join(local, "batch")
	os.WriteFile(batch, []byte("ls\nget readme.txt "+local+"/got.txt\n"), 0o600)
	if out, code := run("sftp", "-b", batch, "demo@127.0.0.1"); code != 0 || !strings.Contains(out, "readme.txt") {
		t.Fatalf("sftp ls and get: exit %d, output %q; want 0 and the listing\npostern stderr:\n%s", code, out, d.stderrText())
	}
	if b, err := os.ReadFile(filepath.Join(local, "got.txt")); err != nil || string(b) != "on the target\n" {
		t.Errorf("got.txt: %q, %v; want the target's file", b, err)
	}

	// The upload waits for an approval.
	notes := filepath.Join(local, "notes.txt")
	os.WriteFile(notes, []byte("from the agent\n"), 0o600)
	type result struct {
		out  string
		code int
	}
	up := make(chan result, 1)
	go func() {
		out, code := run("scp", notes, "demo@127.0.0.1:")
		up <- result{out, code}
	}()
	// postern logs the wait once the agent has been told of it.
	id, _ := d.waitLog("waiting for approval")["approval"].(string)
	c := &cli{t: t, data: dir}
	var pending []struct{ ID, Operation string }
	if err := json.Unmarshal([]byte(c.ok("", "approvals", "list", "-o", "json")), &pending); err != nil {
		t.Fatal(err)
	}
	if len(pending) != 1 || pending[0].ID != id || !strings.HasPrefix(pending[0].Operation, `sftp put "`+root) {
		t.Fatalf("pending approvals %+v; want one, %s for the upload\npostern stderr:\n%s", pending, id, d.stderrText())
	}
	c.ok("", "approvals", "approve", id, "--as", "admin")
	r := testwait.Recv(t, "the scp upload to end", up)
	if r.code != 0 || !strings.Contains(r.out, id) {
		t.Errorf("scp: exit %d, output %q; want 0 and the waiting line", r.code, r.out)
	}
	b, err := os.ReadFile(filepath.Join(root, "notes.txt"))
	if err != nil || string(b) != "from the agent\n" {
		t.Errorf("notes.txt in the target's directory: %q, %v", b, err)
	}
	// Every SFTP row has the target's answer as its exit status.
	var rows []struct {
		Kind       string
		Decision   string
		Operation  string
		ExitStatus *int `json:"exit_status"`
	}
	if err := json.Unmarshal([]byte(c.ok("", "audit", "-o", "json")), &rows); err != nil {
		t.Fatal(err)
	}
	sftpRows := 0
	for _, row := range rows {
		if row.Kind != "sftp" {
			continue
		}
		sftpRows++
		if (row.Decision == "allowed" || row.Decision == "approved") && row.ExitStatus == nil {
			t.Errorf("audit row %q %s with no outcome", row.Operation, row.Decision)
		}
	}
	if sftpRows == 0 {
		t.Error("no sftp audit rows")
	}
	if code := d.stop(); code != 0 {
		t.Errorf("SIGTERM: got exit %d; want 0", code)
	}
}
