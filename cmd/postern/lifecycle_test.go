package main

import (
	"encoding/json"
	"net"
	"slices"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/postern/postern/internal/testsshd"
	"github.com/postern/postern/model"
)

// Connection lifecycle against a real OpenSSH sshd: conn add,
// update, pin, rotate-key and check, each proving the key before it stores,
// each keeping the connection's id and grants, each audited.

// closedPort is a loopback port nothing listens on (just closed).
func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

// bareKey is a known_hosts line without its host names: the pin belongs to
// the connection, whatever name the target is reached by.
func bareKey(k ssh.PublicKey) string { return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k))) }

// conns lists the connections through the CLI, by alias.
func (c *cli) conns() map[string]model.Connection {
	c.t.Helper()
	var list []model.Connection
	if err := json.Unmarshal([]byte(c.ok("", "conn", "list", "-o", "json")), &list); err != nil {
		c.t.Fatal(err)
	}
	out := map[string]model.Connection{}
	for _, x := range list {
		out[x.Alias] = x
	}
	return out
}

// connResult runs a conn command with -o json and decodes its answer.
func (c *cli) connResult(args ...string) (result, model.ConnectionResult) {
	c.t.Helper()
	r := c.runCheck(append(args, "-o", "json")...)
	var got model.ConnectionResult
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		c.t.Fatalf("postern %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, r.stdout, r.stderr)
	}
	return r, got
}

// adminRows are the audit rows of admins' changes.
func adminRows(rows []model.AuditRow) []model.AuditRow {
	var out []model.AuditRow
	for _, r := range rows {
		if r.Kind == "admin" {
			out = append(out, r)
		}
	}
	return out
}

// TestConnAddOutcomes: conn add stores a connection only when its key check
// proves the key, or when --allow-unverified keeps one whose target is not
// ready; a host key mismatch stores nothing whatever the options; exit 0
// only for what was stored as asked.
func TestConnAddOutcomes(t *testing.T) {
	t.Parallel()
	sshd := newE2ETarget(t, testsshd.Options{})
	c := newCLI(t)
	good := sshd.keyFile
	stranger := writeKeyFiles(t, "stranger", "")
	pin := bareKey(sshd.HostKey)
	wrongPin := hostLine(t, "127.0.0.1")
	closed := closedPort(t)
	add := func(alias, key string, port int, hostKey string, extra ...string) []string {
		return append([]string{"conn", "add", alias, "--host", sshd.Host, "--port", itoa(port), "--user", sshd.User,
			"--key-file", key, "--host-key", hostKey}, extra...)
	}
	tests := []struct {
		name   string
		args   []string
		code   int
		stored bool
		status string
		msg    string // in the check's message
	}{
		{"host key mismatch", add("m1", good, sshd.Port, wrongPin), 1, false, "host_key_mismatch", "presented ssh-ed25519 " + ssh.FingerprintSHA256(sshd.HostKey)},
		{"host key mismatch, allow-unverified", add("m2", good, sshd.Port, wrongPin, "--allow-unverified"), 1, false, "host_key_mismatch", "pinned: SHA256:"},
		{"rejected", add("r1", stranger.priv, sshd.Port, pin), 1, false, "rejected", "unable to authenticate"},
		{"rejected, allow-unverified", add("r2", stranger.priv, sshd.Port, pin, "--allow-unverified"), 0, true, "rejected", "unable to authenticate"},
		{"unreachable", add("u1", good, closed, pin), 1, false, "unreachable", "cannot reach"},
		{"unreachable, allow-unverified", add("u2", good, closed, pin, "--allow-unverified"), 0, true, "unreachable", "cannot reach"},
		{"ok", add("ok", good, sshd.Port, pin), 0, true, "ok", "accepted the key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, got := c.connResult(tt.args...)
			if r.code != tt.code || got.Stored != tt.stored || got.Check == nil || got.Check.Status != tt.status ||
				!strings.Contains(got.Check.Message, tt.msg) {
				t.Fatalf("got exit %d, stored %v, check %+v; want exit %d, stored %v, %s with %q\nstderr: %s",
					r.code, got.Stored, got.Check, tt.code, tt.stored, tt.status, tt.msg, r.stderr)
			}
			if tt.stored != (got.Connection != nil) {
				t.Errorf("connection in the answer: %v; want it exactly when stored", got.Connection)
			}
			if tt.stored && tt.status != "ok" && !strings.Contains(r.stderr, "warning") {
				t.Errorf("stderr %q; want a warning for a connection stored unverified", r.stderr)
			}
			if !tt.stored && !strings.Contains(r.stderr, "nothing was stored") {
				t.Errorf("stderr %q; want it to say nothing was stored", r.stderr)
			}
		})
	}
	conns := c.conns()
	var aliases []string
	for a, x := range conns {
		aliases = append(aliases, a)
		// The status shown everywhere says what happened.
		if want := map[string]string{"r2": "rejected", "u2": "unreachable", "ok": "ok"}[a]; x.KeyStatus != want || x.KeyCheckedAt.IsZero() {
			t.Errorf("conn list %s: status %q checked %v; want %q with its time", a, x.KeyStatus, x.KeyCheckedAt, want)
		}
	}
	slices.Sort(aliases)
	if !slices.Equal(aliases, []string{"ok", "r2", "u2"}) {
		t.Errorf("stored connections %v; want [ok r2 u2]", aliases)
	}
	table := c.ok("", "conn", "list")
	for _, want := range []string{"rejected: ", "unreachable: cannot reach"} {
		if !strings.Contains(table, want) {
			t.Errorf("conn list lacks %q:\n%s", want, table)
		}
	}
	// Text output: the mismatch is named with both fingerprints.
	r := c.runCheck(add("m3", good, sshd.Port, wrongPin)...)
	if r.code != 1 || !strings.Contains(r.stdout, "key check: host key mismatch: the target presented ssh-ed25519 "+ssh.FingerprintSHA256(sshd.HostKey)) {
		t.Errorf("conn add with a wrong pin: exit %d, stdout %q; want 1 and the mismatch with both fingerprints", r.code, r.stdout)
	}
}

// TestConnLifecycle: a connection is re-pinned, re-keyed (from a file and
// generated) and moved, keeping its id and grants; each step re-runs the
// key check, stores nothing the check refuses, and is audited.
func TestConnLifecycle(t *testing.T) {
	t.Parallel()
	sshd := newE2ETarget(t, testsshd.Options{})
	c := newCLI(t)
	newE2EAgent(t, c, "bot")
	good := sshd.keyFile
	c.okCheck("conn", "add", "web", "--host", sshd.Host, "--port", itoa(sshd.Port), "--user", sshd.User,
		"--key-file", good, "--host-key", bareKey(sshd.HostKey))
	c.ok("", "grant", "bot", "web", "--write", "ask")
	before := c.conns()["web"]
	keep := func(step string) {
		t.Helper()
		now := c.conns()["web"]
		if now.ID != before.ID {
			t.Errorf("%s: connection id %s; want %s kept", step, now.ID, before.ID)
		}
		var grants []model.Grant
		if err := json.Unmarshal([]byte(c.ok("", "grant", "list", "-o", "json")), &grants); err != nil {
			t.Fatal(err)
		}
		if len(grants) != 1 || grants[0].ConnectionID != before.ID || grants[0].Write != "ask" {
			t.Errorf("%s: grants %+v; want bot's write=ask grant on %s kept", step, grants, before.ID)
		}
	}

	// The target is rebuilt: a new host key. The check says so, naming
	// both keys, and records it; pinning the new key stores it.
	oldFP := ssh.FingerprintSHA256(sshd.HostKey)
	sshd.NewHostKey(t)
	newFP := ssh.FingerprintSHA256(sshd.HostKey)
	r, got := c.connResult("conn", "check", "web")
	if r.code != 1 || got.Check.Status != "host_key_mismatch" || !strings.Contains(got.Check.Message, newFP) ||
		!strings.Contains(got.Check.Message, oldFP) {
		t.Fatalf("check after a new host key: exit %d, %+v; want 1, host_key_mismatch naming %s and %s", r.code, got.Check, newFP, oldFP)
	}
	if s := c.conns()["web"].KeyStatus; s != "host_key_mismatch" {
		t.Errorf("recorded status %q; want host_key_mismatch", s)
	}
	// A wrong pin is refused and stores nothing.
	r, got = c.connResult("conn", "pin", "web", "--host-key", hostLine(t, "127.0.0.1"))
	if r.code != 1 || got.Stored || c.conns()["web"].HostKeys[0].Fingerprint != oldFP {
		t.Errorf("pin to a wrong key: exit %d, stored %v, pinned %s; want 1, nothing stored, %s kept",
			r.code, got.Stored, c.conns()["web"].HostKeys[0].Fingerprint, oldFP)
	}
	out := c.okCheck("conn", "pin", "web", "--accept-new-host-key")
	for _, want := range []string{"host key presented now: ssh-ed25519 " + newFP, "host key: " + oldFP + " -> " + newFP, "key check: ok"} {
		if !strings.Contains(out, want) {
			t.Errorf("conn pin output lacks %q:\n%s", want, out)
		}
	}
	keep("pin")
	// Pinning the key pinned already says so and writes nothing (issue
	// 25: it said "updated").
	audited := len(c.auditRows())
	for _, args := range [][]string{{"--accept-new-host-key"}, {"--host-key", strings.TrimSpace(sshd.KnownHostsLine)}} {
		r := c.run("", append([]string{"conn", "pin", "web"}, args...)...)
		if want := "connection web unchanged: host key " + newFP + " is pinned already\n"; r.code != 0 || !strings.HasSuffix(r.stdout, want) {
			t.Errorf("conn pin %v of the pinned key: got exit %d, %q; want 0 ending %q", args, r.code, r.stdout, want)
		}
	}
	if n := len(c.auditRows()); n != audited {
		t.Errorf("re-pinning the pinned key wrote %d audit rows; want none", n-audited)
	}

	// Rotation is staged (issue 25): a key the target does not know yet
	// is staged beside the current one, nothing switches, and the current
	// key keeps working.
	stranger := writeKeyFiles(t, "stranger", "")
	strangerKey := strings.TrimSuffix(stranger.pubLine, " stranger")
	r, got = c.connResult("conn", "rotate-key", "web", "--key-file", stranger.priv)
	if r.code != 0 || !got.Stored || got.Rotation != "staged" || got.Connection.StagedKey == nil ||
		got.Connection.PublicKey != before.PublicKey || !strings.HasPrefix(got.Connection.StagedKey.PublicKey, strangerKey) {
		t.Fatalf("rotate-key --key-file: exit %d, %+v; want 0, staged beside the current key", r.code, got)
	}
	// The commit proves the staged key first and refuses it.
	r, got = c.connResult("conn", "rotate-key", "web", "--commit")
	if r.code != 1 || got.Stored || got.StagedCheck == nil || got.StagedCheck.Status != "rejected" ||
		!strings.Contains(r.stderr, "not proved") || c.conns()["web"].PublicKey != before.PublicKey {
		t.Errorf("commit of a key the target does not accept: exit %d, %+v, stderr %q; want 1, rejected, nothing switched", r.code, got, r.stderr)
	}
	// The check proves both: the current ok, the staged rejected.
	r, got = c.connResult("conn", "check", "web")
	if r.code != 0 || got.Check.Status != "ok" || got.StagedCheck == nil || got.StagedCheck.Status != "rejected" {
		t.Errorf("check with a staged key not installed: exit %d, check %+v, staged %+v; want 0, ok, rejected", r.code, got.Check, got.StagedCheck)
	}
	if k := c.conns()["web"].StagedKey; k == nil || k.CheckStatus != "rejected" {
		t.Errorf("conn list staged key %+v; want its check recorded as rejected", k)
	}
	if table := c.ok("", "conn", "list"); !strings.Contains(table, "(staged SHA256:") {
		t.Errorf("conn list lacks the staged key:\n%s", table)
	}
	// Installed, both are ok, and the commit switches.
	sshd.Authorize(t, stranger.pubLine)
	r, got = c.connResult("conn", "check", "web")
	if r.code != 0 || got.Check.Status != "ok" || got.StagedCheck == nil || got.StagedCheck.Status != "ok" {
		t.Errorf("check with the staged key installed: exit %d, check %+v, staged %+v; want ok and ok", r.code, got.Check, got.StagedCheck)
	}
	r, got = c.connResult("conn", "rotate-key", "web", "--commit")
	if r.code != 0 || !got.Stored || got.Rotation != "committed" || got.Connection.StagedKey != nil ||
		!strings.HasPrefix(got.Connection.PublicKey, strangerKey) || got.Previous.PublicKey != before.PublicKey {
		t.Fatalf("commit of a proved key: exit %d, %+v; want 0, the new key in use, none staged", r.code, got)
	}
	keep("rotate-key --key-file --commit")
	// The old key is no longer used: with its line gone from the target,
	// the connection still works.
	sshd.Revoke(t, sshd.UserKey.PublicKey())
	if out := c.okCheck("conn", "check", "web"); !strings.HasPrefix(out, "web: ok") {
		t.Errorf("check after the old key was revoked on the target: %q; want ok", out)
	}
	if r := c.run("", "conn", "rotate-key", "web", "--commit"); r.code != 2 || !strings.Contains(r.stderr, "no staged key") {
		t.Errorf("commit with nothing staged: exit %d, stderr %q; want 2 and the reason", r.code, r.stderr)
	}

	// A generated key: staged, its line printed; staging again replaces
	// it; abort drops it.
	r, got = c.connResult("conn", "rotate-key", "web", "--generate")
	if r.code != 0 || got.Connection == nil || got.Connection.StagedKey == nil {
		t.Fatalf("rotate-key --generate: exit %d, %+v; want 0, staged", r.code, got)
	}
	first := got.Connection.StagedKey
	r, got = c.connResult("conn", "rotate-key", "web", "--generate")
	if r.code != 0 || got.Connection.StagedKey == nil || got.Connection.StagedKey.Fingerprint == first.Fingerprint {
		t.Fatalf("rotate-key --generate again: exit %d, %+v; want another staged key", r.code, got)
	}
	r, got = c.connResult("conn", "rotate-key", "web", "--abort")
	if r.code != 0 || got.Rotation != "aborted" || got.Connection.StagedKey != nil || c.conns()["web"].StagedKey != nil {
		t.Errorf("abort: exit %d, %+v; want 0, nothing staged", r.code, got)
	}
	text := c.ok("", "conn", "rotate-key", "web", "--generate")
	line := c.conns()["web"].StagedKey.PublicKey
	if !strings.HasPrefix(line, "ssh-ed25519 ") || !strings.HasSuffix(line, " postern:web") || !strings.Contains(text, "  "+line+"\n") ||
		!strings.Contains(text, "authorized_keys") || !strings.Contains(text, "nothing switched") {
		t.Errorf("rotate-key --generate printed %q (staged %q); want the ssh-ed25519 line named postern:web, where it goes, and that nothing switched", text, line)
	}
	if c.conns()["web"].PublicKey == line {
		t.Error("the generated key is in use before its commit")
	}
	sshd.Authorize(t, line)
	c.okCheck("conn", "rotate-key", "web", "--commit")
	if x := c.conns()["web"]; x.PublicKey != line || x.StagedKey != nil {
		t.Errorf("after commit: key %q, staged %+v; want %q in use, none staged", x.PublicKey, x.StagedKey, line)
	}
	if out := c.okCheck("conn", "check", "web"); !strings.HasPrefix(out, "web: ok") {
		t.Errorf("check after the generated key's commit: %q; want ok", out)
	}
	keep("rotate-key --generate --commit")

	// Moving to an address where nothing answers stores nothing unless
	// allowed; moving back proves the key again.
	closed := closedPort(t)
	r, got = c.connResult("conn", "update", "web", "--port", itoa(closed))
	if r.code != 1 || got.Stored || c.conns()["web"].Port != sshd.Port {
		t.Errorf("update to a closed port: exit %d, stored %v; want 1 and the old port kept", r.code, got.Stored)
	}
	r, got = c.connResult("conn", "update", "web", "--port", itoa(closed), "--allow-unverified")
	if r.code != 0 || !got.Stored || got.Connection.Port != closed || got.Connection.KeyStatus != "unreachable" {
		t.Errorf("update --allow-unverified to a closed port: exit %d, %+v; want stored, unreachable", r.code, got)
	}
	out = c.okCheck("conn", "update", "web", "--port", itoa(sshd.Port), "--env", "production", "--recipe", "linux")
	if !strings.Contains(out, "key check: ok") {
		t.Errorf("update back: %q; want key check ok", out)
	}
	keep("update")
	if x := c.conns()["web"]; x.Env != "production" || x.Recipe != "linux" || x.KeyStatus != "ok" {
		t.Errorf("after update: %+v; want production, linux, ok", x)
	}

	// Every change is in the audit log as an admin's, and the chain holds.
	var ops []string
	for _, row := range adminRows(c.auditRows()) {
		if len(row.Deciders) != 1 || !strings.HasPrefix(row.Deciders[0], "cli:") || row.Decision != "changed" {
			t.Errorf("admin row %d: deciders %v, decision %q; want one cli: decider, changed", row.Seq, row.Deciders, row.Decision)
		}
		if strings.HasPrefix(row.Operation, "conn ") && row.ConnectionID != before.ID {
			t.Errorf("admin row %d (%s): connection id %q; want %s", row.Seq, row.Operation, row.ConnectionID, before.ID)
		}
		ops = append(ops, row.Operation)
	}
	all := strings.Join(ops, "\n")
	for _, want := range []string{"conn add web", "grant bot web", "conn update web: host key " + oldFP + " -> " + newFP,
		"conn rotate-key web: staged key ", "(generated)", "conn rotate-key web: key ", "dropped the staged key",
		"conn update web: port " + itoa(sshd.Port) + " -> " + itoa(closed),
		"env dev -> production"} {
		if !strings.Contains(all, want) {
			t.Errorf("the audit log's admin rows lack %q:\n%s", want, all)
		}
	}
	if n := strings.Count(all, "\n") + 1; n != 13 {
		t.Errorf("admin rows: %d; want 13 (agent add, conn add, grant, pin, four stagings, an abort, two commits, two updates):\n%s", n, all)
	}
	if out := c.ok("", "audit", "verify"); !strings.Contains(out, "intact") {
		t.Errorf("audit verify: %q", out)
	}
}
