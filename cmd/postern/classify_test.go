package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestClassifyCommand(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		args      []string
		wantCode  int
		wantFirst string // first line of stdout
	}{
		{"destructive list", []string{"classify", "--", "ls; rm -rf /tmp/x"}, 0, "destructive"},
		{"read", []string{"classify", "--", "ls -la /etc"}, 0, "read"},
		{"posix dialect", []string{"classify", "--shell", "posix", "--", "cat /etc/hosts"}, 0, "read"},
		{"bad shell", []string{"classify", "--shell", "fish", "--", "ls"}, 2, ""},
		{"no command", []string{"classify"}, 2, ""},
		{"bad output", []string{"classify", "-o", "yaml", "--", "ls"}, 2, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runCLI(t, "", tt.args...)
			if r.code != tt.wantCode {
				t.Fatalf("exit code = %d; want %d (stderr %q)", r.code, tt.wantCode, r.stderr)
			}
			if first, _, _ := strings.Cut(r.stdout, "\n"); first != tt.wantFirst {
				t.Errorf("first line = %q; want %q", first, tt.wantFirst)
			}
		})
	}
}

func TestClassifyJSONOutput(t *testing.T) {
	t.Parallel()
	r := runCLI(t, "", "classify", "-o", "json", "--", "echo x | tee /etc/hosts")
	if r.code != 0 {
		t.Fatalf("exit code = %d; want 0 (stderr %q)", r.code, r.stderr)
	}
	var got struct {
		Class   string `json:"class"`
		Reasons []struct {
			Span, Class, Why string
		} `json:"reasons"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("output %q is not JSON: %v", r.stdout, err)
	}
	if got.Class != "write" || len(got.Reasons) != 1 || got.Reasons[0].Span != "tee /etc/hosts" || got.Reasons[0].Class != "write" {
		t.Errorf("got %+v; want class write with one reason spanning %q", got, "tee /etc/hosts")
	}
}

// TestClassifyJSONL pins the line contract: one output line per input line,
// in order, errors inline, exit 0.
func TestClassifyJSONL(t *testing.T) {
	t.Parallel()
	in := strings.Join([]string{
		`"ls -la"`,
		`{"command": "rm -rf /tmp/x", "other": 1}`,
		`not json`,
		`{"cmd": "ls"}`,
		`"sort -o out in"`,
		`""`,
	}, "\n") + "\n"
	r := runCLI(t, in, "classify", "--jsonl")
	if r.code != 0 {
		t.Fatalf("exit code = %d; want 0 (stderr %q)", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	want := []string{"read", "destructive", "error", "error", "write", "read"}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines %q; want %d", len(lines), r.stdout, len(want))
	}
	for i, line := range lines {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal([]byte(line), &obj); err != nil {
			t.Fatalf("line %d %q is not a JSON object: %v", i, line, err)
		}
		if want[i] == "error" {
			if _, ok := obj["error"]; !ok {
				t.Errorf("line %d = %s; want an error object", i, line)
			}
			continue
		}
		var class string
		_ = json.Unmarshal(obj["class"], &class)
		if class != want[i] {
			t.Errorf("line %d class = %q; want %q", i, class, want[i])
		}
		if _, ok := obj["reasons"]; !ok {
			t.Errorf("line %d = %s; want a reasons field", i, line)
		}
	}
}
