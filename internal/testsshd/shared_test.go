package testsshd

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"

	"go.uber.org/goleak"
	"golang.org/x/crypto/ssh"
)

// TestShared: the first Get starts the server and later ones return the
// same; it serves logins with the empty HOME and its log is readable; it
// leaves no goroutine behind between tests; Stop stops sshd and removes
// its directory; and after Stop no server starts.
func TestShared(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	var sh Shared
	s := sh.Get(t)
	if again := sh.Get(t); again != s {
		t.Fatalf("second Get returned another server")
	}
	c, err := ssh.Dial("tcp", s.Addr, s.ClientConfig())
	if err != nil {
		t.Fatalf("dial: %v\n%s", err, s.Log())
	}
	sess, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	out, err := sess.Output(`echo "$HOME"`)
	c.Close()
	if got := string(bytes.TrimSpace(out)); err != nil || got != s.Home {
		t.Errorf("HOME = %q, %v; want %q", got, err, s.Home)
	}
	if got := s.Log(); !strings.Contains(got, "Accepted publickey for "+s.User) {
		t.Errorf("the log holds no login:\n%s", got)
	}
	if err := goleak.Find(ignore); err != nil {
		t.Errorf("goroutines running beside the shared server: %v", err)
	}

	if err := sh.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if banner(s.Addr) {
		t.Errorf("sshd still answers on %s after Stop", s.Addr)
	}
	if _, err := os.Stat(s.Dir); !os.IsNotExist(err) {
		t.Errorf("the server's directory after Stop: %v; want it removed", err)
	}
	if err := sh.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

// TestSharedRefusesChanges: what would reach the other tests that use a
// shared server fails the test that tries it.
func TestSharedRefusesChanges(t *testing.T) {
	var sh Shared
	s := sh.Get(t)
	t.Cleanup(func() { sh.Stop() })
	for name, change := range map[string]func(t testing.TB){
		"Restart":    s.Restart,
		"NewHostKey": s.NewHostKey,
		"Authorize":  func(t testing.TB) { s.Authorize(t, "ssh-ed25519 AAAA") },
		"WaitLog":    func(t testing.TB) { s.WaitLog(t, "x", 1) },
	} {
		r := &fatalRecorder{TB: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			change(r)
		}()
		<-done
		if !strings.Contains(r.failed, "shared server") {
			t.Errorf("%s on the shared server: failure %q; want it refused", name, r.failed)
		}
	}
	if c, err := ssh.Dial("tcp", s.Addr, s.ClientConfig()); err != nil {
		t.Errorf("dial after the refused changes: %v", err)
	} else {
		c.Close()
	}
}

// fatalRecorder is a testing.TB whose Fatalf records the message and ends
// the goroutine, as a real test's does.
type fatalRecorder struct {
	testing.TB
	failed string
}

func (r *fatalRecorder) Helper() {}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
