package bastion

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/postern/postern/internal/e2e"
	"github.com/postern/postern/internal/testwait"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
)

// The virtual root (`sftp bastion`) across two aliases, as OpenSSH's sftp,
// paramiko and asyncssh use it (docs/sftp.md): a copy between aliases is a
// copy or nothing, mkdir of an alias answers as for a directory that
// exists, every refusal says why and is audited, a chmod rides on a write
// only right after it and only while its rule holds, and a revoked grant
// leaves "/" at once. One postern and one sshd target serve every subtest:
// aliases web and db are two connections to it, each working in a
// directory of its own.

// stepClient is testdata/sftpsteps.py: one SFTP session of paramiko or
// asyncssh, driven a step at a time. Its steps take the (sub)test they
// belong to, so that one session serves several subtests.
type stepClient struct {
	in    io.WriteCloser
	lines chan string
	done  chan error
}

// stepResult is one step's answer: Ok, or the error's class, SFTP status
// code and message.
type stepResult struct {
	Ok    json.RawMessage `json:"ok"`
	Error string          `json:"error"`
	Code  int             `json:"code"`
	Text  string          `json:"text"`
}

// startSteps starts connecting client (paramiko or asyncssh) to the
// bastion's virtual root as the agent (ready waits for it). The session
// ends with the test.
func startSteps(t *testing.T, h *harness, client string) *stepClient {
	t.Helper()
	script, err := filepath.Abs("testdata/sftpsteps.py")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(testwait.Context(t), debianPython, "-W", "ignore", script,
		client, "127.0.0.1", h.port, "agent", h.keyPath)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &stepClient{in: in, lines: make(chan string), done: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
		c.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		in.Close()
		for range c.lines {
		}
		if err := testwait.Recv(t, client+" to exit", c.done); err != nil {
			t.Errorf("%s: %v", client, err)
		}
	})
	return c
}

// ready waits until the client has connected.
func (c *stepClient) ready(t *testing.T) {
	t.Helper()
	if line := c.next(t, "the client to connect"); line != `{"ready": true}` {
		t.Fatalf("got %q; want ready", line)
	}
}

// next returns the script's next line; lines is closed, and next fails
// the test, when the script ends before it.
func (c *stepClient) next(t *testing.T, what string) string {
	t.Helper()
	line := testwait.Recv(t, what, c.lines)
	if line == "" {
		t.Fatalf("the client ended while the test waited for %s", what)
	}
	return line
}

// do runs one step (see sftpsteps.py) and returns its answer.
func (c *stepClient) do(t *testing.T, step map[string]any) stepResult {
	t.Helper()
	b, err := json.Marshal(step)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.in.Write(append(b, '\n')); err != nil {
		t.Fatal(err)
	}
	var r stepResult
	line := c.next(t, "the answer to "+string(b))
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		t.Fatalf("answer %q: %v", line, err)
	}
	return r
}

// ok runs a step that must succeed and returns its result.
func (c *stepClient) ok(t *testing.T, step map[string]any) string {
	t.Helper()
	r := c.do(t, step)
	if r.Error != "" {
		t.Fatalf("%v: got %s %d %q; want success", step, r.Error, r.Code, r.Text)
	}
	return string(r.Ok)
}

// runSFTP runs OpenSSH's sftp in batch mode on the virtual root.
func runSFTP(t *testing.T, h *harness, batch string) sshResult {
	t.Helper()
	bf := filepath.Join(t.TempDir(), "batch")
	if err := os.WriteFile(bf, []byte(batch), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(testwait.Context(t), "sftp", append(h.clientOpts("-P"), "-b", bf, "agent@127.0.0.1")...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := sshResult{stdout: out.String(), stderr: errb.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("sftp: %v", err)
	}
	return r
}

// sftpRows returns the SFTP audit rows as "decision operation (reason)".
func sftpRows(t *testing.T, h *harness) []string {
	t.Helper()
	rows, err := h.st.ListAudit(context.Background(), store.AuditFilter{Kind: string(policy.SFTP)})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rows {
		out = append(out, r.Decision+" "+r.Operation+" ("+r.Reason+")")
	}
	return out
}

// awaitRow waits until an SFTP audit row starts with prefix and returns it.
// A session's rows are written as its operations end, a write's once what
// rides on it has been answered.
func awaitRow(t *testing.T, h *harness, prefix string) string {
	t.Helper()
	var row string
	testwait.Until(t, "an audit row "+prefix, func() bool {
		for _, r := range sftpRows(t, h) {
			if strings.HasPrefix(r, prefix) {
				row = r
				return true
			}
		}
		return false
	})
	return row
}

func setRules(t *testing.T, h *harness, alias string, rules store.Rules) {
	t.Helper()
	if _, err := h.st.SetGrant(context.Background(), store.Unaudited(), "agent1", alias, rules); err != nil {
		t.Fatal(err)
	}
}

func modeOf(t *testing.T, p string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func TestSFTPVirtualRootAcrossAliases(t *testing.T) {
	t.Parallel()
	e2e.Tool(t, "sftp", "openssh-client")
	requirePython(t, "paramiko", "asyncssh")
	h := newHarness(t, harnessOpts{rules: readWrite})
	ctx := context.Background()
	if _, err := h.st.CreateConnection(ctx, store.Unaudited(), store.NewConnection{
		Alias: "db", Host: h.target.Host, Port: h.target.Port, User: h.target.User,
		PrivateKey: h.target.UserKeyPEM, HostKeys: []string{h.target.KnownHostsLine},
	}); err != nil {
		t.Fatal(err)
	}
	setRules(t, h, "db", readWrite)
	webDir, dbDir, local := t.TempDir(), t.TempDir(), t.TempDir()
	web := func(name string) string { return "/web" + webDir + "/" + name } // in the agent's view
	db := func(name string) string { return "/db" + dbDir + "/" + name }
	payload := strings.Repeat("0123456789abcdef", 10000) + "tail" // several of the gate's chunks
	writeFile(t, filepath.Join(webDir, "F"), payload)

	t.Run("OpenSSH cp across aliases copies", func(t *testing.T) {
		writeFile(t, filepath.Join(dbDir, "G"), "an older file")
		got := runSFTP(t, h, "cp "+web("F")+" "+db("G")+"\n")
		if got.code != 0 {
			t.Fatalf("sftp exit %d stderr %q; want 0", got.code, got.stderr)
		}
		if s := readFile(t, filepath.Join(dbDir, "G")); s != payload {
			t.Errorf("db's G holds %d bytes; want the %d of web's F", len(s), len(payload))
		}
		row := awaitRow(t, h, `allowed sftp put "`+dbDir+`/G"`)
		if want := `then copy-data from "` + webDir + `/F" on web (to the end from offset 0 to offset 0): status 0`; !strings.Contains(row, want) {
			t.Errorf("the put's row %q; want it to say %q", row, want)
		}
	})

	t.Run("OpenSSH cp refused leaves the destination", func(t *testing.T) {
		writeFile(t, filepath.Join(dbDir, "H"), "unchanged")
		setRules(t, h, "db", store.Rules{Read: store.RuleAllow, Write: store.RuleDeny, Destructive: store.RuleDeny})
		defer setRules(t, h, "db", readWrite)
		got := runSFTP(t, h, "-cp "+web("F")+" "+db("H")+"\n")
		if s := readFile(t, filepath.Join(dbDir, "H")); s != "unchanged" {
			t.Errorf("db's H = %q after a refused cp; want unchanged", s)
		}
		// The denial names the path as the agent wrote it.
		if want := `postern: denied: write sftp put "` + db("H") + `"`; !strings.Contains(got.stderr, want) {
			t.Errorf("stderr %q; want %q", got.stderr, want)
		}
		awaitRow(t, h, `denied sftp put "`+dbDir+`/H"`)
	})

	clients := map[string]*stepClient{"asyncssh": startSteps(t, h, "asyncssh"), "paramiko": startSteps(t, h, "paramiko")}
	for _, c := range clients {
		c.ready(t)
	}

	t.Run("asyncssh makedirs through an alias", func(t *testing.T) {
		c := clients["asyncssh"]
		p := "/web" + webDir + "/x/y"
		if got := c.ok(t, map[string]any{"op": "makedirs", "path": p}); got != "true" {
			t.Errorf("makedirs %s: got %s; want a directory", p, got)
		}
		if fi, err := os.Stat(filepath.Join(webDir, "x", "y")); err != nil || !fi.IsDir() {
			t.Errorf("x/y on the target: %v, %v; want a directory", fi, err)
		}
	})

	for _, client := range []string{"asyncssh", "paramiko"} {
		t.Run(client+" chmod rides on the write just closed, not after a rule change", func(t *testing.T) {
			c := clients[client]
			src := filepath.Join(local, client)
			writeFile(t, src, "uploaded")
			if err := os.Chmod(src, 0o640); err != nil {
				t.Fatal(err)
			}
			// asyncssh's put with preserve sets the mode right after the
			// close; paramiko's put stats the file, then the chmod comes.
			c.ok(t, map[string]any{"op": "put", "local": src, "path": db(client + "-up")})
			if client == "paramiko" {
				c.ok(t, map[string]any{"op": "chmod", "path": db(client + "-up"), "mode": 0o640})
			}
			if m := modeOf(t, filepath.Join(dbDir, client+"-up")); m != 0o640 {
				t.Errorf("mode after the put: %v; want 0640", m)
			}
			c.ok(t, map[string]any{"op": "write", "path": db(client + "-later"), "data": "x"})
			row := awaitRow(t, h, `allowed sftp put "`+dbDir+"/"+client+`-up"`)
			if !strings.Contains(row, "then setstat (mode 0640") {
				t.Errorf("the put's row %q; want the setstat that rode on it", row)
			}
			before := modeOf(t, filepath.Join(dbDir, client+"-later"))
			setRules(t, h, "db", store.Rules{Read: store.RuleAllow, Write: store.RuleDeny, Destructive: store.RuleDeny})
			defer setRules(t, h, "db", readWrite)
			r := c.do(t, map[string]any{"op": "chmod", "path": db(client + "-later"), "mode": 0o777})
			if r.Error == "" || (client == "asyncssh" && (r.Code != 3 || !strings.Contains(r.Text, "denied") || !strings.Contains(r.Text, db(client+"-later")))) {
				t.Errorf("chmod after the rule changed to deny: got %+v; want permission denied naming %s", r, db(client+"-later"))
			}
			if m := modeOf(t, filepath.Join(dbDir, client+"-later")); m != before {
				t.Errorf("mode after the refused chmod: %v; want %v", m, before)
			}
			awaitRow(t, h, `denied sftp setstat "`+dbDir+"/"+client+`-later" (mode 0777)`)
			for _, r := range sftpRows(t, h) {
				if strings.HasPrefix(r, `allowed sftp setstat "`+dbDir+"/"+client) {
					t.Errorf("row %q; want no setstat of its own: the one that rode is on the put's row", r)
				}
			}
		})
	}

	t.Run("every refusal says why on stderr and is audited", func(t *testing.T) {
		src := filepath.Join(local, "x.txt")
		writeFile(t, src, "x")
		got := runSFTP(t, h, strings.Join([]string{
			"-mkdir /newdir",
			"-put " + src + " /x.txt",
			"-rename " + web("F") + " " + db("F2"),
			"-ln " + web("F") + " " + db("L"),
			"-ln -s " + db("G") + " " + web("S"),
			"-df /",
		}, "\n")+"\n")
		for _, want := range []string{
			"sftpgate: the virtual root is read-only; work inside /ALIAS/",
			"sftpgate: cannot posix-rename across aliases (web to db); copy instead",
			"sftpgate: cannot hardlink across aliases (web to db); copy instead",
			"sftpgate: a symlink on web cannot point at " + db("G"),
			"sftpgate: the virtual root has no file system; try /ALIAS",
		} {
			if !strings.Contains(got.stderr, want+"\n") {
				t.Errorf("stderr %q; want the line %q", got.stderr, want)
			}
		}
		rows := sftpRows(t, h)
		for _, want := range []string{
			`denied sftp mkdir "/newdir" (mode 0777) (the virtual root is read-only; work inside /ALIAS/)`,
			`denied sftp put "/x.txt" (write,create,truncate) (the virtual root is read-only; work inside /ALIAS/)`,
			`denied sftp posix-rename "` + web("F") + `" "` + db("F2") + `" (cannot posix-rename across aliases (web to db); copy instead)`,
			`denied sftp hardlink "` + web("F") + `" "` + db("L") + `" (cannot hardlink across aliases (web to db); copy instead)`,
			`denied sftp symlink "` + db("G") + `" "` + web("S") + `" (a symlink on web cannot point at ` + db("G") + `)`,
			`denied sftp statvfs "/" (the virtual root has no file system; try /ALIAS)`,
		} {
			if !slices.Contains(rows, want) {
				t.Errorf("no audit row %q among:\n  %s", want, strings.Join(rows, "\n  "))
			}
		}
		for _, p := range []string{filepath.Join(dbDir, "F2"), filepath.Join(dbDir, "L"), filepath.Join(webDir, "S")} {
			if _, err := os.Lstat(p); !os.IsNotExist(err) {
				t.Errorf("%s exists after a refusal (%v)", p, err)
			}
		}
	})

	t.Run("a revoked grant leaves the root at once", func(t *testing.T) {
		c := clients["asyncssh"]
		if got := c.ok(t, map[string]any{"op": "listdir", "path": "/"}); got != `["db", "web"]` {
			t.Fatalf("ls /: got %s; want db and web", got)
		}
		if err := h.st.RevokeGrant(ctx, store.Unaudited(), "agent1", "db"); err != nil {
			t.Fatal(err)
		}
		// The session still lists db; the decision finds no grant, and
		// the agent is answered as for a path that is not there.
		for _, p := range []string{db("G"), "/db", "/db/"} {
			if r := c.do(t, map[string]any{"op": "stat", "path": p}); r.Code != 2 {
				t.Errorf("stat %s after the revocation: got %+v; want no such file (2)", p, r)
			}
		}
		if got := c.ok(t, map[string]any{"op": "listdir", "path": "/"}); got != `["web"]` {
			t.Errorf("ls / after the revocation: got %s; want web alone", got)
		}
		if row := awaitRow(t, h, `denied sftp stat "`+dbDir+`/G"`); !strings.Contains(row, "no such connection") {
			t.Errorf("the stat's row %q; want it to say there is no such connection", row)
		}
	})
}
