package bastion

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/postern/postern/internal/testwait"
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
		// The client probes every second (keepalive@openssh.com, packet
		// type 80) and logs at -vvv every packet it sends and receives;
		// the command runs until two probes were answered (type 82,
		// REQUEST_FAILURE, as sshd answers). A probe postern left
		// unanswered holds the test until its deadline: the client's own
		// count of unanswered probes, which is against the clock, is set
		// out of reach.
		gate, open := newGate(t)
		remote := fmt.Sprintf(": %s; read _ < %s; echo alive", newMarker(t), gate)
		p := h.execPaths(t, false)[1]
		ctx := testwait.Context(t)
		cmd := pipelineCommand(ctx, t, "ssh", p.args([]string{"-vvv", "-o", "ServerAliveInterval=1", "-o", "ServerAliveCountMax=100000"}, remote)...)
		var stdout bytes.Buffer
		cmd.Stdout = &stdout
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var log strings.Builder
		r := bufio.NewReader(stderr)
		answers := 0
		answered := linesUntil(r, &log, func(line string) bool {
			if strings.Contains(line, "receive packet: type 82") {
				answers++
			}
			return answers == 2
		})
		if answered {
			open()
		}
		linesUntil(r, &log, func(string) bool { return false })
		err = cmd.Wait()
		if !answered {
			t.Fatalf("ssh -o ServerAliveInterval=1: %d probes answered before it ended (%v); want 2:\n%s", answers, err, grepLines(log.String(), "packet: type 8"))
		}
		if got := stdout.String(); got != "alive\n" || err != nil {
			t.Errorf("ssh -o ServerAliveInterval=1 ... '%s': got %q, %v; want %q, nil", remote, got, err, "alive\n")
		}
	})
}
