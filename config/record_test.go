package config

import (
	"context"
	"strings"
	"testing"

	"github.com/postern/postern/store"
)

// TestRecordField: a connection's record is off when left out; apply
// sets it, export writes it back, and a word that is not a setting is
// refused before anything is applied.
func TestRecordField(t *testing.T) {
	r := newRig(t)
	conn := func(record string) string {
		s := `
[[connection]]
alias = "web"
host = "10.0.0.5"
user = "deploy"
host_keys = ["{h1}"]
key_file = "c1.key"
`
		if record != "" {
			s += "record = \"" + record + "\"\n"
		}
		return s
	}
	cases := []struct {
		record string
		want   store.Record
	}{{"", store.RecordOff}, {"exec", store.RecordExec}, {"all", store.RecordAll}, {"", store.RecordOff}}
	for _, tc := range cases {
		r.mustApply(conn(tc.record), Options{})
		c, err := r.st.ConnectionByAlias(context.Background(), "web")
		if err != nil || c.Record != tc.want {
			t.Fatalf("after apply with record %q: %v, %v; want %s", tc.record, c, err, tc.want)
		}
	}
	r.mustApply(conn("exec"), Options{})
	f, err := Export(context.Background(), r.st)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Marshal(f)
	if err != nil || !strings.Contains(string(b), "record = 'exec'") {
		t.Errorf("export: %s, %v; want record = 'exec'", b, err)
	}
	if _, _, err := r.apply(conn("sometimes"), Options{}); err == nil || !strings.Contains(err.Error(), "want off, exec or all") {
		t.Errorf("apply with record sometimes: %v; want it refused", err)
	}
}
