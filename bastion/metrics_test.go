package bastion

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/crypto/ssh"

	"github.com/postern/postern/internal/testwait"
	"github.com/postern/postern/metrics"
)

// TestMetricsHandshakesAndDials: the bastion counts each agent handshake
// under its outcome and each failed dial of a target under its reason,
// with a real OpenSSH client and target.
func TestMetricsHandshakesAndDials(t *testing.T) {
	t.Parallel()
	freePort := func(t *testing.T) int {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return ln.Addr().(*net.TCPAddr).Port
	}
	_, wrong, _ := ed25519.GenerateKey(rand.Reader)
	wrongPub, _ := ssh.NewSignerFromKey(wrong)
	tests := []struct {
		name   string
		opts   func(t *testing.T) harnessOpts
		client func(t *testing.T, h *harness)
		want   string // the exposition lines of the metric checked
		metric string
	}{
		{"known key", func(*testing.T) harnessOpts { return harnessOpts{} },
			func(t *testing.T, h *harness) {
				if got := h.ssh("", "127.0.0.1", "web", "true"); got.code != 0 {
					t.Fatalf("ssh: exit %d, stderr %q; want 0", got.code, got.stderr)
				}
			}, "ok", "postern_ssh_handshakes_total"},
		{"unknown key", func(*testing.T) harnessOpts { return harnessOpts{} },
			func(t *testing.T, h *harness) {
				_, priv, _ := ed25519.GenerateKey(rand.Reader)
				block, _ := ssh.MarshalPrivateKey(priv, "stranger")
				h.keyPath = filepath.Join(t.TempDir(), "stranger")
				if err := os.WriteFile(h.keyPath, pem.EncodeToMemory(block), 0o600); err != nil {
					t.Fatal(err)
				}
				if got := h.ssh("", "127.0.0.1", "web", "true"); got.code != 255 {
					t.Fatalf("ssh: exit %d; want 255", got.code)
				}
			}, "auth_failed", "postern_ssh_handshakes_total"},
		{"target down", func(t *testing.T) harnessOpts { return harnessOpts{port: freePort(t)} },
			func(t *testing.T, h *harness) {
				if got := h.ssh("", "127.0.0.1", "web", "true"); got.code != ExitUnreachable {
					t.Fatalf("ssh: exit %d; want %d", got.code, ExitUnreachable)
				}
			}, "unreachable", "postern_upstream_dial_errors_total"},
		{"host key changed", func(*testing.T) harnessOpts {
			return harnessOpts{hostKeys: []string{"127.0.0.1 " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(wrongPub.PublicKey())))}}
		}, func(t *testing.T, h *harness) {
			if got := h.ssh("", "127.0.0.1", "web", "true"); got.code != ExitUnreachable {
				t.Fatalf("ssh: exit %d; want %d", got.code, ExitUnreachable)
			}
		}, "host_key_changed", "postern_upstream_dial_errors_total"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			reg := prometheus.NewRegistry()
			m, err := metrics.New(reg)
			if err != nil {
				t.Fatal(err)
			}
			o := tt.opts(t)
			o.config = func(c *Config) { c.Metrics = m }
			h := newHarness(t, o)
			tt.client(t, h)
			// The server ends the handshake a moment after the client
			// has exited.
			testwait.Until(t, tt.metric+" "+tt.want, func() bool {
				return counter(t, reg, tt.metric, tt.want) == 1
			})
			// Every other outcome or reason stays at zero.
			mfs, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			for _, mf := range mfs {
				if mf.GetName() != tt.metric {
					continue
				}
				for _, s := range mf.GetMetric() {
					if v := s.GetLabel()[0].GetValue(); v != tt.want && s.GetCounter().GetValue() != 0 {
						t.Errorf("%s{%s} = %v; want 0", tt.metric, v, s.GetCounter().GetValue())
					}
				}
			}
			if got := testutil.CollectAndCount(reg, "postern_ssh_connections_total"); got != 2 {
				t.Errorf("connection outcome series = %d; want 2", got)
			}
		})
	}
}

// counter is the value of the series of the one-label counter name whose
// label is value.
func counter(t *testing.T, g prometheus.Gatherer, name, value string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == value {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
