package testkey

import (
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

func TestNew(t *testing.T) {
	a, b := New(t, "a"), New(t, "b")
	if string(a.PrivatePEM) == string(b.PrivatePEM) {
		t.Fatal("two pairs share a private key")
	}
	k, err := ssh.ParseRawPrivateKey(a.PrivatePEM)
	if err != nil {
		t.Fatalf("private key file: %v", err)
	}
	s, err := ssh.NewSignerFromKey(k)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(s.PublicKey())))
	if got != a.Authorized || !strings.HasPrefix(a.Authorized, "ssh-ed25519 ") {
		t.Errorf("public key of the file: got %q; want %q", got, a.Authorized)
	}
	if string(a.Public.Marshal()) != string(a.Signer.PublicKey().Marshal()) {
		t.Errorf("Public and Signer disagree")
	}
}
