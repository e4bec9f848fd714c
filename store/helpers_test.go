package store

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"github.com/postern/postern/internal/fakeclock"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

// testMasterKey is a fixed, recognisable master key for tests.
func testMasterKey() []byte {
	k := make([]byte, MasterKeySize)
	for i := range k {
		k[i] = byte(0xA0 + i)
	}
	return k
}

// openTestStore opens a fresh store in a temporary directory.
func openTestStore(t *testing.T) (*Store, *fakeclock.Clock, string) {
	t.Helper()
	clock := fakeclock.New()
	path := filepath.Join(t.TempDir(), DatabaseFile)
	s, err := Open(context.Background(), path, Options{Now: clock.Now, MasterKey: testMasterKey()})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s, clock, path
}

// testKeyPair is an ed25519 key pair in the forms the tests need.
type testKeyPair struct {
	private    ed25519.PrivateKey
	privatePEM []byte // OpenSSH PEM, unencrypted
	authorized string // authorized_keys line with comment
	signer     ssh.Signer
}

func newTestKeyPair(t *testing.T, comment string) testKeyPair {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, comment)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey())))
	if comment != "" {
		line += " " + comment
	}
	return testKeyPair{private: priv, privatePEM: pem.EncodeToMemory(block), authorized: line, signer: signer}
}

// knownHostsLine pins kp's public key for host.
func (kp testKeyPair) knownHostsLine(host string) string {
	return host + " " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(kp.signer.PublicKey())))
}

func mustCreateAgent(t *testing.T, s *Store, name string) (*Agent, testKeyPair) {
	t.Helper()
	kp := newTestKeyPair(t, name+"@test")
	a, err := s.CreateAgent(context.Background(), name, kp.authorized)
	if err != nil {
		t.Fatalf("CreateAgent(%s): %v", name, err)
	}
	return a, kp
}

func mustCreateConnection(t *testing.T, s *Store, alias string, env Env) (*Connection, testKeyPair) {
	t.Helper()
	kp := newTestKeyPair(t, "")
	hostKey := newTestKeyPair(t, "")
	c, err := s.CreateConnection(context.Background(), NewConnection{
		Alias: alias, Host: "10.0.0.1", User: "deploy", PrivateKey: kp.privatePEM,
		HostKeys: []string{hostKey.knownHostsLine("10.0.0.1")}, Env: env,
	})
	if err != nil {
		t.Fatalf("CreateConnection(%s): %v", alias, err)
	}
	return c, kp
}
