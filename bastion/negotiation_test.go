package bastion

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/postern/postern/internal/e2e"
	"github.com/postern/postern/internal/testsshd"
	"github.com/postern/postern/internal/testwait"
	"github.com/rs/zerolog"
	"golang.org/x/crypto/ssh"
)

// debianPython is Debian's interpreter, which has python3-paramiko and
// python3-asyncssh; a developer's python3 on PATH may not be it.
const debianPython = "/usr/bin/python3"

// requirePython skips the test when Debian's python3 or one of modules is
// missing, or fails it when POSTERN_E2E=1.
func requirePython(t *testing.T, modules ...string) {
	t.Helper()
	for _, m := range modules {
		if out, err := exec.Command(debianPython, "-W", "ignore", "-c", "import "+m).CombinedOutput(); err != nil {
			e2e.Missing(t, fmt.Sprintf("%s's module %s (%v: %s)", debianPython, m, err, bytes.TrimSpace(out)), "python3-"+m)
		}
	}
}

// connLog keeps the algorithms postern logs for each agent connection.
type connLog struct {
	// mu guards lines.
	mu    sync.Mutex
	lines []negotiatedLine
}

// negotiatedLine is the part of an "agent connected" log line that says
// what was negotiated.
type negotiatedLine struct {
	Client string `json:"client"`
	Kex    string `json:"kex"`
	Cipher string `json:"cipher"`
	MAC    string `json:"mac"`
}

func (l *connLog) Write(p []byte) (int, error) {
	var line struct {
		Message string `json:"message"`
		negotiatedLine
	}
	if json.Unmarshal(p, &line) == nil && line.Message == "agent connected" {
		l.mu.Lock()
		l.lines = append(l.lines, line.negotiatedLine)
		l.mu.Unlock()
	}
	return len(p), nil
}

// last returns the newest connection's algorithms and how many there were.
func (l *connLog) last() (negotiatedLine, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lines) == 0 {
		return negotiatedLine{}, 0
	}
	return l.lines[len(l.lines)-1], len(l.lines)
}

// pythonClients run `true` through postern with a client library's
// defaults, as the SSH user web (the ALIAS@bastion form); argv: host, port,
// user, key file.
const (
	paramikoTrue = `
import sys, paramiko
host, port, user, key = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
c = paramiko.SSHClient()
c.set_missing_host_key_policy(paramiko.AutoAddPolicy())
c.connect(host, port=port, username=user, key_filename=key, look_for_keys=False, allow_agent=False)
_, out, _ = c.exec_command("true")
sys.exit(out.channel.recv_exit_status())
`
	asyncsshTrue = `
import asyncio, sys, asyncssh
host, port, user, key = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
async def main():
    async with asyncssh.connect(host, port=port, username=user, client_keys=[key], known_hosts=None, agent_path=None) as conn:
        return (await conn.run("true")).exit_status
sys.exit(asyncio.run(main()))
`
)

// TestDefaultClientsNegotiate pins the cipher and MAC that each client
// agents use lands on with its defaults (and OpenSSH with a few -c and -m
// choices), as postern logs them for the connection; the OpenSSH client's
// own -v line says the same. The cheapest AEAD each client has (AES-GCM),
// else AES-CTR with HMAC-SHA-256: see negotiate.go. Upstream, the target's
// sshd says postern asked for AES-GCM.
func TestDefaultClientsNegotiate(t *testing.T) {
	t.Parallel()
	requirePython(t, "paramiko", "asyncssh")
	var log connLog
	h := newHarness(t, harnessOpts{rules: allowAll, target: &testsshd.Options{LogLevel: "DEBUG1"},
		config: func(c *Config) { c.Logger = zerolog.New(&log) }})
	// Each client runs `true` through postern and returns its own account
	// of the cipher, where it gives one.
	openssh := func(extra ...string) func(t *testing.T) string {
		return func(t *testing.T) string {
			args := join(h.clientOpts("-p"), []string{"-v"}, extra, []string{"127.0.0.1", "web", "true"})
			out, err := exec.CommandContext(testwait.Context(t), "ssh", args...).CombinedOutput()
			if err != nil {
				t.Fatalf("ssh %v: %v\n%s", args, err, out)
			}
			// "debug1: kex: server->client cipher: C MAC: M compression: none"
			for _, line := range strings.Split(string(out), "\n") {
				if _, rest, ok := strings.Cut(line, "kex: server->client cipher: "); ok {
					return strings.TrimSuffix(strings.TrimSpace(rest), " compression: none")
				}
			}
			t.Fatalf("ssh -v printed no kex line:\n%s", out)
			return ""
		}
	}
	python := func(script string) func(t *testing.T) string {
		return func(t *testing.T) string {
			out, err := exec.CommandContext(testwait.Context(t), debianPython, "-W", "ignore", "-c", script, "127.0.0.1", h.port, "web", h.keyPath).CombinedOutput()
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			return ""
		}
	}
	xcrypto := func(t *testing.T) string {
		c := h.client()
		defer c.Close()
		if _, _, code, err := runSession(c, "web true"); err != nil || code != 0 {
			t.Fatalf("x/crypto: exit %d, %v; want 0", code, err)
		}
		return ""
	}
	tests := []struct {
		name   string
		run    func(t *testing.T) string
		client string // start of the client's identification string
		cipher string
		mac    string // "" for an AEAD
	}{
		{"OpenSSH default", openssh(), "SSH-2.0-OpenSSH_", ssh.CipherAES128GCM, ""},
		{"paramiko default", python(paramikoTrue), "SSH-2.0-paramiko_2.12", ssh.CipherAES128CTR, ssh.HMACSHA256ETM},
		{"asyncssh default", python(asyncsshTrue), "SSH-2.0-AsyncSSH_2.10", ssh.CipherAES128GCM, ""},
		{"x/crypto default", xcrypto, "SSH-2.0-Go", ssh.CipherAES128GCM, ""},
		{"OpenSSH -c aes128-ctr", openssh("-c", "aes128-ctr"), "SSH-2.0-OpenSSH_", ssh.CipherAES128CTR, ssh.HMACSHA256ETM},
		{"OpenSSH -c aes256-ctr -m hmac-sha2-512", openssh("-c", "aes256-ctr", "-m", "hmac-sha2-512"), "SSH-2.0-OpenSSH_", ssh.CipherAES256CTR, ssh.HMACSHA512},
		{"OpenSSH -c aes256-gcm", openssh("-c", ssh.CipherAES256GCM), "SSH-2.0-OpenSSH_", ssh.CipherAES256GCM, ""},
		{"OpenSSH -c chacha20-poly1305", openssh("-c", ssh.CipherChaCha20Poly1305), "SSH-2.0-OpenSSH_", ssh.CipherChaCha20Poly1305, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, before := log.last()
			view := tt.run(t)
			got, n := log.last()
			if n != before+1 {
				t.Fatalf("postern logged %d agent connections; want %d", n, before+1)
			}
			if !strings.HasPrefix(got.Client, tt.client) || got.Cipher != tt.cipher || got.MAC != tt.mac {
				t.Errorf("postern negotiated: client %q cipher %q mac %q; want %s..., %q, %q", got.Client, got.Cipher, got.MAC, tt.client, tt.cipher, tt.mac)
			}
			want := tt.cipher + " MAC: " + tt.mac
			if tt.mac == "" {
				want += "<implicit>"
			}
			if view != "" && view != want {
				t.Errorf("ssh -v says cipher %s; want %s", view, want)
			}
		})
	}

	t.Run("upstream", func(t *testing.T) {
		// sshd at DEBUG1: "kex: client->server cipher: aes128-gcm@openssh.com MAC: <implicit> compression: none".
		want := "kex: client->server cipher: " + ssh.CipherAES128GCM + " MAC: <implicit>"
		if !strings.Contains(h.target.Log(), want) {
			t.Errorf("target sshd's log has no %q; its kex lines:\n%s", want, grepLines(h.target.Log(), "kex: "))
		}
	})
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var b bytes.Buffer
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, sub) {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}
