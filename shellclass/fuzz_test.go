package shellclass

import (
	"reflect"
	"strings"
	"testing"
)

// FuzzClassify checks, on every input: no panic; the result is
// deterministic; `rm -rf /tmp/x; X` is destructive for every X; any X with a
// NUL byte is destructive; every reason has the result's class.
func FuzzClassify(f *testing.F) {
	for _, rows := range loadCorpus(f, "*.jsonl") {
		for _, r := range rows {
			if len(r.Command) < 4096 {
				f.Add(r.Command)
			}
		}
	}
	f.Fuzz(func(t *testing.T, x string) {
		a := Classify(x, Options{})
		b := Classify(x, Options{})
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("Classify(%q) not deterministic: %+v then %+v", x, a, b)
		}
		for _, r := range a.Reasons {
			if r.Why == whyPanic {
				t.Fatalf("Classify(%q) panicked inside (recovered)", x)
			}
			if r.Class != a.Class {
				t.Fatalf("Classify(%q) reason %+v has class %v; want %v", x, r, r.Class, a.Class)
			}
		}
		if a.Class > Read && len(a.Reasons) == 0 && a.Class != Write {
			t.Fatalf("Classify(%q) = %v with no reason", x, a.Class)
		}
		if got := Classify("rm -rf /tmp/x; "+x, Options{}).Class; got != Destructive {
			t.Fatalf("Classify(%q) = %v; want destructive", "rm -rf /tmp/x; "+x, got)
		}
		if strings.IndexByte(x, 0) >= 0 && a.Class != Destructive {
			t.Fatalf("Classify(%q) with a NUL byte = %v; want destructive", x, a.Class)
		}
		_ = Classify(x, Options{Dialect: POSIX, Hook: fakeHook{}})
	})
}
