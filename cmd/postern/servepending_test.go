package main

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/cobra"
)

// TestServePendingBounds: the bounds on waiting requests come from the
// flags, else the config file's [serve] table, else the defaults (zero,
// which the policy engine reads as its defaults); a negative one is a
// usage error.
func TestServePendingBounds(t *testing.T) {
	tests := []struct {
		name                string
		file                string // the [serve] table's lines; no file if empty
		args                []string
		wantAgent, wantConn int
		wantErr             bool
	}{
		{name: "defaults"},
		{name: "file", file: "max_pending_per_agent = 7\nmax_pending_per_connection = 20\n", wantAgent: 7, wantConn: 20},
		{name: "flag over file", file: "max_pending_per_agent = 7\nmax_pending_per_connection = 20\n",
			args: []string{"--max-pending-per-agent=3"}, wantAgent: 3, wantConn: 20},
		{name: "flags", args: []string{"--max-pending-per-agent=1", "--max-pending-per-connection=2"}, wantAgent: 1, wantConn: 2},
		{name: "negative flag", args: []string{"--max-pending-per-connection=-1"}, wantConn: -1, wantErr: true},
		{name: "negative in the file", file: "max_pending_per_agent = -5\n", wantAgent: -5, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := &cobra.Command{Use: "serve"}
			f := addServeFlags(cmd)
			w := addWebFlags(cmd, "")
			if err := cmd.Flags().Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			path := ""
			if tt.file != "" {
				path = filepath.Join(t.TempDir(), "postern.toml")
				if err := os.WriteFile(path, []byte("[serve]\n"+tt.file), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if err := applyServeConfig(cmd, path, nil, f, w); err != nil {
				t.Fatalf("applyServeConfig: %v", err)
			}
			if got := f.limits; got.maxPendingPerAgent != tt.wantAgent || got.maxPendingPerConnection != tt.wantConn {
				t.Errorf("got %d per agent, %d per connection; want %d, %d",
					got.maxPendingPerAgent, got.maxPendingPerConnection, tt.wantAgent, tt.wantConn)
			}
			cmd.SetErr(io.Discard)
			if _, err := f.check(cmd); (err != nil) != tt.wantErr {
				t.Errorf("check: got %v; want an error: %v", err, tt.wantErr)
			}
		})
	}
}
