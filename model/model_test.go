package model

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/postern/postern/store"
)

func TestTimeJSON(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 500, time.FixedZone("x", 3600))
	for _, tt := range []struct {
		in   Time
		want string
	}{{Time{}, "null"}, {Time(at), `"2026-03-01T11:00:00.0000005Z"`}} {
		b, err := json.Marshal(tt.in)
		if err != nil || string(b) != tt.want {
			t.Errorf("Marshal(%v) = %s, %v; want %s", time.Time(tt.in), b, err, tt.want)
		}
		var back Time
		if err := json.Unmarshal(b, &back); err != nil || !time.Time(back).Equal(time.Time(tt.in)) {
			t.Errorf("Unmarshal(%s) = %v, %v; want %v", b, time.Time(back), err, time.Time(tt.in))
		}
	}
	var bad Time
	if err := json.Unmarshal([]byte(`"yesterday"`), &bad); err == nil {
		t.Error(`Unmarshal("yesterday") succeeded; want an error`)
	}
}

func TestStatusText(t *testing.T) {
	long := strings.Repeat("word ", 30)
	tests := []struct {
		status, msg string
		short       bool
		want        string
	}{
		{"ok", "the target accepted the key", false, "ok: the target accepted the key"},
		{"ok", "the target accepted the key", true, "ok"},
		{"rejected", "Permission denied\n(publickey)", true, "rejected: Permission denied (publickey)"},
		{"host_key_mismatch", "presented A; pinned B", false, "host key mismatch: presented A; pinned B"},
		{"unreachable", "", false, "unreachable"},
		{"unchecked", "", false, "never checked"},
		{"unchecked", "not checked since the last change", false, "not checked since the last change"},
		{"unchecked", "not checked since the last change", true, "never checked"},
		{"unproved", long, true, "unproved: " + strings.TrimSpace(long)[:59] + "…"},
	}
	for _, tt := range tests {
		if got := StatusText(tt.status, tt.msg, tt.short); got != tt.want {
			t.Errorf("StatusText(%q, %q, %v) = %q; want %q", tt.status, tt.msg, tt.short, got, tt.want)
		}
	}
}

// TestApprovalOf: a pending request past its expiry shows as expired, and
// a denied one lists as approvers only who approved before the denial.
func TestApprovalOf(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	a := store.Approval{ID: "apr_1", Status: store.ApprovalPending, ExpiresAt: now.Add(-time.Second),
		TargetUser: "deploy", TargetHost: "10.0.0.5", TargetPort: 22, ConnectionAlias: "web"}
	if v := ApprovalOf(a, now); v.Status != store.ApprovalExpired || v.Target != "deploy@10.0.0.5:22" || v.Connection != "web" {
		t.Errorf("ApprovalOf = %+v; want expired, deploy@10.0.0.5:22, web", v)
	}
	a.Status, a.FirstApprover, a.DecidedBy = store.ApprovalDenied, "alice", "bob"
	if v := ApprovalOf(a, now); len(v.Approvers) != 1 || v.Approvers[0] != "alice" || v.DecidedBy != "bob" {
		t.Errorf("denied after one approval: approvers %v, decided by %q; want [alice], bob", v.Approvers, v.DecidedBy)
	}
	a.TargetHost = ""
	if v := ApprovalOf(a, now); v.Target != "" || v.Approvers == nil {
		t.Errorf("connection removed: target %q, approvers %v; want \"\" and a non-nil list", v.Target, v.Approvers)
	}
}
