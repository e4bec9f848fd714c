package shellclass

import (
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"

	"mvdan.cc/sh/v3/syntax"
)

// probePayload is text that does nothing as data and creates /tmp/M
// wherever bash evaluates it: as a variable name (the subscript runs), as
// arithmetic, as a prompt string or as code. It has no space, so that word
// splitting keeps it whole.
const probePayload = `a[$(>/tmp/M)]`

// probe is one command to run under bash: a corpus row, or a row with a
// payload put in one of its places.
type probe struct {
	cmd     string
	dialect Dialect
	env     []string
	from    string // the corpus row, for the failure message
}

// envSkip are variables a probe does not set from the environment: they
// would change the sandbox itself rather than test the command.
var envSkip = map[string]bool{
	"PATH": true, "HOME": true, "PWD": true, "OLDPWD": true, "IFS": true, "SHELLOPTS": true,
	"BASHOPTS": true, "BASH_ENV": true, "ENV": true, "TMPDIR": true, "SHELL": true, "PS4": true,
	"LANG": true, "LC_ALL": true, "TERM": true, "BASH_XTRACEFD": true, "POSIXLY_CORRECT": true,
}

// probesFor returns the probes of one read row: the row itself; the row
// with each of its words (but the command name) replaced by the payload, in
// single quotes so that only a later evaluation can run it, and for
// --opt=value and NAME=value words with the value replaced; the row with
// every variable it expands set to the payload (and to `x -o -v payload`,
// which an unquoted expansion splits into test's -v operator); and each
// of those inside a function, where local works.
func probesFor(cmd string, d Dialect) []probe {
	base := []probe{{cmd: cmd, dialect: d}}
	lang := syntax.LangBash
	if d == POSIX {
		lang = syntax.LangPOSIX
	}
	f, err := syntax.NewParser(syntax.Variant(lang)).Parse(strings.NewReader(cmd), "")
	if err != nil {
		return withFrom(base, cmd)
	}
	quoted := "'" + probePayload + "'"
	names := map[string]bool{}
	seen := map[[2]int]bool{}
	commandNames := map[*syntax.Word]bool{}
	syntax.Walk(f, func(n syntax.Node) bool {
		switch x := n.(type) {
		case *syntax.CallExpr:
			if len(x.Args) > 0 {
				commandNames[x.Args[0]] = true
			}
		case *syntax.ParamExp:
			if x.Param != nil && isName(x.Param.Value) && !envSkip[x.Param.Value] {
				names[x.Param.Value] = true
			}
		case *syntax.Word:
			if commandNames[x] {
				return true
			}
			start, end := int(x.Pos().Offset()), int(x.End().Offset())
			if start < 0 || end > len(cmd) || start >= end || seen[[2]int{start, end}] {
				return true
			}
			seen[[2]int{start, end}] = true
			src := cmd[start:end]
			base = append(base, probe{cmd: cmd[:start] + quoted + cmd[end:], dialect: d})
			if i := strings.IndexByte(src, '='); i > 0 && !strings.ContainsAny(src[:i], "'\"$`\\") {
				base = append(base, probe{cmd: cmd[:start] + src[:i+1] + quoted + cmd[end:], dialect: d})
			}
		}
		return true
	})
	if len(names) > 0 {
		for _, payload := range []string{probePayload, "x -o -v " + probePayload} {
			var env []string
			for n := range names {
				env = append(env, n+"="+payload)
			}
			sort.Strings(env)
			base = append(base, probe{cmd: cmd, dialect: d, env: env})
		}
	}
	if d == Bash && strings.Contains(cmd, "local") {
		for _, p := range base[:len(base):len(base)] {
			p.cmd = "f() {\n" + p.cmd + "\n}; f"
			base = append(base, p)
		}
	}
	return withFrom(base, cmd)
}

func withFrom(ps []probe, from string) []probe {
	for i := range ps {
		ps[i].from = from
	}
	return ps
}

// readProbes returns the probes of every read row of the corpus that the
// classifier still calls read, without duplicates.
func readProbes(tb testing.TB) (probes []probe, rows int) {
	seen := map[string]bool{}
	all := loadCorpus(tb, "*.jsonl")
	for _, file := range sortedKeys(all) {
		for _, r := range all[file] {
			if r.Class != "read" || len(r.Command) > 4096 {
				continue
			}
			d, err := ParseDialect(r.Shell)
			if err != nil || d == None {
				continue
			}
			rows++
			for _, p := range probesFor(r.Command, d) {
				key := fmt.Sprintf("%d\x00%s\x00%q", p.dialect, p.cmd, p.env)
				if seen[key] || Classify(p.cmd, Options{Dialect: p.dialect}).Class != Read {
					continue
				}
				seen[key] = true
				probes = append(probes, p)
			}
		}
	}
	return probes, rows
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// TestSandboxSeesEvaluation proves the check can fail: commands that bash
// evaluates, or that write, change the scratch directory.
func TestSandboxSeesEvaluation(t *testing.T) {
	sb := newSandbox(t)
	for _, cmd := range []string{
		"read '" + probePayload + "' <<< x",
		"declare -i n; n='" + probePayload + "'",
		"echo x > notes.txt",
		"rm /tmp/keep.txt",
		"chmod 600 notes.txt",
	} {
		res, err := sb.run(cmd, Bash, nil)
		if err != nil {
			t.Fatalf("run %q: %v", cmd, err)
		}
		if len(res.changes) == 0 {
			t.Errorf("run %q changed nothing in the scratch directory; want a change (stderr %q)", cmd, res.stderr)
		}
	}
	res, err := sb.run("cat notes.txt; ls -la /tmp", Bash, nil)
	if err != nil || len(res.changes) != 0 {
		t.Errorf("a plain read changed %v (err %v); want no change", res.changes, err)
	}
}

// probeWorkers is how many probes run at once. A probe spends its time
// waiting, not computing: on a sandbox's namespaces, on a read command
// that waits (sleep 1, vmstat 1 5, top -d) or walks the file system until
// probeTimeout cuts it off, on apt's and pip's start. On the 2-core machine
// of bench/RESULTS.md the 1,800 probes took about two minutes four at a
// time; sixteen at a time keep both cores busy.
const probeWorkers = 16

// probeSample is the share of the probes a plain `go test` runs: every
// probeSample-th. POSTERN_CORPUS_ALL=1 runs them all (.ci/run does). Each
// probe is a bubblewrap sandbox and a shell, about 30 ms of CPU: the
// 1,950 of them took 60 s of CPU and 79 s of wall time on the 2-core
// machine of bench/RESULTS.md, a fifth of the whole suite's CPU, which a
// newcomer's run spends better on the syscall oracle (it checks the same
// read entries call by call).
const probeSample = 4

// TestReadRowsUnderBash runs every read row of the corpus, and the probes
// built from it that the classifier still calls read, under real bash (dash
// for POSIX rows) in the sandbox, probeWorkers at a time. Any change to the
// scratch directory is a read that is not one.
func TestReadRowsUnderBash(t *testing.T) {
	sb := newSandbox(t)
	probes, rows := readProbes(t)
	if rows < 100 || len(probes) < rows {
		t.Fatalf("%d read rows gave %d probes; want the corpus's read rows and more probes than rows", rows, len(probes))
	}
	if os.Getenv("POSTERN_CORPUS_ALL") != "1" {
		var sample []probe
		for i := 0; i < len(probes); i += probeSample {
			sample = append(sample, probes[i])
		}
		probes = sample
	}
	var (
		mu       sync.Mutex
		timeouts int
	)
	work := make(chan probe)
	var wg sync.WaitGroup
	for range probeWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range work {
				res, err := sb.run(p.cmd, p.dialect, p.env)
				mu.Lock()
				switch {
				case err != nil:
					t.Errorf("run %q (row %q): %v", p.cmd, p.from, err)
				case len(res.changes) > 0:
					t.Errorf("Classify(%q) = read, but under %s with env %q it changed %v (row %q; stderr %q)",
						p.cmd, sb.shells[p.dialect], p.env, res.changes, p.from, res.stderr)
				}
				if res.timedOut {
					timeouts++
				}
				mu.Unlock()
			}
		}()
	}
	for _, p := range probes {
		work <- p
	}
	close(work)
	wg.Wait()
	t.Logf("%d read rows, %d probes run under bash in the sandbox, %d cut off at %v", rows, len(probes), timeouts, probeTimeout)
}

// FuzzReadUnderBash mutates read commands and probes of the corpus and runs
// every mutation the classifier calls read under bash in the sandbox: none
// may change the scratch directory.
func FuzzReadUnderBash(f *testing.F) {
	sb := newSandbox(f)
	// Every twentieth probe is a seed for the fuzzer: enough of each kind.
	// Under plain go test the seeds would only run again what
	// TestReadRowsUnderBash runs (all the probes, in parallel), one at a
	// time: they are added when fuzzing only.
	if fuzzing() {
		probes, _ := readProbes(f)
		for i := 0; i < len(probes); i += 20 {
			if probes[i].dialect == Bash && len(probes[i].env) == 0 {
				f.Add(probes[i].cmd)
			}
		}
	}
	f.Fuzz(func(t *testing.T, cmd string) {
		if Classify(cmd, Options{}).Class != Read {
			return
		}
		res, err := sb.run(cmd, Bash, nil)
		if err != nil {
			t.Fatalf("run %q: %v", cmd, err)
		}
		if len(res.changes) > 0 {
			t.Fatalf("Classify(%q) = read, but under bash it changed %v (stderr %q)", cmd, res.changes, res.stderr)
		}
	})
}

// fuzzing reports whether go test runs with -fuzz, rather than running the
// fuzz targets' seeds as tests.
func fuzzing() bool {
	f := flag.Lookup("test.fuzz")
	return f != nil && f.Value.String() != ""
}
