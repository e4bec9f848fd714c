package bastion

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// endpoint is where an OpenSSH client logs in: the target directly, or
// postern in the alias's own view.
type endpoint struct {
	name string
	port string
	user string
	key  string
	mux  []string // options that send the sessions over a ControlMaster (muxed)
}

func (e endpoint) opts(portFlag string) []string {
	return join([]string{"-F", "/dev/null", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
		"-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "-o", "IdentitiesOnly=yes", "-o", "IdentityAgent=none",
		"-i", e.key, portFlag, e.port}, e.mux)
}

// muxed starts a ControlMaster that logs in to e, ended with the test, and
// returns e with the options that send every client's session over it
// (ssh, sftp and scp take them): a test about what each session does, not
// about the SSH handshake, then pays for one handshake instead of one per
// client, each a key exchange on both of postern's legs. sockets is a
// short directory for the master's socket (sun_path holds 108 bytes).
func (e endpoint) muxed(t *testing.T, sockets string) endpoint {
	t.Helper()
	path := filepath.Join(sockets, e.name)
	mux := []string{"-o", "ControlMaster=no", "-o", "ControlPath=" + path}
	startMaster(t, join(e.opts("-p"), []string{"-M", "-N", "-o", "ControlPath=" + path, e.user + "@127.0.0.1"}), mux)
	e.mux = mux
	return e
}

// socketDir returns a new directory for ControlMaster sockets, removed
// when the test ends: t.TempDir() may be too long a path for a socket.
func socketDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pcm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// endpoints returns the target itself and postern in front of it.
func (h *harness) endpoints(t *testing.T) []endpoint {
	t.Helper()
	key := filepath.Join(t.TempDir(), "target_ed25519")
	if err := os.WriteFile(key, h.target.UserKeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return []endpoint{
		{name: "direct", port: strconv.Itoa(h.target.Port), user: h.target.User, key: key},
		{name: "postern", port: h.port, user: "web", key: h.keyPath},
	}
}

// srcMtime is the modification time of the local files the tests copy, so
// that a preserved time is told from a new one.
var srcMtime = time.Date(2021, 3, 4, 5, 6, 7, 0, time.UTC)

// sourceFiles writes the local files the OpenSSH tests copy, with their
// modes and srcMtime, and returns them by name.
func sourceFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{"src": make([]byte, 300<<10), "key": []byte("-----BEGIN KEY-----\n"), "sub/inner": []byte("inner\n")}
	rand.Read(files["src"])
	modes := map[string]os.FileMode{"src": 0o640, "key": 0o600, "sub/inner": 0o604}
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o750); err != nil {
		t.Fatal(err)
	}
	for name, b := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, modes[name]); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, modes[name]); err != nil { // past the umask
			t.Fatal(err)
		}
		if err := os.Chtimes(p, srcMtime, srcMtime); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chtimes(filepath.Join(dir, "sub"), srcMtime, srcMtime); err != nil {
		t.Fatal(err)
	}
	return files
}

// tree describes every entry under dir, one line each, sorted: path, type,
// mode, size, content hash or link target, and the mtime if it is srcMtime
// (else "new"), so that two runs on different days compare equal.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		mtime := "new"
		if fi.ModTime().Equal(srcMtime) {
			mtime = "preserved"
		}
		line := fmt.Sprintf("%s %v", rel, fi.Mode())
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			line += " -> " + strings.ReplaceAll(target, dir, "$DIR")
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			line += fmt.Sprintf(" %d %s %s", fi.Size(), hex.EncodeToString(sum[:6]), mtime)
		default:
			line += " " + mtime
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(lines)
	return lines
}

// diffLines reports lines only in a and only in b.
func diffLines(a, b []string) string {
	var out []string
	for _, l := range a {
		if !slices.Contains(b, l) {
			out = append(out, "  direct only:  "+l)
		}
	}
	for _, l := range b {
		if !slices.Contains(a, l) {
			out = append(out, "  postern only: "+l)
		}
	}
	return strings.Join(out, "\n")
}

// TestOpenSSHClientsTransparent drives OpenSSH's sftp (put, put -p, reput,
// get, get -p, reget, cp, ln -s, chmod, mkdir, rename, df) and scp (SFTP
// mode and -O, with and without -p, recursive) directly against the target
// and through postern, each in a directory of its own, and compares what
// each left on both sides: contents, modes, times, links, and the
// clients' exit statuses and output. Each endpoint's clients share one
// ControlMaster connection.
func TestOpenSSHClientsTransparent(t *testing.T) {
	t.Parallel()
	requireTool(t, "sftp", "openssh-client")
	requireTool(t, "scp", "openssh-client")
	h := newHarness(t, harnessOpts{rules: allowAll})
	type run struct {
		remote, local []string
		outputs       []string
	}
	var runs []run
	src := t.TempDir()
	files := sourceFiles(t, src)
	sockets := socketDir(t)
	for _, e := range h.endpoints(t) {
		e = e.muxed(t, sockets)
		remote, local := t.TempDir(), t.TempDir()
		// Partial copies for reput and reget to complete.
		if err := os.WriteFile(filepath.Join(remote, "partial-up"), files["src"][:100000], 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(local, "partial-down"), files["src"][:70000], 0o644); err != nil {
			t.Fatal(err)
		}
		batch := strings.Join([]string{
			"cd " + remote,
			"put " + src + "/src plain",
			"put -p " + src + "/src preserved",
			"put " + src + "/key key",
			"reput " + src + "/src partial-up",
			"get plain " + local + "/got",
			"get -p preserved " + local + "/got-p",
			"put " + src + "/src partial-down",
			"reget partial-down " + local + "/partial-down",
			"cp plain copied",
			"ln -s plain symlink",
			"ln -s " + remote + "/plain abslink",
			"chmod 600 plain",
			"mkdir made",
			"rename copied made/moved",
			"df .",
			"-rm nosuch",
			"-mkdir made",
		}, "\n") + "\n"
		bf := filepath.Join(t.TempDir(), "batch")
		if err := os.WriteFile(bf, []byte(batch), 0o600); err != nil {
			t.Fatal(err)
		}
		r := run{}
		record := func(what string, got sshResult) {
			out := got.stdout + "|" + got.stderr
			out = strings.NewReplacer(remote, "$REMOTE", local, "$LOCAL", src, "$SRC").Replace(out)
			r.outputs = append(r.outputs, fmt.Sprintf("%s: exit %d: %s", what, got.code, out))
			if got.code != 0 {
				t.Errorf("%s %s: exit %d, stderr %q", e.name, what, got.code, got.stderr)
			}
		}
		got := h.runClient("", "sftp", append(e.opts("-P"), "-b", bf, e.user+"@127.0.0.1")...)
		// df's numbers change between the runs: keep its header only.
		lines := strings.Split(got.stdout, "\n")
		for i := range lines {
			if i > 1 && strings.HasPrefix(lines[i-2], "sftp> df") {
				lines[i] = "(df numbers)"
			}
		}
		got.stdout = strings.Join(lines, "\n")
		record("sftp -b", got)
		to := e.user + "@127.0.0.1:" + remote
		for _, c := range []struct {
			what string
			args []string
		}{
			{"scp", []string{src + "/key", to + "/scp-key"}},
			{"scp -p", []string{"-p", src + "/src", to + "/scp-p"}},
			{"scp -r -p", []string{"-r", "-p", src + "/sub", to + "/scp-r"}},
			{"scp -O", []string{"-O", src + "/key", to + "/scp-O-key"}},
			{"scp -O -p", []string{"-O", "-p", src + "/src", to + "/scp-O-p"}},
			{"scp -O -r -p", []string{"-O", "-r", "-p", src + "/sub", to + "/scp-O-r"}},
			{"scp download -p", []string{"-p", to + "/preserved", local + "/scp-down"}},
			{"scp -O download -p", []string{"-O", "-p", to + "/preserved", local + "/scp-O-down"}},
		} {
			record(c.what, h.runClient("", "scp", append(e.opts("-P"), c.args...)...))
		}
		r.remote, r.local = tree(t, remote), tree(t, local)
		runs = append(runs, r)
	}
	direct, via := runs[0], runs[1]
	if d := diffLines(direct.remote, via.remote); d != "" {
		t.Errorf("files left on the target differ:\n%s", d)
	}
	if d := diffLines(direct.local, via.local); d != "" {
		t.Errorf("files fetched differ:\n%s", d)
	}
	for i := range direct.outputs {
		if direct.outputs[i] != via.outputs[i] {
			t.Errorf("output differs:\n  direct:  %q\n  postern: %q", direct.outputs[i], via.outputs[i])
		}
	}
	// The runs themselves did what they were asked (else both could be
	// equally wrong).
	for _, want := range []string{
		"key -rw------- 20", "preserved -rw-r----- 307200", "plain -rw------- 307200", "partial-up -rw-r--r-- 307200",
		"symlink Lrwxrwxrwx -> plain", "made/moved -rw-r----- 307200", "scp-p -rw-r----- 307200",
	} {
		if !slices.ContainsFunc(direct.remote, func(l string) bool { return strings.HasPrefix(l, want) }) {
			t.Errorf("direct run left no %q on the target:\n%s", want, strings.Join(direct.remote, "\n"))
		}
	}
	if !slices.ContainsFunc(direct.remote, func(l string) bool { return strings.HasPrefix(l, "preserved ") && strings.HasSuffix(l, " preserved") }) {
		t.Errorf("put -p did not keep the time:\n%s", strings.Join(direct.remote, "\n"))
	}
}
