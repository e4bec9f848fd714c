// Package testkey makes real ed25519 key pairs for tests: the OpenSSH
// private key file (so that tests can search what postern shows for it) and
// the public key, in the forms the store and the SSH libraries take.
package testkey

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

// Pair is one key pair.
type Pair struct {
	PrivatePEM []byte        // the OpenSSH private key file
	Authorized string        // the public key as one authorized_keys line, no comment
	Public     ssh.PublicKey // the public key
	Signer     ssh.Signer    // the private key, for x/crypto clients
}

// New returns a fresh key pair whose file carries comment.
func New(t testing.TB, comment string) Pair {
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
	return Pair{
		PrivatePEM: pem.EncodeToMemory(block),
		Authorized: strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey()))),
		Public:     signer.PublicKey(),
		Signer:     signer,
	}
}
