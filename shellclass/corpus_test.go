package shellclass

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// corpusRow is one line of a testdata/corpus/*.jsonl file: a command and the
// class it should have, written from what bash does and the rules of
// docs/classification.md, not from this code.
type corpusRow struct {
	Command string `json:"command"`
	Class   string `json:"class"`
	Why     string `json:"why"`
	Shell   string `json:"shell"`
	// Terminal is set for a row classified as if the session had a pty.
	Terminal bool `json:"terminal"`
}

func loadCorpus(t testing.TB, pattern string) map[string][]corpusRow {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "testdata", "corpus", pattern))
	if err != nil || len(files) == 0 {
		t.Fatalf("corpus files %s: %v (found %d)", pattern, err, len(files))
	}
	out := map[string][]corpusRow{}
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
			var r corpusRow
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatalf("%s:%d: %v", f, n, err)
			}
			out[filepath.Base(f)] = append(out[filepath.Base(f)], r)
		}
		fh.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func TestSharedCorpus(t *testing.T) {
	rows := loadCorpus(t, "shared-exec.jsonl")["shared-exec.jsonl"]
	if len(rows) != 51 {
		t.Fatalf("shared corpus has %d rows; want 51 (the example corpus postern started from)", len(rows))
	}
	checkRows(t, rows)
}

func TestProjectCorpus(t *testing.T) {
	all := loadCorpus(t, "*.jsonl")
	total, reads := 0, 0
	for file, rows := range all {
		if file == "shared-exec.jsonl" {
			continue
		}
		total += len(rows)
		for _, r := range rows {
			if r.Class == "read" {
				reads++
			}
		}
		t.Run(file, func(t *testing.T) { checkRows(t, rows) })
	}
	if total < 300 {
		t.Errorf("project corpus has %d rows; want at least 300", total)
	}
	if reads*4 < total {
		t.Errorf("project corpus has %d read rows of %d; want at least a quarter (over-flagging reads is a defect too)", reads, total)
	}
}

func checkRows(t *testing.T, rows []corpusRow) {
	t.Helper()
	for _, r := range rows {
		want, err := ParseClass(r.Class)
		if err != nil {
			t.Errorf("row %q: %v", r.Command, err)
			continue
		}
		d, err := ParseDialect(r.Shell)
		if err != nil {
			t.Errorf("row %q: %v", r.Command, err)
			continue
		}
		got := Classify(r.Command, Options{Dialect: d, Terminal: r.Terminal})
		if got.Class != want {
			t.Errorf("Classify(%q) = %v; want %v (%s); reasons %v", short(r.Command), got.Class, want, r.Why, got.Reasons)
		}
	}
}

func short(s string) string {
	if len(s) > 120 {
		return s[:120] + "…"
	}
	return s
}
