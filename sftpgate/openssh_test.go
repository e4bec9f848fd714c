package sftpgate

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/pkg/sftp"
	"github.com/postern/postern/internal/e2e"
	"github.com/postern/postern/internal/testsshd"
	"github.com/postern/postern/internal/testwait"
	"github.com/postern/postern/policy"
	"golang.org/x/crypto/ssh"
)

// sshdDialer dials srv's sftp subsystem; with startDir set it runs
// OpenSSH's sftp-server with -d instead, so that a test can choose the
// "home" directory without touching the real one.
func sshdDialer(t testing.TB, srv *testsshd.Server, startDir string) Dialer {
	return func(ctx context.Context, alias string) (*Upstream, error) {
		conn, err := ssh.Dial("tcp", srv.Addr, srv.ClientConfig())
		if err != nil {
			return nil, err
		}
		sess, err := conn.NewSession()
		if err != nil {
			conn.Close()
			return nil, err
		}
		stdin, _ := sess.StdinPipe()
		stdout, _ := sess.StdoutPipe()
		if startDir == "" {
			err = sess.RequestSubsystem("sftp")
		} else {
			err = sess.Start("exec /usr/lib/openssh/sftp-server -d " + startDir)
		}
		if err != nil {
			conn.Close()
			return nil, err
		}
		return &Upstream{Conn: struct {
			io.Reader
			io.Writer
		}{stdout, stdin}, Close: func() error {
			sess.Close()
			return conn.Close()
		}}, nil
	}
}

// sshdGate serves the gate over loopback in front of a real sshd and
// returns the agent's pkg/sftp client.
func sshdGate(t *testing.T, cfg Config) *sftp.Client {
	t.Helper()
	a, b := tcpPair(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	cfg = patient(t, cfg)
	go func() { done <- Serve(ctx, b, cfg) }()
	t.Cleanup(func() {
		cancel()
		a.Close()
		testwait.Recv(t, "Serve to return at the end of the test", done)
		b.Close()
	})
	c, err := sftp.NewClientPipe(a, a)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func allowAll(context.Context, Op) (Finish, error) { return nil, nil }

func TestOpenSSHSymlinkOrder(t *testing.T) {
	srv := sharedTarget.Get(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "target.txt"), []byte("x"), 0o644)
	c := sshdGate(t, Config{Aliases: []string{"web"}, Decide: allowAll, Dial: sshdDialer(t, srv, "")})
	// As `ln -s TARGET LINK` in OpenSSH's sftp: client.Symlink(target, link).
	if err := c.Symlink("target.txt", "/web"+dir+"/rel"); err != nil {
		t.Fatalf("symlink: %v", err)
	}
	if err := c.Symlink("/web"+dir+"/target.txt", "/web"+dir+"/abs"); err != nil {
		t.Fatalf("symlink: %v", err)
	}
	for link, want := range map[string]string{"rel": "target.txt", "abs": filepath.Join(dir, "target.txt")} {
		if got, err := os.Readlink(filepath.Join(dir, link)); err != nil || got != want {
			t.Errorf("%s on disk: got %q, %v; want %q", link, got, err, want)
		}
	}
	if got, err := c.ReadLink("/web" + dir + "/abs"); err != nil || got != "/web"+dir+"/target.txt" {
		t.Errorf("readlink through the gate: got %q, %v; want %q", got, err, "/web"+dir+"/target.txt")
	}
	// Realpath resolves the link on the target and answers in the agent's view.
	if got, err := c.RealPath("/web" + dir + "/rel"); err != nil || got != "/web"+dir+"/target.txt" {
		t.Errorf("realpath: got %q, %v; want %q", got, err, "/web"+dir+"/target.txt")
	}
}

func TestOpenSSHFixedViewHome(t *testing.T) {
	if _, err := os.Stat("/usr/lib/openssh/sftp-server"); err != nil {
		t.Skip("needs /usr/lib/openssh/sftp-server to choose the start directory")
	}
	srv := sharedTarget.Get(t)
	home := t.TempDir()
	c := sshdGate(t, Config{Fixed: "web", Decide: allowAll, Dial: sshdDialer(t, srv, home)})
	if got, err := c.Getwd(); err != nil || got != home {
		t.Errorf("getwd: got %q, %v; want %q", got, err, home)
	}
	f, err := c.Create("landed.txt")
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("here"))
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(home, "landed.txt")); err != nil || string(b) != "here" {
		t.Errorf("landed.txt in home: got %q, %v", b, err)
	}
}

func TestOpenSSHTransferAndAppend(t *testing.T) {
	srv := sharedTarget.Get(t)
	dir := t.TempDir()
	c := sshdGate(t, Config{Aliases: []string{"web"}, Decide: allowAll, Dial: sshdDialer(t, srv, "")})
	data := make([]byte, 8<<20+17)
	rand.Read(data)
	p := "/web" + dir + "/blob"
	f, err := c.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadFrom(bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	onDisk, _ := os.ReadFile(filepath.Join(dir, "blob"))
	if sha256.Sum256(onDisk) != sha256.Sum256(data) {
		t.Fatalf("put: %d bytes on disk do not match the %d sent", len(onDisk), len(data))
	}
	g, err := c.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if _, err := g.WriteTo(&got); err != nil {
		t.Fatal(err)
	}
	g.Close()
	if sha256.Sum256(got.Bytes()) != sha256.Sum256(data) {
		t.Fatalf("get: %d bytes do not match the %d on disk", got.Len(), len(data))
	}
	a, err := c.OpenFile(p, os.O_WRONLY|os.O_APPEND)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Write([]byte("tail")); err != nil {
		t.Fatal(err)
	}
	a.Close()
	if fi, err := os.Stat(filepath.Join(dir, "blob")); err != nil || fi.Size() != int64(len(data)+4) {
		t.Errorf("after append: got %v, %v; want size %d", fi, err, len(data)+4)
	}
	if err := c.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(filepath.Join(dir, "blob")); fi.Mode().Perm() != 0o600 {
		t.Errorf("after chmod: got %v; want -rw-------", fi.Mode())
	}
	// OpenSSH's remove never removes a directory; neither does the gate.
	// (pkg/sftp's client would fall back to rmdir, so this speaks raw.)
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	ra, rb := tcpPair(t)
	defer ra.Close()
	defer rb.Close()
	done := make(chan error, 1)
	go func() {
		done <- Serve(context.Background(), rb, patient(t, Config{Aliases: []string{"web"}, Decide: allowAll, Dial: sshdDialer(t, srv, "")}))
	}()
	r := newRawConn(t, ra)
	if code, msg := r.status(fxpRemove, "/web"+dir+"/sub"); code != fxFailure || msg != "Failure" {
		t.Errorf("remove of a directory: got %d %q; want OpenSSH's own answer, failure", code, msg)
	}
	if _, err := os.Stat(filepath.Join(dir, "sub")); err != nil {
		t.Errorf("sub is gone: %v", err)
	}
	ra.Close()
	if err := testwait.Recv(t, "Serve to return", done); err != nil {
		t.Errorf("Serve: %v", err)
	}
}

// TestOpenSSHClient drives the gate with OpenSSH's own sftp client in batch
// mode, through a minimal x/crypto SSH server that serves the gate on the
// sftp subsystem, to a real sshd behind it.
func TestOpenSSHClient(t *testing.T) {
	sftpBin := e2e.Tool(t, "sftp", "openssh-client")
	srv := sharedTarget.Get(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "keep.txt"), []byte("keep"), 0o644)
	local := t.TempDir()
	os.WriteFile(filepath.Join(local, "up.txt"), []byte("uploaded"), 0o644)

	var mu sync.Mutex
	var ops []Op
	decide := func(ctx context.Context, op Op) (Finish, error) {
		mu.Lock()
		defer mu.Unlock()
		ops = append(ops, op)
		if op.Class == policy.Destructive {
			return nil, errors.New("postern: destructive denied on web")
		}
		return nil, nil
	}
	var stderr bytes.Buffer
	addr := miniSSHServer(t, patient(t, Config{Aliases: []string{"web"}, Decide: decide, Dial: sshdDialer(t, srv, "")}), &stderr)

	batch := strings.Join([]string{
		"ls /",
		"cd /web" + dir,
		"put " + filepath.Join(local, "up.txt") + " up.txt",
		"ln -s keep.txt link",
		"mkdir newdir",
		"rename up.txt moved.txt",
		"-rm keep.txt",
		"get moved.txt " + filepath.Join(local, "down.txt"),
	}, "\n") + "\n"
	batchFile := filepath.Join(local, "batch")
	os.WriteFile(batchFile, []byte(batch), 0o644)
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.CommandContext(testwait.Context(t), sftpBin, "-b", batchFile, "-P", port, "-F", "/dev/null",
		"-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes", "-o", "LogLevel=ERROR",
		"agent@127.0.0.1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sftp -b: %v\n%s", err, out)
	}
	t.Logf("sftp -b output:\n%s", out)
	if !strings.Contains(string(out), "web") {
		t.Errorf("ls / did not list web:\n%s", out)
	}
	if got, err := os.Readlink(filepath.Join(dir, "link")); err != nil || got != "keep.txt" {
		t.Errorf("ln -s keep.txt link: got %q, %v; want a link to keep.txt", got, err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "newdir")); err != nil || !fi.IsDir() {
		t.Errorf("mkdir newdir: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "moved.txt")); err != nil || string(b) != "uploaded" {
		t.Errorf("put then rename: got %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(local, "down.txt")); err != nil || string(b) != "uploaded" {
		t.Errorf("get: got %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "keep.txt")); err != nil {
		t.Errorf("denied rm removed keep.txt: %v", err)
	}
	if !strings.Contains(stderr.String(), "postern: destructive denied on web") {
		t.Errorf("the refusal's reason is not on stderr: %q", stderr.String())
	}
	mu.Lock()
	defer mu.Unlock()
	want := Op{"web", policy.Write, "symlink", []string{"keep.txt", dir + "/link"}, ""}
	found := false
	for _, op := range ops {
		if fmt.Sprint(op) == fmt.Sprint(want) {
			found = true
		}
	}
	if !found {
		t.Errorf("no decision %+v among %+v", want, ops)
	}
}

// miniSSHServer accepts SSH connections on loopback without authentication
// and serves the gate with cfg on each session's sftp subsystem, sending
// exit-status 0 when Serve returns nil. Refusals are copied to stderr as
// well as the session's stderr.
func miniSSHServer(t *testing.T, cfg Config, stderr *bytes.Buffer) string {
	t.Helper()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	sc := &ssh.ServerConfig{NoClientAuth: true}
	sc.AddHostKey(signer)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex // protects stderr
	t.Cleanup(func() {
		l.Close()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer nc.Close()
				conn, chans, reqs, err := ssh.NewServerConn(nc, sc)
				if err != nil {
					return
				}
				defer conn.Close()
				go ssh.DiscardRequests(reqs)
				for nch := range chans {
					if nch.ChannelType() != "session" {
						nch.Reject(ssh.UnknownChannelType, "no")
						continue
					}
					ch, chReqs, err := nch.Accept()
					if err != nil {
						continue
					}
					for req := range chReqs {
						if req.Type != "subsystem" || len(req.Payload) < 4 || string(req.Payload[4:]) != "sftp" {
							req.Reply(false, nil)
							continue
						}
						req.Reply(true, nil)
						c := cfg
						c.Stderr = io.MultiWriter(ch.Stderr(), lockedWriter{&mu, stderr})
						status := uint32(0)
						if err := Serve(context.Background(), ch, c); err != nil {
							status = 1
						}
						ch.SendRequest("exit-status", false, binary.BigEndian.AppendUint32(nil, status))
						ch.Close()
						break
					}
				}
			}()
		}
	}()
	return l.Addr().String()
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}
