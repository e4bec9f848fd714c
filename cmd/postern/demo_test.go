package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/postern/postern/internal/e2e"
	"github.com/postern/postern/internal/testwait"
)

// demoRun is one running `postern demo` and what it printed.
type demoRun struct {
	*bgPostern
	dir     string
	out     []string // the instruction lines
	addr    string   // the bastion, from the "bastion" line
	sshLine []string // the printed ssh lines, in order
	approve string   // the printed approve line
	webURL  string   // from the "web page" line
	certFP  string   // the web certificate's SHA-256, AA:BB:... as printed
	adminPW string   // the admin's password from the "admin" line; never logged
}

// startDemo runs postern demo on a free port and reads its instructions.
// Its approvals and an agent's handshake may take until the test's
// deadline.
func startDemo(t *testing.T, dir string) *demoRun {
	t.Helper()
	p := startPostern(t, "demo", "--dir", dir, "--ssh-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0",
		"--approval-ttl", outlast(t), "--handshake-timeout", outlast(t))
	d := &demoRun{bgPostern: p, dir: dir}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(p.stdout)
		for sc.Scan() {
			lines <- sc.Text()
			if strings.HasPrefix(sc.Text(), "Ctrl-C stops") {
				return
			}
		}
	}()
	deadline := time.NewTimer(testwait.Remaining(t))
	defer deadline.Stop()
	for done := false; !done; {
		select {
		case l, ok := <-lines:
			if !ok {
				done = true
				break
			}
			d.out = append(d.out, l)
		case <-deadline.C:
			t.Fatalf("no instructions by the test's deadline; stdout %q; stderr:\n%s", redactPasswords(d.out), p.stderrText())
		}
	}
	for _, l := range d.out {
		f := strings.Fields(l)
		switch {
		case len(f) >= 2 && f[0] == "bastion":
			d.addr = f[1]
		case len(f) > 0 && f[0] == "ssh":
			d.sshLine = append(d.sshLine, strings.TrimSpace(l))
		case strings.Contains(l, "approvals approve ID --as admin --data"):
			d.approve = strings.TrimSpace(l)
		case len(f) >= 6 && f[0] == "web" && f[1] == "page":
			d.webURL, d.certFP = f[2], strings.TrimSuffix(f[len(f)-1], ")")
		case len(f) >= 4 && f[0] == "admin" && f[1] == "admin" && f[2] == "password":
			d.adminPW = f[3]
		}
	}
	if d.addr == "" || len(d.sshLine) != 4 || d.approve == "" || d.webURL == "" || d.certFP == "" || d.adminPW == "" {
		// The output holds the admin password: say what is missing, not it.
		t.Fatalf("instructions: got bastion %q, %d ssh lines, approve line %q, web page %q (certificate %q), password given %v; "+
			"want all of them\nstderr:\n%s", d.addr, len(d.sshLine), d.approve, d.webURL, d.certFP, d.adminPW != "", p.stderrText())
	}
	return d
}

// requireSSHClient finds the OpenSSH client, skipping without it (failing under
// POSTERN_E2E=1, where the end-to-end tests must run).
func requireSSHClient(t *testing.T) {
	t.Helper()
	e2e.Tool(t, "ssh", "openssh-client")
}

// runPrinted runs a printed line with sh, as a user pasting it would, with
// OpenSSH told to ignore the user's config and never prompt; ctx kills it.
// It is safe to call from any goroutine: a failure to run sh at all is exit
// status -1.
func runPrinted(ctx context.Context, line string) (stdout, stderr string, code int) {
	line = strings.Replace(line, "ssh ", "ssh -F /dev/null -o BatchMode=yes ", 1)
	cmd := exec.CommandContext(ctx, "sh", "-c", line)
	cmd.Env = cliEnv()
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		return o.String(), e.String() + err.Error(), -1
	}
	return o.String(), e.String(), code
}

// TestDemoSetup checks what postern demo leaves in its directory and
// prints, and that a second run re-uses it.
func TestDemoSetup(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "demo dir") // a space: the lines must quote it
	d := startDemo(t, dir)

	for _, f := range []struct {
		name string
		mode os.FileMode
	}{{"agent_ed25519", 0o600}, {"agent_ed25519.pub", 0o644}, {"known_hosts", 0o644}, {"demo_target_host_ed25519_key", 0o600}, {"target-root", os.ModeDir | 0o700}} {
		st, err := os.Stat(filepath.Join(dir, f.name))
		if err != nil {
			t.Errorf("%s: %v", f.name, err)
			continue
		}
		if st.Mode()&(os.ModeDir|os.ModePerm) != f.mode {
			t.Errorf("%s: got mode %v; want %v", f.name, st.Mode(), f.mode)
		}
	}
	pub, err := os.ReadFile(filepath.Join(dir, "agent_ed25519.pub"))
	if err != nil {
		t.Fatal(err)
	}
	agentKey, _, _, _, err := ssh.ParseAuthorizedKey(pub)
	if err != nil {
		t.Fatalf("agent_ed25519.pub: %v", err)
	}
	kh, err := os.ReadFile(filepath.Join(dir, "known_hosts"))
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := strings.Cut(d.addr, ":")
	if !strings.HasPrefix(string(kh), "[127.0.0.1]:"+port+" ssh-ed25519 ") {
		t.Errorf("known_hosts: got %q; want [127.0.0.1]:%s ssh-ed25519 ...", kh, port)
	}
	if want := "-p " + port + " 127.0.0.1 demo uptime"; !strings.HasSuffix(d.sshLine[0], want) {
		t.Errorf("first ssh line: got %q; want it to end %q", d.sshLine[0], want)
	}
	if !strings.Contains(d.sshLine[0], "'"+filepath.Join(dir, "agent_ed25519")+"'") {
		t.Errorf("first ssh line: got %q; want the key path quoted", d.sshLine[0])
	}

	c := &cli{t: t, data: dir}
	var conns []struct {
		Alias, Host, User, Env string
		Port                   int
	}
	json.Unmarshal([]byte(c.ok("", "conn", "list", "-o", "json")), &conns)
	var grants []struct{ Agent, Connection, Read, Write, Destructive string }
	json.Unmarshal([]byte(c.ok("", "grant", "list", "-o", "json")), &grants)
	if len(conns) != 1 || conns[0].Alias != "demo" || conns[0].Host != "127.0.0.1" || conns[0].Env != "dev" || conns[0].User == "" {
		t.Errorf("connections: got %+v; want demo on 127.0.0.1, dev", conns)
	}
	if len(grants) != 1 || grants[0] != (struct{ Agent, Connection, Read, Write, Destructive string }{"demo-agent", "demo", "allow", "ask", "ask"}) {
		t.Errorf("grants: got %+v; want demo-agent on demo allow/ask/ask", grants)
	}
	firstTargetPort := conns[0].Port
	// The set-up is in the audit log as the OS account's changes, one row
	// each, and the chain holds.
	var setup []string
	for _, row := range adminRows(c.auditRows()) {
		if len(row.Deciders) != 1 || !strings.HasPrefix(row.Deciders[0], "cli:") {
			t.Errorf("set-up row %q: deciders %v; want the OS account, cli:NAME", row.Operation, row.Deciders)
		}
		setup = append(setup, row.Operation)
	}
	for _, want := range []string{"agent add demo-agent", "conn add demo", "grant demo-agent demo", "admin add admin"} {
		if !slices.ContainsFunc(setup, func(op string) bool { return strings.HasPrefix(op, want) }) {
			t.Errorf("the audit log lacks the set-up's %q; its admin rows: %q", want, setup)
		}
	}
	if out := c.ok("", "audit", "verify"); !strings.Contains(out, "intact") {
		t.Errorf("audit verify after the set-up: %q; want intact", out)
	}
	// An admin's change of the demo's grant outlives the next run.
	c.ok("", "grant", "demo-agent", "demo", "--write", "deny")

	// The web page answers at the printed URL with the printed certificate,
	// and the printed password logs the admin in.
	ctx := testwait.Context(t)
	wc := newWebClient(t, d.webURL, d.certFP)
	if code := wc.login(ctx, "admin", d.adminPW); code != http.StatusSeeOther {
		t.Errorf("login with the printed password: got status %d; want 303", code)
	}
	if code, _ := wc.get(ctx, "/approvals"); code != http.StatusOK {
		t.Errorf("GET /approvals after login: got status %d; want 200", code)
	}
	if code := newWebClient(t, d.webURL, d.certFP).login(ctx, "admin", "not-the-password"); code != http.StatusUnauthorized {
		t.Errorf("login with a wrong password: got status %d; want 401", code)
	}
	firstPW := d.adminPW

	if code := d.stop(); code != 0 {
		t.Errorf("SIGTERM: got exit %d; want 0\nstderr:\n%s", code, d.stderrText())
	}
	for _, text := range []string{strings.Join(d.out, "\n"), d.stderrText()} {
		if strings.Contains(text, "PRIVATE KEY") {
			t.Error("a private key was printed")
		}
	}
	if strings.Contains(d.stderrText(), d.adminPW) {
		t.Error("the admin password was logged")
	}

	// Again in the same directory: same agent key, the connection moved to
	// the target's new port.
	d2 := startDemo(t, dir)
	pub2, _ := os.ReadFile(filepath.Join(dir, "agent_ed25519.pub"))
	if !bytes.Equal(pub, pub2) {
		t.Error("second run: agent key changed; want it re-used")
	}
	json.Unmarshal([]byte(c.ok("", "conn", "list", "-o", "json")), &conns)
	if len(conns) != 1 || !strings.Contains(strings.Join(d2.out, "\n"), "demo target  127.0.0.1:"+strconv.Itoa(conns[0].Port)) {
		t.Errorf("second run: got connections %+v (first run port %d); want demo at the new target port\n%s", conns, firstTargetPort, strings.Join(d2.out, "\n"))
	}
	var agents []struct {
		Name string
		Keys []struct{ Fingerprint string }
	}
	json.Unmarshal([]byte(c.ok("", "agent", "list", "-o", "json")), &agents)
	if len(agents) != 1 || len(agents[0].Keys) != 1 || agents[0].Keys[0].Fingerprint != ssh.FingerprintSHA256(agentKey) {
		t.Errorf("agents: got %+v; want demo-agent with its one key", agents)
	}
	json.Unmarshal([]byte(c.ok("", "grant", "list", "-o", "json")), &grants)
	if len(grants) != 1 || grants[0].Write != "deny" {
		t.Errorf("second run: grants %+v; want the admin's write=deny kept", grants)
	}
	if d2.adminPW == firstPW {
		t.Error("second run: the admin password is the first run's; want a new one each run")
	}
	if code := newWebClient(t, d2.webURL, d2.certFP).login(ctx, "admin", d2.adminPW); code != http.StatusSeeOther {
		t.Errorf("second run: login with the new password: got status %d; want 303", code)
	}
	if code := d2.stop(); code != 0 {
		t.Errorf("second run SIGTERM: got exit %d; want 0\nstderr:\n%s", code, d2.stderrText())
	}
}

// TestDemoEndToEnd runs the printed lines with the real ssh: a read runs at
// once in both routing forms, the listing shows the rules, and a write waits
// until the printed approve line approves it.
func TestDemoEndToEnd(t *testing.T) {
	t.Parallel()
	requireSSHClient(t)
	dir := filepath.Join(t.TempDir(), "demo")
	d := startDemo(t, dir)
	ctx := testwait.Context(t)

	// Line 1, with echo for uptime so that the output is known.
	out, errs, code := runPrinted(ctx, strings.TrimSuffix(d.sshLine[0], " uptime")+" echo hi")
	if out != "hi\n" || code != 0 {
		t.Fatalf("ssh ... demo echo hi: got %q, exit %d; want hi, 0\nssh stderr: %s\npostern stderr:\n%s", out, code, errs, d.stderrText())
	}
	// Line 2: user-name routing.
	out, errs, code = runPrinted(ctx, strings.Replace(d.sshLine[1], "'ls -la'", "pwd", 1))
	root, _ := filepath.EvalSymlinks(filepath.Join(dir, "target-root"))
	if strings.TrimSpace(out) != root || code != 0 {
		t.Errorf("ssh demo@... pwd: got %q, exit %d; want %s, 0\nstderr: %s", out, code, root, errs)
	}
	// Line 4: the listing.
	out, errs, code = runPrinted(ctx, d.sshLine[3]+" </dev/null")
	if !strings.Contains(out+errs, "demo") || !strings.Contains(out+errs, "ask") {
		t.Errorf("ssh bastion: got %q %q, exit %d; want the demo alias and its rules", out, errs, code)
	}

	// Line 3 waits for approval.
	type result struct {
		out, errs string
		code      int
	}
	wrote := make(chan result, 1)
	go func() {
		o, e, c := runPrinted(ctx, d.sshLine[2])
		wrote <- result{o, e, c}
	}()
	// postern logs the wait once the agent has been told of it.
	id, _ := d.waitLog("waiting for approval")["approval"].(string)
	c := &cli{t: t, data: dir}
	var pending []struct{ ID, Operation string }
	if err := json.Unmarshal([]byte(c.ok("", "approvals", "list", "-o", "json")), &pending); err != nil {
		t.Fatal(err)
	}
	if len(pending) != 1 || pending[0].ID != id || pending[0].Operation != "echo hi > note.txt" {
		t.Fatalf("pending approvals %+v; want one, %s for the write\npostern stderr:\n%s", pending, id, d.stderrText())
	}
	if _, err := os.Stat(filepath.Join(dir, "target-root", "note.txt")); err == nil {
		t.Fatal("note.txt exists before the approval")
	}
	if out, errs, code := runPrinted(ctx, strings.Replace(d.approve, " ID ", " "+id+" ", 1)); code != 0 {
		t.Fatalf("approve line: got exit %d %q %q; want 0", code, out, errs)
	}
	r := testwait.Recv(t, "the approved write to end", wrote)
	if r.code != 0 || !strings.Contains(r.errs, id) {
		t.Errorf("approved write: got exit %d, stderr %q; want 0 and the approval id on stderr", r.code, r.errs)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "target-root", "note.txt")); err != nil || string(b) != "hi\n" {
		t.Errorf("note.txt: got %q, %v; want hi", b, err)
	}

	if code := d.stop(); code != 0 {
		t.Errorf("SIGTERM: got exit %d; want 0\nstderr:\n%s", code, d.stderrText())
	}
}
