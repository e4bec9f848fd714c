package bastion

import (
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// BenchmarkExecOnOpenConnection measures one exec over an already open
// agent connection (what an OpenSSH ControlMaster does), through postern
// and directly against the same sshd, interleaved, and reports both and
// their ratio.
func BenchmarkExecOnOpenConnection(b *testing.B) {
	h := newHarness(b, harnessOpts{})
	through := h.client()
	defer through.Close()
	direct, err := ssh.Dial("tcp", h.target.Addr, h.target.ClientConfig())
	if err != nil {
		b.Fatal(err)
	}
	defer direct.Close()
	exec := func(c *ssh.Client, cmd string) time.Duration {
		start := time.Now()
		s, err := c.NewSession()
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Run(cmd); err != nil {
			b.Fatal(err)
		}
		s.Close()
		return time.Since(start)
	}
	exec(through, "web true") // warm the upstream pool
	var dt, dd time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		dt += exec(through, "web true")
		dd += exec(direct, "true")
	}
	b.StopTimer()
	b.ReportMetric(float64(dt.Microseconds())/float64(b.N), "µs/postern")
	b.ReportMetric(float64(dd.Microseconds())/float64(b.N), "µs/direct")
	b.ReportMetric(float64(dt)/float64(dd), "ratio")
}
