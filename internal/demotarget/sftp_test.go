package demotarget

import (
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
)

// TestSFTP: the sftp subsystem starts in the scratch directory, writes and
// reads real files with the modes asked for, and ends with exit status 0.
func TestSFTP(t *testing.T) {
	f := start(t)
	c := f.dial(t)
	ch, reqs, err := c.OpenChannel("session", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if ok, err := ch.SendRequest("subsystem", true, ssh.Marshal(struct{ Name string }{"sftp"})); err != nil || !ok {
		t.Fatalf("subsystem sftp: got %v, %v; want accepted", ok, err)
	}
	sc, err := sftp.NewClientPipe(ch, halfCloser{ch})
	if err != nil {
		t.Fatal(err)
	}
	if wd, err := sc.Getwd(); err != nil || wd != f.target.Dir() {
		t.Errorf("getwd: got %q, %v; want the scratch directory %q", wd, err, f.target.Dir())
	}
	w, err := sc.OpenFile("up.txt", os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("through sftp\n")); err != nil {
		t.Fatal(err)
	}
	if err := w.Chmod(0o600); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(f.target.Dir(), "up.txt"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("up.txt on disk: got %v, %v; want mode 0600", fi, err)
	}
	r, err := sc.Open("up.txt")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(r)
	r.Close()
	if err != nil || string(b) != "through sftp\n" {
		t.Errorf("read back: got %q, %v", b, err)
	}
	if _, err := sc.Stat("missing"); err == nil {
		t.Error("stat of a missing file succeeded")
	}
	if err := sc.Close(); err != nil {
		t.Fatal(err)
	}
	status := -1
	for req := range reqs {
		if req.Type == "exit-status" && len(req.Payload) == 4 {
			status = int(binary.BigEndian.Uint32(req.Payload))
		}
	}
	if status != 0 {
		t.Errorf("exit status %d; want 0", status)
	}
}

// halfCloser ends the client's side of a channel (EOF) on Close, so that
// the server's exit status can still arrive.
type halfCloser struct{ ch ssh.Channel }

func (h halfCloser) Write(p []byte) (int, error) { return h.ch.Write(p) }
func (h halfCloser) Close() error                { return h.ch.CloseWrite() }

// TestOtherSubsystemsRefused: only sftp is served.
func TestOtherSubsystemsRefused(t *testing.T) {
	f := start(t)
	c := f.dial(t)
	ch, _, err := c.OpenChannel("session", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	payload := ssh.Marshal(struct{ Name string }{"nope"})
	if ok, err := ch.SendRequest("subsystem", true, payload); err != nil || ok {
		t.Errorf("subsystem nope: got %v, %v; want refused", ok, err)
	}
	msg, _ := io.ReadAll(ch.Stderr())
	if !strings.Contains(string(msg), "only the sftp subsystem is served") {
		t.Errorf("stderr: got %q; want the refusal", msg)
	}
}
