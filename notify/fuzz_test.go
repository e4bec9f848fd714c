package notify

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/postern/postern/store"
)

// FuzzRender renders an approval whose text came from an agent (operation,
// reasons, stated reason) and an admin (a denial's note) in every format,
// and checks what must hold for any text: no panic, JSON that parses, no
// raw bidirectional control or other invisible code point in any message,
// an ntfy body within ntfy's limit and header values an HTTP client sends.
func FuzzRender(f *testing.F) {
	f.Add("rm -rf /srv", "rm deletes", "deploy", "", false)
	f.Add(bidiOp, "\u200b\u2066x\u2069", "\x00\x1b[31m", "no\nway", true)
	f.Add(strings.Repeat("é", 3000), "\xff\xfe", "<!channel> <https://x|y>", "&lt;", true)
	f.Fuzz(func(t *testing.T, op, reasons, agentReason, note string, decided bool) {
		event := string(store.NotifyPending)
		if decided {
			event = string(store.NotifyDecided)
		}
		now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		a := store.Approval{ID: "apr_x", Status: store.ApprovalDenied, AgentName: "bot", ConnectionAlias: "web",
			ConnectionEnv: store.EnvProduction, Class: "write", Kind: "exec", Operation: op, Reasons: reasons,
			AgentReason: agentReason, Reason: note, ApprovalsNeeded: 2, DecidedBy: "alice", CreatedAt: now,
			ExpiresAt: now.Add(time.Minute), DecidedAt: now}
		p := newPayload(a, event, "ntf_x", "https://postern.example", now)
		for _, format := range store.NotifyFormats {
			m, err := render(format, p, []byte("tk_secret"))
			if err != nil {
				t.Fatalf("%s: %v", format, err)
			}
			if format != store.NotifyNtfy && !json.Valid(m.body) {
				t.Fatalf("%s: the body is not JSON: %q", format, m.body)
			}
			var text string
			if format == store.NotifyNtfy {
				text = string(m.body)
				if len(m.body) > 4096 {
					t.Fatalf("ntfy body of %d bytes; want at most 4096", len(m.body))
				}
			} else {
				var v any
				_ = json.Unmarshal(m.body, &v)
				text = jsonStrings(v)
			}
			if !utf8.ValidString(text) {
				t.Fatalf("%s: the message is not UTF-8", format)
			}
			for _, r := range text {
				if (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) ||
					r == 0x200b || r == 0x200e || r == 0x200f || (r < 0x20 && r != '\n' && r != '\t') {
					t.Fatalf("%s: the message holds %U", format, r)
				}
			}
			for k, vs := range m.header {
				for _, v := range vs {
					if !httpHeaderValue(v) {
						t.Fatalf("%s: header %s value %q cannot be sent", format, k, v)
					}
				}
			}
		}
	})
}

// jsonStrings joins every string value in v.
func jsonStrings(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []any:
		var b strings.Builder
		for _, e := range x {
			b.WriteString(jsonStrings(e) + "\n")
		}
		return b.String()
	case map[string]any:
		var b strings.Builder
		for _, e := range x {
			b.WriteString(jsonStrings(e) + "\n")
		}
		return b.String()
	}
	return ""
}

// httpHeaderValue reports whether v is a header value HTTP allows: no
// control character but tab.
func httpHeaderValue(v string) bool {
	for _, r := range v {
		if r < 0x20 && r != '\t' || r == 0x7f {
			return false
		}
	}
	return true
}
