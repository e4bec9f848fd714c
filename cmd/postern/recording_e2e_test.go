package main

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/postern/postern/internal/testwait"
	"github.com/postern/postern/model"
	"github.com/postern/postern/store"
)

// recordings lists the recordings with the CLI, as the owner.
func (c *cli) recordings() []model.Recording {
	c.t.Helper()
	var list []model.Recording
	decodeJSON(c.t, c.ok("", "recording", "list", "-o", "json"), &list)
	return list
}

// onlyNewRecording waits for nothing: the bastion stores a recording
// before the agent learns the exit status, so once the client has exited
// the recording is there. It returns the one recording that is not in
// seen, failing unless there is exactly one.
func (c *cli) onlyNewRecording(seen map[string]bool) model.Recording {
	c.t.Helper()
	var fresh []model.Recording
	for _, r := range c.recordings() {
		if !seen[r.ID] {
			fresh = append(fresh, r)
			seen[r.ID] = true
		}
	}
	if len(fresh) != 1 {
		c.t.Fatalf("new recordings: got %+v; want exactly one", fresh)
	}
	return fresh[0]
}

// joined is each stream's data of a recording, joined in order.
func joined(r model.Recording) map[string]string {
	out := map[string]string{}
	for _, e := range r.Events {
		out[e.Stream] += string(e.Data)
	}
	return out
}

// TestRecordingsE2E: with a real sshd and OpenSSH's client (issue 24),
// nothing is recorded while a connection's record is off; with all, the
// output of an exec command (stdout and stderr) and a terminal session's
// stream play back (CLI and REST) the same bytes the agent received; past
// serve's bound the recording keeps the bound and counts the rest; a
// viewer cannot fetch one (CLI and REST); the database holds the output
// only sealed; and serve's retention sweep deletes old ones.
func TestRecordingsE2E(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigConfig{admins: []string{"alice"}, grant: []string{"--write", "allow", "--destructive", "allow"}})
	c := r.cli
	c.ok("", "admin", "add", "vera", "--role", "viewer", "--password-file", writePasswordFile(t, r.password))
	adminToken := tokenFromOutput(t, c.ok("", "token", "add", "ops", "--admin", "alice", "--scope", "admin"))
	viewerToken := tokenFromOutput(t, c.ok("", "token", "add", "look", "--admin", "vera", "--scope", "read"))
	c.approveChanges()
	const bound = 4096
	srv := r.serve("--recording-bound", strconv.Itoa(bound))
	ctx := testwait.Context(t)
	wc := srv.web(t)
	seen := map[string]bool{}

	// Off: nothing is recorded.
	run := r.ssh("target", "printf 'off-%s\\n' 3d8a")
	run.wait(t)
	if run.code != 0 || run.stdout != "off-3d8a\n" {
		t.Fatalf("command with recording off: exit %d, stdout %q; want 0 and its output", run.code, run.stdout)
	}
	if list := c.recordings(); len(list) != 0 {
		t.Fatalf("recordings with record off: %+v; want none", list)
	}

	c.ok("", "conn", "update", "target", "--record", "all")
	var conns []model.Connection
	decodeJSON(t, c.ok("", "conn", "list", "-o", "json"), &conns)
	if len(conns) != 1 || conns[0].Record != "all" {
		t.Fatalf("conn list after --record all: %+v; want record all", conns)
	}

	// An exec command's stdout and stderr.
	run = r.ssh("target", "printf 'out-%s\\n' 5e1f; printf 'err-%s\\n' 5e1f >&2; printf 'out2-%s\\n' 5e1f")
	run.wait(t)
	if run.code != 0 || run.stdout != "out-5e1f\nout2-5e1f\n" || run.stderr != "err-5e1f\n" {
		t.Fatalf("printf: exit %d, stdout %q, stderr %q; want 0 and its output", run.code, run.stdout, run.stderr)
	}
	exec := c.onlyNewRecording(seen)
	if exec.Mode != store.RecordingExec || exec.ConnectionAlias != "target" || exec.AgentName != "bot" || exec.BytesDropped != 0 ||
		exec.BytesKept != int64(len(run.stdout)+len(run.stderr)) {
		t.Errorf("exec recording: %+v; want mode exec on target by bot, %d bytes kept, none dropped", exec, len(run.stdout)+len(run.stderr))
	}
	var auditOp string
	for _, row := range c.auditRows() {
		if row.Seq == exec.AuditSeq {
			auditOp = row.Operation
		}
	}
	if !strings.Contains(auditOp, "out-%s") {
		t.Errorf("the recording names audit row %d, whose operation is %q; want the printf's row", exec.AuditSeq, auditOp)
	}
	show := c.run("", "recording", "show", exec.ID)
	if show.code != 0 || show.stdout != run.stdout || show.stderr != run.stderr {
		t.Errorf("recording show: exit %d, stdout %q, stderr %q; want 0 and the agent's %q, %q", show.code, show.stdout, show.stderr,
			run.stdout, run.stderr)
	}
	timed := c.run("", "recording", "show", "--timing", exec.ID)
	if timed.code != 0 || timed.stdout != run.stdout || timed.stderr != run.stderr {
		t.Errorf("recording show --timing: exit %d, stdout %q, stderr %q; want the same output", timed.code, timed.stdout, timed.stderr)
	}
	code, body := apiCall(ctx, wc, adminToken, http.MethodGet, "/v1/recordings/"+exec.ID, "")
	var got struct{ Data model.Recording }
	if code != http.StatusOK {
		t.Fatalf("GET /v1/recordings/%s: %d %s; want 200", exec.ID, code, body)
	}
	decodeJSON(t, body, &got)
	if s := joined(got.Data); s["stdout"] != run.stdout || s["stderr"] != run.stderr {
		t.Errorf("REST events: stdout %q, stderr %q; want %q, %q", s["stdout"], s["stderr"], run.stdout, run.stderr)
	}

	// Past the bound: the bound is kept, the rest counted.
	run = r.ssh("target", "head -c 10000 /dev/zero | tr '\\0' x")
	run.wait(t)
	if run.code != 0 || len(run.stdout) != 10000 {
		t.Fatalf("10000 bytes: exit %d, %d bytes; want 0 and 10000", run.code, len(run.stdout))
	}
	big := c.onlyNewRecording(seen)
	if big.BytesKept != bound || big.BytesDropped != 10000-bound {
		t.Errorf("recording past the bound: kept %d, dropped %d; want %d and %d", big.BytesKept, big.BytesDropped, bound, 10000-bound)
	}
	show = c.run("", "recording", "show", big.ID)
	if show.code != 0 || show.stdout != run.stdout[:bound] || !strings.Contains(show.stderr, strconv.Itoa(10000-bound)+" more bytes were not kept") {
		t.Errorf("recording show of the cut recording: exit %d, %d bytes, stderr %q; want the first %d bytes and the count of the rest",
			show.code, len(show.stdout), show.stderr, bound)
	}

	// A terminal session: its stream.
	host, port := splitAddr(t, srv.sshAddr)
	run = startAgentRun(t, nil, "ssh", append(r.agent.options(), "-tt", "-p", port, host,
		"target", "printf 'pty-%s\\n' 9c3d; printf 'pty2-%s\\n' 9c3d")...)
	run.wait(t)
	if run.code != 0 || !strings.Contains(run.stdout, "pty-9c3d") {
		t.Fatalf("ssh -tt: exit %d, stdout %q; want 0 and the output", run.code, run.stdout)
	}
	pty := c.onlyNewRecording(seen)
	if pty.Mode != store.RecordingPty {
		t.Errorf("terminal recording: mode %q; want pty", pty.Mode)
	}
	show = c.run("", "recording", "show", pty.ID)
	if show.code != 0 || show.stdout != run.stdout {
		t.Errorf("recording show of the terminal session: exit %d, stdout %q; want the agent's %q", show.code, show.stdout, run.stdout)
	}

	// A viewer cannot fetch one, on any door.
	refused := c.run("", "recording", "show", exec.ID, "--as", "vera")
	if refused.code != 2 || !strings.Contains(refused.stderr, "admin role") || strings.Contains(refused.stdout, "5e1f") {
		t.Errorf("recording show as a viewer: exit %d, stdout %q, stderr %q; want 2 naming the admin role, no output",
			refused.code, refused.stdout, refused.stderr)
	}
	if res := c.run("", "recording", "list", "--as", "vera"); res.code != 2 {
		t.Errorf("recording list as a viewer: exit %d; want 2", res.code)
	}
	for _, path := range []string{"/v1/recordings/" + exec.ID, "/v1/recordings"} {
		if code, body := apiCall(ctx, wc, viewerToken, http.MethodGet, path, ""); code != http.StatusForbidden || strings.Contains(body, "5e1f") {
			t.Errorf("GET %s as a viewer: %d %s; want 403", path, code, body)
		}
	}

	// The database holds the output only sealed.
	files, err := filepath.Glob(filepath.Join(c.data, store.DatabaseFile+"*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("database files: %v, %v", files, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, plain := range []string{"out-5e1f", "err-5e1f", "pty-9c3d", strings.Repeat("x", 64)} {
			if bytes.Contains(b, []byte(plain)) {
				t.Errorf("%s holds %q in plain text", filepath.Base(f), plain)
			}
		}
	}

	// Retention: a serve that keeps recordings for a millisecond deletes
	// all three at its start.
	if code := srv.end(syscall.SIGTERM); code != 0 {
		t.Fatalf("serve exited %d; want 0", code)
	}
	srv = r.serve("--recording-retention", "1ms")
	m := srv.waitLog("recordings deleted")
	if n, ok := m["recordings"].(float64); !ok || n != 3 {
		t.Errorf("retention sweep log: %v; want recordings 3", m)
	}
	if list := c.recordings(); len(list) != 0 {
		t.Errorf("recordings after the sweep: %+v; want none", list)
	}
}
