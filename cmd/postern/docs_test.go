package main

// The docs test: every shell command printed in README.md and docs/*.md
// runs as printed, against this postern, a fixture data directory, a real
// sshd as the target and the web server the docs' own `postern serve`
// starts. A reader copies these lines; a flag that does not exist, a curl
// the API refuses (415), a program a stock system lacks, are bugs of the
// docs that only running them finds.
//
// The convention, stated for writers in README's Tests section:
//
//   - A shell block is a block indented four spaces (six inside a list
//     item) or a ``` fence with no language or sh, bash, shell or console.
//     A fence with another language (text, toml, ini, json, go, python,
//     haproxy) is not shell and is not run.
//   - Every shell block runs, unless the line before it (blank lines
//     between are allowed) is `<!-- illustrative: REASON -->`: a block that
//     no test environment can run (an apt-get, a systemd unit, a second
//     terminal's approval of an id the reader copies, a production host).
//     The reason is required, so that the exception says why.
//   - A block runs one logical line at a time (`\` continues a line; bash
//     drops `#` comments), in the order of the file, each file in a
//     directory of its own where the fixture files the docs name exist
//     (./deploy_key, ~/.ssh/postern_agent.pub, pw.txt, …).
//   - Only host names, ports and listen addresses are replaced, by
//     docSubstitutions and the address of the serve or demo running;
//     `go run ./cmd/postern` is this test's postern binary; `chg_…` and
//     `1234:9f86d0…` are the change request id and audit head the commands
//     before printed, as a reader copies them (docCopied); $TOKEN and
//     $ADMIN_TOKEN are the tokens `postern token add` printed.
//   - `postern serve` and `postern demo` run in the background until
//     their start is logged, and stay up (for the curl and ssh lines
//     below them) until the next one or the file's end, when they are
//     stopped with SIGTERM and must exit 0.
//
// Every other command must exit 0 and print no "unknown flag", "unknown
// command" or "command not found"; a curl must answer JSON with "data"
// (an error, a 415 among them, has none).

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/postern/postern/internal/e2e"
	"github.com/postern/postern/internal/testkey"
	"github.com/postern/postern/internal/testsshd"
	"github.com/postern/postern/internal/testwait"
)

// docBlock is one code block of a markdown file.
type docBlock struct {
	file         string
	line         int    // of the block's first line, from 1
	lang         string // a fence's language; "" for an indented block
	text         string // the block without its indentation or fences
	shell        bool   // a shell block (see the convention above)
	illustrative string // the reason of an <!-- illustrative: … --> marker
}

var (
	fenceRE      = regexp.MustCompile("^(\\s*)(```+|~~~+)\\s*([A-Za-z0-9_+-]*)")
	listItemRE   = regexp.MustCompile(`^(\s*)([-*+]|\d+\.)\s+`)
	illustrateRE = regexp.MustCompile(`^<!--\s*illustrative(?::\s*(.*?))?\s*-->$`)
)

// shellLangs are the fence languages of shell blocks.
var shellLangs = map[string]bool{"": true, "sh": true, "bash": true, "shell": true, "console": true}

// indentOf is the number of leading spaces of line (a tab counts four).
func indentOf(line string) int {
	n := 0
	for _, r := range line {
		switch r {
		case ' ':
			n++
		case '\t':
			n += 4
		default:
			return n
		}
	}
	return n
}

// parseDocBlocks finds the code blocks of one markdown file: fenced blocks,
// and indented ones (four spaces past the enclosing list item's content)
// after a blank line, with the marker on the non-blank line before each.
func parseDocBlocks(file, src string) []docBlock {
	lines := strings.Split(src, "\n")
	var blocks []docBlock
	listIndent := 0    // the content indent of the list item the text is in
	prevNonBlank := "" // the last non-blank line outside a block
	blankBefore := true
	marker := func() string {
		m := illustrateRE.FindStringSubmatch(strings.TrimSpace(prevNonBlank))
		if m == nil {
			return ""
		}
		if m[1] == "" {
			return "?" // a marker without a reason; the test says so
		}
		return m[1]
	}
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if m := fenceRE.FindStringSubmatch(line); m != nil {
			b := docBlock{file: file, line: i + 1, lang: strings.ToLower(m[3]), illustrative: marker()}
			b.shell = shellLangs[b.lang]
			var body []string
			i++
			for ; i < len(lines); i++ {
				if strings.HasPrefix(strings.TrimSpace(lines[i]), m[2]) {
					break
				}
				body = append(body, strings.TrimPrefix(lines[i], m[1]))
			}
			b.text = strings.Join(body, "\n")
			blocks = append(blocks, b)
			prevNonBlank, blankBefore = line, false
			continue
		}
		if strings.TrimSpace(line) == "" {
			blankBefore = true
			continue
		}
		ind := indentOf(line)
		if blankBefore && ind >= listIndent+4 {
			b := docBlock{file: file, line: i + 1, shell: true, illustrative: marker()}
			strip := listIndent + 4
			var body []string
			for ; i < len(lines); i++ {
				l := lines[i]
				if strings.TrimSpace(l) != "" && indentOf(l) < strip {
					break
				}
				if len(l) >= strip {
					l = l[strip:]
				} else {
					l = ""
				}
				body = append(body, l)
			}
			i--
			for len(body) > 0 && strings.TrimSpace(body[len(body)-1]) == "" {
				body = body[:len(body)-1]
			}
			b.text = strings.Join(body, "\n")
			blocks = append(blocks, b)
			prevNonBlank, blankBefore = "", false
			continue
		}
		if m := listItemRE.FindStringSubmatch(line); m != nil {
			listIndent = len(m[0])
		} else if ind == 0 {
			listIndent = 0
		}
		prevNonBlank, blankBefore = line, false
	}
	return blocks
}

// docCommands splits a shell block into its logical lines: a line ending
// in `\` goes on with the next; blank and comment-only lines are dropped;
// a console block's commands are its `$ ` lines.
func docCommands(b docBlock) []string {
	var cmds []string
	cur := ""
	for _, l := range strings.Split(b.text, "\n") {
		if b.lang == "console" {
			if !strings.HasPrefix(l, "$ ") && cur == "" {
				continue
			}
			l = strings.TrimPrefix(l, "$ ")
		}
		if strings.HasSuffix(l, "\\") {
			cur += strings.TrimSuffix(l, "\\")
			continue
		}
		l = cur + l
		cur = ""
		if t := strings.TrimSpace(l); t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		cmds = append(cmds, strings.TrimSpace(l))
	}
	if strings.TrimSpace(cur) != "" {
		cmds = append(cmds, strings.TrimSpace(cur))
	}
	return cmds
}

func TestParseDocBlocks(t *testing.T) {
	src := strings.Join([]string{
		"# title",
		"",
		"    postern init",
		"    postern conn add x --host h \\",
		"        --user u   # a comment",
		"",
		"text",
		"",
		"<!-- illustrative: needs a real host -->",
		"",
		"    apt-get install postern",
		"",
		"- a list item",
		"  continued",
		"",
		"  still the item, not code",
		"",
		"      ssh bastion help",
		"",
		"```toml",
		"[serve]",
		"```",
		"",
		"```sh",
		"# only a comment",
		"curl -s https://x",
		"```",
		"",
		"<!-- illustrative -->",
		"```",
		"run me",
		"```",
	}, "\n")
	got := parseDocBlocks("t.md", src)
	type want struct {
		line         int
		shell        bool
		illustrative string
		cmds         []string
	}
	wants := []want{
		{3, true, "", []string{"postern init", "postern conn add x --host h     --user u   # a comment"}},
		{11, true, "needs a real host", []string{"apt-get install postern"}},
		{18, true, "", []string{"ssh bastion help"}},
		{20, false, "", []string{"[serve]"}},
		{24, true, "", []string{"curl -s https://x"}},
		{30, true, "?", []string{"run me"}},
	}
	if len(got) != len(wants) {
		t.Fatalf("got %d blocks; want %d: %+v", len(got), len(wants), got)
	}
	for i, w := range wants {
		g := got[i]
		if g.line != w.line || g.shell != w.shell || g.illustrative != w.illustrative {
			t.Errorf("block %d: got line %d shell %v illustrative %q; want %d %v %q", i, g.line, g.shell, g.illustrative, w.line, w.shell, w.illustrative)
		}
		if cmds := docCommands(g); strings.Join(cmds, "|") != strings.Join(w.cmds, "|") {
			t.Errorf("block %d: got commands %q; want %q", i, cmds, w.cmds)
		}
	}
}

// docFiles are the markdown files whose commands the test runs.
func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"../../README.md"}, files...)
}

// TestDocsMarked holds every shell block of the docs to the convention: a
// marker has a reason. It needs nothing but the files, so that a new block
// is seen in every run; TestDocsCommandsRun runs the unmarked ones.
func TestDocsMarked(t *testing.T) {
	n := 0
	for _, f := range docFiles(t) {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range parseDocBlocks(filepath.Base(f), string(src)) {
			if b.illustrative == "?" {
				t.Errorf("%s:%d: <!-- illustrative --> without a reason; write <!-- illustrative: WHY -->", b.file, b.line)
			}
			if b.shell && b.illustrative == "" {
				n++
			}
		}
	}
	if n < 10 {
		t.Errorf("got %d runnable shell blocks in the docs; want at least 10 (is the parser finding them?)", n)
	}
}

// docWorld is where one file's commands run: a working directory with the
// fixture files, a HOME, the target, and the serve or demo running.
type docWorld struct {
	t      *testing.T
	dir    string // the working directory
	env    []string
	target *e2eTarget
	subs   []string          // docSubstitutions for this target, old, new, …
	copied map[string]string // placeholder → what a command printed for it (docCopied)
	bg     *docBackground
}

// docBackground is a serve or demo a doc started.
type docBackground struct {
	cmdline string
	cmd     *exec.Cmd
	out     lockedBuffer // stdout and stderr
	done    chan struct{}
	err     error
	addr    string // the bastion's host:port
	url     string // the web page's base URL, if any
}

// docSubstitutions are the host names, ports and target user the docs
// use, each (old, new) replaced by the test's target and loopback ports,
// and `go run ./cmd/postern` by this binary. Only these change; the rest
// of a command runs as printed.
func docSubstitutions(tg *e2eTarget) []string {
	host, port := tg.Host, strconv.Itoa(tg.Port)
	target := "--host " + host + " --port " + port
	return []string{
		"go run ./cmd/postern", "postern",
		"--host 10.0.0.5", target,
		"--host 10.0.0.6", target,
		"--host 10.0.0.9", target,
		"ssh-keyscan -t ed25519 10.0.0.5", "ssh-keyscan -t ed25519 -p " + port + " " + host,
		"--user deploy", "--user " + tg.User,
		"--user ops", "--user " + tg.User,
		"0.0.0.0:2222", "127.0.0.1:0",
		"0.0.0.0:8443", "127.0.0.1:0",
		"--http-listen 127.0.0.1:8443", "--http-listen 127.0.0.1:0",
	}
}

func newDocWorld(t *testing.T, tg *e2eTarget) *docWorld {
	t.Helper()
	root := t.TempDir()
	w := &docWorld{t: t, dir: filepath.Join(root, "work"), target: tg, subs: docSubstitutions(tg), copied: map[string]string{}}
	home := filepath.Join(root, "home")
	write := func(path string, data []byte, mode os.FileMode) {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, mode); err != nil {
			t.Fatal(err)
		}
	}
	agent := testkey.New(t, "postern_agent")
	write(filepath.Join(home, ".ssh", "postern_agent"), agent.PrivatePEM, 0o600)
	write(filepath.Join(home, ".ssh", "postern_agent.pub"), []byte(agent.Authorized+" postern_agent\n"), 0o644)
	write(filepath.Join(w.dir, "deploy_key"), tg.UserKeyPEM, 0o600)
	newKey := testkey.New(t, "new_key")
	tg.Authorize(t, newKey.Authorized)
	write(filepath.Join(w.dir, "new_key"), newKey.PrivatePEM, 0o600)
	write(filepath.Join(w.dir, "second.pub"), []byte(testkey.New(t, "second").Authorized+" second\n"), 0o644)
	write(filepath.Join(w.dir, "pw.txt"), []byte("pw-"+newPassword()+"\n"), 0o600)
	write(filepath.Join(w.dir, "ops.key"), []byte(newPassword()+"\n"), 0o600)
	write(filepath.Join(w.dir, "slack-webhook-url.txt"), []byte("https://hooks.slack.com/services/T0/B0/x\n"), 0o600)
	write(filepath.Join(w.dir, "notes.txt"), []byte("notes\n"), 0o644)
	write(filepath.Join(w.dir, "slack-url.txt"), []byte("https://hooks.slack.com/services/T0/B0/x\n"), 0o600)
	write(filepath.Join(w.dir, "ntfy-token.txt"), []byte("tk_"+newPassword()+"\n"), 0o600)
	w.env = cliEnv("HOME="+home, "PATH="+filepath.Dir(posternBin)+":"+os.Getenv("PATH"))
	// The fixture data directory, ./postern-data, as `postern init` makes
	// it: the docs past README's start take one for granted (README's own
	// init runs again and keeps it).
	c := exec.CommandContext(testwait.Context(t), posternBin, "init")
	c.Dir, c.Env = w.dir, w.env
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("postern init: %v\n%s", err, out)
	}
	return w
}

// substitute applies the world's substitutions and the running serve's
// address to cmd.
func (w *docWorld) substitute(cmd string) string {
	for i := 0; i+1 < len(w.subs); i += 2 {
		cmd = strings.ReplaceAll(cmd, w.subs[i], w.subs[i+1])
	}
	for placeholder, v := range w.copied {
		cmd = strings.ReplaceAll(cmd, placeholder, v)
	}
	if w.bg != nil {
		if w.bg.url != "" {
			cmd = strings.ReplaceAll(cmd, "https://127.0.0.1:8443", strings.TrimSuffix(w.bg.url, "/"))
		}
		if _, port, ok := strings.Cut(w.bg.addr, ":"); ok {
			cmd = strings.ReplaceAll(cmd, "-p 2222", "-p "+port)
			cmd = strings.ReplaceAll(cmd, "-P 2222", "-P "+port)
		}
	}
	return cmd
}

var (
	backgroundRE = regexp.MustCompile(`^postern (serve|demo)\b`)
	// The demo's start lines on stdout; serve's are JSON log lines.
	docAddrRE = regexp.MustCompile(`(?m)^\s*bastion\s+(\S+:\d+)`)
	docURLRE  = regexp.MustCompile(`(?m)^\s*web page\s+(https://\S+)`)
	// docCopied are the placeholders of the docs for what a reader copies
	// from a command's output, each with what it copies: a change
	// request's id, an audit head.
	docCopied = map[string]*regexp.Regexp{
		"chg_…":        regexp.MustCompile(`chg_[a-z0-9]+`),
		"1234:9f86d0…": regexp.MustCompile(`(?m)^[0-9]+:[0-9a-f]{64}$`),
	}
	docTokenRE    = regexp.MustCompile(`pst_[A-Za-z0-9_-]+`)
	docPasswordRE = regexp.MustCompile(`(?i)(password:?\s+)\S+`)
	// docBadOutput is what no command of the docs may print: a flag or
	// command postern lacks, a program the machine lacks (inside $(…) its
	// status is lost). A curl the API refuses (415 without Content-Type)
	// answers an error without "data" (run).
	docBadOutput = regexp.MustCompile(`unknown (flag|shorthand flag|command)|Unsupported Media Type|command not found`)
)

// run runs one command of block b.
func (w *docWorld) run(b docBlock, printed string) {
	t := w.t
	t.Helper()
	cmd := w.substitute(printed)
	where := fmt.Sprintf("%s:%d: %s", b.file, b.line, printed)
	if backgroundRE.MatchString(cmd) {
		w.stop()
		if strings.HasPrefix(cmd, "postern demo") && !strings.Contains(cmd, "-listen") {
			// the demo's default ports, 2222 and 8443, replaced
			cmd += " --ssh-listen 127.0.0.1:0 --http-listen 127.0.0.1:0"
		}
		w.start(where, cmd)
		return
	}
	c := exec.CommandContext(testwait.Context(t), "bash", "-c", cmd)
	c.Dir, c.Env = w.dir, w.env
	out, err := c.CombinedOutput()
	// A failure shows the output, never a console token in it.
	shown := docShown(out)
	if err != nil {
		t.Fatalf("%s\nran: %s\ngot %v; want exit 0; output:\n%s", where, cmd, err, shown)
	}
	if m := docBadOutput.Find(out); m != nil {
		t.Fatalf("%s\nran: %s\nprinted %q; output:\n%s", where, cmd, m, shown)
	}
	if strings.HasPrefix(cmd, "curl") && !strings.Contains(string(out), `"data"`) {
		t.Fatalf("%s\nran: %s\ngot no JSON answer with \"data\"; output:\n%s", where, cmd, shown)
	}
	w.keepToken(cmd, out)
	for placeholder, re := range docCopied {
		if m := re.FindAll(out, -1); m != nil {
			w.copied[placeholder] = string(m[len(m)-1])
		}
	}
	t.Logf("%s: ok", where)
}

// docShown is out as a failure may show it: without the console tokens
// and passwords (the demo's admin's, `admin add`'s) it holds.
func docShown(out []byte) []byte {
	out = docTokenRE.ReplaceAll(out, []byte("pst_(redacted)"))
	return docPasswordRE.ReplaceAll(out, []byte("${1}(redacted)"))
}

// start runs a serve or demo in the background and waits for its start
// lines: the bastion's address and, with --http-listen, the web page's.
func (w *docWorld) start(where, cmd string) {
	t := w.t
	t.Helper()
	bg := &docBackground{cmdline: where, done: make(chan struct{})}
	bg.cmd = exec.Command("bash", "-c", "exec "+cmd)
	bg.cmd.Dir, bg.cmd.Env = w.dir, w.env
	bg.cmd.Stdout, bg.cmd.Stderr = &bg.out, &bg.out
	if err := bg.cmd.Start(); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	go func() {
		defer close(bg.done)
		bg.err = bg.cmd.Wait()
	}()
	w.bg = bg
	t.Cleanup(func() {
		if w.bg == bg {
			bg.cmd.Process.Kill()
			<-bg.done
		}
	})
	web := strings.Contains(cmd, "--http-listen") || strings.HasPrefix(cmd, "postern demo")
	for {
		text, wrote := bg.out.next()
		if m := docAddrRE.FindStringSubmatch(text); m != nil {
			bg.addr = m[1]
		}
		if m := docURLRE.FindStringSubmatch(text); m != nil {
			bg.url = m[1]
		}
		for _, line := range strings.Split(text, "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) != nil {
				continue
			}
			switch m["message"] {
			case "postern serving":
				bg.addr, _ = m["addr"].(string)
			case "web page serving":
				bg.url, _ = m["url"].(string)
			}
		}
		if bg.addr != "" && (!web || bg.url != "") {
			t.Logf("%s: started, bastion %s, web %s", where, bg.addr, bg.url)
			return
		}
		select {
		case <-wrote:
		case <-bg.done:
			t.Fatalf("%s\nran: %s\nexited before it served (%v); output:\n%s", where, cmd, bg.err, docShown([]byte(bg.out.String())))
		case <-testwait.End(t):
			t.Fatalf("%s\nran: %s\nnot serving by the test's deadline; output:\n%s", where, cmd, docShown([]byte(bg.out.String())))
		}
	}
}

// stop ends the serve or demo running, if any, with SIGTERM, as an admin
// does, and requires exit 0.
func (w *docWorld) stop() {
	t := w.t
	t.Helper()
	bg := w.bg
	if bg == nil {
		return
	}
	w.bg = nil
	if err := bg.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("%s: SIGTERM: %v", bg.cmdline, err)
	}
	testwait.Done(t, bg.cmdline+" to exit after SIGTERM", bg.done)
	if bg.err != nil {
		t.Fatalf("%s: after SIGTERM got %v; want exit 0; output:\n%s", bg.cmdline, bg.err, docShown([]byte(bg.out.String())))
	}
}

// TestDocsCommandsRun runs every unmarked shell command of README.md and
// docs/*.md (see the convention at the top of this file).
func TestDocsCommandsRun(t *testing.T) {
	if !e2e.Enabled() {
		t.Skip("runs every command of the docs; set POSTERN_E2E=1")
	}
	for _, tool := range [][2]string{{"bash", "bash"}, {"curl", "curl"}, {"ssh", "openssh-client"}, {"ssh-keyscan", "openssh-client"}, {"sftp", "openssh-client"}} {
		e2e.Tool(t, tool[0], tool[1])
	}
	for _, f := range docFiles(t) {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		blocks := parseDocBlocks(filepath.Base(f), string(src))
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			var run []docBlock
			for _, b := range blocks {
				if b.shell && b.illustrative == "" {
					run = append(run, b)
				}
			}
			if len(run) == 0 {
				return
			}
			w := newDocWorld(t, newE2ETarget(t, testsshd.Options{}))
			for _, b := range run {
				for _, c := range docCommands(b) {
					w.run(b, c)
				}
			}
			w.stop()
		})
	}
}

// keepToken keeps the console token a `postern token add` of the docs
// printed, as the reader does, for the curl lines' $TOKEN (the first
// token) and $ADMIN_TOKEN (the first of scope admin).
func (w *docWorld) keepToken(cmd string, out []byte) {
	if !strings.HasPrefix(cmd, "postern token add") {
		return
	}
	tok := docTokenRE.Find(out)
	if tok == nil {
		w.t.Fatalf("%s printed no token:\n%s", cmd, out)
	}
	name := "TOKEN"
	if strings.Contains(cmd, "--scope admin") {
		name = "ADMIN_TOKEN"
	}
	for _, e := range w.env {
		if strings.HasPrefix(e, name+"=") {
			return
		}
	}
	w.env = append(w.env, name+"="+string(tok))
}

func TestDocShown(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"token pst_abc-DEF_1 shown once", "token pst_(redacted) shown once"},
		{"password: hunter2-xyz\n", "password: (redacted)\n"},
		{"  admin        admin  password s3cret  (shown only now)", "  admin        admin  password (redacted)  (shown only now)"},
		{"conn add prod-web: ok", "conn add prod-web: ok"},
	} {
		if got := string(docShown([]byte(tc.in))); got != tc.want {
			t.Errorf("docShown(%q): got %q; want %q", tc.in, got, tc.want)
		}
	}
}
