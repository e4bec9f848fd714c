package bastion

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/postern/postern/internal/e2e"
	"github.com/postern/postern/internal/testwait"
	"github.com/postern/postern/store"
)

// corpusRead is a read row of testdata/corpus: a command the classifier
// calls read.
type corpusRead struct {
	file, command, shell string
}

// corpusReads loads the read rows of every corpus file.
func corpusReads(t *testing.T) []corpusRead {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "testdata", "corpus", "*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("corpus files: %v (found %d)", err, len(files))
	}
	var rows []corpusRead
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for n := 1; sc.Scan(); n++ {
			if len(sc.Bytes()) == 0 {
				continue
			}
			var r struct{ Command, Class, Shell string }
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatalf("%s:%d: %v", f, n, err)
			}
			if r.Class == "read" {
				rows = append(rows, corpusRead{file: filepath.Base(f), command: r.Command, shell: r.Shell})
			}
		}
		fh.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return rows
}

// sessionResult is how a command ended: on a session, or one row of a
// batch.
type sessionResult struct {
	stdout, stderr string
	code           int
}

// corpusBatchRows is how many rows run in one exec: each batch is one
// command string, which the classifier bounds at 64 KiB.
const corpusBatchRows = 120

// corpusSample is the share of the read rows a plain `go test` runs: every
// corpusSample-th row. POSTERN_CORPUS_ALL=1 runs every row (.ci/run does):
// each row is a process or two on the target, three times over, and the
// sandboxed run costs bubblewrap's setup besides.
const corpusSample = 12

// TestReadRowsInSandbox: every read row of the corpus (bash's: the target's
// login shell is bash) runs directly on the target and through postern in
// the read sandbox, and gives the same stdout, stderr and exit status,
// apart from the differences docs/read-sandbox.md lists ("How output
// differs in the sandbox"), which sandboxDifference names. A row whose
// output differs between two direct runs (ps, date) is compared on its exit
// status only.
//
// The rows run in batches, one exec each, over one connection to the
// target and one through postern: a batch runs each row with bash -c,
// stdin from /dev/null, between markers on stdout and stderr. What
// is compared is what the sandbox's read-only view does to each read; that
// the wrapper itself passes a command, its output and its status through
// unchanged is TestWrapTransparent's (package readsandbox). The batches
// are let through as read by the tests' classifier: what the classifier
// calls each row is shellclass's own test.
func TestReadRowsInSandbox(t *testing.T) {
	t.Parallel()
	needSandboxTools(t)
	rows := corpusReads(t)
	if len(rows) < 400 {
		t.Fatalf("%d read rows in the corpus; want the corpus's 600 and more", len(rows))
	}
	var run []corpusRead
	skipped := 0
	for i, r := range rows {
		switch {
		case r.shell != "" && r.shell != "bash", strings.TrimSpace(r.command) == "":
			// The posix rows are a dash target's; an empty command is a
			// shell request, which postern never runs on a pipe.
			skipped++
		case os.Getenv("POSTERN_CORPUS_ALL") == "1" || i%corpusSample == 0:
			run = append(run, r)
		}
	}
	e2e.Tool(t, "git", "git")
	e2e.Tool(t, "timeout", "coreutils")
	tree := corpusTree(t)
	h := newHarness(t, harnessOpts{server: func(s *Server) { s.classifyOverride = allRead }})
	h.setProbe("web", store.SandboxBwrap, "bwrap: works")
	direct, err := ssh.Dial("tcp", h.target.Addr, h.target.ClientConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	via := h.client()
	defer via.Close()

	var same, unstable int
	listed := map[string]int{}
	var batches [][]corpusRead
	for start := 0; start < len(run); start += corpusBatchRows {
		batches = append(batches, run[start:min(start+corpusBatchRows, len(run))])
	}
	results := runBatches(t, direct, via, tree, batches)
	for b, batch := range batches {
		d1, p, d2 := results[b][0], results[b][1], results[b][2]
		for i, r := range batch {
			switch {
			case d1[i] != d2[i] || d1[i].code == 124 || d1[i].code == 137 || sameLines(d1[i], p[i]):
				// Output that changes run to run, or comes in another
				// order (rg's threads, two process substitutions).
				unstable++
				// Compared on status only: a status the sandbox changes
				// must be one of the listed differences, or come with
				// refusals of root without capabilities alone (rg over
				// /etc exits 2 for a file it may not read).
				if d1[i].code == d2[i].code && p[i].code != d1[i].code && sandboxDifference(r.command, d1[i], p[i]) == "" &&
					!addedLinesName(d1[i].stderr, p[i].stderr, "Permission denied") && !rerunStatusAgrees(t, direct, via, tree, r) {
					t.Errorf("%s: %q: exit %d in the sandbox, %d directly (stderr %q)", r.file, r.command, p[i].code, d1[i].code, p[i].stderr)
				}
			case p[i] == d1[i]:
				same++
			case sandboxDifference(r.command, d1[i], p[i]) != "":
				listed[sandboxDifference(r.command, d1[i], p[i])]++
			case rerunAgrees(t, direct, via, tree, r):
				// Two direct runs agreed by chance (ip neigh's states,
				// free's "used"): run alone, the row agrees.
				unstable++
			default:
				t.Errorf("%s: %q differs in the sandbox:\n  direct:  exit %d, stdout %q, stderr %q\n  sandbox: exit %d, stdout %q, stderr %q",
					r.file, r.command, d1[i].code, d1[i].stdout, d1[i].stderr, p[i].code, p[i].stdout, p[i].stderr)
			}
		}
	}
	t.Logf("%d of %d read rows run: %d the same, listed differences %v, %d whose direct output changes run to run; %d posix or empty rows skipped",
		len(run), len(rows), same, listed, unstable, skipped)
}

// corpusRowBound bounds one row in a batch (coreutils timeout, the same on
// both sides): a row that searches a whole tree (find /, grep -r) or
// recurses until bash gives up must not hold the batch. A row cut off
// directly and in the sandbox alike is compared on its exit status only,
// as one whose output changes run to run. It detects a slow row; it is not
// a timing assertion.
const corpusRowBound = "30"

// rerunTries is how many times rerunAgrees runs a row alone before it
// takes a difference for the sandbox's.
const rerunTries = 3

// rerunAgrees runs row r alone, directly, in the sandbox and directly
// again, up to rerunTries times, and reports whether the sandbox's run
// once agreed with the direct one (or differed only as listed), or the two
// direct runs differed, so the row's output changes run to run and is
// compared on its status: a row whose two direct runs in its batch agreed
// by chance. Seen in CI: free -h -s 1 -c 2, whose "used" moved between the
// sandboxed run and both direct runs of its batch, and again when rerun
// once. A row the sandbox really changes differs on every try, and its
// direct runs agree on every try.
func rerunAgrees(t *testing.T, direct, via *ssh.Client, tree string, r corpusRead) bool {
	t.Helper()
	script := corpusBatch(tree, []corpusRead{r})
	for range rerunTries {
		d, p := runAlone(t, direct, via, tree, r)
		if d == p || sameLines(d, p) || sandboxDifference(r.command, d, p) != "" {
			return true
		}
		d2 := runBatch(t, direct, script, 1)[0]
		if d2 != d && d2.code == d.code {
			return p.code == d.code
		}
	}
	return false
}

// runAlone runs row r in a batch of its own, directly and in the sandbox.
func runAlone(t *testing.T, direct, via *ssh.Client, tree string, r corpusRead) (d, p sessionResult) {
	t.Helper()
	script := corpusBatch(tree, []corpusRead{r})
	return runBatch(t, direct, script, 1)[0], runBatch(t, via, "web "+script, 1)[0]
}

// rerunStatusAgrees runs row r alone, directly and in the sandbox, and
// reports whether the two exit statuses now agree (or differ as listed):
// a row whose output changes run to run and whose status differed in its
// batch for what the batch's rows share. Seen once in CI: ps aux | grep
// nginx, whose output holds the batch's own 64 KiB command line (three
// times over in the sandbox: the login shell, bwrap, the shell inside),
// exited 2 with grep's "write error: Resource temporarily unavailable",
// the session's stdout having been left non-blocking by a row before it
// (the stdout a session starts with is blocking, directly and in the
// sandbox alike).
func rerunStatusAgrees(t *testing.T, direct, via *ssh.Client, tree string, r corpusRead) bool {
	t.Helper()
	d, p := runAlone(t, direct, via, tree, r)
	return d.code == p.code || sandboxDifference(r.command, d, p) != ""
}

// corpusBatch is the script that runs rows one after the other, each under
// bash -c between markers (see runBatch), in dir: a small tree of the
// test's, so that rows that search the working directory (find ., rg, tree)
// read a few files rather than the target user's home.
func corpusBatch(dir string, rows []corpusRead) string {
	var b strings.Builder
	fmt.Fprintf(&b, "cd %s || exit\n", shellQuote(dir))
	for i, r := range rows {
		// The row's bash waits for what it started in the background
		// (ls &), so that its output lands between its own markers. Its
		// stdout is a pipe of its own, to cat: a row that sets
		// O_NONBLOCK on its stdout (rsync --server does) would otherwise
		// set it on the batch's, and a later marker written while the
		// session's pipe is full fails with EAGAIN and is lost (seen in
		// CI: "no status for row 59", three rows after rsync's).
		fmt.Fprintf(&b, "printf '\\n@@row-%d@@\\n'; printf '\\n@@row-%d@@\\n' >&2; timeout -k 5 %s bash -c 'eval \"$1\"; s=$?; wait; exit $s' bash %s </dev/null | cat; printf '\\n@@end-%d %%d@@\\n' \"${PIPESTATUS[0]}\"\n",
			i, i, corpusRowBound, shellQuote(r.command), i)
	}
	return b.String()
}

// corpusTree makes the small tree the rows run in: a few files, a git
// repository with a commit, a log.
func corpusTree(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range map[string]string{
		"README.md": "# app\nTODO: docs\n", "main.py": "print('hi')  # TODO\n", "app.log": "INFO start\nERROR boom\n",
		"etc/app.conf": "port = 8080\n", "src/main.go": "package main\n// TODO\nfunc main() {}\n",
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git := exec.Command("sh", "-c", "git init -q && git add -A && git -c user.name=t -c user.email=t@example.com commit -qm init")
	git.Dir = dir
	if out, err := git.CombinedOutput(); err != nil {
		t.Fatalf("git: %v: %s", err, out)
	}
	return dir
}

// shellQuote single-quotes s for bash.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// runBatch runs a corpusBatch script on a session of c and splits its
// output into the n rows' results. A batch that has not ended at the
// test's deadline is taken for one that waits forever (a row ends in
// milliseconds, and each runs under timeout): its session is closed so
// that the failure shows what it printed.
func runBatch(t *testing.T, c *ssh.Client, script string, n int) []sessionResult {
	t.Helper()
	res, err := batchResults(t, c, script, n)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// corpusSessions is how many batch runs go at once: a batch's time is
// mostly its rows' own waits (vmstat 1 5, find / -xdev, sleep 1) and
// process starts, which then overlap on both cores.
const corpusSessions = 6

// runBatches runs each batch directly, through postern and directly again,
// corpusSessions runs at once, and returns the three results of each
// batch in that order. Output that depends on what else runs (ps) then
// differs between a batch's direct runs and is compared on its status, as
// any output that changes run to run.
func runBatches(t *testing.T, direct, via *ssh.Client, tree string, batches [][]corpusRead) [][3][]sessionResult {
	t.Helper()
	res := make([][3][]sessionResult, len(batches))
	errs := make([]error, 3*len(batches))
	slots := make(chan struct{}, corpusSessions)
	var wg sync.WaitGroup
	for b, batch := range batches {
		script := corpusBatch(tree, batch)
		for i, run := range []struct {
			c      *ssh.Client
			script string
		}{{direct, script}, {via, "web " + script}, {direct, script}} {
			wg.Go(func() {
				slots <- struct{}{}
				defer func() { <-slots }()
				res[b][i], errs[3*b+i] = batchResults(t, run.c, run.script, len(batch))
			})
		}
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return res
}

// batchResults is runBatch's work, for any goroutine: it returns its
// failure rather than ending the test.
func batchResults(t *testing.T, c *ssh.Client, script string, n int) ([]sessionResult, error) {
	s, err := c.NewSession()
	if err != nil {
		return nil, err
	}
	defer s.Close()
	bound := testwait.Remaining(t)
	timer := time.AfterFunc(bound, func() { s.Close() })
	defer timer.Stop()
	var out, errb strings.Builder
	s.Stdout, s.Stderr = &out, &errb
	err = s.Run(script)
	if !timer.Stop() {
		return nil, fmt.Errorf("a batch of %d rows did not end within %v; stdout so far ends %q", n, bound.Round(time.Second), lastBytes(out.String()))
	}
	if _, ok := err.(*ssh.ExitError); err != nil && !ok {
		return nil, fmt.Errorf("batch: %w", err)
	}
	res := make([]sessionResult, n)
	stdout, stderr := out.String(), errb.String()
	for i := range res {
		begin, end, status := fmt.Sprintf("\n@@row-%d@@\n", i), fmt.Sprintf("\n@@row-%d@@\n", i+1), fmt.Sprintf("\n@@end-%d ", i)
		_, rest, ok := strings.Cut(stdout, status)
		code, _, ok2 := strings.Cut(rest, "@@")
		if !ok || !ok2 {
			row := between(stdout, begin, end)
			return nil, fmt.Errorf("batch: no status for row %d of %d; its stdout (%d bytes) ends %q, its stderr %q; the batch's stdout ends %q",
				i, n, len(row), lastBytes(row), lastBytes(between(stderr, begin, end)), lastBytes(stdout))
		}
		res[i].code, err = strconv.Atoi(code)
		if err != nil {
			return nil, fmt.Errorf("batch: row %d's status %q: %w", i, code, err)
		}
		res[i].stdout, res[i].stderr = between(stdout, begin, status), between(stderr, begin, end)
	}
	return res, nil
}

// between returns the text of s after begin and before end (or the end of
// s); "" when begin is not in s.
func between(s, begin, end string) string {
	i := strings.Index(s, begin)
	if i < 0 {
		return ""
	}
	s = s[i+len(begin):]
	if j := strings.Index(s, end); j >= 0 {
		return s[:j]
	}
	return s
}

func lastBytes(s string) string { return s[max(0, len(s)-200):] }

// sandboxDifference says which difference of docs/read-sandbox.md
// ("How output differs in the sandbox") explains got (in the sandbox)
// against want (direct), or "" for none. The target user of these tests is
// root.
func sandboxDifference(command string, want, got sessionResult) string {
	switch {
	case namesDevices(command):
		// /dev holds only the harmless devices: what a walk of it finds,
		// and what it fails to open (bwrap's /dev/tty, a bind mount that
		// a directory walk takes for a file), are the sandbox's.
		if got.code == want.code || addedLinesName(want.stderr, got.stderr, "/dev/") {
			return "devices"
		}
	case mountsCommand(command):
		// Every mount is read-only, and bwrap's /dev is its own.
		if got.code == want.code {
			return "mounts"
		}
	case strings.Contains(got.stderr, "Read-only file system") && !strings.Contains(want.stderr, "Read-only file system"):
		// A program that needs a temporary file (apt) fails.
		return "temporary files"
	}
	// SHLVL counts the sandbox's shell too. (SSH_CLIENT and
	// SSH_CONNECTION name postern's own port on the target, as for any
	// command relayed through postern.)
	if got.code == want.code && got.stderr == want.stderr && environment(got.stdout) == environment(want.stdout) &&
		got.stdout != want.stdout {
		return "environment"
	}
	// Only the user's own uid and gid are mapped: other users' names show
	// as nobody and nogroup, which changes column widths.
	if got.code == want.code && got.stderr == want.stderr && ownersOut(got.stdout) == ownersOut(want.stdout) {
		return "owners"
	}
	// Root without capabilities: what the owner bits of another user's
	// file refuse (with the message, or a status where 2>/dev/null hid
	// it), and what needs a capability: other processes' details (ss -p,
	// lsof), the kernel log (dmesg), devices' configuration (lspci -v),
	// raw sockets (ping: its file capability does not apply either).
	denied := func(s string) string {
		var keep []string
		for _, l := range strings.Split(s, "\n") {
			if !strings.Contains(l, "Permission denied") && !strings.Contains(l, "Operation not permitted") {
				keep = append(keep, l)
			}
		}
		return strings.Join(keep, "\n")
	}
	refused := strings.Contains(got.stderr, "Permission denied") || strings.Contains(got.stderr, "Operation not permitted") ||
		strings.Contains(command, "2>/dev/null")
	if refused && denied(got.stderr) == denied(want.stderr) && ownedLinesAnyOrder(got.stdout, want.stdout) {
		return "root without capabilities"
	}
	if strings.Contains(want.stdout, "users:((") && got.code == want.code &&
		ownersOut(processColumn(got.stdout)) == ownersOut(processColumn(want.stdout)) {
		return "root without capabilities"
	}
	for _, w := range []string{"dmesg", "lspci", "lsof", "ping", "netstat -p"} {
		if strings.Contains(command, w) {
			return "root without capabilities"
		}
	}
	return ""
}

// namesDevices reports whether command names a device or /dev itself
// other than the ones that are the same in the sandbox (/dev/null, the
// standard streams, /dev/fd, zero, full and the random devices), which so
// many commands redirect to that letting them pass as "devices" on their
// exit status alone would hide any other difference of theirs.
func namesDevices(command string) bool {
	for _, d := range []string{"/dev/null", "/dev/stdin", "/dev/stdout", "/dev/stderr", "/dev/fd/", "/dev/zero", "/dev/full", "/dev/urandom", "/dev/random"} {
		command = strings.ReplaceAll(command, d, "")
	}
	return strings.Contains(command, "/dev")
}

// environment is env's output without what differs through postern or in
// the sandbox by design: SHLVL, and the SSH client's address.
func environment(s string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(l, "SHLVL=") && !strings.HasPrefix(l, "SSH_CLIENT=") && !strings.HasPrefix(l, "SSH_CONNECTION=") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// sameLines reports whether a and b have the same status and the same
// lines of output in another order.
func sameLines(a, b sessionResult) bool {
	sorted := func(s string) string {
		l := strings.Split(s, "\n")
		slices.Sort(l)
		return strings.Join(l, "\n")
	}
	return a.code == b.code && a != b && sorted(a.stdout) == sorted(b.stdout) && sorted(a.stderr) == sorted(b.stderr)
}

// mountsCommand reports whether command lists mounts.
func mountsCommand(command string) bool {
	for _, w := range []string{"df", "mount", "findmnt", "mountinfo", "/proc/mounts", "/etc/mtab", "lsblk"} {
		if strings.Contains(command, w) {
			return true
		}
	}
	return false
}

// ownedLinesAnyOrder reports whether a and b hold the same lines, each
// compared as ownersOut says, in any order: a search over a tree by several
// threads (rg) prints its matches in the order it finds them, which a file
// refused in the sandbox changes.
func ownedLinesAnyOrder(a, b string) bool {
	lines := func(s string) []string {
		l := strings.Split(s, "\n")
		for i := range l {
			l[i] = ownersOut(l[i])
		}
		slices.Sort(l)
		return l
	}
	return slices.Equal(lines(a), lines(b))
}

// ownersOut is s with every user and group name of this machine other than
// root's written as one word, and runs of spaces as one, so that listings
// that differ only in whose names show (and the column widths that follow)
// compare equal.
func ownersOut(s string) string {
	fields := strings.Fields(s)
	names := ownerNames()
	for i, f := range fields {
		if names[f] {
			fields[i] = "OWNER"
		}
	}
	return strings.Join(fields, " ")
}

// ownerNames are the user and group names of /etc/passwd and /etc/group,
// and nobody and nogroup, but root.
func ownerNames() map[string]bool {
	names := map[string]bool{"nobody": true, "nogroup": true}
	for _, f := range []string{"/etc/passwd", "/etc/group"} {
		data, _ := os.ReadFile(f)
		for _, line := range strings.Split(string(data), "\n") {
			if name, _, ok := strings.Cut(line, ":"); ok && name != "root" {
				names[name] = true
			}
		}
	}
	return names
}

// processColumn is ss's output without the process column that -p adds.
func processColumn(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if i := strings.Index(l, "users:(("); i >= 0 {
			l = l[:i]
		}
		out = append(out, strings.TrimRight(strings.TrimSuffix(strings.TrimRight(l, " "), "Process"), " "))
	}
	return strings.Join(out, "\n")
}

// addedLinesName reports whether got has lines that want has not, and
// every one of them names word.
func addedLinesName(want, got, word string) bool {
	had := map[string]bool{}
	for _, l := range strings.Split(want, "\n") {
		had[l] = true
	}
	added := 0
	for _, l := range strings.Split(got, "\n") {
		if had[l] {
			continue
		}
		if !strings.Contains(l, word) {
			return false
		}
		added++
	}
	return added > 0
}
