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

// TestEmptyHomeAndLimits: with EmptyHome the user key's sessions see the
// empty HOME, and MaxSessions raised past sshd's default of 10 lets one
// connection hold more sessions at once.
func TestEmptyHomeAndLimits(t *testing.T) {
	s := Start(t, Options{EmptyHome: true, MaxSessions: 12, MaxStartups: "100:30:200", MaxAuthTries: 10})
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
				s.WaitLog(t, "Accepted publickey for "+s.User, 1, StartTimeout)
			} else if n := s.LogCount("Accepted publickey"); n != 0 {
				t.Errorf("LogLevel ERROR: the log holds %d logins; want none", n)
			}
		})
	}
}
