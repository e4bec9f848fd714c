package main

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/postern/postern/internal/testwait"
	"github.com/postern/postern/internal/usererr"
	"github.com/postern/postern/model"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
)

// TestSandboxReasonSameOnEveryDoor: a read sandbox reason, which every
// admin reads (pages, lists, warnings, the audit log), is refused with the
// same words as a denial's reason (policy.CheckAdminText) by the CLI, the
// REST API and apply, and nothing is changed (issue 23: one rule for text
// one person types for another, kept in the layer every door uses).
func TestSandboxReasonSameOnEveryDoor(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigConfig{admins: []string{"alice"}})
	token := tokenFromOutput(t, r.cli.ok("", "token", "add", "ci", "--admin", "alice", "--scope", "admin"))
	r.cli.approveChanges()
	srv := r.serve()
	ctx := testwait.Context(t)
	wc := srv.web(t)
	var conns []model.Connection
	decodeJSON(t, r.cli.ok("", "conn", "list", "-o", "json"), &conns)
	if len(conns) != 1 {
		t.Fatalf("connections: %+v; want the rig's one", conns)
	}
	id := conns[0].ID
	dir := t.TempDir()

	doors := []struct {
		name string
		set  func(t *testing.T, reason string) string // the refusal's words, as the door shows them
	}{
		{"CLI", func(t *testing.T, reason string) string {
			res := r.cli.run("", "conn", "update", "target", "--read-sandbox", "off", "--read-sandbox-reason", reason)
			if res.code != 2 {
				t.Errorf("got exit %d; want 2", res.code)
			}
			return strings.TrimSuffix(strings.TrimPrefix(res.stderr, "postern: "), "\n")
		}},
		{"REST", func(t *testing.T, reason string) string {
			code, body := apiCall(ctx, wc, token, http.MethodPatch, "/v1/connections/"+id,
				`{"read_sandbox": "off", "read_sandbox_reason": `+jsonString(t, reason)+`}`)
			var e struct {
				Error struct{ Code, Message string } `json:"error"`
			}
			decodeJSON(t, body, &e)
			if code != http.StatusBadRequest {
				t.Errorf("got %d %s; want 400", code, e.Error.Code)
			}
			return e.Error.Message
		}},
		{"apply", func(t *testing.T, reason string) string {
			conf := filepath.Join(dir, "postern.toml")
			text := "[[connection]]\nalias = \"target\"\nhost = " + jsonString(t, r.target.Host) + "\nport = " +
				itoa(r.target.Port) + "\nuser = " + jsonString(t, r.target.User) + "\nread_sandbox = \"off\"\nread_sandbox_reason = " +
				jsonString(t, reason) + "\n"
			if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			res := r.cli.run("", "apply", "-f", conf)
			_, failed, ok := strings.Cut(res.stdout, "FAILED: ")
			if res.code != 1 || !ok {
				t.Errorf("got exit %d, stdout %q; want 1 and the change FAILED", res.code, res.stdout)
			}
			line, _, _ := strings.Cut(failed, "\n")
			return line
		}},
	}
	for _, tt := range hostileReasons {
		err := policy.CheckAdminText("read sandbox reason", strings.TrimSpace(tt.reason), store.MaxSandboxReason)
		if !errors.Is(err, policy.ErrInvalidText) {
			t.Fatalf("policy.CheckAdminText(%.40q): got %v; want ErrInvalidText", tt.reason, err)
		}
		want := usererr.Message(err, "")
		for _, door := range doors {
			t.Run(tt.name+"/"+door.name, func(t *testing.T) {
				if got := door.set(t, tt.reason); got != policy.VisibleLine(want) && got != want {
					t.Errorf("got %q; want policy's %q", got, want)
				}
			})
		}
	}
	decodeJSON(t, r.cli.ok("", "conn", "list", "-o", "json"), &conns)
	if rs := conns[0].ReadSandbox; rs.Setting != "auto" || rs.Reason != "" {
		t.Errorf("the read sandbox after the refused reasons: %+v; want auto without a reason", rs)
	}
}
