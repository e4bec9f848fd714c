package shellclass

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
)

func TestClassText(t *testing.T) {
	for _, c := range []Class{Read, Write, Destructive} {
		b, err := c.MarshalText()
		if err != nil {
			t.Fatalf("MarshalText(%d): %v", c, err)
		}
		var back Class
		if err := back.UnmarshalText(b); err != nil || back != c {
			t.Errorf("round trip of %v = %v, %v; want %v", c, back, err, c)
		}
	}
	if _, err := Class(9).MarshalText(); err == nil {
		t.Error("MarshalText(9) succeeded; want an error")
	}
	if _, err := ParseClass("writ"); err == nil {
		t.Error(`ParseClass("writ") succeeded; want an error`)
	}
	if !(Read < Write && Write < Destructive) {
		t.Error("classes are not ordered read < write < destructive")
	}
}

func TestLimits(t *testing.T) {
	tests := []struct {
		name string
		cmd  string
		opts Options
		want Class
		why  string
	}{
		{"NUL byte", "ls\x00", Options{}, Destructive, "NUL"},
		{"NUL in quotes", "echo 'a\x00b'", Options{}, Destructive, "NUL"},
		{"over default length", "echo " + strings.Repeat("a", DefaultMaxLength), Options{}, Destructive, "longer than the limit"},
		{"over set length", "echo hello", Options{MaxLength: 5}, Destructive, "longer than the limit"},
		{"at set length", "ls", Options{MaxLength: 2}, Read, ""},
		{"deep substitution", strings.Repeat("echo $(", 60) + "ls" + strings.Repeat(")", 60), Options{}, Destructive, "nesting deeper"},
		{"deep sh -c", nestShC(7, "ls"), Options{MaxDepth: 4}, Destructive, "nesting deeper"},
		{"shallow sh -c", nestShC(2, "ls"), Options{MaxDepth: 8}, Read, ""},
		{"unparseable", "ls (", Options{}, Destructive, "could not parse"},
		{"unterminated quote", "echo 'abc", Options{}, Destructive, "could not parse"},
		{"long pipeline of reads", strings.Repeat("cat /etc/hosts | ", 500) + "wc -l", Options{}, Read, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Classify(tt.cmd, tt.opts)
			if got.Class != tt.want {
				t.Fatalf("class = %v; want %v (reasons %v)", got.Class, tt.want, got.Reasons)
			}
			if tt.why == "" {
				return
			}
			for _, r := range got.Reasons {
				if strings.Contains(r.Why, tt.why) {
					return
				}
			}
			t.Errorf("reasons %v; want one mentioning %q", got.Reasons, tt.why)
		})
	}
}

func nestShC(n int, inner string) string {
	s := inner
	for i := 0; i < n; i++ {
		q, _ := json.Marshal(s) // a double-quoted string bash reads the same way here
		s = "sh -c " + strings.ReplaceAll(string(q), "$", `\$`)
	}
	return s
}

func TestReasons(t *testing.T) {
	cmd := "ls /etc; sort -o /tmp/o /tmp/i; cat x > /etc/hosts"
	got := Classify(cmd, Options{})
	if got.Class != Write {
		t.Fatalf("class = %v; want write", got.Class)
	}
	if len(got.Reasons) != 2 {
		t.Fatalf("got %d reasons %v; want 2 (sort -o and the redirect)", len(got.Reasons), got.Reasons)
	}
	for _, r := range got.Reasons {
		if r.Class != Write {
			t.Errorf("reason %+v has class %v; want write", r, r.Class)
		}
		if cmd[r.Offset:r.Offset+len(r.Span)] != r.Span {
			t.Errorf("reason span %q at offset %d does not match the command text %q", r.Span, r.Offset, cmd[r.Offset:])
		}
	}
	if !strings.Contains(got.Reasons[0].Why, "-o") || !strings.Contains(got.Reasons[1].Why, "/etc/hosts") {
		t.Errorf("reasons %v; want sort -o first, then the redirect to /etc/hosts", got.Reasons)
	}
	if r := Classify("ls -la", Options{}); len(r.Reasons) != 0 || r.Reasons == nil {
		t.Errorf("read result reasons = %#v; want an empty, non-nil list", r.Reasons)
	}
	nested := Classify("echo ok; bash -c 'rm -rf /tmp/x'", Options{})
	if len(nested.Reasons) != 1 || nested.Reasons[0].Span != "rm -rf /tmp/x" || nested.Reasons[0].Offset != 9 {
		t.Errorf("nested reasons = %+v; want span %q at the offset (9) of the bash -c command", nested.Reasons, "rm -rf /tmp/x")
	}
}

func TestDialect(t *testing.T) {
	// Process substitution is bash; a POSIX shell cannot parse it, which
	// fails closed.
	if got := Classify("diff <(ls a) <(ls b)", Options{Dialect: Bash}).Class; got != Read {
		t.Errorf("bash: class = %v; want read", got)
	}
	if got := Classify("diff <(ls a) <(ls b)", Options{Dialect: POSIX}).Class; got != Destructive {
		t.Errorf("posix: class = %v; want destructive (could not parse)", got)
	}
	// Brace expansion is bash only: in POSIX sh {a,b} is a literal word.
	if got := Classify("cat {a,b}", Options{Dialect: POSIX}).Class; got != Read {
		t.Errorf("posix brace: class = %v; want read", got)
	}
	if got := Classify("rm{,}", Options{Dialect: Bash}).Class; got != Destructive {
		t.Errorf("bash brace name: class = %v; want destructive", got)
	}
}

// fakeHook is a recipe hook for tests: `show ...` is an exact read and
// `configure` is raised.
type fakeHook struct{}

func (fakeHook) ExactRead(argv []string) bool { return len(argv) >= 2 && argv[0] == "show" }
func (fakeHook) Raise(argv []string) (string, bool) {
	for _, a := range argv {
		if a == "reload" {
			return "recipe: reload restarts the service", true
		}
	}
	return "", false
}

func TestHook(t *testing.T) {
	tests := []struct {
		cmd  string
		want Class
	}{
		{"show version", Read},           // exact read of the recipe
		{"show version; show ip", Write}, // not one command: built-in rules
		{"show $X", Write},               // dynamic: never an exact read
		{"show version > /tmp/x", Write}, // redirect: not unambiguous
		{"cat /etc/hosts", Read},         // built-in read stays read
		{"cat reload", Write},            // raised by the hook
		{"rm -rf /tmp/x", Destructive},   // hook never lowers
		{"show running-config", Read},    //
		{"X=1 show version", Write},      // assignment: not unambiguous
		{"reload", Write},                // unknown program; raise says why
		{"sudo rm reload", Destructive},  // never lowered below destructive
		{"echo $(show version)", Write},  // substitution: not one command
	}
	for _, tt := range tests {
		got := Classify(tt.cmd, Options{Hook: fakeHook{}})
		if got.Class != tt.want {
			t.Errorf("Classify(%q) with hook = %v; want %v (reasons %v)", tt.cmd, got.Class, tt.want, got.Reasons)
		}
	}
}

func TestConcurrent(t *testing.T) {
	rows := loadCorpus(t, "shared-exec.jsonl")["shared-exec.jsonl"]
	want := make([]Class, len(rows))
	for i, r := range rows {
		want[i] = Classify(r.Command, Options{}).Class
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8*len(rows))
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i, r := range rows {
				if got := Classify(r.Command, Options{}).Class; got != want[i] {
					errs <- r.Command
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for cmd := range errs {
		t.Errorf("concurrent Classify(%q) differed from the sequential result", cmd)
	}
}

func TestNoShellDialect(t *testing.T) {
	tests := []struct {
		cmd  string
		hook Hook
		want Class
	}{
		{"show version", fakeHook{}, Read},
		{"show   version", fakeHook{}, Read},
		{"show version\nreload", fakeHook{}, Write},
		{"configure terminal", fakeHook{}, Write},
		{"ls -la", nil, Write},   // no shell: nothing is read by the built-in rules
		{"rm -rf /", nil, Write}, // nor destructive: there is no rm
		{"show\x00version", fakeHook{}, Destructive},
	}
	for _, tt := range tests {
		if got := Classify(tt.cmd, Options{Dialect: None, Hook: tt.hook}).Class; got != tt.want {
			t.Errorf("Classify(%q, none) = %v; want %v", tt.cmd, got, tt.want)
		}
	}
	if d, err := ParseDialect("none"); err != nil || d != None || d.String() != "none" {
		t.Errorf("ParseDialect(none) = %v, %v; want None", d, err)
	}
}

// TestUnreviewable: the limits that stop the classifier from reading a
// string whole mark it unreviewable; a parse error or any rule does not.
func TestUnreviewable(t *testing.T) {
	tests := []struct {
		name string
		cmd  string
		want bool
	}{
		{"plain read", "ls -la", false},
		{"destructive", "rm -rf /tmp/x", false},
		{"parse error", "echo 'unterminated", false},
		{"NUL byte", "ls\x00rm", true},
		{"over the length limit", "echo " + strings.Repeat("a", DefaultMaxLength), true},
		{"nested deeper than the limit", strings.Repeat("$(", DefaultMaxDepth+2) + "ls" + strings.Repeat(")", DefaultMaxDepth+2), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Classify(tc.cmd, Options{})
			if got.Unreviewable != tc.want {
				t.Errorf("Classify(%.40q).Unreviewable = %v; want %v (class %v, reasons %v)", tc.cmd, got.Unreviewable, tc.want, got.Class, got.Reasons)
			}
			if got.Unreviewable && got.Class != Destructive {
				t.Errorf("unreviewable with class %v; want destructive", got.Class)
			}
		})
	}
}

// TestRecursionOverKmsg: rg --files walks a tree that holds /proc/kmsg
// without opening a file (not a corpus row: the corpus's read rows also
// run on the tests' machine, and listing / there is slow and unstable).
func TestRecursionOverKmsg(t *testing.T) {
	for cmd, want := range map[string]Class{
		"rg --files /":          Read,
		"rg --type-list":        Read,
		"rg -l x /":             Destructive,
		"grep -rl x / /srv/app": Destructive,
	} {
		if got := Classify(cmd, Options{}).Class; got != want {
			t.Errorf("Classify(%q) = %v; want %v", cmd, got, want)
		}
	}
}
