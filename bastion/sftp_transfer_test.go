package bastion

import (
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
)

// Transfers audited with their size and time: what an operator checks to
// learn which data left a host or reached it. An SFTP file's row is
// written when its handle is closed, with the bytes read and written
// through it; scp -O and rsync run as commands, whose rows count the
// bytes each way of the session (the file and the tool's own protocol).

// transferSize is the file the tests move: larger than any one SFTP
// packet or SSH window, so that a count of one packet or of the open alone
// cannot pass for it.
const transferSize = 1 << 20

// execOverhead bounds what scp -O's and rsync's own protocol adds to the
// file's bytes on the way the file goes (headers, file lists, checksums):
// a count within it is the file plus the protocol, not the file twice.
const execOverhead = 64 << 10

// transferRow waits until the bastion has audited the operation whose
// text match accepts, then returns its row as the store keeps it, failing
// the test unless there is exactly one.
func (h *harness) transferRow(what string, match func(op string) bool) store.AuditRow {
	h.t.Helper()
	h.events.await(h.t, "the audit record of "+what, func(audits []policy.Record, _ []policy.Approval) bool {
		for _, r := range audits {
			if match(r.Operation) {
				return true
			}
		}
		return false
	})
	rows, err := h.st.ListAudit(context.Background(), store.AuditFilter{})
	if err != nil {
		h.t.Fatal(err)
	}
	var found []store.AuditRow
	for _, r := range rows {
		if match(r.Operation) {
			found = append(found, r)
		}
	}
	if len(found) != 1 {
		h.t.Fatalf("%s: got %d audit rows; want 1", what, len(found))
	}
	return found[0]
}

// TestTransferAudited: a 1 MiB sftp get and put and an scp download (in
// SFTP mode) are audited with exactly the file's size read or written and
// a non-zero time; scp -O and rsync, through exec, with at least the
// file's size the way it went (and no more than their protocol adds).
func TestTransferAudited(t *testing.T) {
	t.Parallel()
	requireTool(t, "sftp", "openssh-client")
	requireTool(t, "scp", "openssh-client")
	requireTool(t, "rsync", "rsync")
	h := newHarness(t, harnessOpts{rules: readWrite})
	remote, local := t.TempDir(), t.TempDir()
	data := make([]byte, transferSize)
	rand.Read(data) // incompressible: no tool can send it smaller
	for _, name := range []string{"down", "scp", "scpO", "rsync/f"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(remote, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(remote, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(local, "up"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(local, "push"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(local, "push", "f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(remote, "pushed"), 0o755); err != nil {
		t.Fatal(err)
	}
	// The transfers, each checked for the file it moved.
	if r := h.sftpBatch("web", "get "+remote+"/down "+local+"/down\nput "+local+"/up "+remote+"/up\n"); r.code != 0 {
		t.Fatalf("sftp: exit %d stderr %q", r.code, r.stderr)
	}
	if r := h.scp("web@127.0.0.1:"+remote+"/scp", local+"/scp"); r.code != 0 {
		t.Fatalf("scp: exit %d stderr %q", r.code, r.stderr)
	}
	if r := h.scp("-O", "web@127.0.0.1:"+remote+"/scpO", local+"/scpO"); r.code != 0 {
		t.Fatalf("scp -O: exit %d stderr %q", r.code, r.stderr)
	}
	mustRun(t, local, nil, "rsync", "-a", "-e", h.sshCommand(), "web@127.0.0.1:"+remote+"/rsync/", local+"/rsync/")
	mustRun(t, local, nil, "rsync", "-a", "-e", h.sshCommand(), local+"/push/", "web@127.0.0.1:"+remote+"/pushed/")
	for _, p := range []string{local + "/down", remote + "/up", local + "/scp", local + "/scpO", local + "/rsync/f", remote + "/pushed/f"} {
		if b, err := os.ReadFile(p); err != nil || string(b) != string(data) {
			t.Fatalf("%s: got %d bytes, %v; want the %d of the file", p, len(b), err, len(data))
		}
	}

	sftpOp := func(method, path string) func(string) bool {
		return func(op string) bool { return strings.HasPrefix(op, "sftp "+method+` "`+path+`"`) }
	}
	const n = transferSize
	for _, tc := range []struct {
		name  string
		match func(op string) bool
		// out and in bound BytesOut (target to agent) and BytesIn
		// (agent to target), both ends included.
		outMin, outMax, inMin, inMax int64
	}{
		{name: "sftp get", match: sftpOp("get", remote+"/down"), outMin: n, outMax: n},
		{name: "sftp put", match: sftpOp("put", remote+"/up"), inMin: n, inMax: n},
		{name: "scp download", match: sftpOp("get", remote+"/scp"), outMin: n, outMax: n},
		{name: "scp -O download", match: func(op string) bool { return strings.HasPrefix(op, "scp ") && strings.HasSuffix(op, remote+"/scpO") },
			outMin: n, outMax: n + execOverhead, inMax: execOverhead},
		{name: "rsync pull", match: func(op string) bool {
			return strings.HasPrefix(op, "rsync --server --sender ") && strings.HasSuffix(op, remote+"/rsync/")
		}, outMin: n, outMax: n + execOverhead, inMax: execOverhead},
		{name: "rsync push", match: func(op string) bool {
			return strings.HasPrefix(op, "rsync --server ") && !strings.Contains(op, "--sender") && strings.HasSuffix(op, remote+"/pushed/")
		}, inMin: n, inMax: n + execOverhead, outMax: execOverhead},
	} {
		t.Run(tc.name, func(t *testing.T) {
			row := h.transferRow(tc.name, tc.match)
			if row.BytesOut < tc.outMin || row.BytesOut > tc.outMax {
				t.Errorf("%q: got bytes_out %d; want %d to %d", row.Operation, row.BytesOut, tc.outMin, tc.outMax)
			}
			if row.BytesIn < tc.inMin || row.BytesIn > tc.inMax {
				t.Errorf("%q: got bytes_in %d; want %d to %d", row.Operation, row.BytesIn, tc.inMin, tc.inMax)
			}
			if row.Duration <= 0 {
				t.Errorf("%q: got duration %v; want more than zero", row.Operation, row.Duration)
			}
			if row.Decision != string(policy.Allowed) {
				t.Errorf("%q: got decision %q; want %q", row.Operation, row.Decision, policy.Allowed)
			}
		})
	}
}
