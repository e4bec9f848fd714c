package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/postern/postern/internal/testwait"
	"github.com/postern/postern/model"
)

// TestAuditSessionControlMaster: two commands over one OpenSSH
// ControlMaster connection to the bastion share a session id on their
// audit rows; a command over a connection of its own gets another. `postern
// audit --session ID` lists the rows of that session and no other.
func TestAuditSessionControlMaster(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigConfig{grant: []string{"--read", "allow"}})
	p := r.serve()
	host, port := splitAddr(t, p.sshAddr)
	// A socket path must fit in sun_path (108 bytes): t.TempDir() may not.
	dir, err := os.MkdirTemp("", "pcm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	mux := []string{"-o", "ControlPath=" + filepath.Join(dir, "m")}
	base := append(r.agent.options(), "-p", port)
	// -M alone: with ControlMaster=yes as well it would be -MM, a master
	// that asks before each session, which BatchMode refuses.
	master := startAgentRun(t, nil, "ssh", slices.Concat(base, mux, []string{"-M", "-N", host})...)
	check := slices.Concat([]string{"-F", "/dev/null"}, mux, []string{"-O", "check", host})
	testwait.Until(t, "the ControlMaster to answer", func() bool {
		select {
		case <-master.done:
			t.Fatalf("ControlMaster exited %d: %s", master.code, master.stderr)
		default:
		}
		return exec.CommandContext(testwait.Context(t), "ssh", check...).Run() == nil
	})
	run := func(opts []string, command string) {
		t.Helper()
		a := startAgentRun(t, nil, "ssh", slices.Concat(base, opts, []string{host, "target", command})...)
		a.wait(t)
		if a.code != 0 || strings.TrimSpace(a.stdout) != strings.TrimPrefix(command, "echo ") {
			t.Fatalf("%s: exit %d, stdout %q, stderr %q; want 0 and its word", command, a.code, a.stdout, a.stderr)
		}
	}
	// ControlMaster=no: use the master, never become one.
	overMaster := slices.Concat(mux, []string{"-o", "ControlMaster=no"})
	run(overMaster, "echo one")
	run(overMaster, "echo two")
	run(nil, "echo three")
	// An SFTP session over a connection of its own: each of its
	// operations' rows names that connection's session.
	tr := r.agent.sftp(t, p.sshAddr, "target", "ls "+r.scratch+"\nls "+r.scratch+"\n")
	tr.wait(t)
	if tr.code != 0 {
		t.Fatalf("sftp: exit %d, stderr %q; want 0", tr.code, tr.stderr)
	}

	session := map[string]string{}
	sftpSessions := map[string]bool{}
	for _, row := range r.cli.auditRows() {
		switch row.Kind {
		case "exec":
			session[row.Operation] = row.SessionID
		case "sftp":
			sftpSessions[row.SessionID] = true
		}
	}
	one, two, three := session["echo one"], session["echo two"], session["echo three"]
	if !strings.HasPrefix(one, "ses_") || len(one) != len("ses_")+16 {
		t.Fatalf("session id of echo one %q; want ses_ and 16 characters (rows: %v)", one, session)
	}
	if two != one {
		t.Errorf("echo two over the same ControlMaster: session %q; want %q", two, one)
	}
	if !strings.HasPrefix(three, "ses_") || three == one {
		t.Errorf("echo three over a connection of its own: session %q; want a session id other than %q", three, one)
	}

	if len(sftpSessions) != 1 || sftpSessions[""] || sftpSessions[one] || sftpSessions[three] {
		t.Errorf("sftp rows' sessions %v; want one session id of their own", sftpSessions)
	}

	var rows []model.AuditRow
	if err := json.Unmarshal([]byte(r.cli.ok("", "audit", "--session", one, "-o", "json")), &rows); err != nil {
		t.Fatal(err)
	}
	var ops []string
	for _, row := range rows {
		if row.SessionID != one {
			t.Errorf("audit --session %s: row %d has session %q", one, row.Seq, row.SessionID)
		}
		ops = append(ops, row.Operation)
	}
	if strings.Join(ops, ",") != "echo one,echo two" {
		t.Errorf("audit --session %s: operations %q; want echo one, echo two", one, ops)
	}
	if out := r.cli.ok("", "audit", "--session", three); !strings.Contains(out, "echo three") || strings.Contains(out, "echo one") {
		t.Errorf("audit --session %s:\n%s\nwant echo three alone", three, out)
	}
	var sess []auditSessionJSON
	if err := json.Unmarshal([]byte(r.cli.ok("", "audit", "--sessions", "--limit", "2", "-o", "json")), &sess); err != nil {
		t.Fatal(err)
	}
	// The two most recently active, oldest first: echo three's, then
	// the SFTP session's.
	if len(sess) != 2 || sess[0].SessionID != three || sess[0].Rows != 1 || sess[0].Agent != "bot" ||
		!slices.Equal(sess[0].Connections, []string{"target"}) || !sftpSessions[sess[1].SessionID] {
		t.Errorf("audit --sessions --limit 2: %+v; want echo three's session (1 row, bot, target), then the SFTP one", sess)
	}
	if out := r.cli.ok("", "audit", "--sessions"); !strings.Contains(out, one) || !regexp.MustCompile(one+`\s+bot\s+target\s.*\s2\n`).MatchString(out) {
		t.Errorf("audit --sessions:\n%s\nwant %s with bot, target and 2 rows", out, one)
	}
	if out := r.cli.ok("", "audit", "--session", "ses_none"); !strings.Contains(out, "no audit rows") {
		t.Errorf("audit --session ses_none: %q; want no audit rows", out)
	}
}
