package testsshd

import (
	"bytes"
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
