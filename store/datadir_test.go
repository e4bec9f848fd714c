package store

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

func TestDirInit(t *testing.T) {
	ctx := context.Background()
	d := Dir{Path: filepath.Join(t.TempDir(), "data")}
	res, err := d.Init(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.CreatedDir || !res.CreatedMasterKey || !res.CreatedHostKey || !res.CreatedDatabase {
		t.Errorf("first init: got %+v; want everything created", res)
	}
	for _, f := range []struct {
		path string
		mode os.FileMode
	}{
		{d.Path, 0o700 | os.ModeDir},
		{d.MasterKeyPath(), 0o600},
		{d.HostKeyPath(), 0o600},
	} {
		st, err := os.Stat(f.path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode() != f.mode {
			t.Errorf("%s: got mode %v; want %v", f.path, st.Mode(), f.mode)
		}
	}
	key, err := d.MasterKey()
	if err != nil || len(key) != MasterKeySize {
		t.Fatalf("master key: got %d bytes, %v", len(key), err)
	}
	signer, err := d.HostKey()
	if err != nil {
		t.Fatal(err)
	}
	if signer.PublicKey().Type() != ssh.KeyAlgoED25519 {
		t.Errorf("host key type: got %s; want ed25519", signer.PublicKey().Type())
	}
	if res.HostKeyFingerprint != ssh.FingerprintSHA256(signer.PublicKey()) {
		t.Errorf("fingerprint: got %s", res.HostKeyFingerprint)
	}

	// A second init keeps everything.
	res2, err := d.Init(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res2.CreatedDir || res2.CreatedMasterKey || res2.CreatedHostKey || res2.CreatedDatabase {
		t.Errorf("second init: got %+v; want nothing created", res2)
	}
	key2, _ := d.MasterKey()
	if !bytes.Equal(key, key2) || res2.HostKeyFingerprint != res.HostKeyFingerprint {
		t.Error("second init replaced a key")
	}

	s, err := d.Open(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, _ := mustCreateConnection(t, s, "web", EnvDev)
	if _, err := s.ConnectionSigner(ctx, c.ID); err != nil {
		t.Errorf("sealed key round trip through the data directory: %v", err)
	}
}

func TestDirMasterKeyFile(t *testing.T) {
	ctx := context.Background()
	tmp := t.TempDir()
	keyFile := filepath.Join(tmp, "elsewhere.key")
	d := Dir{Path: filepath.Join(tmp, "data"), MasterKeyFile: keyFile}
	if _, err := d.Init(ctx, Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(d.Path, MasterKeyFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("master.key created in the data directory although another file was named: %v", err)
	}
	raw, err := os.ReadFile(keyFile)
	if err != nil || len(raw) != MasterKeySize {
		t.Fatalf("named key file: got %d bytes, %v", len(raw), err)
	}

	// The same key written as hex works too.
	hexFile := filepath.Join(tmp, "hex.key")
	os.WriteFile(hexFile, []byte(hex.EncodeToString(raw)+"\n"), 0o600)
	s, err := Dir{Path: d.Path, MasterKeyFile: hexFile}.Open(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s.sealer == nil {
		t.Errorf("hex master key not accepted: %v", s.keyErr)
	}
	s.Close()

	bad := filepath.Join(tmp, "bad.key")
	os.WriteFile(bad, []byte("0123456789"), 0o600)
	_, err = Dir{Path: d.Path, MasterKeyFile: bad}.Open(ctx, Options{})
	if err == nil || !strings.Contains(err.Error(), "holds 10 bytes") || strings.Contains(err.Error(), "0123456789") {
		t.Errorf("malformed key file: got %v; want a length error that does not quote the content", err)
	}

	missing := Dir{Path: d.Path, MasterKeyFile: filepath.Join(tmp, "missing.key")}
	s, err = missing.Open(ctx, Options{})
	if err != nil {
		t.Fatalf("Open with a missing master key file: %v; want it to open", err)
	}
	defer s.Close()
	_, err = s.CreateConnection(ctx, Unaudited(), NewConnection{Alias: "x", Host: "h", User: "u",
		PrivateKey: newTestKeyPair(t, "").privatePEM, HostKeys: []string{newTestKeyPair(t, "").knownHostsLine("h")}})
	if !errors.Is(err, ErrNoMasterKey) || !strings.Contains(err.Error(), "missing.key does not exist") {
		t.Errorf("sealing without a key: got %v; want ErrNoMasterKey naming the file", err)
	}
}

func TestDirOpenUninitialised(t *testing.T) {
	d := Dir{Path: filepath.Join(t.TempDir(), "nope")}
	_, err := d.Open(context.Background(), Options{})
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "postern init") {
		t.Errorf("got %v; want ErrNotFound telling to run postern init", err)
	}
	if _, err := os.Stat(d.Path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Open created the directory: %v", err)
	}
}
