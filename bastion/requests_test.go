package bastion

import (
	"bytes"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

// TestRequestsParse: well-formed payloads parse to their fields; short,
// long or otherwise malformed ones are errors, never panics.
func TestRequestsParse(t *testing.T) {
	t.Parallel()
	// Adapters giving each parser the one shape the table uses.
	env := func(p []byte) (any, error) { return parseEnv(p) }
	ptyReq := func(p []byte) (any, error) {
		r, _, err := parsePtyReq(p)
		if err != nil {
			return nil, err
		}
		return *r, nil
	}
	exec := func(p []byte) (any, error) { return parseExec(p) }
	subsystem := func(p []byte) (any, error) { return parseSubsystem(p) }
	window := func(p []byte) (any, error) { return parseWindowChange(p) }
	signal := func(p []byte) (any, error) { return parseSignal(p) }
	status := func(p []byte) (any, error) { return parseExitStatus(p) }
	exitSig := func(p []byte) (any, error) { return parseExitSignal(p) }
	eow := func(p []byte) (any, error) { return struct{}{}, parseEOW(p) }

	pty := ptyRequest{Term: "xterm-256color", Columns: 100, Rows: 40, Width: 800, Height: 600, Modes: "\x35\x00\x00\x00\x00\x00"}
	ptyPayload := ssh.Marshal(pty)
	tests := []struct {
		name    string
		parse   func([]byte) (any, error)
		payload []byte
		want    any // compared when wantErr is false
		wantErr bool
	}{
		{name: "env", parse: env, payload: ssh.Marshal(envVar{"LANG", "C.UTF-8"}), want: envVar{"LANG", "C.UTF-8"}},
		{name: "env empty value", parse: env, payload: ssh.Marshal(envVar{"TERM", ""}), want: envVar{"TERM", ""}},
		{name: "env empty", parse: env, payload: nil, wantErr: true},
		{name: "env name only", parse: env, payload: ssh.Marshal(execRequest{"LANG"}), wantErr: true},
		{name: "env trailing bytes", parse: env, payload: append(ssh.Marshal(envVar{"LANG", "C"}), 0), wantErr: true},
		{name: "env length past end", parse: env, payload: []byte{0, 0, 0, 9, 'L', 'A', 'N', 'G'}, wantErr: true},
		{name: "env huge length", parse: env, payload: []byte{0xff, 0xff, 0xff, 0xff, 'L'}, wantErr: true},
		{name: "env empty name", parse: env, payload: ssh.Marshal(envVar{"", "x"}), wantErr: true},
		{name: "env name with =", parse: env, payload: ssh.Marshal(envVar{"LANG=C", "x"}), wantErr: true},
		{name: "env name with NUL", parse: env, payload: ssh.Marshal(envVar{"LANG\x00", "x"}), wantErr: true},
		{name: "env value with NUL", parse: env, payload: ssh.Marshal(envVar{"LANG", "C\x00"}), wantErr: true},

		{name: "pty-req", parse: ptyReq, payload: ptyPayload, want: pty},
		{name: "pty-req truncated", parse: ptyReq, payload: ptyPayload[:len(ptyPayload)-3], wantErr: true},
		{name: "pty-req no modes", parse: ptyReq, payload: ptyPayload[:len(ptyPayload)-len(pty.Modes)-4], wantErr: true},
		{name: "pty-req trailing bytes", parse: ptyReq, payload: append(append([]byte(nil), ptyPayload...), 1), wantErr: true},
		{name: "pty-req empty", parse: ptyReq, payload: []byte{}, wantErr: true},

		{name: "exec", parse: exec, payload: ssh.Marshal(execRequest{"uptime; echo 'a b'"}), want: "uptime; echo 'a b'"},
		{name: "exec binary command", parse: exec, payload: ssh.Marshal(execRequest{"\x00\xff\n"}), want: "\x00\xff\n"},
		{name: "exec empty string", parse: exec, payload: ssh.Marshal(execRequest{""}), want: ""},
		{name: "exec empty payload", parse: exec, payload: nil, wantErr: true},
		{name: "exec short length", parse: exec, payload: []byte{0, 0, 0}, wantErr: true},
		{name: "exec trailing bytes", parse: exec, payload: append(ssh.Marshal(execRequest{"ls"}), 'x'), wantErr: true},

		{name: "subsystem", parse: subsystem, payload: ssh.Marshal(subsystemRequest{"sftp"}), want: "sftp"},
		{name: "subsystem malformed", parse: subsystem, payload: []byte{0, 0, 0, 5, 's'}, wantErr: true},

		{name: "window-change", parse: window, payload: ssh.Marshal(windowChange{120, 50, 0, 0}), want: windowChange{120, 50, 0, 0}},
		{name: "window-change short", parse: window, payload: []byte{0, 0, 0, 120, 0, 0, 0, 50}, wantErr: true},

		{name: "signal", parse: signal, payload: ssh.Marshal(signalRequest{"INT"}), want: "INT"},
		{name: "signal malformed", parse: signal, payload: []byte{1}, wantErr: true},

		{name: "eow@openssh.com", parse: eow, payload: nil, want: struct{}{}},
		{name: "eow@openssh.com with a payload", parse: eow, payload: []byte{0}, wantErr: true},

		{name: "exit-status", parse: status, payload: exitStatusPayload(255), want: uint32(255)},
		{name: "exit-status short", parse: status, payload: []byte{0, 0, 1}, wantErr: true},
		{name: "exit-status long", parse: status, payload: []byte{0, 0, 0, 1, 0}, wantErr: true},

		{name: "exit-signal", parse: exitSig, payload: ssh.Marshal(exitSignal{"TERM", true, "killed", ""}), want: exitSignal{"TERM", true, "killed", ""}},
		{name: "exit-signal no language", parse: exitSig, payload: ssh.Marshal(signalRequest{"TERM"}), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.parse(tt.payload)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("got %#v, nil error; want an error", got)
				}
				if !strings.HasPrefix(err.Error(), "bastion: ") {
					t.Errorf("error: got %q; want the bastion: prefix", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("got error %v; want %#v", err, tt.want)
			}
			if got != tt.want {
				t.Errorf("got %#v; want %#v", got, tt.want)
			}
		})
	}
}

// TestParsePtyReqKeepsPayload: the raw pty-req payload is returned for
// replay byte for byte, and is a copy, not the caller's buffer.
func TestParsePtyReqKeepsPayload(t *testing.T) {
	t.Parallel()
	payload := ssh.Marshal(ptyRequest{Term: "xterm", Columns: 80, Rows: 24, Modes: "\x81\x00\x00\x96\x00\x00"})
	_, raw, err := parsePtyReq(payload)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(raw, payload) {
		t.Errorf("raw: got %x; want %x", raw, payload)
	}
	payload[len(payload)-1] ^= 0xff
	if bytes.Equal(raw, payload) {
		t.Errorf("raw shares the caller's buffer; want a copy")
	}
}

// TestEnvAllowed: only LANG, LC_*, TERM and GIT_PROTOCOL pass.
func TestEnvAllowed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		want bool
	}{
		{"LANG", true},
		{"TERM", true},
		{"GIT_PROTOCOL", true},
		{"LC_ALL", true},
		{"LC_CTYPE", true},
		{"LC_PAPER_SIZE", true},
		{"LC_", false},
		{"LC", false},
		{"LC_all", false},
		{"LC_ALL=C", false},
		{"LANGUAGE", false},
		{"lang", false},
		{"TERMINFO", false},
		{"GIT_SSH_COMMAND", false},
		{"LD_PRELOAD", false},
		{"PATH", false},
		{"BASH_ENV", false},
		{"FOO", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := envAllowed(tt.name); got != tt.want {
			t.Errorf("envAllowed(%q): got %v; want %v", tt.name, got, tt.want)
		}
	}
}

// FuzzParseRequests: no payload makes a parser panic, and whatever parses
// marshals back to the same bytes (nothing is dropped or invented).
func FuzzParseRequests(f *testing.F) {
	f.Add(ssh.Marshal(envVar{"LANG", "C.UTF-8"}))
	f.Add(ssh.Marshal(ptyRequest{Term: "xterm", Columns: 80, Rows: 24, Modes: "\x00"}))
	f.Add(ssh.Marshal(execRequest{"uptime"}))
	f.Add(ssh.Marshal(windowChange{80, 24, 0, 0}))
	f.Add(ssh.Marshal(exitSignal{"TERM", false, "", ""}))
	f.Add(exitStatusPayload(1))
	f.Add([]byte{})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, payload []byte) {
		roundTrip := func(name string, v any) {
			if got := ssh.Marshal(v); !bytes.Equal(got, payload) {
				t.Errorf("%s: marshal of parsed %#v: got %x; want %x", name, v, got, payload)
			}
		}
		if e, err := parseEnv(payload); err == nil {
			roundTrip("env", e)
		}
		if p, raw, err := parsePtyReq(payload); err == nil {
			roundTrip("pty-req", *p)
			if !bytes.Equal(raw, payload) {
				t.Errorf("pty-req raw: got %x; want %x", raw, payload)
			}
		}
		if c, err := parseExec(payload); err == nil {
			roundTrip("exec", execRequest{c})
		}
		if s, err := parseSubsystem(payload); err == nil {
			roundTrip("subsystem", subsystemRequest{s})
		}
		if w, err := parseWindowChange(payload); err == nil {
			roundTrip("window-change", w)
		}
		if s, err := parseSignal(payload); err == nil {
			roundTrip("signal", signalRequest{s})
		}
		if s, err := parseExitStatus(payload); err == nil {
			roundTrip("exit-status", exitStatus{s})
		}
		if err := parseEOW(payload); err == nil && len(payload) != 0 {
			t.Errorf("eow@openssh.com: got %x accepted; want only an empty payload", payload)
		}
		// exit-signal's boolean reads any non-zero byte as true, so it
		// need not marshal back to the same byte; parsing must not panic.
		_, _ = parseExitSignal(payload)
	})
}
