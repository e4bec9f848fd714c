package notify

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
)

// EventTest is the event of a test message (`postern notify test`, the
// page's Test button): it names no real request.
const EventTest = "test"

// KindChange is the Kind of a payload about a change request: a
// configuration change that waits for, or was decided by, a second admin
// (model.KindChange, the same word on the approvals card).
const KindChange = "change"

// Payload is the body of a json channel's message, documented field by
// field in docs/notifications.md. Text that came from the agent or an
// admin (operation, reasons, agent_reason, note, a change's fields) went
// through policy.Visible: invisible and direction-changing code points
// arrive as <U+XXXX> escapes.
type Payload struct {
	Event      string `json:"event"`    // pending, decided, bound, audit.head or test
	Delivery   string `json:"delivery"` // the same on every retry of one notification
	SentAt     string `json:"sent_at"`  // this attempt, RFC 3339 UTC
	ApprovalID string `json:"approval_id"`
	// Status is pending, approved, denied or expired; a change can also
	// be failed (approved, and then its write failed).
	Status string `json:"status"`
	Agent  string `json:"agent"`
	Alias  string `json:"alias"`
	Env    string `json:"env"` // "" when the connection was removed, and for a change
	Class  string `json:"class"`
	Kind   string `json:"kind"` // exec, sftp or change
	// Operation is the command or SFTP operation; for a change, the
	// change in words (its summary).
	Operation       string   `json:"operation"`
	Reasons         string   `json:"reasons"`
	AgentReason     string   `json:"agent_reason"` // POSTERN_REASON, "" if the agent gave none
	ApprovalsNeeded int      `json:"approvals_needed"`
	DecidedBy       []string `json:"decided_by"` // in order; [] while pending
	Note            string   `json:"note"`       // a denial's note for the agent
	Link            string   `json:"link"`       // the request's page; "" when postern serves no page
	CreatedAt       string   `json:"created_at"`
	ExpiresAt       string   `json:"expires_at"`
	DecidedAt       *string  `json:"decided_at"` // null while pending
	// Scope is what an approval lets through: "request" (the one
	// operation), "operation" (the same exact operation of the agent on
	// the connection) or "class" (any operation of its class there) until
	// ScopeExpiresAt; "" unless the request was approved.
	Scope          string  `json:"scope"`
	ScopeExpiresAt *string `json:"scope_expires_at"` // null for "request" and unless approved
	// Bound and Waiting are set on a "bound" summary only: whose bound on
	// waiting requests was reached ("agent" or "connection") and how many
	// requests were waiting. The request fields then describe the newest
	// of those, without its operation: the summary is about the queue.
	Bound   string `json:"bound,omitempty"`
	Waiting int    `json:"waiting,omitempty"`
	// Change is set when Kind is KindChange, and absent otherwise.
	Change *ChangeFacts `json:"change,omitempty"`
	// AuditHead is set on an audit.head event, and absent otherwise; the
	// request fields are then empty.
	AuditHead *HeadFacts `json:"audit_head,omitempty"`
}

// HeadFacts is the audit log's head as serve published it: the newest
// row's seq and hash, and both as `postern audit verify --from` takes them.
// A receiver that keeps these can later prove that no row up to the head
// was changed or removed (docs/deploy.md).
type HeadFacts struct {
	Seq  int64  `json:"seq"`
	Hash string `json:"hash"` // hex SHA-256
	Head string `json:"head"` // SEQ:HASH
}

// newHeadPayload describes a published audit head, as delivery sent at
// sentAt.
func newHeadPayload(h policy.Head, delivery string, sentAt time.Time) Payload {
	return Payload{Event: string(store.NotifyAuditHead), Delivery: delivery, SentAt: rfc3339(sentAt),
		DecidedBy: []string{}, AuditHead: &HeadFacts{Seq: h.Seq, Hash: hex.EncodeToString(h.Hash), Head: h.String()}}
}

// ChangeFacts is what a notification about a change request tells besides
// its summary: what the second admin is asked to let happen. Every field
// went through policy.VisibleLine, so none holds a line break.
type ChangeFacts struct {
	// What is the kind of change: grant, conn-update, conn-remove,
	// admin-add, admin-role or token-add.
	What   string `json:"what"`
	Before string `json:"before"`
	After  string `json:"after"`
	// RequestedBy is the admin who asked (cli:USER for the server's CLI
	// without --as); RequestedVia the door: cli, web, api or apply.
	RequestedBy  string `json:"requested_by"`
	RequestedVia string `json:"requested_via"`
}

// rfc3339 is a time in a payload.
func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// newPayload describes event about a, as delivery (the outbox row's id)
// sent at sentAt. base is the web page's URL ("" for none).
func newPayload(a store.Approval, event, delivery, base string, sentAt time.Time) Payload {
	p := Payload{
		Event: event, Delivery: delivery, SentAt: rfc3339(sentAt), ApprovalID: a.ID, Status: a.Status,
		Agent: a.AgentName, Alias: a.ConnectionAlias, Env: string(a.ConnectionEnv), Class: a.Class, Kind: a.Kind,
		Operation: policy.Visible(a.Operation), Reasons: policy.Visible(a.Reasons),
		AgentReason: policy.Visible(a.AgentReason), ApprovalsNeeded: a.ApprovalsNeeded,
		DecidedBy: a.Deciders(), Note: policy.VisibleLine(a.Reason),
		CreatedAt: rfc3339(a.CreatedAt), ExpiresAt: rfc3339(a.ExpiresAt),
	}
	if p.DecidedBy == nil {
		p.DecidedBy = []string{}
	}
	if base != "" {
		p.Link = strings.TrimSuffix(base, "/") + "/approvals/" + a.ID
	}
	if !a.DecidedAt.IsZero() {
		t := rfc3339(a.DecidedAt)
		p.DecidedAt = &t
	}
	if a.Status == store.ApprovalApproved {
		p.Scope = string(a.Scope)
		if p.Scope == "" {
			p.Scope = string(store.ScopeRequest)
		}
		if !a.ScopeExpiresAt.IsZero() {
			t := rfc3339(a.ScopeExpiresAt)
			p.ScopeExpiresAt = &t
		}
	}
	return p
}

// newChangePayload describes event about change request c, as delivery
// sent at sentAt; base is the web page's URL ("" for none). The link is
// c's card in the approvals queue. A change has one decider and needs one
// approval: the second admin's.
func newChangePayload(c store.ChangeRequest, event, delivery, base string, sentAt time.Time) Payload {
	p := Payload{
		Event: event, Delivery: delivery, SentAt: rfc3339(sentAt), ApprovalID: c.ID, Status: c.Status,
		Agent: policy.VisibleLine(c.AgentName), Alias: policy.VisibleLine(c.ConnectionAlias), Kind: KindChange,
		Operation: policy.VisibleLine(c.Summary), ApprovalsNeeded: 1, DecidedBy: []string{},
		Note: policy.VisibleLine(c.Reason), CreatedAt: rfc3339(c.CreatedAt), ExpiresAt: rfc3339(c.ExpiresAt),
		Change: &ChangeFacts{What: policy.VisibleLine(c.Kind), Before: policy.VisibleLine(c.Before),
			After: policy.VisibleLine(c.After), RequestedBy: policy.VisibleLine(c.RequestedBy),
			RequestedVia: policy.VisibleLine(c.RequestedVia)},
	}
	if c.DecidedBy != "" {
		p.DecidedBy = []string{policy.VisibleLine(c.DecidedBy)}
	}
	if base != "" {
		p.Link = strings.TrimSuffix(base, "/") + "/approvals/" + c.ID
	}
	if !c.DecidedAt.IsZero() {
		t := rfc3339(c.DecidedAt)
		p.DecidedAt = &t
	}
	return p
}

// boundSummary turns p, the payload of the newest waiting request, into
// the summary of a bound reached: scope is store.BoundAgent or
// store.BoundConnection, waiting the requests that were waiting.
func boundSummary(p Payload, scope string, waiting int) Payload {
	p.Bound, p.Waiting = scope, waiting
	p.Operation, p.Reasons, p.AgentReason = "", "", ""
	return p
}

// testApproval is the request a test message describes: made up, and
// saying so.
func testApproval(now time.Time) store.Approval {
	return store.Approval{ID: "apr_test", Status: store.ApprovalPending, AgentName: "postern-test",
		ConnectionAlias: "example", ConnectionEnv: store.EnvDev, Class: "write", Kind: "exec",
		Operation: "echo this is a test notification from postern", Reasons: "a test: no request waits",
		ApprovalsNeeded: 1, CreatedAt: now, ExpiresAt: now.Add(policy.DefaultApprovalLifetime)}
}

// message is one HTTP POST to a channel.
type message struct {
	contentType string
	header      http.Header // besides Content-Type and User-Agent
	body        []byte
}

// Limits of the chat formats' text.
const (
	// slackTextMax keeps a Slack text object under its 3000-character
	// limit.
	slackTextMax = 2900
	// ntfyBodyMax keeps an ntfy message under its 4096-byte limit, above
	// which ntfy turns the body into an attachment.
	ntfyBodyMax = 4000
	// ntfyOperationMax leaves room in an ntfy body for the facts around
	// the operation.
	ntfyOperationMax = 3000
	// changePartMax bounds each of a change's summary, before and after
	// in the chat formats, so that all three and the facts fit one Slack
	// text or ntfy body.
	changePartMax = 1000
)

// render writes p in format; secret is the channel's (nil for none).
func render(format store.NotifyFormat, p Payload, secret []byte) (message, error) {
	switch format {
	case store.NotifyJSON:
		return renderJSON(p, secret), nil
	case store.NotifySlack:
		return renderSlack(p), nil
	case store.NotifyNtfy:
		return renderNtfy(p, secret), nil
	}
	return message{}, fmt.Errorf("notify: unknown format %q", format)
}

func renderJSON(p Payload, secret []byte) message {
	body, err := json.Marshal(p)
	if err != nil {
		// Payload holds only strings, numbers and slices of strings.
		panic(fmt.Sprintf("notify: marshal payload: %v", err))
	}
	h := http.Header{}
	h.Set("X-Postern-Event", p.Event)
	h.Set("X-Postern-Delivery", p.Delivery)
	if secret != nil {
		h.Set(SignatureHeader, Sign(secret, body))
	}
	return message{contentType: "application/json", header: h, body: body}
}

// headline is the one-line summary every chat format leads with.
func headline(p Payload) string {
	if p.AuditHead != nil {
		return fmt.Sprintf("postern audit head: row %d", p.AuditHead.Seq)
	}
	if p.Change != nil {
		return changeHeadline(p)
	}
	where := p.Alias + " (" + p.Env + ")"
	if p.Env == "" {
		where = p.Alias + " (connection removed)"
	}
	what := "a " + p.Class + " command"
	if p.Kind == string(policy.SFTP) {
		what = "a " + p.Class + " SFTP operation"
	}
	switch p.Event {
	case EventTest:
		return "Test notification from postern: this channel works"
	case string(store.NotifyBound):
		who := "agent " + p.Agent
		if p.Bound == store.BoundConnection {
			who = "connection " + where
		}
		return fmt.Sprintf("%s has %d requests waiting; further requests are being denied", who, p.Waiting)
	case string(store.NotifyDecided):
		verdict := "Decided"
		if p.Status != "" {
			verdict = strings.ToUpper(p.Status[:1]) + p.Status[1:]
		}
		if len(p.DecidedBy) > 0 {
			verdict += " by " + strings.Join(p.DecidedBy, " and ")
		}
		return verdict + ": " + p.Agent + "'s " + strings.TrimPrefix(what, "a ") + " on " + where
	}
	head := "Approval needed: " + p.Agent + " asks to run " + what + " on " + where
	if p.ApprovalsNeeded > 1 {
		head += fmt.Sprintf(" (%d different admins must approve)", p.ApprovalsNeeded)
	}
	return head
}

// changeHeadline is headline for a change: who asked for what kind of
// change, about which agent or connection, and, once decided, the verdict
// and who gave it. It is built from names and manage's words, never from
// the summary, before or after, which can hold an admin's free text.
func changeHeadline(p Payload) string {
	c := p.Change
	what := "a " + c.What + " change"
	switch {
	case p.Agent != "" && p.Alias != "":
		what += " for agent " + p.Agent + " on " + p.Alias
	case p.Alias != "":
		what += " on " + p.Alias
	case p.Agent != "":
		what += " for agent " + p.Agent
	}
	if p.Event != string(store.NotifyDecided) {
		return "Change needs a second admin: " + c.RequestedBy + " asks for " + what
	}
	verdict := "Decided"
	if p.Status != "" {
		verdict = strings.ToUpper(p.Status[:1]) + p.Status[1:]
	}
	if len(p.DecidedBy) > 0 {
		by := " by "
		if p.Status == store.ChangeFailed {
			by = " after approval by "
		}
		verdict += by + strings.Join(p.DecidedBy, " and ")
	}
	return verdict + ": " + c.RequestedBy + "'s " + strings.TrimPrefix(what, "a ")
}

// changeSides are a change's before and after, one line each, for the
// chat formats.
func changeSides(c *ChangeFacts) []string {
	return []string{"Before: " + cut(c.Before, changePartMax), "After: " + cut(c.After, changePartMax)}
}

// changeFacts are the lines under a change's before and after in the
// chat formats.
func changeFacts(p Payload) []string {
	out := []string{"Asked by " + p.Change.RequestedBy + " (" + p.Change.RequestedVia + ")"}
	if p.Note != "" {
		out = append(out, "Reason: "+p.Note)
	}
	if p.Event == string(store.NotifyDecided) {
		return append(out, "Request "+p.ApprovalID)
	}
	if t, err := time.Parse(time.RFC3339Nano, p.ExpiresAt); err == nil {
		out = append(out, "Expires "+t.UTC().Format("2006-01-02 15:04:05 UTC")+" ("+p.ApprovalID+")")
	}
	return out
}

// facts are the lines under the operation in the chat formats.
func facts(p Payload) []string {
	if p.AuditHead != nil {
		return []string{"Head " + p.AuditHead.Head,
			"Keep it: `postern audit verify --from " + p.AuditHead.Head + "` proves the log up to this row is unchanged and complete"}
	}
	if p.Change != nil {
		return changeFacts(p)
	}
	var out []string
	if p.Reasons != "" {
		out = append(out, "Why "+p.Class+": "+p.Reasons)
	}
	if p.AgentReason != "" {
		out = append(out, "The agent says: "+p.AgentReason)
	}
	if p.Note != "" {
		out = append(out, "Note: "+p.Note)
	}
	if p.ScopeExpiresAt != nil {
		if t, err := time.Parse(time.RFC3339Nano, *p.ScopeExpiresAt); err == nil {
			what := "this exact operation"
			if p.Scope == string(store.ScopeClass) {
				what = "every " + p.Class + " operation"
			}
			out = append(out, "Scope: "+what+" of "+p.Agent+" on "+p.Alias+" runs without asking until "+
				t.UTC().Format("2006-01-02 15:04:05 UTC"))
		}
	}
	if p.Event == string(store.NotifyBound) {
		out = append(out, "Each further request is denied at once, with no notification, until "+
			"the waiting ones are decided or expire. Newest waiting: "+p.ApprovalID)
		return out
	}
	if p.Event == string(store.NotifyPending) || p.Event == EventTest {
		if t, err := time.Parse(time.RFC3339Nano, p.ExpiresAt); err == nil {
			out = append(out, "Expires "+t.UTC().Format("2006-01-02 15:04:05 UTC")+" ("+p.ApprovalID+")")
		}
	} else {
		out = append(out, "Request "+p.ApprovalID)
	}
	return out
}

// cut shortens s to at most n bytes on a rune boundary, saying how much
// was left out.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	end := n
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end] + fmt.Sprintf("… (%d more bytes)", len(s)-end)
}

// slackMessage is a Slack incoming-webhook message: a text for
// notifications and clients without blocks, and simple blocks.
type slackMessage struct {
	Text   string       `json:"text"`
	Blocks []slackBlock `json:"blocks"`
}

type slackBlock struct {
	Type     string      `json:"type"`
	Text     *slackText  `json:"text,omitempty"`
	Elements []slackText `json:"elements,omitempty"`
}

type slackText struct {
	Type  string `json:"type"` // mrkdwn or plain_text
	Text  string `json:"text"`
	Emoji *bool  `json:"emoji,omitempty"`
}

// slackEscape escapes the three characters Slack's mrkdwn reserves, so that
// no text of ours becomes a link or a mention.
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// slackPlain is a plain_text object: Slack shows it as it is, with no
// markup, links or emoji codes interpreted — the form for every text that
// came from an agent or an admin.
func slackPlain(s string) slackText {
	no := false
	return slackText{Type: "plain_text", Text: cut(s, slackTextMax), Emoji: &no}
}

func renderSlack(p Payload) message {
	head := slackEscape(headline(p))
	top := "*" + head + "*"
	if p.Link != "" {
		top += "\n<" + slackEscape(p.Link) + "|Open " + p.ApprovalID + " in postern>"
	}
	m := slackMessage{Text: head, Blocks: []slackBlock{
		{Type: "section", Text: &slackText{Type: "mrkdwn", Text: top}},
	}}
	switch {
	case p.Change != nil:
		// The summary, then before and after, each a plain_text section:
		// an admin's text never reaches mrkdwn.
		op := slackPlain(p.Kind + ": " + cut(p.Operation, changePartMax))
		sides := slackPlain(strings.Join(changeSides(p.Change), "\n"))
		m.Blocks = append(m.Blocks, slackBlock{Type: "section", Text: &op}, slackBlock{Type: "section", Text: &sides})
	case p.Operation != "":
		op := slackPlain(p.Kind + ": " + p.Operation)
		m.Blocks = append(m.Blocks, slackBlock{Type: "section", Text: &op})
	}
	var ctx []slackText
	for _, f := range facts(p) {
		ctx = append(ctx, slackPlain(f))
	}
	m.Blocks = append(m.Blocks, slackBlock{Type: "context", Elements: ctx})
	body, err := json.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("notify: marshal slack message: %v", err))
	}
	return message{contentType: "application/json", header: http.Header{}, body: body}
}

// headerText makes s safe as an HTTP header value: printable ASCII, with
// anything else as '?'. Titles are built from names, which are ASCII
// already; this only makes sure.
func headerText(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return '?'
		}
		return r
	}, s)
}

// ntfyValue quotes a value of ntfy's Actions header when it holds a comma
// or semicolon, which separate its fields and actions.
func ntfyValue(s string) string {
	if strings.ContainsAny(s, ",;") {
		return `"` + strings.ReplaceAll(s, `"`, "%22") + `"`
	}
	return s
}

func renderNtfy(p Payload, secret []byte) message {
	h := http.Header{}
	h.Set("Title", headerText("postern: "+headline(p)))
	tag := p.Class
	switch {
	case p.Change != nil:
		tag = KindChange
	case p.AuditHead != nil:
		tag = "audit"
	}
	h.Set("Tags", "postern,"+headerText(tag))
	if p.Event == string(store.NotifyPending) || p.Event == string(store.NotifyBound) {
		h.Set("Priority", "high")
	}
	if p.Link != "" {
		h.Set("Click", p.Link)
		h.Set("Actions", "view, Open, "+ntfyValue(p.Link))
	}
	if secret != nil {
		h.Set("Authorization", "Bearer "+string(secret))
	}
	var b bytes.Buffer
	switch {
	case p.Change != nil:
		b.WriteString(p.Kind + ": " + cut(p.Operation, changePartMax) + "\n\n")
		b.WriteString(strings.Join(changeSides(p.Change), "\n") + "\n\n")
	case p.Operation != "":
		b.WriteString(p.Kind + ": " + cut(p.Operation, ntfyOperationMax) + "\n\n")
	}
	b.WriteString(strings.Join(facts(p), "\n"))
	return message{contentType: "text/plain; charset=utf-8", header: h, body: []byte(cut(b.String(), ntfyBodyMax))}
}
