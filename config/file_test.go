package config

import (
	"bytes"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/postern/postern/internal/testwait"
)

func TestParse(t *testing.T) {
	f, err := Parse([]byte(`
[serve]
ssh_listen = "0.0.0.0:2222"
approval_ttl = "3m"
command_rate = 5.5

[[agent]]
name = "bot"
keys = ["ssh-ed25519 AAAA bot"]

[[connection]]
alias = "web"
host = "10.0.0.5"
user = "deploy"
generate_key = true
accept_new_host_key = true

[[grant]]
agent = "bot"
connection = "web"
write = "ask"

[[notify]]
name = "ops"
url_file = "ops.url"
events = ["pending"]
`))
	if err != nil {
		t.Fatal(err)
	}
	if f.Serve.SSHListen != "0.0.0.0:2222" || time.Duration(f.Serve.ApprovalTTL) != 3*time.Minute || f.Serve.CommandRate != 5.5 {
		t.Errorf("serve: %+v", f.Serve)
	}
	if len(f.Agents) != 1 || len(f.Connections) != 1 || !f.Connections[0].GenerateKey || len(f.Grants) != 1 ||
		f.Grants[0].Write != "ask" || len(f.Notify) != 1 || f.Notify[0].URLFile != "ops.url" {
		t.Errorf("parsed: %+v", f)
	}
	// What Marshal writes, Parse reads back the same.
	b, err := Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(b)
	if err != nil {
		t.Fatalf("Parse(Marshal): %v\n%s", err, b)
	}
	if !reflect.DeepEqual(back, f) {
		t.Errorf("round trip:\n%+v\nwant\n%+v", back, f)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"unknown key", "[[agent]]\nname = \"a\"\nkey = \"x\"\n", "line 3: unknown key agent.key"},
		{"unknown table", "[agents]\nname = \"a\"\n", "unknown key agents"},
		{"wrong type", "[[connection]]\nport = \"22\"\n", "line 2"},
		{"bad duration", "[serve]\napproval_ttl = \"soon\"\n", "want a number and a unit"},
		{"not TOML", "[[agent]\n", "line 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse: %v; want an error with %q", err, tt.want)
			}
		})
	}
}

// TestReadRegular: apply reads only regular files, and only up to a
// bound: a FIFO, a device, a directory or a socket is refused by name
// before a byte is read (a FIFO without a writer, too, without blocking),
// and so is a file over the bound. Symbolic links are followed.
func TestReadRegular(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, size int64) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, bytes.Repeat([]byte("k"), int(min(size, 4096))), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, size); err != nil { // sparse beyond 4 KiB
			t.Fatal(err)
		}
		return p
	}
	const limit = 1 << 10
	exact := write("exact", limit)
	over := write("over", limit+1)
	huge := write("huge", 1<<40)
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	link := filepath.Join(dir, "link")
	if err := os.Symlink(exact, link); err != nil {
		t.Fatal(err)
	}
	zeroLink := filepath.Join(dir, "zero-link")
	if err := os.Symlink("/dev/zero", zeroLink); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path string
		want       string // "" for a read of limit bytes
	}{
		{"regular, at the bound", exact, ""},
		{"link to a regular file", link, ""},
		{"one byte over", over, over + ": larger than 1 KiB, the most a key file may hold"},
		{"a terabyte", huge, huge + ": larger than 1 KiB, the most a key file may hold"},
		{"FIFO", fifo, fifo + ": a named pipe (FIFO); give a regular file"},
		{"/dev/zero", "/dev/zero", "/dev/zero: a character device; give a regular file"},
		{"link to /dev/zero", zeroLink, zeroLink + ": a character device; give a regular file"},
		{"/dev/null", "/dev/null", "/dev/null: a character device; give a regular file"},
		{"directory", dir, dir + ": a directory; give a regular file"},
		{"socket", sock, sock + ": a socket; give a regular file"},
		{"missing", filepath.Join(dir, "nosuch"), "stat " + filepath.Join(dir, "nosuch") + ": no such file or directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			type result struct {
				b   []byte
				err error
			}
			r := returns(t, "readRegular("+tt.path+")", func() result {
				b, err := readRegular(tt.path, limit, "a key file")
				return result{b, err}
			})
			switch {
			case tt.want == "" && (r.err != nil || len(r.b) != limit):
				t.Errorf("got %d bytes, %v; want %d bytes", len(r.b), r.err, limit)
			case tt.want != "" && (r.err == nil || r.err.Error() != tt.want):
				t.Errorf("got %d bytes, error %v; want error %q", len(r.b), r.err, tt.want)
			}
		})
	}
}

// TestLoadRefuses: the config file itself is bounded and must be regular.
func TestLoadRefuses(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "postern.toml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.toml")
	if err := os.WriteFile(big, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, maxConfigFile+1); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(filepath.Join(dir, "nosuch.toml")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load of a missing file: %v; want an error that is fs.ErrNotExist", err)
	}
	for path, want := range map[string]string{
		fifo:        "config: " + fifo + ": a named pipe (FIFO); give a regular file",
		"/dev/zero": "config: /dev/zero: a character device; give a regular file",
		dir:         "config: " + dir + ": a directory; give a regular file",
		big:         "config: " + big + ": larger than 1 MiB, the most a config file may hold",
	} {
		err := returns(t, "Load("+path+")", func() error {
			_, err := Load(path)
			return err
		})
		if err == nil || err.Error() != want {
			t.Errorf("Load(%s): %v; want %q", path, err, want)
		}
	}
}

// returns runs fn and returns what it returns, failing t if fn has not
// returned by the test's deadline: a read that blocks (on a FIFO) fails
// the test saying so instead of hanging it into go test's timeout.
func returns[T any](t *testing.T, what string, fn func() T) T {
	t.Helper()
	done := make(chan T, 1)
	go func() { done <- fn() }()
	return testwait.Recv(t, what+" to return", done)
}
