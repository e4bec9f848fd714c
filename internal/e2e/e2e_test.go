package e2e

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// recorder is a testing.TB that records how the test ended instead of
// ending it: Fatalf and Skipf end the goroutine, as the real ones do.
type recorder struct {
	testing.TB
	mu      sync.Mutex
	failed  string
	skipped string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.mu.Lock()
	r.failed = fmt.Sprintf(format, args...)
	r.mu.Unlock()
	panic(r)
}

func (r *recorder) Skipf(format string, args ...any) {
	r.mu.Lock()
	r.skipped = fmt.Sprintf(format, args...)
	r.mu.Unlock()
	panic(r)
}

// run calls fn with r and recovers the end Fatalf or Skipf signal.
func (r *recorder) run(fn func(testing.TB)) {
	defer func() {
		if v := recover(); v != nil && v != r {
			panic(v)
		}
	}()
	fn(r)
}

func TestMissing(t *testing.T) {
	tests := []struct {
		env      string
		wantFail bool
	}{
		{"1", true},
		{"", false},
		{"0", false},
	}
	for _, tt := range tests {
		t.Run("POSTERN_E2E="+tt.env, func(t *testing.T) {
			t.Setenv("POSTERN_E2E", tt.env)
			r := &recorder{TB: t}
			r.run(func(tb testing.TB) { Missing(tb, "frobnicator", "the frob package") })
			got := r.skipped
			if tt.wantFail {
				got = r.failed
			}
			if got == "" || !strings.Contains(got, "frobnicator") || !strings.Contains(got, "the frob package") {
				t.Errorf("failed %q, skipped %q; want the %s to name what is missing and the package", r.failed, r.skipped, map[bool]string{true: "failure", false: "skip"}[tt.wantFail])
			}
			if tt.wantFail && r.skipped != "" || !tt.wantFail && r.failed != "" {
				t.Errorf("failed %q, skipped %q; want only a %s", r.failed, r.skipped, map[bool]string{true: "failure", false: "skip"}[tt.wantFail])
			}
		})
	}
}

func TestTool(t *testing.T) {
	t.Setenv("POSTERN_E2E", "1")
	r := &recorder{TB: t}
	var got string
	r.run(func(tb testing.TB) { got = Tool(tb, "sh", "dash") })
	if got == "" || r.failed != "" {
		t.Errorf("Tool(sh) = %q, failure %q; want the path of sh", got, r.failed)
	}
	r = &recorder{TB: t}
	r.run(func(tb testing.TB) { got = Tool(tb, "postern-no-such-program", "nothing") })
	if !strings.Contains(r.failed, "postern-no-such-program") {
		t.Errorf("Tool(missing) failure %q; want it to name the program", r.failed)
	}
}
