package recipes

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/postern/postern/shellclass"
)

// loadT loads the embedded catalog or fails the test.
func loadT(t *testing.T) *Catalog {
	t.Helper()
	c, err := Load()
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return c
}

// TestNilRecipeOptions: a host no recipe claims is classified by the
// built-in rules for bash.
func TestNilRecipeOptions(t *testing.T) {
	var r *Recipe
	if got := r.Options(); got.Hook != nil || got.Dialect != shellclass.Bash {
		t.Errorf("(*Recipe)(nil).Options() = %+v; want the zero Options", got)
	}
}

// TestExactReadsAreRead: every exact read of every recipe classifies read
// with the recipe's options, and only when written exactly (a second
// command after it makes it no longer read).
func TestExactReadsAreRead(t *testing.T) {
	for _, r := range loadT(t).All() {
		opts := r.Options()
		for _, e := range r.ExactReads {
			t.Run(r.Key+"/"+e, func(t *testing.T) {
				if got := shellclass.Classify(e, opts); got.Class != shellclass.Read {
					t.Errorf("Classify(%q) = %v %v; want read", e, got.Class, got.Reasons)
				}
				for _, s := range []string{e + "; touch /tmp/x", e + " > /tmp/x", e + "\nreload"} {
					if got := shellclass.Classify(s, opts); got.Class == shellclass.Read {
						t.Errorf("Classify(%q) = read; want more than read", s)
					}
				}
			})
		}
	}
}

// TestDestructiveStays: a recipe never lowers a destructive command. On a
// target without a shell nothing is shell code, so there the commands are
// write, never read.
func TestDestructiveStays(t *testing.T) {
	for _, r := range loadT(t).All() {
		opts := r.Options()
		for _, s := range []string{"rm -rf /tmp/x", "ls; rm -rf x", "sh -c 'rm -rf /'"} {
			got := shellclass.Classify(s, opts).Class
			want := shellclass.Destructive
			if r.Shell == shellclass.None {
				want = shellclass.Write
			}
			if got != want {
				t.Errorf("%s: Classify(%q) = %v; want %v", r.Key, s, got, want)
			}
		}
	}
}

// TestKeyCheckIsRead: the key check runs on the target with the sealed key,
// so it must itself be read under the recipe's own rules.
func TestKeyCheckIsRead(t *testing.T) {
	for _, r := range loadT(t).All() {
		if r.KeyCheck.AuthOnly {
			continue
		}
		if got := shellclass.Classify(r.KeyCheck.Command, r.Options()); got.Class != shellclass.Read {
			t.Errorf("%s: key check %q classifies %v %v; want read", r.Key, r.KeyCheck.Command, got.Class, got.Reasons)
		}
	}
}

// TestRulesOnlyRaise: for every rule of every recipe, a command the rule
// matches classifies write with the recipe's options when the built-in
// rules say read or write, and destructive only when they already say
// destructive. A word rule is also tried on echo, a built-in read, to show
// the rule raising it.
func TestRulesOnlyRaise(t *testing.T) {
	for _, r := range loadT(t).All() {
		opts := r.Options()
		base := shellclass.Options{Dialect: r.Shell}
		for i, rule := range r.Rules {
			var samples [][]string
			switch rule.Match {
			case MatchWord:
				samples = [][]string{{"echo", rule.Value}, {rule.Value}}
			case MatchPrefix:
				samples = [][]string{strings.Fields(rule.Value)}
			case MatchCommand:
				samples = [][]string{{rule.Value}, {rule.Value, "--help"}}
			}
			for _, argv := range samples {
				if len(argv) == 0 {
					continue
				}
				if why, ok := (hook{r}).Raise(argv); !ok || why == "" {
					t.Errorf("%s rules[%d]: Raise(%q) = %q, %v; want a reason", r.Key, i, argv, why, ok)
				}
				s := quoteArgv(argv)
				b := shellclass.Classify(s, base).Class
				got := shellclass.Classify(s, opts).Class
				want := shellclass.Write
				if b == shellclass.Destructive {
					want = shellclass.Destructive
				}
				if got != want {
					t.Errorf("%s rules[%d]: Classify(%q) = %v (built-in %v); want %v", r.Key, i, s, got, b, want)
				}
			}
		}
	}
}

// TestCorpusNeverLowered runs the shared classification corpus with every
// recipe's options: a destructive command stays destructive, nothing
// becomes destructive that was not, and nothing is lowered except a
// recipe's exact read.
func TestCorpusNeverLowered(t *testing.T) {
	cmds := corpus(t)
	// The built-in classes depend only on the dialect: compute them once
	// per dialect, not once per recipe.
	builtin := map[shellclass.Dialect][]shellclass.Class{}
	for _, d := range []shellclass.Dialect{shellclass.Bash, shellclass.POSIX, shellclass.None} {
		for _, s := range cmds {
			builtin[d] = append(builtin[d], shellclass.Classify(s, shellclass.Options{Dialect: d}).Class)
		}
	}
	for _, r := range loadT(t).All() {
		t.Run(r.Key, func(t *testing.T) {
			t.Parallel()
			opts := r.Options()
			for i, s := range cmds {
				b := builtin[r.Shell][i]
				got := shellclass.Classify(s, opts).Class
				switch {
				case (b == shellclass.Destructive) != (got == shellclass.Destructive):
					t.Errorf("Classify(%q) = %v; built-in %v: destructive must stay and never appear", s, got, b)
				case got < b && !(got == shellclass.Read && r.exact[strings.Join(strings.Fields(s), " ")]):
					t.Errorf("Classify(%q) = %v; lower than built-in %v without an exact read", s, got, b)
				}
			}
		})
	}
}

// corpus reads the commands of the repository's classification corpus.
func corpus(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "testdata", "corpus", "*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("corpus: got %d files, %v; want testdata/corpus/*.jsonl", len(files), err)
	}
	var cmds []string
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var row struct {
				Command string `json:"command"`
			}
			if json.Unmarshal(sc.Bytes(), &row) == nil && row.Command != "" {
				cmds = append(cmds, row.Command)
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return cmds
}

// quoteArgv writes argv as a shell command, single-quoting any word that
// is not plain, so the classifier sees exactly these words.
func quoteArgv(argv []string) string {
	q := make([]string, len(argv))
	for i, w := range argv {
		if w != "" && strings.Trim(w, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./=:,+-") == "" {
			q[i] = w
		} else {
			q[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
		}
	}
	return strings.Join(q, " ")
}
