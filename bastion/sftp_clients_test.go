package bastion

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/postern/postern/internal/testwait"
)

// clientCase is one line of testdata/sftpclients.py's output.
type clientCase struct {
	Case   string          `json:"case"`
	Result json.RawMessage `json:"result"`
}

// runClientScript runs testdata/sftpclients.py with client against
// host:port as user with key, working in a fresh directory, and returns its
// cases in order.
func runClientScript(t *testing.T, client string, port int, user, key string) []clientCase {
	t.Helper()
	script, err := filepath.Abs("testdata/sftpclients.py")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(testwait.Context(t), debianPython, "-W", "ignore", script,
		client, "127.0.0.1", strconv.Itoa(port), user, key, t.TempDir())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s (user %s, port %d): %v\nstdout:\n%s\nstderr:\n%s", client, user, port, err, out, stderr.String())
	}
	var cases []clientCase
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var c clientCase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("%s: output line %q: %v", client, sc.Text(), err)
		}
		cases = append(cases, c)
	}
	return cases
}

// TestSFTPClientsTransparent runs paramiko and asyncssh through every
// behaviour postern was once found changing (pipelined append, writes seen
// before close, ftruncate and fsetstat after a write, a write error on the
// write, requested modes, symbolic links, every extension, listings with
// "." and ".."), directly against an OpenSSH target and through postern in
// the alias's own view, with every class allowed. Any difference fails.
func TestSFTPClientsTransparent(t *testing.T) {
	t.Parallel()
	requirePython(t, "paramiko", "asyncssh")
	h := newHarness(t, harnessOpts{rules: allowAll})
	targetKey := filepath.Join(t.TempDir(), "target_ed25519")
	if err := os.WriteFile(targetKey, h.target.UserKeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	bastionPort, err := strconv.Atoi(h.port)
	if err != nil {
		t.Fatal(err)
	}
	for _, client := range []string{"paramiko", "asyncssh"} {
		t.Run(client, func(t *testing.T) {
			direct := runClientScript(t, client, h.target.Port, h.target.User, targetKey)
			via := runClientScript(t, client, bastionPort, "web", h.keyPath)
			// The script itself must work directly, or the comparison
			// proves nothing.
			sanity := map[string]string{
				"append pipelined":          `{"right content":true,"size":2098176}`,
				"write then fstat and stat": `{"fstat":10,"on disk":10,"stat":10}`,
				"write then ftruncate 4":    `{"on disk":"0123"}`,
				"symlink":                   `"relative":"target.txt"`,
				"listing":                   `[".",".."]`,
			}
			got := map[string]string{}
			for _, c := range direct {
				got[c.Case] = string(c.Result)
			}
			for name, want := range sanity {
				if !strings.Contains(got[name], want) {
					t.Errorf("direct %s: got %s; want %s (the script or the target misbehaves)", name, got[name], want)
				}
			}
			names := func(cs []clientCase) []string {
				var n []string
				for _, c := range cs {
					n = append(n, c.Case)
				}
				return n
			}
			if !slices.Equal(names(direct), names(via)) {
				t.Fatalf("cases: got %q through postern; want %q as directly", names(via), names(direct))
			}
			for i := range direct {
				if !bytes.Equal(direct[i].Result, via[i].Result) {
					t.Errorf("%s %s: got %s through postern; want %s as directly", client, direct[i].Case, via[i].Result, direct[i].Result)
				}
			}
		})
	}
}
