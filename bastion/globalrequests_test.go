package bastion

import (
	"testing"

	"golang.org/x/crypto/ssh"
)

// TestGlobalRequestsAsOpenSSH: postern answers an agent's global requests
// as the target's OpenSSH sshd answers them (keepalive@openssh.com fails,
// no-more-sessions@openssh.com succeeds, an unknown one fails), and the
// OpenSSH client's ServerAlive probe, which counts any answer, keeps a
// session alive through postern.
func TestGlobalRequestsAsOpenSSH(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{rules: allowAll})
	direct, err := ssh.Dial("tcp", h.target.Addr, h.target.ClientConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	viaPostern := h.client()
	defer viaPostern.Close()

	// no-more-sessions last: sshd then drops a connection that opens
	// another session, and these connections open none.
	tests := []struct {
		name string
		want bool
	}{
		{"keepalive@openssh.com", false},
		{"postern-unknown@example.com", false},
		{"no-more-sessions@openssh.com", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, err := viaPostern.SendRequest(tt.name, true, nil)
			if err != nil {
				t.Fatalf("through postern: %v", err)
			}
			ref, _, err := direct.SendRequest(tt.name, true, nil)
			if err != nil {
				t.Fatalf("direct: %v", err)
			}
			if got != ref || got != tt.want {
				t.Errorf("reply through postern: got %v; want %v (direct sshd: %v)", got, tt.want, ref)
			}
		})
	}

	t.Run("ServerAliveInterval", func(t *testing.T) {
		// With one probe a second and one unanswered probe allowed, the
		// client gives up after about two silent seconds; the command is
		// silent for three.
		p := h.execPaths(t, false)[1]
		out, err := pipeline(t, `"$@"`, "", p.args([]string{"-o", "ServerAliveInterval=1", "-o", "ServerAliveCountMax=1"}, "sleep 3; echo alive"))
		if out != "alive\n" || err != nil {
			t.Errorf("ssh -o ServerAliveInterval=1 -o ServerAliveCountMax=1 ... 'sleep 3; echo alive': got %q, %v; want %q, nil", out, err, "alive\n")
		}
	})
}
