package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/postern/postern/internal/testsshd"
	"github.com/postern/postern/model"
)

// keyFiles is an ed25519 key pair written as id and id.pub.
type keyFiles struct {
	priv, pub   string // paths
	pubLine     string
	fingerprint string
	privPEM     []byte
}

func writeKeyFiles(t *testing.T, name, passphrase string) keyFiles {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var block *pem.Block
	if passphrase == "" {
		block, err = ssh.MarshalPrivateKey(priv, name)
	} else {
		block, err = ssh.MarshalPrivateKeyWithPassphrase(priv, name, []byte(passphrase))
	}
	if err != nil {
		t.Fatal(err)
	}
	signer, _ := ssh.NewSignerFromKey(priv)
	dir := t.TempDir()
	k := keyFiles{
		priv:        filepath.Join(dir, name),
		pub:         filepath.Join(dir, name+".pub"),
		pubLine:     strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey()))) + " " + name,
		fingerprint: ssh.FingerprintSHA256(signer.PublicKey()),
		privPEM:     pem.EncodeToMemory(block),
	}
	if err := os.WriteFile(k.priv, k.privPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(k.pub, []byte(k.pubLine+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return k
}

// hostLine is a known_hosts line pinning a fresh key for host.
func hostLine(t *testing.T, host string) string {
	return host + " " + strings.TrimSuffix(writeKeyFiles(t, "hostkey", "").pubLine, " hostkey")
}

func TestInit(t *testing.T) {
	t.Parallel()
	data := filepath.Join(t.TempDir(), "data")
	r := runProcess(t, "", []string{"POSTERN_DATA=" + data}, "init")
	if r.code != 0 {
		t.Fatalf("init: exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{"postern.db (created)", "master.key (created)", "ssh_host_ed25519_key (created)", "SHA256:", "Next steps:", "postern agent add"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("init output lacks %q:\n%s", want, r.stdout)
		}
	}
	for name, mode := range map[string]os.FileMode{"": 0o700 | os.ModeDir, "master.key": 0o600, "ssh_host_ed25519_key": 0o600} {
		st, err := os.Stat(filepath.Join(data, name))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode() != mode {
			t.Errorf("%s: got mode %v; want %v", name, st.Mode(), mode)
		}
	}
	key, _ := os.ReadFile(filepath.Join(data, "master.key"))
	if strings.Contains(r.stdout, string(key)) {
		t.Error("init printed the master key")
	}
	r = runProcess(t, "", []string{"POSTERN_DATA=" + data}, "init")
	if r.code != 0 || !strings.Contains(r.stdout, "master.key (kept)") {
		t.Errorf("second init: exit %d, output:\n%s; want master.key (kept)", r.code, r.stdout)
	}
	key2, _ := os.ReadFile(filepath.Join(data, "master.key"))
	if string(key) != string(key2) {
		t.Error("second init replaced the master key")
	}
}

func TestInitMasterKeyFile(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	keyFile := filepath.Join(tmp, "secret.key")
	data := filepath.Join(tmp, "data")
	env := []string{"POSTERN_MASTER_KEY_FILE=" + keyFile}
	if r := runProcess(t, "", env, "init", "--data", data); r.code != 0 {
		t.Fatalf("init: exit %d: %s", r.code, r.stderr)
	}
	if _, err := os.Stat(keyFile); err != nil {
		t.Fatalf("POSTERN_MASTER_KEY_FILE not created: %v", err)
	}
	if _, err := os.Stat(filepath.Join(data, "master.key")); !os.IsNotExist(err) {
		t.Errorf("master.key created in the data directory too: %v", err)
	}
	k := writeKeyFiles(t, "target", "")
	add := []string{"conn", "add", "--no-check", "web", "--host", "h", "--user", "u", "--key-file", k.priv, "--host-key", hostLine(t, "h"), "--data", data}
	// Without the variable there is no master key: a clear error, exit 1.
	r := runCLI(t, "", add...)
	if r.code != 1 || !strings.Contains(r.stderr, "no master key") {
		t.Errorf("conn add without the master key: exit %d, stderr %q; want 1 and 'no master key'", r.code, r.stderr)
	}
	if r := runProcess(t, "", env, add...); r.code != 0 {
		t.Errorf("conn add with POSTERN_MASTER_KEY_FILE: exit %d: %s", r.code, r.stderr)
	}
}

func TestUninitialisedDataDir(t *testing.T) {
	t.Parallel()
	data := filepath.Join(t.TempDir(), "none")
	r := runCLI(t, "", "agent", "list", "--data", data)
	if r.code == 0 || !strings.Contains(r.stderr, "postern init") {
		t.Errorf("got exit %d, stderr %q; want an error telling to run postern init", r.code, r.stderr)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Errorf("a failed command created the data directory: %v", err)
	}
}

func TestAgentCommands(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	k1 := writeKeyFiles(t, "bot-laptop", "")
	k2 := writeKeyFiles(t, "bot-ci", "")

	out := c.ok("", "agent", "add", "bot", "--key", k1.pub)
	if !strings.Contains(out, "added agent bot") || !strings.Contains(out, k1.fingerprint) {
		t.Errorf("agent add output: %q", out)
	}
	c.ok(k2.pubLine+"\n", "agent", "key", "add", "bot", "--key", "-")
	k3 := writeKeyFiles(t, "other", "")
	c.ok("", "agent", "add", "other", "--key", k3.pub)

	var agents []model.Agent
	if err := json.Unmarshal([]byte(c.ok("", "agent", "list", "-o", "json")), &agents); err != nil {
		t.Fatal(err)
	}
	if len(agents) != 2 || agents[0].Name != "bot" || len(agents[0].Keys) != 2 || agents[0].Keys[1].Fingerprint != k2.fingerprint {
		t.Fatalf("agent list -o json: got %+v", agents)
	}
	text := c.ok("", "agent", "list")
	for _, want := range []string{"NAME", "bot", "other", k1.fingerprint, k2.fingerprint, "enabled"} {
		if !strings.Contains(text, want) {
			t.Errorf("agent list lacks %q:\n%s", want, text)
		}
	}

	c.ok("", "agent", "disable", "bot")
	if text := c.ok("", "agent", "list"); !strings.Contains(text, "disabled") {
		t.Errorf("agent list after disable:\n%s", text)
	}
	c.ok("", "agent", "enable", "bot")
	c.ok("", "agent", "key", "remove", "bot", k1.fingerprint)
	c.ok("", "agent", "remove", "other")
	if err := json.Unmarshal([]byte(c.ok("", "agent", "list", "-o", "json")), &agents); err != nil {
		t.Fatal(err)
	}
	if len(agents) != 1 || len(agents[0].Keys) != 1 {
		t.Errorf("after key remove and agent remove: got %+v", agents)
	}
}

func TestConnCommands(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	k := writeKeyFiles(t, "target", "")
	out := c.ok("", "conn", "add", "--no-check", "prod-web", "--host", "10.0.0.5", "--port", "2222", "--user", "deploy",
		"--key-file", k.priv, "--host-key", hostLine(t, "10.0.0.5"), "--env", "production", "--recipe", "linux")
	if !strings.Contains(out, "added connection prod-web") || !strings.Contains(out, "deploy@10.0.0.5:2222") {
		t.Errorf("conn add output: %q", out)
	}
	c.ok(string(k.privPEM), "conn", "add", "--no-check", "dev-db", "--host", "db", "--user", "u", "--key-file", "-", "--host-key", hostLine(t, "db"))

	raw := c.ok("", "conn", "list", "-o", "json")
	var conns []model.Connection
	if err := json.Unmarshal([]byte(raw), &conns); err != nil {
		t.Fatal(err)
	}
	if len(conns) != 2 || conns[1].Alias != "prod-web" || conns[1].Port != 2222 || conns[1].Env != "production" ||
		conns[1].Recipe != "linux" || conns[1].KeyStatus != "unchecked" || len(conns[1].HostKeys) != 1 || conns[0].Env != "dev" {
		t.Errorf("conn list -o json: got %+v", conns)
	}
	text := c.ok("", "conn", "list")
	for _, want := range []string{"ALIAS", "prod-web", "deploy@10.0.0.5:2222", "production", "never checked", "LAST CHECK"} {
		if !strings.Contains(text, want) {
			t.Errorf("conn list lacks %q:\n%s", want, text)
		}
	}
	block, _ := pem.Decode(k.privPEM)
	for _, out := range []string{raw, text} {
		if strings.Contains(out, "PRIVATE KEY") || strings.Contains(out, string(block.Bytes)) {
			t.Error("conn list shows the private key")
		}
	}
	c.ok("", "conn", "remove", "dev-db")
	if text := c.ok("", "conn", "list"); strings.Contains(text, "dev-db") {
		t.Errorf("removed connection still listed:\n%s", text)
	}
}

func TestGrantCommands(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	k := writeKeyFiles(t, "bot", "")
	c.ok("", "agent", "add", "bot", "--key", k.pub)
	for _, env := range []string{"dev", "production"} {
		c.ok("", "conn", "add", "--no-check", env+"-web", "--host", "h", "--user", "u", "--key-file", k.priv, "--host-key", hostLine(t, "h"), "--env", env)
	}
	out := c.ok("", "grant", "bot", "dev-web")
	if !strings.Contains(out, "read=allow write=deny destructive=deny") {
		t.Errorf("default grant: %q", out)
	}
	out = c.ok("", "grant", "bot", "dev-web", "--write", "ask", "--destructive", "allow")
	if !strings.Contains(out, "read=allow write=ask destructive=allow") {
		t.Errorf("updated grant: %q", out)
	}
	// Only the rules given change.
	out = c.ok("", "grant", "bot", "dev-web", "--read", "ask")
	if !strings.Contains(out, "read=ask write=ask destructive=allow") {
		t.Errorf("partial update: %q", out)
	}
	// A new grant on production waits for a second admin.
	if out := c.ok("", "grant", "bot", "production-web", "--destructive", "ask"); !strings.Contains(out, "waits for a second admin: change request chg_") {
		t.Errorf("grant on production: %q; want it to wait for a second admin", out)
	}
	if ids := c.approveChanges(); len(ids) != 1 {
		t.Errorf("changes waiting after the production grant: %v; want the one", ids)
	}
	var grants []model.Grant
	if err := json.Unmarshal([]byte(c.ok("", "grant", "list", "-o", "json")), &grants); err != nil {
		t.Fatal(err)
	}
	if len(grants) != 2 || grants[1].Connection != "production-web" || grants[1].Env != "production" || grants[1].Destructive != "ask" || grants[1].Read != "allow" {
		t.Errorf("grant list -o json: got %+v", grants)
	}
	if text := c.ok("", "grant", "list"); !strings.Contains(text, "DESTRUCTIVE") || !strings.Contains(text, "production-web") {
		t.Errorf("grant list:\n%s", text)
	}
	c.ok("", "grant", "revoke", "bot", "dev-web")
	if err := json.Unmarshal([]byte(c.ok("", "grant", "list", "-o", "json")), &grants); err != nil {
		t.Fatal(err)
	}
	if len(grants) != 1 {
		t.Errorf("after revoke: got %d grants; want 1", len(grants))
	}
}

// TestBadInput runs commands that must fail with one clear line on stderr
// and exit status 2, and checks that none of them changed anything.
func TestBadInput(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	k := writeKeyFiles(t, "bot", "")
	locked := writeKeyFiles(t, "locked", "hunter2")
	c.ok("", "agent", "add", "bot", "--key", k.pub)
	c.ok("", "conn", "add", "--no-check", "web", "--host", "h", "--user", "u", "--key-file", k.priv, "--host-key", hostLine(t, "h"))
	c.ok("", "conn", "add", "--no-check", "prod", "--host", "h", "--user", "u", "--key-file", k.priv, "--host-key", hostLine(t, "h"), "--env", "production")
	c.ok("", "grant", "bot", "prod")
	garbage := filepath.Join(t.TempDir(), "garbage.pub")
	os.WriteFile(garbage, []byte("ssh-ed25519 !!!not-base64\n"), 0o644)
	other := writeKeyFiles(t, "other", "")

	tests := []struct {
		name    string
		stdin   string
		args    []string
		wantMsg string
	}{
		{"duplicate agent", "", []string{"agent", "add", "bot", "--key", other.pub}, "agent bot already exists"},
		{"key of another agent", "", []string{"agent", "add", "bot2", "--key", k.pub}, "already exists"},
		{"malformed public key", "", []string{"agent", "add", "x", "--key", garbage}, "malformed OpenSSH public key"},
		{"private key as public", "", []string{"agent", "add", "x", "--key", k.priv}, "got a private key"},
		{"bad agent name", "", []string{"agent", "add", "a b", "--key", other.pub}, "agent name"},
		{"missing key file", "", []string{"agent", "add", "x", "--key", "/nonexistent/k.pub"}, "public key file"},
		{"no --key", "", []string{"agent", "add", "x"}, "missing public key file"},
		{"empty stdin", "", []string{"agent", "add", "x", "--key", "-"}, "public key is empty"},
		{"unknown agent disable", "", []string{"agent", "disable", "nobody"}, `agent "nobody" not found`},
		{"unknown agent remove", "", []string{"agent", "remove", "nobody"}, `agent "nobody" not found`},
		{"unknown agent subcommand", "", []string{"agent", "frob"}, `unknown subcommand "frob"`},
		{"last key", "", []string{"agent", "key", "remove", "bot", k.fingerprint}, "last key"},
		{"unknown flag", "", []string{"agent", "list", "--frob"}, "unknown flag"},
		{"bad output format", "", []string{"agent", "list", "-o", "yaml"}, "unknown output format"},
		{"duplicate alias", "", []string{"conn", "add", "--no-check", "web", "--host", "h", "--user", "u", "--key-file", k.priv, "--host-key", hostLine(t, "h")}, "connection web already exists"},
		{"passphrase key", "", []string{"conn", "add", "--no-check", "new", "--host", "h", "--user", "u", "--key-file", locked.priv, "--host-key", hostLine(t, "h")}, "passphrase"},
		{"public key as private", "", []string{"conn", "add", "--no-check", "new", "--host", "h", "--user", "u", "--key-file", k.pub, "--host-key", hostLine(t, "h")}, "private key does not parse"},
		{"bad host key", "", []string{"conn", "add", "--no-check", "new", "--host", "h", "--user", "u", "--key-file", k.priv, "--host-key", "h ssh-ed25519 zzz"}, "malformed host key"},
		{"no host key", "", []string{"conn", "add", "--no-check", "new", "--host", "h", "--user", "u", "--key-file", k.priv}, "--accept-new-host-key"},
		{"both host key flags", "", []string{"conn", "add", "--no-check", "new", "--host", "h", "--user", "u", "--key-file", k.priv, "--host-key", hostLine(t, "h"), "--accept-new-host-key"}, "not both"},
		{"bad env", "", []string{"conn", "add", "--no-check", "new", "--host", "h", "--user", "u", "--key-file", k.priv, "--host-key", hostLine(t, "h"), "--env", "prod"}, `environment "prod"`},
		{"no host", "", []string{"conn", "add", "--no-check", "new", "--user", "u", "--key-file", k.priv, "--host-key", hostLine(t, "h")}, "--host is required"},
		{"bad port", "", []string{"conn", "add", "--no-check", "new", "--host", "h", "--port", "0", "--user", "u", "--key-file", k.priv, "--host-key", hostLine(t, "h")}, "out of range"},
		{"port not a number", "", []string{"conn", "add", "--no-check", "new", "--host", "h", "--port", "ssh", "--user", "u", "--key-file", k.priv, "--host-key", hostLine(t, "h")}, "invalid argument"},
		{"unknown conn remove", "", []string{"conn", "remove", "nowhere"}, `connection "nowhere" not found`},
		{"grant unknown agent", "", []string{"grant", "nobody", "web"}, `agent "nobody" not found`},
		{"grant unknown alias", "", []string{"grant", "bot", "nowhere"}, `connection "nowhere" not found`},
		{"bad rule word", "", []string{"grant", "bot", "web", "--write", "sometimes"}, `--write "sometimes"`},
		{"production destructive allow", "", []string{"grant", "bot", "prod", "--destructive", "allow"}, "not permitted on a production connection"},
		{"grant one argument", "", []string{"grant", "bot"}, "want AGENT and ALIAS"},
		{"revoke missing grant", "", []string{"grant", "revoke", "bot", "web"}, "not found"},
	}
	before := c.snapshot()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := c.run(tt.stdin, tt.args...)
			if r.code != 2 {
				t.Errorf("got exit %d; want 2 (stderr %q)", r.code, r.stderr)
			}
			if !strings.Contains(r.stderr, tt.wantMsg) {
				t.Errorf("got stderr %q; want it to contain %q", r.stderr, tt.wantMsg)
			}
			if n := strings.Count(strings.TrimSpace(r.stderr), "\n"); n != 0 {
				t.Errorf("got %d lines on stderr; want one:\n%s", n+1, r.stderr)
			}
			if strings.Contains(r.stderr, "PRIVATE KEY") || strings.Contains(r.stderr, "hunter2") {
				t.Errorf("stderr leaks key material: %q", r.stderr)
			}
			if after := c.snapshot(); after != before {
				t.Errorf("a failed command changed the data:\nbefore: %s\nafter: %s", before, after)
			}
		})
	}
}

// TestConnAddAcceptNewHostKey pins the host key of a real OpenSSH sshd.
func TestConnAddAcceptNewHostKey(t *testing.T) {
	t.Parallel()
	sshd := newE2ETarget(t, testsshd.Options{})
	c := newCLI(t)
	keyFile := sshd.keyFile
	want := ssh.FingerprintSHA256(sshd.HostKey)
	out := c.okCheck("conn", "add", "--no-check", "local", "--host", sshd.Host, "--port", itoa(sshd.Port), "--user", sshd.User,
		"--key-file", keyFile, "--accept-new-host-key")
	if !strings.Contains(out, want) || !strings.Contains(out, "ssh-ed25519") {
		t.Errorf("conn add output %q; want the host key fingerprint %s", out, want)
	}
	var conns []model.Connection
	if err := json.Unmarshal([]byte(c.ok("", "conn", "list", "-o", "json")), &conns); err != nil {
		t.Fatal(err)
	}
	if len(conns) != 1 || len(conns[0].HostKeys) != 1 || conns[0].HostKeys[0].Fingerprint != want {
		t.Fatalf("pinned: got %+v; want %s", conns, want)
	}
	if wantLine := strings.TrimSpace(sshd.KnownHostsLine); conns[0].HostKeys[0].Line != wantLine {
		t.Errorf("pinned line: got %q; want %q", conns[0].HostKeys[0].Line, wantLine)
	}

	// Nothing listening: a clear error and nothing stored.
	sshd.Stop()
	r := c.runCheck("conn", "add", "--no-check", "gone", "--host", sshd.Host, "--port", itoa(sshd.Port), "--user", sshd.User,
		"--key-file", keyFile, "--accept-new-host-key")
	if r.code == 0 || !strings.Contains(r.stderr, "fetch the host key") {
		t.Errorf("scan of a stopped sshd: exit %d, stderr %q; want a fetch host key error", r.code, r.stderr)
	}
	if strings.Contains(c.ok("", "conn", "list"), "gone") {
		t.Error("a failed conn add stored the connection")
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
