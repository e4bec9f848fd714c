package sftpgate

import (
	"io"
	"strings"
	"testing"

	"github.com/pkg/sftp"
)

// benchClient returns a client to an in-memory target holding /f: straight
// to it ("direct"), or through the gate's fixed view with every operation
// allowed ("gate"). The difference is what the gate costs per request,
// without SSH or a real file system.
func benchClient(b *testing.B, via string) *sftp.Client {
	b.Helper()
	h := startHarness(b, harnessOpts{fixed: "web"})
	h.writeFile("web", "/f", "x")
	h.writeFile("web", "/big", strings.Repeat("0123456789abcdef", 1<<18))
	if via == "gate" {
		return h.client
	}
	c, closeFn := h.targets["web"].session(b)
	b.Cleanup(func() { closeFn() })
	return c
}

// BenchmarkStatRoundTrip is one stat, answered, per op: the latency the
// gate adds to a request that waits for its answer (a decision included).
func BenchmarkStatRoundTrip(b *testing.B) {
	for _, via := range []string{"direct", "gate"} {
		b.Run(via, func(b *testing.B) {
			c := benchClient(b, via)
			b.ResetTimer()
			for b.Loop() {
				if _, err := c.Stat("/f"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDownload is a 4 MiB download in 32 KiB reads, pipelined
// (pkg/sftp keeps 64 in flight), per op.
func BenchmarkDownload(b *testing.B) {
	for _, via := range []string{"direct", "gate"} {
		b.Run(via, func(b *testing.B) {
			c := benchClient(b, via)
			const size = 4 << 20
			b.SetBytes(size)
			b.ResetTimer()
			for b.Loop() {
				f, err := c.Open("/big")
				if err != nil {
					b.Fatal(err)
				}
				n, err := f.WriteTo(io.Discard)
				f.Close()
				if err != nil || n != size {
					b.Fatalf("read %d bytes, %v; want %d", n, err, size)
				}
			}
		})
	}
}
