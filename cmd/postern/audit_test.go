package main

import (
	"strings"
	"testing"

	"github.com/postern/postern/policy"
)

func TestKindOp(t *testing.T) {
	tests := []struct {
		kind, op, want string
	}{
		{"exec", "uptime", "exec: uptime"},
		{"sftp", `sftp put "/srv/a" (write,create)`, `sftp put "/srv/a" (write,create)`},
		// Only a text that starts with its kind and a space names it.
		{"exec", "sftp put x", "exec: sftp put x"},
		{"sftp", "sftpx", "sftp: sftpx"},
		// Control characters are shown escaped, the prefix check included.
		{"exec", "ls\rrm -rf /", "exec: " + policy.VisibleLine("ls\rrm -rf /")},
	}
	for _, tt := range tests {
		got := kindOp(tt.kind, tt.op)
		if got != tt.want || strings.ContainsAny(got, "\r\n") {
			t.Errorf("kindOp(%q, %q) = %q; want %q, with no CR or LF", tt.kind, tt.op, got, tt.want)
		}
	}
}
