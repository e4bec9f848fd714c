package testsshd

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/crypto/ssh"
)

func TestStartAndRun(t *testing.T) {
	s := Start(t, Options{})
	c, err := ssh.Dial("tcp", s.Addr, s.ClientConfig())
	if err != nil {
		t.Fatalf("dial: %v\n%s", err, s.Log())
	}
	defer c.Close()
	sess, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	out, err := sess.Output("echo hello")
	if err != nil {
		t.Fatalf("exec: %v", err)
	}
	if got, want := string(bytes.TrimSpace(out)), "hello"; got != want {
		t.Errorf("got %q; want %q", got, want)
	}
}

// TestKillRestartNewHostKey: Kill drops open connections at once, Restart
// serves on the same port again, and NewHostKey takes effect on Restart.
func TestKillRestartNewHostKey(t *testing.T) {
	s := Start(t, Options{})
	c, err := ssh.Dial("tcp", s.Addr, s.ClientConfig())
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.Close()
	s.Kill()
	if err := c.Wait(); err == nil {
		t.Log("connection ended without an error after Kill")
	}
	if _, err := ssh.Dial("tcp", s.Addr, s.ClientConfig()); err == nil {
		t.Fatal("dial after Kill succeeded; want it refused")
	}
	old := s.HostKey
	s.NewHostKey(t)
	if bytes.Equal(old.Marshal(), s.HostKey.Marshal()) {
		t.Fatal("NewHostKey kept the old key")
	}
	s.Restart(t)
	c2, err := ssh.Dial("tcp", s.Addr, s.ClientConfig()) // ClientConfig pins the new key
	if err != nil {
		t.Fatalf("dial after Restart with the new key: %v", err)
	}
	c2.Close()
}

// TestEmptyHomeAndLimits: every key's sessions see the empty HOME (the
// user key, a key of Options.AuthorizedKeys and one added by Authorize),
// so no shell start-up file of the machine's user runs, and MaxSessions
// raised past sshd's default of 10 lets one connection hold more sessions
// at once.
func TestEmptyHomeAndLimits(t *testing.T) {
	extra, added := newSigner(t), newSigner(t)
	s := Start(t, Options{MaxSessions: 12, MaxStartups: "100:30:200", MaxAuthTries: 10, AuthorizedKeys: []ssh.PublicKey{extra.PublicKey()}})
	s.Authorize(t, string(ssh.MarshalAuthorizedKey(added.PublicKey())))
	for name, key := range map[string]ssh.Signer{"Options.AuthorizedKeys": extra, "Authorize": added} {
		cfg := s.ClientConfig()
		cfg.Auth = []ssh.AuthMethod{ssh.PublicKeys(key)}
		c, err := ssh.Dial("tcp", s.Addr, cfg)
		if err != nil {
			t.Fatalf("dial with the key of %s: %v\n%s", name, err, s.Log())
		}
		sess, err := c.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		out, err := sess.Output(`echo "$HOME"`)
		c.Close()
		if got := string(bytes.TrimSpace(out)); err != nil || got != s.Home {
			t.Errorf("HOME with the key of %s = %q, %v; want %q", name, got, err, s.Home)
		}
	}
	c, err := ssh.Dial("tcp", s.Addr, s.ClientConfig())
	if err != nil {
		t.Fatalf("dial: %v\n%s", err, s.Log())
	}
	defer c.Close()
	sess, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	out, err := sess.Output(`echo "$HOME"`)
	if err != nil {
		t.Fatalf("exec: %v", err)
	}
	if got := string(bytes.TrimSpace(out)); got != s.Home || s.Home == "" {
		t.Errorf("HOME = %q; want %q (non-empty)", got, s.Home)
	}
	var open []*ssh.Session
	defer func() {
		for _, o := range open {
			o.Close()
		}
	}()
	for i := 0; i < 12; i++ {
		o, err := c.NewSession()
		if err != nil {
			t.Fatalf("session %d of 12 on one connection: %v; want MaxSessions 12 to allow it", i+1, err)
		}
		open = append(open, o)
	}
}

// TestWaitLog: WaitLog returns once sshd has logged the line (here the
// login, at INFO), and Start works at a LogLevel that hides sshd's
// "Server listening" line, by asking for the banner instead.
func TestWaitLog(t *testing.T) {
	for _, level := range []string{"", "ERROR"} {
		t.Run("LogLevel "+level, func(t *testing.T) {
			s := Start(t, Options{LogLevel: level})
			c, err := ssh.Dial("tcp", s.Addr, s.ClientConfig())
			if err != nil {
				t.Fatalf("dial: %v\n%s", err, s.Log())
			}
			c.Close()
			if level == "" {
				s.WaitLog(t, "Accepted publickey for "+s.User, 1)
			} else if n := s.LogCount("Accepted publickey"); n != 0 {
				t.Errorf("LogLevel ERROR: the log holds %d logins; want none", n)
			}
		})
	}
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

// TestPathKey: a login with the key of PathKey finds programs on the PATH
// given, runs the command as the login shell would ($0 its base name,
// quotes intact), sees the same HOME, and the key of Start still logs in
// with the usual PATH.
func TestPathKey(t *testing.T) {
	s := Start(t, Options{})
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "bwrap"), []byte("#!/bin/sh\necho fake bwrap\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, signer := s.PathKey(t, dir+":/usr/bin:/bin")
	cfg := s.ClientConfig()
	cfg.Auth = []ssh.AuthMethod{ssh.PublicKeys(signer)}
	c, err := ssh.Dial("tcp", s.Addr, cfg)
	if err != nil {
		t.Fatalf("dial with the path key: %v\n%s", err, s.Log())
	}
	defer c.Close()
	sess, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	out, err := sess.Output(`bwrap; echo "$0" "$HOME" 'it'\''s'; echo "${SSH_ORIGINAL_COMMAND-unset}"`)
	want := "fake bwrap\nbash " + s.Home + " it's\nunset\n"
	if err != nil || string(out) != want {
		t.Errorf("with the path key: %q, %v; want %q", out, err, want)
	}
}
