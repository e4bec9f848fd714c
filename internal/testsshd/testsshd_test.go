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
