package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/postern/postern/internal/testsshd"
)

// Config as code: apply and export against a real sshd.

// writeFile writes content to name in dir and returns its path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestApplyExportRoundTrip: a file declares an agent, a connection (its key
// in a file beside it), a grant and a notification channel; apply creates
// them, key-checked and audited, and a second apply changes nothing.
// export writes the same state without a secret, applying the export
// changes nothing, and the export plus the secrets' files recreates the
// same state in an empty data directory.
func TestApplyExportRoundTrip(t *testing.T) {
	t.Parallel()
	sshd := testsshd.Start(t, testsshd.Options{})
	c := newCLI(t)
	dir := t.TempDir()
	writeFile(t, dir, "web.key", string(sshd.UserKeyPEM))
	const hookURL = "https://hooks.example.com/services/T0/B0/hook-token-4711"
	const hookSecret = "hook-signing-secret-0815"
	writeFile(t, dir, "ops.url", hookURL+"\n")
	writeFile(t, dir, "ops.secret", hookSecret+"\n")
	bot := writeKeyFiles(t, "bot", "")
	conf := fmt.Sprintf(`# what postern serves
[[agent]]
name = "bot"
keys = [%q]

[[connection]]
alias = "web"
host = %q
port = %d
user = %q
env = "staging"
recipe = "linux"
host_keys = [%q]
key_file = "web.key"

[[grant]]
agent = "bot"
connection = "web"
write = "ask"

[[notify]]
name = "ops"
url_file = "ops.url"
secret_file = "ops.secret"
events = ["pending"]
`, bot.pubLine, sshd.Host, sshd.Port, sshd.User, bareKey(sshd.HostKey))
	file := writeFile(t, dir, "postern.toml", conf)

	dry := c.ok("", "apply", "-f", file, "--dry-run")
	if !strings.Contains(dry, "+ connection web") || !strings.Contains(dry, "dry run, nothing changed") || len(c.conns()) != 0 {
		t.Fatalf("apply --dry-run: %q, %d connections; want the plan and nothing changed", dry, len(c.conns()))
	}
	out := c.ok("", "apply", "-f", file)
	for _, want := range []string{"+ agent bot", "+ connection web: " + sshd.User + "@" + sshd.Host, "key check: ok",
		"+ grant bot web: read=allow write=ask destructive=deny", "+ notify ops: json to https://hooks.example.com/…",
		"4 to change, 4 done, 0 failed"} {
		if !strings.Contains(out, want) {
			t.Errorf("apply output lacks %q:\n%s", want, out)
		}
	}
	if again := c.ok("", "apply", "-f", file); !strings.Contains(again, "nothing to change") || !strings.Contains(again, "4 unchanged") {
		t.Errorf("second apply: %q; want nothing to change", again)
	}
	if x := c.conns()["web"]; x.KeyStatus != "ok" || x.Env != "staging" || x.Recipe != "linux" {
		t.Errorf("applied connection: %+v; want ok, staging, linux", x)
	}
	for _, r := range adminRows(c.auditRows()) {
		if !strings.Contains(r.Reason, "via apply") {
			t.Errorf("audit row %d %q: reason %q; want via apply", r.Seq, r.Operation, r.Reason)
		}
	}

	exported := c.ok("", "export")
	for _, secret := range []string{"hook-token-4711", hookSecret, "PRIVATE KEY", strings.Split(string(sshd.UserKeyPEM), "\n")[1]} {
		if strings.Contains(exported, secret) {
			t.Errorf("export contains a secret (%.20q...):\n%s", secret, exported)
		}
	}
	expFile := writeFile(t, dir, "exported.toml", exported)
	if same := c.ok("", "apply", "-f", expFile); !strings.Contains(same, "nothing to change") {
		t.Errorf("applying the export: %q; want nothing to change", same)
	}

	// An empty data directory: the export alone lacks the secrets, and
	// says what is missing without changing anything.
	fresh := newCLI(t)
	r := fresh.run("", "apply", "-f", expFile)
	if r.code != 2 || !strings.Contains(r.stderr, "needs key_file or generate_key") || !strings.Contains(r.stderr, "needs url_file") {
		t.Fatalf("applying the bare export to an empty directory: exit %d, %q; want 2 naming the missing key and URL", r.code, r.stderr)
	}
	if len(fresh.conns()) != 0 || strings.Contains(fresh.ok("", "agent", "list"), "bot") {
		t.Error("a refused apply changed the empty directory")
	}
	withSecrets := strings.Replace(exported, "alias = 'web'", "alias = 'web'\nkey_file = 'web.key'", 1)
	withSecrets = strings.Replace(withSecrets, "name = 'ops'", "name = 'ops'\nurl_file = 'ops.url'\nsecret_file = 'ops.secret'", 1)
	if withSecrets == exported {
		t.Fatalf("the export's format changed; the test cannot add the secrets' files:\n%s", exported)
	}
	fresh.ok("", "apply", "-f", writeFile(t, dir, "restore.toml", withSecrets))
	if got := fresh.ok("", "export"); got != exported {
		t.Errorf("export of the recreated directory differs:\n%s\nwant:\n%s", got, exported)
	}
}

// TestApplyPruneAndChanges: apply --dry-run lists the files it reads; apply
// changes what differs (a rule, an agent's key, a connection's port),
// keeps what the file does not name, and --prune removes it; a file with a
// mistake changes nothing and says where the mistake is.
func TestApplyPruneAndChanges(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	dir := t.TempDir()
	k1, k2 := writeKeyFiles(t, "k1", ""), writeKeyFiles(t, "k2", "")
	target := writeKeyFiles(t, "target", "")
	host := hostLine(t, "127.0.0.1")
	c.ok("", "agent", "add", "old", "--key", k2.pub)
	base := func(rule, port string) string {
		return fmt.Sprintf(`[[agent]]
name = "bot"
keys = [%q]

[[connection]]
alias = "web"
host = "127.0.0.1"
port = %s
user = "deploy"
host_keys = [%q]
key_file = %q
allow_unverified = true

[[grant]]
agent = "bot"
connection = "web"
write = %q
`, k1.pubLine, port, host, target.priv, rule)
	}
	port := itoa(closedPort(t))
	f := writeFile(t, dir, "a.toml", base("ask", port))
	dry := c.ok("", "apply", "-f", f, "--dry-run")
	for _, want := range []string{"reads " + f + ": the config file\n", "reads " + target.priv + ": key_file of connection web\n"} {
		if !strings.Contains(dry, want) {
			t.Errorf("apply --dry-run lacks %q:\n%s", want, dry)
		}
	}
	out := c.ok("", "apply", "-f", f, "--timeout", "5s")
	if !strings.Contains(out, "stored unverified") || !strings.Contains(out, "old (not in the file; kept") {
		t.Errorf("first apply: %q; want the unverified connection stored and agent old kept", out)
	}
	other := itoa(closedPort(t))
	f = writeFile(t, dir, "b.toml", base("deny", other))
	out = c.ok("", "apply", "-f", f, "--timeout", "5s")
	for _, want := range []string{"~ connection web: port " + port + " -> " + other,
		"~ grant bot web: read=allow write=deny destructive=deny (was read=allow write=ask destructive=deny)"} {
		if !strings.Contains(out, want) {
			t.Errorf("second apply lacks %q:\n%s", want, out)
		}
	}
	out = c.ok("", "apply", "-f", f, "--prune")
	if !strings.Contains(out, "- agent old") || strings.Contains(c.ok("", "agent", "list"), "old") {
		t.Errorf("apply --prune: %q; want agent old removed", out)
	}

	bad := writeFile(t, dir, "bad.toml", base("sometimes", port)+"\n[[agent]]\nname = \"x\"\nkeys = []\ncolour = \"red\"\n")
	r := c.run("", "apply", "-f", bad)
	if r.code != 2 || !strings.Contains(r.stderr, "unknown key") || !strings.Contains(r.stderr, "line ") {
		t.Errorf("apply of a file with an unknown key: exit %d, %q; want 2 naming the line", r.code, r.stderr)
	}
	bad = writeFile(t, dir, "bad2.toml", base("sometimes", port))
	before := c.snapshot()
	r = c.run("", "apply", "-f", bad)
	if r.code != 2 || !strings.Contains(r.stderr, `write: "sometimes"`) || !strings.Contains(r.stderr, "nothing was changed") {
		t.Errorf("apply of a bad rule: exit %d, %q; want 2 naming the rule", r.code, r.stderr)
	}
	if c.snapshot() != before {
		t.Error("a refused apply changed the data")
	}
}

// refuses runs postern with args as a process of its own, which the
// test's deadline kills: an apply that must refuse its file at once and
// regresses into a read that blocks (a FIFO) or never ends (/dev/zero)
// fails the test instead of hanging it.
func refuses(t *testing.T, args ...string) result {
	t.Helper()
	return runProcess(t, "", nil, args...)
}

// TestApplyRefusesFiles: apply reads only regular files of a bounded size:
// the config file given to -f and the key, URL and secret files it names.
// /dev/zero, a FIFO (with no writer: apply must not wait for one) and a
// directory are refused at once, each by name, and nothing is changed.
func TestApplyRefusesFiles(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{"/dev/zero", fifo} {
		r := refuses(t, "apply", "-f", file, "--data", c.data)
		if r.code != 2 || !strings.Contains(r.stderr, "postern: config: "+file+": a ") ||
			!strings.Contains(r.stderr, "; give a regular file") {
			t.Errorf("apply -f %s: exit %d, %q; want exit 2 at once naming the file", file, r.code, r.stderr)
		}
	}
	conf := writeFile(t, dir, "postern.toml", fmt.Sprintf(`
[[connection]]
alias = "web"
host = "127.0.0.1"
user = "deploy"
host_keys = [%q]
key_file = "/dev/zero"

[[notify]]
name = "ops"
url_file = %q
secret_file = %q
`, hostLine(t, "127.0.0.1"), fifo, dir))
	before := c.snapshot()
	r := refuses(t, "apply", "-f", conf, "--data", c.data)
	for _, want := range []string{
		`connection "web" (connection #1): key_file: /dev/zero: a character device; give a regular file`,
		`notify "ops" (notify #1): url_file: ` + fifo + `: a named pipe (FIFO); give a regular file`,
	} {
		if r.code != 2 || !strings.Contains(r.stderr, want) {
			t.Errorf("apply of a file naming /dev/zero and a FIFO: exit %d, %q; want exit 2 with %q", r.code, r.stderr, want)
		}
	}
	r = refuses(t, "apply", "-f", writeFile(t, dir, "secret.toml", fmt.Sprintf(`
[[notify]]
name = "ops"
url = "https://hooks.example.com/x"
secret_file = %q
`, dir)), "--data", c.data)
	if want := `notify "ops" (notify #1): secret_file: ` + dir + `: a directory; give a regular file`; r.code != 2 || !strings.Contains(r.stderr, want) {
		t.Errorf("apply of a file naming a directory: exit %d, %q; want exit 2 with %q", r.code, r.stderr, want)
	}
	if c.snapshot() != before {
		t.Error("a refused apply changed the data")
	}
}

// TestApplyEscapesErrors: a config file whose key holds ESC[2J (clear the
// screen) and BEL, and names holding them, cannot reach the admin's
// terminal: everything apply prints shows them as escapes.
func TestApplyEscapesErrors(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	dir := t.TempDir()
	for _, tt := range []struct{ name, conf, want string }{
		{"unknown key", "[[agent]]\nname = \"bot\"\n\"\\u001b[2J\\u0007applied OK\" = 1\n",
			"unknown key agent.<U+001B>[2J<U+0007>applied OK"},
		{"names", "[[grant]]\nagent = \"\\u001b[2J\"\nconnection = \"\\u0007\\u202e\"\n",
			`grant <U+001B>[2J on <U+0007><U+202E> (grant #1): no agent "\x1b[2J" in the file or the database`},
	} {
		r := refuses(t, "apply", "-f", writeFile(t, dir, "esc.toml", tt.conf), "--data", c.data)
		if r.code != 2 || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("%s: exit %d, %q; want exit 2 with %q", tt.name, r.code, r.stderr, tt.want)
		}
		for i, b := range []byte(r.stdout + r.stderr) {
			if b < 0x20 && b != '\n' || b == 0x7f {
				t.Errorf("%s: apply printed the control byte %#x at %d: %q", tt.name, b, i, r.stdout+r.stderr)
				break
			}
		}
		if strings.ContainsRune(r.stderr, '\u202e') {
			t.Errorf("%s: apply printed U+202E as itself: %q", tt.name, r.stderr)
		}
	}
}
