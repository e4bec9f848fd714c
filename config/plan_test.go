package config

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/postern/postern/policy"
	"github.com/postern/postern/recipes"
	"github.com/postern/postern/store"
)

// The pieces of the cases' files: one of each resource, all related.
const (
	agentBot = `
[[agent]]
name = "bot"
keys = ["{a1}"]
`
	connWeb = `
[[connection]]
alias = "web"
host = "10.0.0.5"
user = "deploy"
host_keys = ["{h1}"]
key_file = "c1.key"
`
	grantBotWeb = `
[[grant]]
agent = "bot"
connection = "web"
write = "ask"
`
	notifyOps = `
[[notify]]
name = "ops"
url_file = "ops.url"
secret_file = "ops.secret"
events = ["pending"]
`
	allFour = agentBot + connWeb + grantBotWeb + notifyOps
)

// How a dry run lists the files read for connWeb and notifyOps.
const (
	readsWeb       = "reads {dir}/c1.key: key_file of connection web"
	readsOpsURL    = "reads {dir}/ops.url: url_file of notify ops"
	readsOpsSecret = "reads {dir}/ops.secret: secret_file of notify ops"
)

// kept is how a dry run lists what the file does not name.
func kept(what string) string { return "  " + what + " (not in the file; kept, --prune removes it)" }

// usedKept is how a dry run lists what the file does not declare and a
// grant in it uses: --prune does not remove it.
func usedKept(what, user string) string {
	return "  " + what + " (not in the file; kept: " + user + " uses it)"
}

// TestPlan: every kind of plan, as a dry run prints it (after the files it
// read, each with what it is for). After the dry run
// each case is applied for real (every change made), and a second apply
// of the same file finds nothing to change.
func TestPlan(t *testing.T) {
	tests := []struct {
		name string
		seed string // applied first, "" for an empty database
		file string
		opts Options
		want []string // the dry run's lines after the config file's "reads" line
	}{
		{name: "an empty file on an empty database",
			want: []string{"nothing to change", "dry run, nothing changed: 0 to change, 0 done, 0 failed, 0 unchanged, 0 not in the file"}},

		// Agents.
		{name: "new agent", file: agentBot,
			want: []string{"+ agent bot: keys {a1.fp}", "dry run, nothing changed: 1 to change, 0 done, 0 failed, 0 unchanged, 0 not in the file"}},
		{name: "new agent, a key given twice", file: `[[agent]]
name = "bot"
keys = ["{a1}", "{a2} bot@laptop", "{a1} again"]`,
			want: []string{"+ agent bot: keys {a1.fp}, {a2.fp}", "dry run, nothing changed: 1 to change, 0 done, 0 failed, 0 unchanged, 0 not in the file"}},
		{name: "new agent, disabled", file: agentBot + "disabled = true\n",
			want: []string{"+ agent bot: keys {a1.fp}", "~ agent bot: disabled",
				"dry run, nothing changed: 2 to change, 0 done, 0 failed, 0 unchanged, 0 not in the file"}},
		{name: "agent as declared", seed: agentBot, file: agentBot,
			want: []string{"nothing to change", "dry run, nothing changed: 0 to change, 0 done, 0 failed, 1 unchanged, 0 not in the file"}},
		{name: "agent gains a key", seed: agentBot, file: `[[agent]]
name = "bot"
keys = ["{a1}", "{a2}"]`,
			want: []string{"~ agent bot: add key {a2.fp}", "dry run, nothing changed: 1 to change, 0 done, 0 failed, 0 unchanged, 0 not in the file"}},
		{name: "agent key the file leaves out is kept", seed: `[[agent]]
name = "bot"
keys = ["{a1}", "{a2}"]`, file: agentBot,
			want: []string{"nothing to change", kept("agent bot key {a2.fp}"),
				"dry run, nothing changed: 0 to change, 0 done, 0 failed, 1 unchanged, 1 not in the file"}},
		{name: "agent key the file leaves out is pruned", seed: `[[agent]]
name = "bot"
keys = ["{a1}", "{a2}"]`, file: agentBot, opts: Options{Prune: true},
			want: []string{"- agent bot: key {a2.fp}", "dry run, nothing changed: 1 to change, 0 done, 0 failed, 0 unchanged, 0 not in the file"}},
		{name: "agent disabled", seed: agentBot, file: agentBot + "disabled = true\n",
			want: []string{"~ agent bot: disabled false -> true", "dry run, nothing changed: 1 to change, 0 done, 0 failed, 0 unchanged, 0 not in the file"}},
		{name: "agent enabled", seed: agentBot + "disabled = true\n", file: agentBot,
			want: []string{"~ agent bot: disabled true -> false", "dry run, nothing changed: 1 to change, 0 done, 0 failed, 0 unchanged, 0 not in the file"}},
		{name: "agent re-keyed and disabled at once", seed: agentBot, file: `[[agent]]
name = "bot"
keys = ["{a2}"]
disabled = true`, opts: Options{Prune: true},
			want: []string{"~ agent bot: add key {a2.fp}", "- agent bot: key {a1.fp}", "~ agent bot: disabled false -> true",
				"dry run, nothing changed: 3 to change, 0 done, 0 failed, 0 unchanged, 0 not in the file"}},

		// Connections.
		{name: "new connection, pinned, with a key file", file: connWeb,
			want: []string{readsWeb, "+ connection web: deploy@10.0.0.5:22, env dev, host key {h1.fp}, key {c1.fp}",
				"dry run, nothing changed: 1 to change, 0 done, 0 failed, 0 unchanged, 0 not in the file"}},
		{name: "new connection, two pins", file: `[[connection]]
alias = "web"
host = "10.0.0.5"
user = "deploy"
host_keys = ["{h1}", "10.0.0.5 {h2}"]
key_file = "c1.key"`,
			want: []string{readsWeb, "+ connection web: deploy@10.0.0.5:22, env dev, host key {h1.fp}, {h2.fp}, key {c1.fp}",
				"dry run, nothing changed: 1 to change, 0 done, 0 failed, 0 unchanged, 0 not in the file"}},
		{name: "new connection, host key accepted, key generated", file: `[[connection]]
alias = "db"
host = "db.internal"
port = 2222
user = "postgres"
env = "production"
recipe = "linux"
accept_new_host_key = true
generate_key = true`,
			want: []string{"+ connection db: postgres@db.internal:2222, env production, host key the key it presents now, key generated",
				"dry run, nothing changed: 1 to change, 0 done, 0 failed, 0 unchanged, 0 not in the file"}},
		{name: "connection as declared", seed: connWeb, file: connWeb,
			want: []string{readsWeb, "nothing to change", "dry run, nothing changed: 0 to change, 0 done, 0 failed, 1 unchanged, 0 not in the file"}},
		{name: "connection keeps its key and pins when the file names none", seed: connWeb, file: `[[connection]]
alias = "web"
host = "10.0.0.5"
user = "deploy"`,
			want: []string{"nothing to change", "dry run, nothing changed: 0 to change, 0 done, 0 failed, 1 unchanged, 0 not in the file"}},
		{name: "accept_new_host_key and generate_key do not change an existing connection", seed: connWeb, file: `[[connection]]
alias = "web"
host = "10.0.0.5"
user = "deploy"
accept_new_host_key = true
generate_key = true`,
			want: []string{"nothing to change", "dry run, nothing changed: 0 to change, 0 done, 0 failed, 1 unchanged, 0 not in the file"}},
		{name: "connection moved", seed: connWeb, file: `[[connection]]
alias = "web"
host = "10.0.0.6"
port = 2200
user = "admin"
env = "staging"
recipe = "linux"`,
			want: []string{"~ connection web: host 10.0.0.5 -> 10.0.0.6, port 22 -> 2200, user deploy -> admin, env dev -> staging, recipe none -> linux",
				"dry run, nothing changed: 1 to change, 0 done, 0 failed, 0 unchanged, 0 not in the file"}},
		{name: "connection's recipe and env left out go back to the defaults", seed: connWeb + "recipe = \"linux\"\nenv = \"test\"\n", file: connWeb,
			want: []string{readsWeb, "~ connection web: env test -> dev, recipe linux -> none",
				"dry run, nothing changed: 1 to change, 0 done, 0 failed, 0 unchanged, 0 not in the file"}},
		{name: "connection re-pinned", seed: connWeb, file: `[[connection]]
alias = "web"
host = "10.0.0.5"
user = "deploy"
host_keys = ["{h2}"]`,
			want: []string{"~ connection web: host key {h1.fp} -> {h2.fp}",
				"dry run, nothing changed: 1 to change, 0 done, 0 failed, 0 unchanged, 0 not in the file"}},
		{name: "connection's pins in another order", seed: `[[connection]]
alias = "web"
host = "10.0.0.5"
user = "deploy"
host_keys = ["{h1}", "{h2}"]
key_file = "c1.key"`, file: `[[connection]]
alias = "web"
host = "10.0.0.5"
user = "deploy"
host_keys = ["{h2}", "{h1}", "web {h2}"]`,
			want: []string{"nothing to change", "dry run, nothing changed: 0 to change, 0 done, 0 failed, 1 unchanged, 0 not in the file"}},
		{name: "connection re-keyed", seed: connWeb, file: `[[connection]]
alias = "web"
host = "10.0.0.5"
user = "deploy"
key_file = "c2.key"`,
			want: []string{"reads {dir}/c2.key: key_file of connection web", "~ connection web: key {c1.fp} -> {c2.fp}",
				"dry run, nothing changed: 1 to change, 0 done, 0 failed, 0 unchanged, 0 not in the file"}},

		// Notification channels.
		{name: "new channel, URL and secret from files", file: notifyOps,
			want: []string{readsOpsURL, readsOpsSecret, "+ notify ops: json to https://hooks.example.com/…, events pending",
				"dry run, nothing changed: 1 to change, 0 done, 0 failed, 0 unchanged, 0 not in the file"}},
		{name: "new channel, URL inline, every event", file: `[[notify]]
name = "alerts"
format = "ntfy"
url = "` + otherURL + `"`,
			want: []string{"+ notify alerts: ntfy to https://ntfy.example.com/…, events pending,decided",
				"dry run, nothing changed: 1 to change, 0 done, 0 failed, 0 unchanged, 0 not in the file"}},
		{name: "channel as declared", seed: notifyOps, file: notifyOps,
			want: []string{readsOpsURL, readsOpsSecret, "nothing to change", "dry run, nothing changed: 0 to change, 0 done, 0 failed, 1 unchanged, 0 not in the file"}},
		{name: "channel keeps its URL and secret when the file names none", seed: notifyOps, file: `[[notify]]
name = "ops"
events = ["pending"]`,
			want: []string{"nothing to change", "dry run, nothing changed: 0 to change, 0 done, 0 failed, 1 unchanged, 0 not in the file"}},
		{name: "channel's format and events", seed: notifyOps, file: `[[notify]]
name = "ops"
format = "ntfy"
events = ["decided"]`,
			want: []string{"~ notify ops: format json -> ntfy, events pending -> decided",
				"dry run, nothing changed: 1 to change, 0 done, 0 failed, 0 unchanged, 0 not in the file"}},
		{name: "channel's URL and secret", seed: notifyOps, file: `[[notify]]
name = "ops"
url_file = "other.url"
secret_file = "other.secret"
events = ["pending"]`,
			want: []string{"reads {dir}/other.url: url_file of notify ops", "reads {dir}/other.secret: secret_file of notify ops", "~ notify ops: url -> https://ntfy.example.com/…, secret changed",
				"dry run, nothing changed: 1 to change, 0 done, 0 failed, 0 unchanged, 0 not in the file"}},

		// Grants.
		{name: "new grant of an agent and a connection only in the database", seed: agentBot + connWeb, file: `[[grant]]
agent = "bot"
connection = "web"`,
			want: []string{"+ grant bot web: read=allow write=deny destructive=deny", usedKept("connection web", "grant bot on web (grant #1)"),
				usedKept("agent bot", "grant bot on web (grant #1)"),
				"dry run, nothing changed: 1 to change, 0 done, 0 failed, 0 unchanged, 2 not in the file"}},
		{name: "everything new", file: agentBot + connWeb + `
[[grant]]
agent = "bot"
connection = "web"
read = "ask"
write = "ask"
destructive = "allow"` + notifyOps,
			want: []string{readsWeb, readsOpsURL, readsOpsSecret, "+ agent bot: keys {a1.fp}", "+ connection web: deploy@10.0.0.5:22, env dev, host key {h1.fp}, key {c1.fp}",
				"+ notify ops: json to https://hooks.example.com/…, events pending",
				"+ grant bot web: read=ask write=ask destructive=allow",
				"dry run, nothing changed: 4 to change, 0 done, 0 failed, 0 unchanged, 0 not in the file"}},
		{name: "everything as declared", seed: allFour, file: allFour,
			want: []string{readsWeb, readsOpsURL, readsOpsSecret, "nothing to change", "dry run, nothing changed: 0 to change, 0 done, 0 failed, 4 unchanged, 0 not in the file"}},
		{name: "grant's rules", seed: allFour, file: agentBot + connWeb + notifyOps + `
[[grant]]
agent = "bot"
connection = "web"
destructive = "ask"`,
			want: []string{readsWeb, readsOpsURL, readsOpsSecret, "~ grant bot web: read=allow write=deny destructive=ask (was read=allow write=ask destructive=deny)",
				"dry run, nothing changed: 1 to change, 0 done, 0 failed, 3 unchanged, 0 not in the file"}},
		// (From production, the environment change would wait for a
		// second admin: TestApplyHoldsLoosening.)
		{name: "grant checked against the env the file gives its connection", seed: connWeb + `env = "staging"`,
			file: agentBot + connWeb + `
[[grant]]
agent = "bot"
connection = "web"
destructive = "allow"`,
			want: []string{readsWeb, "+ agent bot: keys {a1.fp}", "~ connection web: env staging -> dev",
				"+ grant bot web: read=allow write=deny destructive=allow",
				"dry run, nothing changed: 3 to change, 0 done, 0 failed, 0 unchanged, 0 not in the file"}},

		// What the file does not name.
		{name: "what the file leaves out is kept", seed: allFour,
			want: []string{"nothing to change", kept("grant bot web"), kept("connection web"), kept("agent bot"), kept("notify ops"),
				"dry run, nothing changed: 0 to change, 0 done, 0 failed, 0 unchanged, 4 not in the file"}},
		{name: "what the file leaves out is pruned, grants first", seed: allFour, opts: Options{Prune: true},
			want: []string{"- grant bot web", "- connection web", "- agent bot", "- notify ops",
				"dry run, nothing changed: 4 to change, 0 done, 0 failed, 0 unchanged, 0 not in the file"}},
		{name: "prune keeps what the file names", seed: allFour + `
[[agent]]
name = "old"
keys = ["{a2}"]`, file: allFour, opts: Options{Prune: true},
			want: []string{readsWeb, readsOpsURL, readsOpsSecret, "- agent old", "dry run, nothing changed: 1 to change, 0 done, 0 failed, 4 unchanged, 0 not in the file"}},
		{name: "a grant of an agent and a connection only in the database", seed: allFour, file: grantBotWeb + notifyOps,
			want: []string{readsOpsURL, readsOpsSecret, "nothing to change",
				usedKept("connection web", "grant bot on web (grant #1)"), usedKept("agent bot", "grant bot on web (grant #1)"),
				"dry run, nothing changed: 0 to change, 0 done, 0 failed, 2 unchanged, 2 not in the file"}},
		{name: "prune keeps what a grant of the file uses once declared", seed: allFour, file: agentBot + grantBotWeb + connWeb,
			opts: Options{Prune: true},
			want: []string{readsWeb, "- notify ops", "dry run, nothing changed: 1 to change, 0 done, 0 failed, 3 unchanged, 0 not in the file"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := newRig(t)
			if tt.seed != "" {
				r.mustApply(tt.seed, Options{})
			}
			dry := tt.opts
			dry.DryRun = true
			out, _, err := r.apply(tt.file, dry)
			if err != nil {
				t.Fatalf("dry run: %v", err)
			}
			want := strings.Split(r.expand(strings.Join(append([]string{"reads {dir}/postern.toml: the config file"}, tt.want...), "\n")), "\n")
			diffLines(t, "dry run", strings.Split(strings.TrimSuffix(out, "\n"), "\n"), want)

			if out := r.mustApply(tt.file, tt.opts); strings.HasPrefix(out, "reads ") {
				t.Errorf("apply without --dry-run lists the files read:\n%s", out)
			}
			out, res, err := r.apply(tt.file, tt.opts)
			if err != nil || res.Planned != 0 {
				t.Errorf("second apply: %+v, %v; want nothing to change\n%s", res, err, out)
			}
		})
	}
}

// TestPlanErrors: every mistake a file can hold, as apply names it. A file
// with mistakes changes nothing.
func TestPlanErrors(t *testing.T) {
	tests := []struct {
		name  string
		seed  string
		file  string
		other bool // the store is opened with another master key after the seed
		setup func(r *rig)
		opts  Options
		want  []string
	}{
		// Agents.
		{name: "agent name", file: `[[agent]]
name = "b@d"
keys = ["{a1}"]`,
			want: []string{`agent "b@d" (agent #1): agent name "b@d": use 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit`}},
		{name: "agent twice", file: agentBot + agentBot,
			want: []string{`agent "bot" (agent #2): declared twice`}},
		{name: "agent without a key", file: `[[agent]]
name = "bot"
keys = []`,
			want: []string{`agent "bot" (agent #1): keys: give at least one public key`}},
		{name: "agent's keys malformed", file: `[[agent]]
name = "bot"
keys = ["ssh-ed25519 AAAA", "from=\"10.0.0.1\" {a1}", ""]`,
			want: []string{`agent "bot" (agent #1): keys: malformed OpenSSH public key: ssh: no key found; last parsing error for ignored line: ssh: short read`,
				`agent "bot" (agent #1): keys: public key has authorized_keys options (from="10.0.0.1"); give the bare key`,
				`agent "bot" (agent #1): keys: public key is empty`}},

		// Connections.
		{name: "connection alias", file: `[[connection]]
alias = "-web"`,
			want: []string{`connection "-web" (connection #1): connection name "-web": use 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit`}},
		{name: "connection twice", file: connWeb + connWeb,
			want: []string{`connection "web" (connection #2): declared twice`}},
		{name: "connection's host", file: `[[connection]]
alias = "web"
host = "a host"
user = "deploy"`,
			want: []string{`connection "web" (connection #1): connection web: host "a host" is not a host name or address`}},
		{name: "connection's port", file: `[[connection]]
alias = "web"
host = "10.0.0.5"
port = 65536
user = "deploy"`,
			want: []string{`connection "web" (connection #1): connection web: port 65536 out of range 1-65535`}},
		{name: "connection's user", file: `[[connection]]
alias = "web"
host = "10.0.0.5"`,
			want: []string{`connection "web" (connection #1): connection web: target user "" is not a user name`}},
		{name: "connection's env", file: connWeb + `env = "prod"`,
			want: []string{`connection "web" (connection #1): environment "prod": want dev, test, staging or production`}},
		{name: "connection's recipe", file: connWeb + `recipe = "nosuch"`,
			want: []string{`connection "web" (connection #1): unknown recipe "nosuch" (postern recipes list)`}},
		{name: "connection's host key", file: `[[connection]]
alias = "web"
host = "10.0.0.5"
user = "deploy"
host_keys = ["@revoked {h1}"]`,
			want: []string{`connection "web" (connection #1): host_keys: host key line has a marker (@revoked); give a plain known_hosts line`}},
		{name: "connection pinned and accepting", file: connWeb + `accept_new_host_key = true`,
			want: []string{`connection "web" (connection #1): give host_keys or accept_new_host_key, not both`}},
		{name: "connection's key given and generated", file: connWeb + `generate_key = true`,
			want: []string{`connection "web" (connection #1): give key_file or generate_key, not both`}},
		{name: "connection's key file missing", file: `[[connection]]
alias = "web"
host = "10.0.0.5"
user = "deploy"
key_file = "nosuch.key"`,
			want: []string{`connection "web" (connection #1): key_file: stat {dir}/nosuch.key: no such file or directory`}},
		{name: "connection's key file not a key", file: `[[connection]]
alias = "web"
host = "10.0.0.5"
user = "deploy"
key_file = "ops.url"`,
			want: []string{`connection "web" (connection #1): key_file ops.url: private key does not parse: ssh: no key found`}},
		{name: "connection's key file empty", file: `[[connection]]
alias = "web"
host = "10.0.0.5"
user = "deploy"
key_file = "empty.key"`,
			want: []string{`connection "web" (connection #1): key_file empty.key: private key is empty`}},
		{name: "connection's key file encrypted", file: `[[connection]]
alias = "web"
host = "10.0.0.5"
user = "deploy"
key_file = "locked.key"`,
			setup: func(r *rig) { r.write("locked.key", string(lockedKey(r.t))) },
			want:  []string{`connection "web" (connection #1): key_file locked.key: private key is protected by a passphrase; give an unencrypted copy (ssh-keygen -p -N '' -f COPY)`}},
		{name: "connection's key file a device", file: `[[connection]]
alias = "web"
host = "10.0.0.5"
user = "deploy"
key_file = "/dev/zero"`,
			want: []string{`connection "web" (connection #1): key_file: /dev/zero: a character device; give a regular file`}},
		{name: "connection's key file too large", file: `[[connection]]
alias = "web"
host = "10.0.0.5"
user = "deploy"
key_file = "big.key"`,
			setup: func(r *rig) {
				if err := os.Truncate(r.write("big.key", ""), maxKeyFile+1); err != nil {
					r.t.Fatal(err)
				}
			},
			want: []string{`connection "web" (connection #1): key_file: {dir}/big.key: larger than 64 KiB, the most a key file may hold`}},
		{name: "new connection without a host key", file: `[[connection]]
alias = "web"
host = "10.0.0.5"
user = "deploy"
key_file = "c1.key"`,
			want: []string{`connection "web" (connection #1): a new connection needs host_keys or accept_new_host_key`}},
		{name: "new connection without a key", file: `[[connection]]
alias = "web"
host = "10.0.0.5"
user = "deploy"
host_keys = ["{h1}"]`,
			want: []string{`connection "web" (connection #1): a new connection needs key_file or generate_key`}},
		{name: "connection's stored key sealed with another master key", seed: connWeb, other: true, file: connWeb,
			want: []string{`connection "web" (connection #1): the stored key cannot be read to compare: ` + sealedErr("connection web")}},

		// Notification channels.
		{name: "channel name", file: `[[notify]]
name = "o p s"
url = "` + opsURL + `"`,
			want: []string{`notify "o p s" (notify #1): notification channel name "o p s": use 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit`}},
		{name: "channel twice", file: notifyOps + notifyOps,
			want: []string{`notify "ops" (notify #2): declared twice`}},
		{name: "channel's format", file: notifyOps + `format = "xml"`,
			want: []string{`notify "ops" (notify #1): notification format "xml": want json, slack or ntfy`}},
		{name: "channel's events", file: `[[notify]]
name = "ops"
url_file = "ops.url"
events = ["pending", "sent"]`,
			want: []string{`notify "ops" (notify #1): notification event "sent": want pending, decided or audit.head, comma-separated`}},
		{name: "channel's URL twice", file: notifyOps + `url = "` + opsURL + `"`,
			want: []string{`notify "ops" (notify #1): give url or url_file, not both`}},
		{name: "channel's URL file missing", file: `[[notify]]
name = "ops"
url_file = "nosuch.url"`,
			want: []string{`notify "ops" (notify #1): url_file: stat {dir}/nosuch.url: no such file or directory`}},
		{name: "channel's URL file a FIFO", file: `[[notify]]
name = "ops"
url_file = "url.fifo"`,
			setup: func(r *rig) {
				if err := syscall.Mkfifo(filepath.Join(r.dir, "url.fifo"), 0o600); err != nil {
					r.t.Fatal(err)
				}
			},
			want: []string{`notify "ops" (notify #1): url_file: {dir}/url.fifo: a named pipe (FIFO); give a regular file`}},
		{name: "channel's URL file too large", file: `[[notify]]
name = "ops"
url_file = "big.url"`,
			setup: func(r *rig) { r.write("big.url", "https://hooks.example.com/"+strings.Repeat("a", maxURLFile)) },
			want:  []string{`notify "ops" (notify #1): url_file: {dir}/big.url: larger than 8 KiB, the most a url file may hold`}},
		{name: "channel's URL", file: `[[notify]]
name = "ops"
url = "ftp://hooks.example.com/x"`,
			want: []string{`notify "ops" (notify #1): notification URL must start with https:// (or http://)`}},
		{name: "channel's secret file missing", file: `[[notify]]
name = "ops"
url_file = "ops.url"
secret_file = "nosuch.secret"`,
			want: []string{`notify "ops" (notify #1): secret_file: stat {dir}/nosuch.secret: no such file or directory`}},
		{name: "channel's secret file a directory", file: `[[notify]]
name = "ops"
url_file = "ops.url"
secret_file = "."`,
			want: []string{`notify "ops" (notify #1): secret_file: {dir}: a directory; give a regular file`}},
		{name: "channel's secret file too large", file: `[[notify]]
name = "ops"
url_file = "ops.url"
secret_file = "big.secret"`,
			setup: func(r *rig) { r.write("big.secret", strings.Repeat("s", maxSecretFile+1)) },
			want:  []string{`notify "ops" (notify #1): secret_file: {dir}/big.secret: larger than 8 KiB, the most a secret file may hold`}},
		{name: "new channel without a URL", file: `[[notify]]
name = "ops"
secret_file = "ops.secret"`,
			want: []string{`notify "ops" (notify #1): a new channel needs url_file (or url)`}},
		{name: "channel's stored URL sealed with another master key", seed: notifyOps, other: true, file: notifyOps,
			want: []string{`notify "ops" (notify #1): the stored URL cannot be read to compare: ` + sealedErr("notification channel ops")}},

		// Grants.
		{name: "grant twice", file: agentBot + connWeb + grantBotWeb + grantBotWeb,
			want: []string{`grant bot on web (grant #2): declared twice`}},
		{name: "grant of an unknown agent", file: connWeb + `
[[grant]]
agent = "ghost"
connection = "web"`,
			want: []string{`grant ghost on web (grant #1): no agent "ghost" in the file or the database`}},
		{name: "grant on an unknown connection", seed: connWeb, file: agentBot + `
[[grant]]
agent = "bot"
connection = "nosuch"`,
			want: []string{`grant bot on nosuch (grant #1): no connection "nosuch" in the file or the database`}},
		{name: "grant's rules", file: agentBot + connWeb + `
[[grant]]
agent = "bot"
connection = "web"
read = "yes"
write = "sometimes"
destructive = "deny"`,
			want: []string{`grant bot on web (grant #1): read: "yes": want allow, ask or deny`,
				`grant bot on web (grant #1): write: "sometimes": want allow, ask or deny`}},
		{name: "grant of destructive=allow on production", seed: connWeb + `env = "production"`, file: agentBot + `
[[grant]]
agent = "bot"
connection = "web"
destructive = "allow"`,
			want: []string{`grant bot on web (grant #1): destructive=allow is not permitted on a production connection; use ask (a human approves each operation) or deny`}},
		{name: "grant of destructive=allow on a connection the file makes production", file: agentBot + connWeb + `env = "production"
[[grant]]
agent = "bot"
connection = "web"
destructive = "allow"`,
			want: []string{`grant bot on web (grant #1): destructive=allow is not permitted on a production connection; use ask (a human approves each operation) or deny`}},

		// Every mistake at once, in the file's order by kind.
		{name: "every mistake is named", file: `[[agent]]
name = "bot"
keys = []
[[connection]]
alias = "web"
host = "10.0.0.5"
user = "deploy"
[[notify]]
name = "ops"
format = "xml"
[[grant]]
agent = "ghost"
connection = "web"`,
			want: []string{`agent "bot" (agent #1): keys: give at least one public key`,
				`connection "web" (connection #1): a new connection needs host_keys or accept_new_host_key`,
				`notify "ops" (notify #1): notification format "xml": want json, slack or ntfy`,
				`grant ghost on web (grant #1): no agent "ghost" in the file or the database`}},

		// --prune removes only what nothing in the file uses.
		{name: "prune of what a grant uses", seed: allFour, file: grantBotWeb, opts: Options{Prune: true},
			want: []string{`grant bot on web (grant #1): uses connection "web", which the file does not declare, so --prune would remove it and this grant with it: declare it in the file (export prints it) or remove the grant`,
				`grant bot on web (grant #1): uses agent "bot", which the file does not declare, so --prune would remove it and this grant with it: declare it in the file (export prints it) or remove the grant`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := newRig(t)
			r.write("empty.key", "\n")
			if tt.setup != nil {
				tt.setup(r)
			}
			if tt.seed != "" {
				r.mustApply(tt.seed, Options{})
			}
			if tt.other {
				r.reopenWithOtherKey()
			}
			before := r.snapshot()
			out, res, err := r.apply(tt.file, tt.opts)
			if res != nil || out != "" {
				t.Errorf("apply: %+v, printed %q; want no result and nothing printed", res, out)
			}
			diffLines(t, "errors", planLines(t, err), strings.Split(r.expand(strings.Join(tt.want, "\n")), "\n"))
			if after := r.snapshot(); after != before {
				t.Errorf("a file with mistakes changed the database:\n%s\nwant\n%s", after, before)
			}
		})
	}
}

// sealedErr is what the store says of a secret sealed with another master
// key. It is not a message written for people (it is about the master key,
// which no door shows), so apply, which runs on the server for its
// operator, shows it whole, with its package prefix.
func sealedErr(what string) string {
	return "store: cannot open sealed key of " + what + ": master key does not match: the master key is not the one this database was created with (check POSTERN_MASTER_KEY_FILE)"
}

// lockedKey is a private key file protected by a passphrase (which costs
// bcrypt's rounds: make it only where it is needed).
func lockedKey(t *testing.T) []byte {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKeyWithPassphrase(priv, "", []byte("passphrase"))
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(block)
}

// snapshot is what the database holds, as an export.
func (r *rig) snapshot() string {
	r.t.Helper()
	f, err := Export(context.Background(), r.st)
	if err != nil {
		r.t.Fatal(err)
	}
	b, err := Marshal(f)
	if err != nil {
		r.t.Fatal(err)
	}
	return string(b)
}

// TestApplyReport: what apply prints of each change it makes: a key
// check's outcome, a generated key's public line, a connection stored
// unverified, a change that failed (and the others still made); and the
// audit rows name the admin, via apply.
func TestApplyReport(t *testing.T) {
	r := newRig(t)
	r.chk.result = recipes.Result{Status: recipes.StatusRejected, Message: "the target refused the key"}
	out, res, err := r.apply(agentBot+connWeb+`
[[connection]]
alias = "db"
host = "10.0.0.6"
user = "postgres"
accept_new_host_key = true
generate_key = true

[[connection]]
alias = "cache"
host = "10.0.0.7"
user = "redis"
host_keys = ["{h2}"]
key_file = "c2.key"
allow_unverified = true
`, Options{Actor: policy.Actor{Name: "alice", Role: store.RoleOwner}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Planned != 4 || res.Done != 3 || res.Failed != 1 || res.Unchanged != 0 || res.Kept != 0 {
		t.Errorf("result %+v; want 4 planned, 3 done, 1 failed", res)
	}
	for _, want := range []string{
		"+ connection web: deploy@10.0.0.5:22, env dev, host key {h1.fp}, key {c1.fp}\n    key check: rejected: the target refused the key\n    FAILED: ",
		"+ connection db: postgres@10.0.0.6:22, env dev, host key the key it presents now, key generated\n    key check: rejected: the target refused the key; install on the target: {db.pub}; stored unverified\n",
		"+ connection cache: redis@10.0.0.7:22, env dev, host key {h2.fp}, key {c2.fp}\n    key check: rejected: the target refused the key; stored unverified\n",
		"applied: 4 to change, 3 done, 1 failed, 0 unchanged, 0 not in the file\n",
	} {
		want = r.expand(want)
		if strings.Contains(want, "{db.pub}") {
			pub, err := r.st.ConnectionPublicKey(context.Background(), r.connID("db"))
			if err != nil {
				t.Fatal(err)
			}
			want = strings.ReplaceAll(want, "{db.pub}", strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub)))+" postern:db")
		}
		if !strings.Contains(out, want) {
			t.Errorf("apply printed:\n%s\nwant it to hold:\n%s", out, want)
		}
	}
	rows, err := r.st.ListAudit(context.Background(), store.AuditFilter{Kind: string(policy.Admin)})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		t.Fatal("no audit rows")
	}
	for _, row := range rows {
		if len(row.Deciders) != 1 || row.Deciders[0] != "alice" || !strings.HasPrefix(row.Reason, "via apply") {
			t.Errorf("audit row %q: by %q, reason %q; want alice, via apply", row.Operation, row.Deciders, row.Reason)
		}
	}
}

// connID is the id of the connection alias.
func (r *rig) connID(alias string) string {
	r.t.Helper()
	c, err := r.st.ConnectionByAlias(context.Background(), alias)
	if err != nil {
		r.t.Fatal(err)
	}
	return c.ID
}

// TestPruneGrantGoneMeanwhile: a grant the plan prunes that is gone when
// its change runs (removed with its agent meanwhile) is not a failure.
func TestPruneGrantGoneMeanwhile(t *testing.T) {
	r := newRig(t)
	r.mustApply(allFour, Options{})
	f, err := r.load("")
	if err != nil {
		t.Fatal(err)
	}
	p, err := makePlan(context.Background(), r.m, f, Options{Prune: true, Actor: policy.Actor{Name: "alice", Role: store.RoleOwner}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.m.RemoveAgent(context.Background(), policy.Actor{Name: "bob", Role: store.RoleOwner}, "bot"); err != nil {
		t.Fatal(err)
	}
	if len(p.changes) == 0 || p.changes[0].line != "- grant bot web" {
		t.Fatalf("plan %+v; want the grant's removal first", p.changes)
	}
	if _, err := p.changes[0].do(context.Background()); err != nil {
		t.Errorf("removing a grant that is gone: %v; want no error", err)
	}
}

// TestExport: export writes what the database holds without a secret (no
// key file, URL or secret), every connection setting included, and
// applying the export changes nothing.
func TestExport(t *testing.T) {
	r := newRig(t)
	r.mustApply(allFour+`
[[connection]]
alias = "db"
host = "10.0.0.6"
port = 2222
user = "postgres"
env = "production"
recipe = "linux"
host_keys = ["{h2}"]
key_file = "c2.key"
`, Options{})
	f, err := Export(context.Background(), r.st)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	want := r.expand(`[[agent]]
name = 'bot'
keys = [
  '{a1}'
]

[[connection]]
alias = 'db'
host = '10.0.0.6'
port = 2222
user = 'postgres'
env = 'production'
recipe = 'linux'
host_keys = [
  '{h2}'
]

[[connection]]
alias = 'web'
host = '10.0.0.5'
user = 'deploy'
env = 'dev'
host_keys = [
  '{h1}'
]

[[grant]]
agent = 'bot'
connection = 'web'
read = 'allow'
write = 'ask'
destructive = 'deny'

[[notify]]
name = 'ops'
format = 'json'
events = [
  'pending'
]
`)
	if string(b) != want {
		t.Errorf("export:\n%s\nwant:\n%s", b, want)
	}
	out, res, err := r.apply(string(b), Options{})
	if err != nil || res.Planned != 0 {
		t.Errorf("applying the export: %+v, %v; want nothing to change\n%s", res, err, out)
	}
}
