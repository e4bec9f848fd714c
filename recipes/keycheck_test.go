package recipes

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/crypto/ssh"

	"github.com/postern/postern/internal/testsshd"
	"github.com/postern/postern/internal/testwait"
)

// TestMain checks that a key check leaves no goroutine behind (the SSH
// client's readers end when the check closes the connection).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// checkRecipe is a recipe with the given key check, loaded the ordinary
// way so that it is valid.
func checkRecipe(t *testing.T, kc map[string]any) *Recipe {
	t.Helper()
	m := sample("check")
	m["key_check"] = kc
	c, err := load(catalogOf(t, map[string]map[string]any{"check": m}), catalogGlob)
	if err != nil {
		t.Fatal(err)
	}
	return c.Get("check")
}

// targetOn is a key check's target at 127.0.0.1:port as user, accepting
// only hostKey.
func targetOn(port int, user string, hostKey ssh.PublicKey) Target {
	return Target{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), User: user, HostKeys: ssh.FixedHostKey(hostKey)}
}

// connTo is srv as a key check's target, its host key pinned.
func connTo(t *testing.T, srv *testsshd.Server) Target {
	t.Helper()
	_, _, key, _, _, err := ssh.ParseKnownHosts([]byte(srv.KnownHostsLine))
	if err != nil {
		t.Fatal(err)
	}
	return Target{Addr: net.JoinHostPort(srv.Host, strconv.Itoa(srv.Port)), User: srv.User, HostKeys: ssh.FixedHostKey(key)}
}

func newSigner(t *testing.T) ssh.Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestCheckAgainstSSHD(t *testing.T) {
	bannerPath := filepath.Join(t.TempDir(), "banner")
	if err := os.WriteFile(bannerPath, []byte("Authorized use only. Ask ops@example.net for access.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := testsshd.Start(t, testsshd.Options{ExtraConfig: []string{"Banner " + bannerPath}})
	conn := connTo(t, srv)
	other := newSigner(t)
	wrongPin := conn
	wrongPin.HostKeys = ssh.FixedHostKey(newSigner(t).PublicKey())
	wrongPinNamed := wrongPin
	wrongPinNamed.Pinned = []string{ssh.FingerprintSHA256(newSigner(t).PublicKey())}

	tests := []struct {
		name   string
		conn   Target
		signer ssh.Signer
		recipe *Recipe
		want   Status
		msg    string // part of the message
	}{
		{"accepted, read runs", conn, srv.UserKey, checkRecipe(t, map[string]any{"command": "true"}), StatusOK, `ran "true"`},
		{"accepted, no recipe", conn, srv.UserKey, nil, StatusOK, `ran "true"`},
		{"accepted, auth only", conn, srv.UserKey, checkRecipe(t, map[string]any{"auth_only": true}), StatusOK, "authentication only"},
		{"accepted, read fails", conn, srv.UserKey, checkRecipe(t, map[string]any{"command": "echo denied >&2; exit 3"}), StatusUnproved, "status 3: denied"},
		{"rejected keeps the target's words", conn, other, checkRecipe(t, map[string]any{"command": "true"}), StatusRejected, "Ask ops@example.net"},
		{"rejected names the failure", conn, other, nil, StatusRejected, "unable to authenticate"},
		{"host key not the pinned one", wrongPin, srv.UserKey, nil, StatusHostKeyMismatch, "host key mismatch"},
		{"host key not the pinned one, fingerprints named", wrongPinNamed, srv.UserKey, nil, StatusHostKeyMismatch,
			"presented ssh-ed25519 " + ssh.FingerprintSHA256(srv.HostKey) + "; pinned: SHA256:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Check(context.Background(), tt.conn, tt.signer, tt.recipe)
			if got.Status != tt.want || !strings.Contains(got.Message, tt.msg) {
				t.Errorf("Check = %+v; want status %s and a message with %q", got, tt.want, tt.msg)
			}
		})
	}
}

func TestCheckUnreachable(t *testing.T) {
	// A port that was just closed refuses the connection.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	got := Check(context.Background(), targetOn(port, "u", newSigner(t).PublicKey()), newSigner(t), nil)
	if got.Status != StatusUnreachable || !strings.Contains(got.Message, "cannot reach") {
		t.Errorf("Check = %+v; want unreachable, cannot reach", got)
	}
	if got.Proved() {
		t.Errorf("Proved of %+v: true; want nothing proved", got)
	}
}

// TestCheckSilentTarget: a target that accepts TCP and never speaks is cut
// off at the timeout and proves nothing.
func TestCheckSilentTarget(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			accepted <- c
		}
		close(accepted)
	}()
	port := l.Addr().(*net.TCPAddr).Port
	// The target never speaks, so only the check's bound can end it: a
	// short one is what this test is about.
	const bound = 200 * time.Millisecond
	start := time.Now()
	got := Checker{Timeout: bound}.Check(context.Background(), targetOn(port, "u", newSigner(t).PublicKey()), newSigner(t), nil)
	if got.Status != StatusUnreachable || !strings.Contains(got.Message, "did not finish the handshake within 200ms") {
		t.Errorf("Check = %+v; want unreachable when its bound ran out", got)
	}
	if d := time.Since(start); d < bound {
		t.Errorf("Check returned after %v; want not before its bound of %v", d, bound)
	}
	l.Close()
	if c, ok := <-accepted; ok {
		c.Close()
	}
}

// TestCheckCutDuringTheRead: a check whose context ends while the target
// runs the read says so, never "remote command exited without exit
// status": the connection is cut only after the context is done (a
// connection deadline that fired a moment before the context's timer once
// made a timeout look like the target's fault, under load in CI).
func TestCheckCutDuringTheRead(t *testing.T) {
	srv := testsshd.Start(t, testsshd.Options{})
	recipe := checkRecipe(t, map[string]any{"command": "sleep 600"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan Result, 1)
	go func() { done <- Check(ctx, connTo(t, srv), srv.UserKey, recipe) }()
	srv.WaitLog(t, "Starting session: command", 1)
	cancel()
	got := testwait.Recv(t, "the check to end", done)
	srv.Kill() // and the sleep it started
	if got.Status != StatusUnproved || got.Message != `the key was accepted but "sleep 600" did not finish before the check was cancelled` {
		t.Errorf("Check = %+v; want unproved, cancelled while the read ran", got)
	}
}

func TestResultProved(t *testing.T) {
	tests := []struct {
		in   Status
		want bool
	}{
		{StatusOK, true},
		{StatusRejected, true},
		{StatusUnreachable, false},
		{StatusHostKeyMismatch, false},
		{StatusUnproved, false},
	}
	for _, tt := range tests {
		if got := (Result{Status: tt.in}).Proved(); got != tt.want {
			t.Errorf("Result{%s}.Proved() = %v; want %v", tt.in, got, tt.want)
		}
	}
}
