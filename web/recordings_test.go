package web

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/postern/postern/store"
)

// TestRecordingPages: the recordings list and one recording's playback are
// for the admin role and above; viewers and approvers get 403 and none of
// the output. Playback shows the output as text, in order, with stderr
// marked, a terminal's escape sequences taken out and secrets redacted.
func TestRecordingPages(t *testing.T) {
	ps := newPageSite(t, nil)
	rec, err := ps.st.SaveRecording(context.Background(), store.Recording{AgentName: "bot", ConnectionAlias: "web1",
		Operation: "deploy", Mode: store.RecordingPty}, []store.RecordingEvent{
		{Stream: store.StreamPty, Data: []byte("\x1b[1;31mred-out\x1b[0m\r\n")},
		{Stream: store.StreamStderr, Data: []byte("DB_PASSWORD=hunter2\n")},
	})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		role    store.Role
		allowed bool
	}{{store.RoleViewer, false}, {store.RoleApprover, false}, {store.RoleAdmin, true}, {store.RoleOwner, true}}
	for _, tc := range cases {
		t.Run(string(tc.role), func(t *testing.T) {
			name := "rec-" + string(tc.role)
			ps.addAdminRole(name, tc.role)
			pc := ps.client()
			pc.loginAs(name)
			for _, path := range []string{"/recordings", "/recordings/" + rec.ID} {
				status, _, body := pc.get(path)
				want := http.StatusForbidden
				if tc.allowed {
					want = http.StatusOK
				}
				if status != want {
					t.Errorf("GET %s: got status %d; want %d", path, status, want)
				}
				if !tc.allowed && strings.Contains(body, "red-out") {
					t.Errorf("GET %s as %s shows the output", path, tc.role)
				}
			}
			if !tc.allowed {
				return
			}
			_, _, body := pc.get("/recordings/" + rec.ID)
			for _, want := range []string{`class="piece stream-pty" data-offset-ms="0">red-out` + "\n<", `class="piece stream-stderr"`, "DB_PASSWORD=[REDACTED]"} {
				if !strings.Contains(body, want) {
					t.Errorf("playback page lacks %q", want)
				}
			}
			if strings.Contains(body, "hunter2") || strings.Contains(body, "\x1b") {
				t.Errorf("playback page shows a secret or an escape byte")
			}
		})
	}
}

// TestPlaybackText: escape sequences and control bytes are taken out, a
// newline and a tab stay; a bare carriage return of a command without a
// terminal becomes a newline.
func TestPlaybackText(t *testing.T) {
	cases := []struct {
		in   string
		pty  bool
		want string
	}{
		{"a\tb\n", false, "a\tb\n"},
		{"\x1b[31mred\x1b[0m\r\n", true, "red\n"},
		{"\x1b]0;title\x07x", true, "x"},
		{"bell\x07 nul\x00 del\x7f", false, "bell nul del"},
		{"50%\r100%\n", false, "50%\n100%\n"},
		{"bad \xff byte", false, "bad \uFFFD byte"},
	}
	for _, tc := range cases {
		if got := playbackText([]byte(tc.in), tc.pty); got != tc.want {
			t.Errorf("playbackText(%q, %v) = %q; want %q", tc.in, tc.pty, got, tc.want)
		}
	}
}
