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
	"github.com/postern/postern/store"
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

// connTo is a connection to srv with its host key pinned.
func connTo(srv *testsshd.Server) *store.Connection {
	return &store.Connection{Alias: "target", Host: srv.Host, Port: srv.Port, User: srv.User, HostKeys: []string{srv.KnownHostsLine}}
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
	conn := connTo(srv)
	other := newSigner(t)
	otherHost := newSigner(t).PublicKey()
	wrongPin := *conn
	wrongPin.HostKeys = []string{"[127.0.0.1]:" + strconv.Itoa(srv.Port) + " " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(otherHost)))}

	tests := []struct {
		name   string
		conn   *store.Connection
		signer ssh.Signer
		recipe *Recipe
		want   Status
		msg    string // part of the message
	}{
		{"accepted, read runs", conn, srv.UserKey, checkRecipe(t, map[string]any{"command": "true"}), StatusOK, `ran "true"`},
		{"accepted, no recipe", conn, srv.UserKey, nil, StatusOK, `ran "true"`},
		{"accepted, auth only", conn, srv.UserKey, checkRecipe(t, map[string]any{"auth_only": true}), StatusOK, "authentication only"},
		{"accepted, read fails", conn, srv.UserKey, checkRecipe(t, map[string]any{"command": "echo denied >&2; exit 3"}), StatusUnknown, "status 3: denied"},
		{"rejected keeps the target's words", conn, other, checkRecipe(t, map[string]any{"command": "true"}), StatusRejected, "Ask ops@example.net"},
		{"rejected names the failure", conn, other, nil, StatusRejected, "unable to authenticate"},
		{"host key not the pinned one", &wrongPin, srv.UserKey, nil, StatusUnknown, "HOST KEY MISMATCH"},
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
	conn := &store.Connection{Alias: "gone", Host: "127.0.0.1", Port: port, User: "u",
		HostKeys: []string{"[127.0.0.1]:" + strconv.Itoa(port) + " " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(newSigner(t).PublicKey())))}}
	got := Check(context.Background(), conn, newSigner(t), nil)
	if got.Status != StatusUnknown || !strings.Contains(got.Message, "cannot reach") {
		t.Errorf("Check = %+v; want unknown, cannot reach", got)
	}
	if _, record := got.KeyStatus(); record {
		t.Errorf("KeyStatus of %+v: got record; want the stored status left alone", got)
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
	conn := &store.Connection{Alias: "silent", Host: "127.0.0.1", Port: port, User: "u",
		HostKeys: []string{"[127.0.0.1]:" + strconv.Itoa(port) + " " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(newSigner(t).PublicKey())))}}
	start := time.Now()
	got := Checker{Timeout: 200 * time.Millisecond}.Check(context.Background(), conn, newSigner(t), nil)
	if got.Status != StatusUnknown || !strings.Contains(got.Message, "did not finish the handshake") {
		t.Errorf("Check = %+v; want unknown after the timeout", got)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Check took %v; want about the 200ms timeout", d)
	}
	l.Close()
	if c, ok := <-accepted; ok {
		c.Close()
	}
}

func TestResultKeyStatus(t *testing.T) {
	tests := []struct {
		in     Status
		want   store.KeyStatus
		record bool
	}{
		{StatusOK, store.KeyOK, true},
		{StatusRejected, store.KeyRejected, true},
		{StatusUnknown, store.KeyUnknown, false},
	}
	for _, tt := range tests {
		got, record := Result{Status: tt.in}.KeyStatus()
		if got != tt.want || record != tt.record {
			t.Errorf("Result{%s}.KeyStatus() = %s, %v; want %s, %v", tt.in, got, record, tt.want, tt.record)
		}
	}
}
