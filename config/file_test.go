package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	f, err := Parse([]byte(`
[serve]
ssh_listen = "0.0.0.0:2222"
approval_ttl = "3m"
command_rate = 5.5

[[agent]]
name = "bot"
keys = ["ssh-ed25519 AAAA bot"]

[[connection]]
alias = "web"
host = "10.0.0.5"
user = "deploy"
generate_key = true
accept_new_host_key = true

[[grant]]
agent = "bot"
connection = "web"
write = "ask"

[[notify]]
name = "ops"
url_file = "ops.url"
events = ["pending"]
`))
	if err != nil {
		t.Fatal(err)
	}
	if f.Serve.SSHListen != "0.0.0.0:2222" || time.Duration(f.Serve.ApprovalTTL) != 3*time.Minute || f.Serve.CommandRate != 5.5 {
		t.Errorf("serve: %+v", f.Serve)
	}
	if len(f.Agents) != 1 || len(f.Connections) != 1 || !f.Connections[0].GenerateKey || len(f.Grants) != 1 ||
		f.Grants[0].Write != "ask" || len(f.Notify) != 1 || f.Notify[0].URLFile != "ops.url" {
		t.Errorf("parsed: %+v", f)
	}
	// What Marshal writes, Parse reads back the same.
	b, err := Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(b)
	if err != nil {
		t.Fatalf("Parse(Marshal): %v\n%s", err, b)
	}
	if !reflect.DeepEqual(back, f) {
		t.Errorf("round trip:\n%+v\nwant\n%+v", back, f)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"unknown key", "[[agent]]\nname = \"a\"\nkey = \"x\"\n", "line 3: unknown key agent.key"},
		{"unknown table", "[agents]\nname = \"a\"\n", "unknown key agents"},
		{"wrong type", "[[connection]]\nport = \"22\"\n", "line 2"},
		{"bad duration", "[serve]\napproval_ttl = \"soon\"\n", "want a number and a unit"},
		{"not TOML", "[[agent]\n", "line 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse: %v; want an error with %q", err, tt.want)
			}
		})
	}
}
