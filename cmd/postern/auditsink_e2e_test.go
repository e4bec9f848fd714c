package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/postern/postern/internal/e2e"
	"github.com/postern/postern/internal/testwait"
)

// rsyslogConf is the test's rsyslog: imtcp on loopback (port 0 picks a free
// one and writes it to the port file), each message's MSG — the row's JSON
// record — on a line of its own in one file; no system socket, no
// privileges.
const rsyslogConf = `global(workDirectory="%[1]s" maxMessageSize="64k")
module(load="imtcp")
template(name="msgonly" type="string" string="%%msg%%\n")
input(type="imtcp" address="127.0.0.1" port="%[2]s" listenPortFileName="%[1]s/port" ruleset="audit")
ruleset(name="audit") {
  action(type="omfile" file="%[1]s/audit.log" template="msgonly")
}
`

// rsyslog is Debian's rsyslogd run by a test, in the foreground with a
// config of its own in dir.
type rsyslog struct {
	t      *testing.T
	bin    string
	dir    string
	port   string
	cmd    *exec.Cmd
	exited chan struct{}
	stderr bytes.Buffer
}

// rsyslogBin finds rsyslogd (in /usr/sbin, which a user's PATH may lack).
func rsyslogBin(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("rsyslogd"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/sbin/rsyslogd"); err == nil {
		return "/usr/sbin/rsyslogd"
	}
	e2e.Missing(t, "rsyslogd", "rsyslog")
	return ""
}

// startRsyslog starts rsyslogd on port ("0": a free one) and waits until it
// listens. The test's cleanup stops it.
func startRsyslog(t *testing.T, bin, dir, port string) *rsyslog {
	t.Helper()
	portFile := filepath.Join(dir, "port")
	os.Remove(portFile)
	conf := filepath.Join(dir, "rsyslog.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, rsyslogConf, dir, port), 0o600); err != nil {
		t.Fatal(err)
	}
	r := &rsyslog{t: t, bin: bin, dir: dir, exited: make(chan struct{})}
	r.cmd = exec.Command(bin, "-n", "-f", conf, "-i", filepath.Join(dir, "rsyslogd.pid"))
	r.cmd.Stdout, r.cmd.Stderr = &r.stderr, &r.stderr
	if err := r.cmd.Start(); err != nil {
		t.Fatalf("rsyslogd: %v", err)
	}
	go func() {
		defer close(r.exited)
		r.cmd.Wait()
	}()
	t.Cleanup(r.stop)
	testwait.Until(t, "rsyslogd to listen", func() bool {
		select {
		case <-r.exited:
			t.Fatalf("rsyslogd exited at start: %s", r.stderr.String())
		default:
		}
		if port == "0" {
			// rsyslog writes the port file for a port it picked only.
			b, err := os.ReadFile(portFile)
			if err != nil || len(bytes.TrimSpace(b)) == 0 {
				return false
			}
			r.port = string(bytes.TrimSpace(b))
		} else {
			r.port = port
		}
		c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", r.port))
		if err != nil {
			return false
		}
		c.Close()
		return true
	})
	return r
}

// stop ends rsyslogd (SIGTERM) and waits for it; rows it took are in its
// file by then.
func (r *rsyslog) stop() {
	select {
	case <-r.exited:
		return
	default:
	}
	r.cmd.Process.Signal(syscall.SIGTERM)
	testwait.Done(r.t, "rsyslogd to exit", r.exited)
}

// seqs reads the seq of every record rsyslog wrote, in its file's order.
func (r *rsyslog) seqs(t *testing.T) []int64 {
	return recordSeqs(t, filepath.Join(r.dir, "audit.log"))
}

// recordSeqs reads the seq of every JSON record of a file, one per line; a
// missing file has none. A line that is not a record fails t.
func recordSeqs(t *testing.T, path string) []int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for l := range bytes.Lines(b) {
		if !bytes.HasSuffix(l, []byte("\n")) {
			break // a line being written
		}
		var rec struct {
			Seq       *int64 `json:"seq"`
			Operation string `json:"operation"`
		}
		if err := json.Unmarshal(bytes.TrimSpace(l), &rec); err != nil || rec.Seq == nil {
			t.Fatalf("%s: line %q is not an audit record: %v", path, l, err)
		}
		out = append(out, *rec.Seq)
	}
	return out
}

// inOrder drops the repeats of an at-least-once delivery (a seq at or
// below the largest seen) and reports whether the rest is 1, 2, ..., n
// with nothing skipped.
func inOrder(seqs []int64) (n int64, ok bool) {
	for _, s := range seqs {
		switch {
		case s <= n:
		case s == n+1:
			n = s
		default:
			return n, false
		}
	}
	return n, true
}

// TestAuditSinksEndToEnd: `postern serve --audit-sink` ships every audit
// row of a run to Debian's rsyslog (RFC 5424 over TCP) and to a JSON lines
// file: the rows written while rsyslog was stopped arrive, in order, once
// it is back; rows written while serve was stopped arrive after its
// restart, which resumes from the cursor (the file gets each row exactly
// once); each record is the row as the CLI gives it.
func TestAuditSinksEndToEnd(t *testing.T) {
	t.Parallel()
	bin := rsyslogBin(t)
	r := newRig(t, rigConfig{conns: []rigConn{{"web", "dev"}}, grant: []string{"--read", "allow", "--write", "allow", "--destructive", "deny"}})
	rs := startRsyslog(t, bin, t.TempDir(), "0")
	jsonl := filepath.Join(t.TempDir(), "audit.jsonl")
	flags := []string{"--audit-sink", "rsyslog=syslog+tcp://127.0.0.1:" + rs.port, "--audit-sink", "jsonl://" + jsonl}
	p := r.serve(append(flags, "--metrics-listen", "127.0.0.1:0")...)
	metricsURL, _ := p.waitLog("metrics serving")["url"].(string)

	run := func(command string, wantCode int) {
		t.Helper()
		a := r.ssh("web", command)
		a.wait(t)
		if a.code != wantCode {
			t.Fatalf("%s: exit %d, stderr %q; want %d", command, a.code, a.stderr, wantCode)
		}
	}
	// head is the newest seq of the log, through the CLI.
	head := func() int64 {
		rows := r.cli.auditRows()
		if len(rows) == 0 {
			t.Fatal("the audit log is empty")
		}
		return rows[len(rows)-1].Seq
	}
	waitSyslog := func(what string, want int64) {
		t.Helper()
		testwait.Until(t, what, func() bool {
			n, ok := inOrder(rs.seqs(t))
			if !ok {
				t.Fatalf("rsyslog got %v: a row skipped", rs.seqs(t))
			}
			return n == want
		})
	}
	waitFile := func(what string, want int64) {
		t.Helper()
		testwait.Until(t, what, func() bool { return int64(len(recordSeqs(t, jsonl))) >= want })
	}

	run("echo one", 0)
	run("rm -f "+r.file("x"), 126)
	first := head()
	waitSyslog("rsyslog to get the first rows", first)
	waitFile("the file to get the first rows", first)

	// rsyslog stops; rows are written meanwhile and reach the file; they
	// reach rsyslog once it is back on its port.
	rs.stop()
	run("echo two", 0)
	run("echo three", 0)
	whileDown := head()
	if whileDown <= first {
		t.Fatalf("head %d after two commands; want past %d", whileDown, first)
	}
	waitFile("the file to get the rows written while rsyslog was stopped", whileDown)
	if n, _ := inOrder(rs.seqs(t)); n != first {
		t.Fatalf("rsyslog had rows up to %d while stopped; want %d", n, first)
	}
	// The metrics show the stopped receiver: failures, and rows behind.
	testwait.Until(t, "the metrics to show rsyslog behind", func() bool {
		fams := scrape(t, metricsURL)
		return value(fams, "postern_audit_sink_send_failures_total", "sink", "rsyslog") >= 1 &&
			value(fams, "postern_audit_sink_rows_behind", "sink", "rsyslog") == float64(whileDown-first) &&
			value(fams, "postern_audit_sink_rows_behind", "sink", "jsonl://"+jsonl) == 0
	})
	rs = startRsyslog(t, bin, rs.dir, rs.port)
	waitSyslog("rsyslog to get the rows written while it was stopped", whileDown)

	// serve stops; an admin's change is audited meanwhile; the restarted
	// serve ships it from the cursor, and what comes after.
	if code := p.end(syscall.SIGTERM); code != 0 {
		t.Fatalf("serve exit %d; want 0\n%s", code, p.stderrText())
	}
	r.cli.ok("", "grant", "bot", "web", "--read", "allow", "--write", "ask", "--destructive", "deny")
	offline := head()
	if offline <= whileDown {
		t.Fatalf("head %d after a grant; want past %d (the change is audited)", offline, whileDown)
	}
	p = r.serve(flags...)
	run("echo four", 0)
	last := head()
	waitSyslog("rsyslog to get every row after serve's restart", last)
	waitFile("the file to get every row after serve's restart", last)
	if got := recordSeqs(t, jsonl); int64(len(got)) != last || func() bool { n, ok := inOrder(got); return !ok || n != last }() {
		t.Fatalf("the file has seqs %v; want 1..%d, each once (a clean restart resumes from the cursor)", got, last)
	}

	// Each record is the row as the CLI gives it, nothing more.
	rows := r.cli.auditRows()
	b, err := os.ReadFile(jsonl)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	for i, row := range rows {
		want, _ := json.Marshal(row)
		if lines[i] != string(want) {
			t.Errorf("record %d: got %s; want %s", i+1, lines[i], want)
		}
	}
	if code := p.end(syscall.SIGTERM); code != 0 {
		t.Fatalf("serve exit %d; want 0", code)
	}
}
