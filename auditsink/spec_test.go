package auditsink

import (
	"strings"
	"testing"
)

// TestParseSpec: each kind's URL, its default name and a given NAME, the
// file's rotation parameters, and the refusals.
func TestParseSpec(t *testing.T) {
	for _, tc := range []struct {
		in                 string
		name, kind, target string // target: addr, path or URL
		maxSize            int64
		keep               int
		err                string // a part of the error; "" for none
	}{
		{in: "syslog+tcp://127.0.0.1:514", name: "syslog+tcp://127.0.0.1:514", kind: KindSyslog, target: "127.0.0.1:514"},
		{in: "siem=syslog+tcp://[::1]:6514", name: "siem", kind: KindSyslog, target: "[::1]:6514"},
		{in: "jsonl:///var/log/postern/audit.jsonl", name: "jsonl:///var/log/postern/audit.jsonl", kind: KindFile, target: "/var/log/postern/audit.jsonl"},
		{in: "f=jsonl:///a/b.jsonl?max_size=10MiB&keep=3", name: "f", kind: KindFile, target: "/a/b.jsonl", maxSize: 10 << 20, keep: 3},
		{in: "jsonl:///a/b.jsonl?max_size=4096", name: "jsonl:///a/b.jsonl", kind: KindFile, target: "/a/b.jsonl", maxSize: 4096},
		{in: "https://collector.example/ingest?x=1", name: "https://collector.example/ingest", kind: KindHTTP, target: "https://collector.example/ingest?x=1"},
		{in: "http://127.0.0.1:8687/", name: "http://127.0.0.1:8687/", kind: KindHTTP, target: "http://127.0.0.1:8687/"},
		{in: "syslog+tcp://127.0.0.1", err: "want syslog+tcp://HOST:PORT"},
		{in: "syslog+tcp://127.0.0.1:514/x", err: "want syslog+tcp://HOST:PORT"},
		{in: "jsonl://relative/path", err: "ABSOLUTE"},
		{in: "jsonl:///a/dir/", err: "ABSOLUTE"},
		{in: "jsonl:///a/b?max_size=0", err: "max_size"},
		{in: "jsonl:///a/b?max_size=1TB", err: "max_size"},
		{in: "jsonl:///a/b?keep=0", err: "keep"},
		{in: "jsonl:///a/b?rotate=1", err: "unknown parameter"},
		{in: "https://user:secret@collector/x", err: "no user or password"},
		{in: "udp://127.0.0.1:514", err: "unknown kind"},
		{in: "=syslog+tcp://127.0.0.1:514", err: "NAME before = is empty"},
		{in: "a b=syslog+tcp://127.0.0.1:514", err: "no spaces"},
	} {
		sp, err := ParseSpec(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: got %+v, %v; want an error with %q", tc.in, sp, err, tc.err)
			}
			if err != nil && strings.Contains(err.Error(), "secret") {
				t.Errorf("%q: error %v", tc.in, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		target := map[string]string{KindSyslog: sp.addr, KindFile: sp.path, KindHTTP: sp.URL}[sp.Kind]
		if sp.Name != tc.name || sp.Kind != tc.kind || target != tc.target || sp.maxSize != tc.maxSize || sp.keep != tc.keep {
			t.Errorf("%q: got name %q kind %q target %q max %d keep %d; want %q %q %q %d %d", tc.in,
				sp.Name, sp.Kind, target, sp.maxSize, sp.keep, tc.name, tc.kind, tc.target, tc.maxSize, tc.keep)
		}
	}
}

// TestCheckNames: two sinks with one name would share a cursor.
func TestCheckNames(t *testing.T) {
	a, _ := ParseSpec("syslog+tcp://127.0.0.1:514")
	b, _ := ParseSpec("x=jsonl:///a")
	if err := CheckNames([]Spec{a, b}); err != nil {
		t.Errorf("distinct names: got %v; want nil", err)
	}
	c, _ := ParseSpec("syslog+tcp://127.0.0.1:514?")
	if err := CheckNames([]Spec{a, b, c}); err == nil || !strings.Contains(err.Error(), "two sinks") {
		t.Errorf("one name twice: got %v; want an error", err)
	}
}
