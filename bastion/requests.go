package bastion

import (
	"fmt"
	"strings"

	"golang.org/x/crypto/ssh"
)

// This file parses and builds the payloads of session channel requests
// (RFC 4254 §6). Every parser goes through ssh.Unmarshal, which rejects short
// payloads and trailing bytes, so a malformed request from an agent or a
// target becomes an error rather than a panic or a silently truncated value.

// envVar is the payload of an "env" request (RFC 4254 §6.4).
type envVar struct {
	Name  string
	Value string
}

// parseEnv parses an "env" request. A name that is empty or holds '=' or NUL,
// or a value that holds NUL, cannot be a variable in the target's
// environment, so it is refused here rather than passed on for the target to
// interpret.
func parseEnv(payload []byte) (envVar, error) {
	var e envVar
	if err := ssh.Unmarshal(payload, &e); err != nil {
		return envVar{}, fmt.Errorf("bastion: malformed env request: %w", err)
	}
	if e.Name == "" || strings.ContainsAny(e.Name, "=\x00") {
		return envVar{}, fmt.Errorf("bastion: env request with invalid name %q", e.Name)
	}
	if strings.ContainsRune(e.Value, 0) {
		return envVar{}, fmt.Errorf("bastion: env request for %s with a NUL in its value", e.Name)
	}
	return e, nil
}

// envAllowed reports whether an agent may pass the variable name on to a
// target. The list is the one OpenSSH's AcceptEnv ships with for locale and
// terminal (LANG, LC_*, TERM) plus GIT_PROTOCOL, which git needs to keep
// protocol v2 through the bastion. Anything else (LD_PRELOAD, PATH, BASH_ENV,
// a token) could change what the approved command does on the target, so it
// is dropped.
func envAllowed(name string) bool {
	switch name {
	case "LANG", "TERM", "GIT_PROTOCOL":
		return true
	}
	rest, ok := strings.CutPrefix(name, "LC_")
	if !ok || rest == "" {
		return false
	}
	for _, r := range rest {
		if (r < 'A' || r > 'Z') && r != '_' {
			return false
		}
	}
	return true
}

// ptyRequest is the payload of a "pty-req" request (RFC 4254 §6.2). Modes
// are the encoded terminal modes, kept as bytes: the bastion does not
// interpret them, it replays the raw payload to the target.
type ptyRequest struct {
	Term    string
	Columns uint32
	Rows    uint32
	Width   uint32 // pixels
	Height  uint32 // pixels
	Modes   string
}

// parsePtyReq parses a "pty-req" request. It returns the parsed request and a
// copy of the raw payload, which startUpstream replays unchanged so that the
// terminal modes reach the target byte for byte.
func parsePtyReq(payload []byte) (*ptyRequest, []byte, error) {
	var p ptyRequest
	if err := ssh.Unmarshal(payload, &p); err != nil {
		return nil, nil, fmt.Errorf("bastion: malformed pty-req request: %w", err)
	}
	return &p, append([]byte(nil), payload...), nil
}

// execRequest is the payload of an "exec" request (RFC 4254 §6.5).
type execRequest struct {
	Command string
}

// parseExec returns the command string of an "exec" request.
func parseExec(payload []byte) (string, error) {
	var e execRequest
	if err := ssh.Unmarshal(payload, &e); err != nil {
		return "", fmt.Errorf("bastion: malformed exec request: %w", err)
	}
	return e.Command, nil
}

// subsystemRequest is the payload of a "subsystem" request (RFC 4254 §6.5).
type subsystemRequest struct {
	Name string
}

// parseSubsystem returns the subsystem name of a "subsystem" request.
func parseSubsystem(payload []byte) (string, error) {
	var s subsystemRequest
	if err := ssh.Unmarshal(payload, &s); err != nil {
		return "", fmt.Errorf("bastion: malformed subsystem request: %w", err)
	}
	return s.Name, nil
}

// windowChange is the payload of a "window-change" request (RFC 4254 §6.7).
type windowChange struct {
	Columns uint32
	Rows    uint32
	Width   uint32 // pixels
	Height  uint32 // pixels
}

// parseWindowChange parses a "window-change" request. The relay forwards
// the raw payload; it parses first so that it never passes on garbage.
func parseWindowChange(payload []byte) (windowChange, error) {
	var w windowChange
	if err := ssh.Unmarshal(payload, &w); err != nil {
		return windowChange{}, fmt.Errorf("bastion: malformed window-change request: %w", err)
	}
	return w, nil
}

// signalRequest is the payload of a "signal" request (RFC 4254 §6.9): a
// signal name without the "SIG" prefix.
type signalRequest struct {
	Name string
}

// parseSignal returns the signal name of a "signal" request.
func parseSignal(payload []byte) (string, error) {
	var s signalRequest
	if err := ssh.Unmarshal(payload, &s); err != nil {
		return "", fmt.Errorf("bastion: malformed signal request: %w", err)
	}
	return s.Name, nil
}

// parseEOW checks an "eow@openssh.com" request (OpenSSH's PROTOCOL §2.1):
// its payload is empty, and sshd disconnects a client that sends more.
func parseEOW(payload []byte) error {
	if len(payload) != 0 {
		return fmt.Errorf("bastion: malformed eow@openssh.com request: %d unexpected bytes", len(payload))
	}
	return nil
}

// exitStatus is the payload of an "exit-status" request (RFC 4254 §6.10).
type exitStatus struct {
	Status uint32
}

// parseExitStatus returns the status of an "exit-status" request.
func parseExitStatus(payload []byte) (uint32, error) {
	var e exitStatus
	if err := ssh.Unmarshal(payload, &e); err != nil {
		return 0, fmt.Errorf("bastion: malformed exit-status request: %w", err)
	}
	return e.Status, nil
}

// exitStatusPayload builds an "exit-status" payload, for callers that end a
// session themselves (refusals, a lost target).
func exitStatusPayload(status uint32) []byte {
	return ssh.Marshal(exitStatus{Status: status})
}

// exitSignal is the payload of an "exit-signal" request (RFC 4254 §6.10).
type exitSignal struct {
	Signal     string // without the "SIG" prefix
	CoreDumped bool
	Message    string
	Language   string
}

// parseExitSignal parses an "exit-signal" request.
func parseExitSignal(payload []byte) (exitSignal, error) {
	var e exitSignal
	if err := ssh.Unmarshal(payload, &e); err != nil {
		return exitSignal{}, fmt.Errorf("bastion: malformed exit-signal request: %w", err)
	}
	return e, nil
}
