package model

import (
	"bytes"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/postern/postern/policy"
	"github.com/postern/postern/recipes"
	"github.com/postern/postern/store"
)

// Time is a time in JSON: RFC 3339 in UTC with the fraction it has, or null
// for the zero time (something that never happened).
type Time time.Time

// MarshalJSON writes the time or null.
func (t Time) MarshalJSON() ([]byte, error) {
	tt := time.Time(t)
	if tt.IsZero() {
		return []byte("null"), nil
	}
	return []byte(strconv.Quote(tt.UTC().Format(time.RFC3339Nano))), nil
}

// UnmarshalJSON reads what MarshalJSON writes, for programs (and tests)
// that read postern's answers back.
func (t *Time) UnmarshalJSON(b []byte) error {
	if bytes.Equal(b, []byte("null")) {
		*t = Time{}
		return nil
	}
	s, err := strconv.Unquote(string(b))
	if err != nil {
		return fmt.Errorf("model: time %s: want an RFC 3339 string or null", b)
	}
	tt, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return fmt.Errorf("model: time %q: %w", s, err)
	}
	*t = Time(tt)
	return nil
}

// IsZero reports whether the time never happened.
func (t Time) IsZero() bool { return time.Time(t).IsZero() }

// Agent is an agent with its public keys.
type Agent struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	Disabled   bool       `json:"disabled"`
	Keys       []AgentKey `json:"keys"`
	CreatedAt  Time       `json:"created_at"`
	ModifiedAt Time       `json:"modified_at"`
}

// AgentKey is one of an agent's public keys: what its authorized_keys line
// says, safe to show.
type AgentKey struct {
	ID            string `json:"id"`
	Type          string `json:"type"`
	Fingerprint   string `json:"fingerprint"`
	AuthorizedKey string `json:"authorized_key"`
	CreatedAt     Time   `json:"created_at"`
}

// AgentOf is a as an Agent.
func AgentOf(a store.Agent) Agent {
	v := Agent{ID: a.ID, Name: a.Name, Disabled: a.Disabled, Keys: []AgentKey{},
		CreatedAt: Time(a.CreatedAt), ModifiedAt: Time(a.ModifiedAt)}
	for _, k := range a.Keys {
		typ := ""
		if pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(k.AuthorizedKey)); err == nil {
			typ = pub.Type()
		}
		v.Keys = append(v.Keys, AgentKey{ID: k.ID, Type: typ, Fingerprint: k.Fingerprint,
			AuthorizedKey: k.AuthorizedKey, CreatedAt: Time(k.CreatedAt)})
	}
	return v
}

// Connection is a target. It never carries key material beyond the public
// half of its key: the private key stays sealed in the database.
type Connection struct {
	ID     string `json:"id"`
	Alias  string `json:"alias"`
	Host   string `json:"host"`
	Port   int    `json:"port"`
	User   string `json:"user"` // on the target
	Env    string `json:"env"`
	Recipe string `json:"recipe"` // "" when none was chosen
	// KeyStatus is what the last key check found (store.KeyStatuses);
	// KeyMessage says more, in the target's words where it gave any.
	KeyStatus    string    `json:"key_status"`
	KeyMessage   string    `json:"key_message"`
	KeyCheckedAt Time      `json:"key_checked_at"`
	HostKeys     []HostKey `json:"host_keys"`
	// PublicKey is the public half of the connection's key, the line for
	// the target's authorized_keys; "" when it could not be read.
	PublicKey  string `json:"public_key"`
	CreatedAt  Time   `json:"created_at"`
	ModifiedAt Time   `json:"modified_at"`
	// ReadSandbox is whether its read commands run read-only on the
	// target (readsandbox.go).
	ReadSandbox ReadSandbox `json:"read_sandbox"`
	// Record is what of its sessions' output is recorded: off, exec or
	// all (store.Records).
	Record string `json:"record"`
	// StagedKey is the key staged for a rotation (conn rotate-key), null
	// when none is: its public half and last check, never the private key.
	StagedKey *StagedKey `json:"staged_key"`
}

// StagedKey is a key staged beside a connection's current one: the line
// to install on the target, and whether the target accepts it yet. A
// commit switches to it only once its check says ok.
type StagedKey struct {
	Fingerprint string `json:"fingerprint"` // SHA256:...
	PublicKey   string `json:"public_key"`  // the line for the target's authorized_keys
	StagedAt    Time   `json:"staged_at"`
	// CheckStatus is its last check (store.KeyStatuses; unchecked until
	// one ran), CheckMessage says more.
	CheckStatus  string `json:"check_status"`
	CheckMessage string `json:"check_message"`
	CheckedAt    Time   `json:"checked_at"`
}

// HostKey is one pinned host key of a target.
type HostKey struct {
	Type        string `json:"type"`        // the key type, "invalid" for a pin that does not parse
	Fingerprint string `json:"fingerprint"` // SHA256:..., as ssh-keygen -l prints it
	Line        string `json:"line"`        // as pinned: a known_hosts line or a public key
}

// ConnectionOf is c as a Connection; pub is the public half of its key
// (nil when it is not known).
func ConnectionOf(c store.Connection, pub ssh.PublicKey) Connection {
	v := Connection{ID: c.ID, Alias: c.Alias, Host: c.Host, Port: c.Port, User: c.User, Env: string(c.Env),
		Recipe: c.Recipe, KeyStatus: string(c.KeyStatus), KeyMessage: c.KeyMessage,
		KeyCheckedAt: Time(c.KeyCheckedAt), HostKeys: []HostKey{},
		CreatedAt: Time(c.CreatedAt), ModifiedAt: Time(c.ModifiedAt), ReadSandbox: ReadSandboxOf(c),
		Record: string(c.Record)}
	if v.Record == "" {
		v.Record = string(store.RecordOff)
	}
	if pub != nil {
		v.PublicKey = AuthorizedKeyLine(pub, c.Alias)
	}
	if k := c.Staged; k != nil {
		v.StagedKey = &StagedKey{Fingerprint: k.Fingerprint(), PublicKey: AuthorizedKeyLine(k.PublicKey, c.Alias),
			StagedAt: Time(k.StagedAt), CheckStatus: string(k.Check.Status), CheckMessage: k.Check.Message,
			CheckedAt: Time(k.Check.CheckedAt)}
	}
	for _, line := range c.HostKeys {
		hk := HostKey{Type: "invalid", Line: line}
		if _, key, err := store.ParseHostKeyLine(line); err == nil {
			hk.Type, hk.Fingerprint = key.Type(), ssh.FingerprintSHA256(key)
		}
		v.HostKeys = append(v.HostKeys, hk)
	}
	return v
}

// AuthorizedKeyLine is pub as a line for a target's authorized_keys, with
// a comment naming the connection so that the target's admin knows whose
// key it is.
func AuthorizedKeyLine(pub ssh.PublicKey, alias string) string {
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub))) + " postern:" + alias
}

// StatusText is a connection's key status in words, as every list shows
// it: "ok", "rejected: the target's message", "unreachable: ...", "host
// key mismatch: ...", "unproved: ...", "never checked". short (for a table
// cell) cuts the message, and leaves it out for ok and unchecked.
func StatusText(status, message string, short bool) string {
	word := strings.ReplaceAll(status, "_", " ")
	msg := strings.Join(strings.Fields(message), " ")
	switch store.KeyStatus(status) {
	case store.KeyUnchecked:
		if short || msg == "" {
			return "never checked"
		}
		return msg
	case store.KeyOK:
		if short {
			return "ok"
		}
	}
	if short {
		if r := []rune(msg); len(r) > 60 {
			msg = string(r[:59]) + "…"
		}
	}
	if msg == "" {
		return word
	}
	return word + ": " + msg
}

// Grant is one agent's rules on one connection.
type Grant struct {
	ID           string `json:"id"`
	Agent        string `json:"agent"`
	AgentID      string `json:"agent_id"`
	Connection   string `json:"connection"` // the connection's alias
	ConnectionID string `json:"connection_id"`
	Env          string `json:"env"`
	Read         string `json:"read"`
	Write        string `json:"write"`
	Destructive  string `json:"destructive"`
	CreatedAt    Time   `json:"created_at"`
	ModifiedAt   Time   `json:"modified_at"`
	// Scopes are the approvals whose active scope elevates the grant.
	Scopes []Approval `json:"scopes"`
}

// GrantOf is g as a Grant; now decides which of its scopes show as expired.
func GrantOf(g store.ElevatedGrant, now time.Time) Grant {
	scopes := make([]Approval, 0, len(g.Scopes))
	for _, a := range g.Scopes {
		scopes = append(scopes, ApprovalOf(a, now))
	}
	return Grant{ID: g.ID, Agent: g.AgentName, AgentID: g.AgentID, Connection: g.Alias, ConnectionID: g.ConnectionID,
		Env: string(g.Env), Read: string(g.Rules.Read), Write: string(g.Rules.Write),
		Destructive: string(g.Rules.Destructive), CreatedAt: Time(g.CreatedAt), ModifiedAt: Time(g.ModifiedAt),
		Scopes: scopes}
}

// Approval is an approval request. Operation, reasons and the agent's
// reason are the redacted text the store keeps, and the agent's: untrusted.
type Approval struct {
	ID              string `json:"id"`
	Status          string `json:"status"`
	Agent           string `json:"agent"`
	AgentID         string `json:"agent_id"`
	Connection      string `json:"connection"`
	ConnectionID    string `json:"connection_id"`
	Env             string `json:"env"`
	Target          string `json:"target"` // user@host:port, "" when the connection was removed
	Class           string `json:"class"`
	Kind            string `json:"kind"`
	Operation       string `json:"operation"`
	OperationSHA256 string `json:"operation_sha256"`
	// OperationLines and OperationBytes are the operation's size, so that
	// a client that shows part of it can say how much it does not show
	// (policy.Extent: the page, the CLI and notifications do).
	OperationLines int `json:"operation_lines"`
	OperationBytes int `json:"operation_bytes"`
	// TerminalLifeSeconds is set for a session with a terminal (an
	// interactive shell, whatever its command): the longest it runs once
	// approved. 0 for a request without a terminal.
	TerminalLifeSeconds int64    `json:"terminal_life_seconds"`
	Reasons             string   `json:"reasons"`
	AgentReason         string   `json:"agent_reason"`
	SourceAddr          string   `json:"source_addr"`
	ApprovalsNeeded     int      `json:"approvals_needed"`
	Approvers           []string `json:"approvers"` // who approved, in order
	FirstApprover       string   `json:"first_approver"`
	FirstApprovedAt     Time     `json:"first_approved_at"`
	DecidedBy           string   `json:"decided_by"`
	DecidedAt           Time     `json:"decided_at"`
	Reason              string   `json:"reason"` // a denial's
	ExpiresAt           Time     `json:"expires_at"`
	ConsumedAt          Time     `json:"consumed_at"`
	Scope               string   `json:"scope"`
	ScopeExpiresAt      Time     `json:"scope_expires_at"`
	ScopeRevokedAt      Time     `json:"scope_revoked_at"`
	ScopeRevokedBy      string   `json:"scope_revoked_by"`
	CreatedAt           Time     `json:"created_at"`
	ModifiedAt          Time     `json:"modified_at"`
	// A request of kind change (a change of configuration that waits for
	// a second admin, ChangeApprovalOf) has what it changes from and to,
	// and who asked; Operation is the change in words.
	Before      string `json:"before,omitempty"`
	After       string `json:"after,omitempty"`
	RequestedBy string `json:"requested_by,omitempty"`
}

// KindChange is the kind of a request in the approvals queue that is a
// change of configuration waiting for a second admin, not an operation.
const KindChange = "change"

// ChangeApprovalOf is the change request c as an entry of the approvals
// queue: kind change, one approval needed (the second admin's; the one
// who asked was the first person), its summary as the operation.
func ChangeApprovalOf(c store.ChangeRequest, now time.Time) Approval {
	status := c.Status
	if status == store.ChangePending && !now.Before(c.ExpiresAt) {
		status = store.ChangeExpired
	}
	ext := policy.ExtentOf(c.Summary)
	approvers := []string{}
	if c.Status == store.ChangeApproved || c.Status == store.ChangeFailed {
		approvers = append(approvers, c.DecidedBy)
	}
	return Approval{ID: c.ID, Status: status, Agent: c.AgentName, AgentID: c.AgentID, Connection: c.ConnectionAlias,
		ConnectionID: c.ConnectionID, Kind: KindChange, Operation: c.Summary, OperationSHA256: "",
		OperationLines: ext.Lines, OperationBytes: ext.Bytes, Reasons: c.Kind, SourceAddr: "",
		ApprovalsNeeded: 1, Approvers: approvers, DecidedBy: c.DecidedBy, DecidedAt: Time(c.DecidedAt),
		Reason: c.Reason, ExpiresAt: Time(c.ExpiresAt), Scope: string(store.ScopeRequest),
		CreatedAt: Time(c.CreatedAt), ModifiedAt: Time(c.ModifiedAt),
		Before: c.Before, After: c.After, RequestedBy: c.RequestedBy}
}

// ApprovalOf is a as an Approval. A request still pending past its expiry
// shows as expired, which it is, before anything has marked it so.
func ApprovalOf(a store.Approval, now time.Time) Approval {
	status := a.Status
	if status == store.ApprovalPending && !now.Before(a.ExpiresAt) {
		status = store.ApprovalExpired
	}
	ext := policy.ExtentOf(a.Operation)
	approvers := []string{}
	switch {
	case a.Status == store.ApprovalDenied && a.FirstApprover != "":
		approvers = append(approvers, a.FirstApprover)
	case a.Status != store.ApprovalDenied:
		approvers = append(approvers, a.Deciders()...)
	}
	return Approval{ID: a.ID, Status: status, Agent: a.AgentName, AgentID: a.AgentID, Connection: a.ConnectionAlias,
		ConnectionID: a.ConnectionID, Env: string(a.ConnectionEnv), Target: approvalTarget(a), Class: a.Class,
		Kind: a.Kind, Operation: a.Operation, OperationSHA256: a.OperationSHA256,
		OperationLines: ext.Lines, OperationBytes: ext.Bytes, Reasons: a.Reasons,
		TerminalLifeSeconds: int64(a.TerminalLife / time.Second),
		AgentReason:         a.AgentReason, SourceAddr: a.SourceAddr, ApprovalsNeeded: a.ApprovalsNeeded,
		Approvers: approvers, FirstApprover: a.FirstApprover, FirstApprovedAt: Time(a.FirstApprovedAt),
		DecidedBy: a.DecidedBy, DecidedAt: Time(a.DecidedAt), Reason: a.Reason, ExpiresAt: Time(a.ExpiresAt),
		ConsumedAt: Time(a.ConsumedAt), Scope: string(a.Scope), ScopeExpiresAt: Time(a.ScopeExpiresAt),
		ScopeRevokedAt: Time(a.ScopeRevokedAt), ScopeRevokedBy: a.ScopeRevokedBy,
		CreatedAt: Time(a.CreatedAt), ModifiedAt: Time(a.ModifiedAt)}
}

// approvalTarget is the approval's target as user@host:port, or "" when
// its connection was removed.
func approvalTarget(a store.Approval) string {
	if a.TargetHost == "" {
		return ""
	}
	return a.TargetUser + "@" + net.JoinHostPort(a.TargetHost, strconv.Itoa(a.TargetPort))
}

// AuditRow is one row of the audit log. Its id is its seq as a string and
// its modified_at its time: rows are written once and never changed.
type AuditRow struct {
	ID           string   `json:"id"`
	Seq          int64    `json:"seq"`
	Time         Time     `json:"time"`
	ModifiedAt   Time     `json:"modified_at"`
	Agent        string   `json:"agent"`
	AgentID      string   `json:"agent_id"`
	Connection   string   `json:"connection"`
	ConnectionID string   `json:"connection_id"`
	Class        string   `json:"class"`
	Kind         string   `json:"kind"` // exec, sftp, or admin for an admin's change
	Decision     string   `json:"decision"`
	Reason       string   `json:"reason"`
	ApprovalID   string   `json:"approval_id"`
	Deciders     []string `json:"deciders"`
	Operation    string   `json:"operation"`
	ExitStatus   *int     `json:"exit_status"` // null when it did not run or gave none
	DurationMS   float64  `json:"duration_ms"`
	BytesIn      int64    `json:"bytes_in"`
	BytesOut     int64    `json:"bytes_out"`
	AgentReason  string   `json:"agent_reason"`
	SourceAddr   string   `json:"source_addr"`
	// SessionID names the agent's SSH connection the row came from; ""
	// for a row no agent connection wrote (an admin's change).
	SessionID string `json:"session_id"`
	Hash      string `json:"hash"`
}

// AuditRowOf is r as an AuditRow.
func AuditRowOf(r store.AuditRow) AuditRow {
	deciders := r.Deciders
	if deciders == nil {
		deciders = []string{}
	}
	return AuditRow{ID: strconv.FormatInt(r.Seq, 10), Seq: r.Seq, Time: Time(r.Time), ModifiedAt: Time(r.Time),
		Agent: r.AgentName, AgentID: r.AgentID, Connection: r.ConnectionAlias, ConnectionID: r.ConnectionID,
		Class: r.Class, Kind: r.Kind, Decision: r.Decision, Reason: r.Reason, ApprovalID: r.ApprovalID,
		Deciders: deciders, Operation: r.Operation, ExitStatus: r.ExitStatus,
		DurationMS: float64(r.Duration) / float64(time.Millisecond), BytesIn: r.BytesIn, BytesOut: r.BytesOut,
		AgentReason: r.AgentReason, SourceAddr: r.SourceAddr, SessionID: r.SessionID, Hash: fmt.Sprintf("%x", r.Hash)}
}

// ChainStatus is the audit chain's verification.
type ChainStatus struct {
	Intact     bool        `json:"intact"`
	Rows       int64       `json:"rows"`
	Head       string      `json:"head"` // keep it elsewhere to catch a truncated log
	Broken     *ChainBreak `json:"broken"`
	VerifiedAt Time        `json:"verified_at"`
}

// ChainBreak is where the audit chain breaks.
type ChainBreak struct {
	Seq      int64  `json:"seq"`
	Position int64  `json:"position"`
	Reason   string `json:"reason"`
}

// Token is a console token: never its value, nor its hash.
type Token struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	Admin      string `json:"admin"` // "" for a token that belongs to no admin yet
	AdminID    string `json:"admin_id"`
	Scope      string `json:"scope"` // read, approve or admin
	CreatedAt  Time   `json:"created_at"`
	ModifiedAt Time   `json:"modified_at"`
	LastUsedAt Time   `json:"last_used_at"`
}

// TokenOf is t as a Token.
func TokenOf(t store.ConsoleToken) Token {
	return Token{ID: t.ID, Name: t.Name, Admin: t.AdminName, AdminID: t.AdminID, Scope: string(t.Scope),
		CreatedAt: Time(t.CreatedAt), ModifiedAt: Time(t.ModifiedAt), LastUsedAt: Time(t.LastUsedAt)}
}

// NewToken is the answer to making a token: the token, and its value, shown
// this once (postern keeps only its SHA-256).
type NewToken struct {
	Token Token  `json:"token"`
	Value string `json:"value"`
}

// Admin is an admin of the web page: never the password hash.
type Admin struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	Role       string `json:"role"`
	Disabled   bool   `json:"disabled"`
	CreatedAt  Time   `json:"created_at"`
	ModifiedAt Time   `json:"modified_at"`
}

// AdminOf is a as an Admin.
func AdminOf(a store.Admin) Admin {
	return Admin{ID: a.ID, Name: a.Name, Role: string(a.Role), Disabled: a.Disabled, CreatedAt: Time(a.CreatedAt),
		ModifiedAt: Time(a.ModifiedAt)}
}

// Channel is a notification channel. It has no field that could hold the
// URL's path or the secret: the URL is shown as scheme://host/…, and the
// secret only as whether there is one.
type Channel struct {
	ID             string   `json:"id"`
	Name           string   `json:"name"`
	Format         string   `json:"format"`
	URL            string   `json:"url"`    // scheme://host/…
	Events         []string `json:"events"` // pending, decided, audit.head
	SecretSet      bool     `json:"secret_set"`
	LastDeliveryAt Time     `json:"last_delivery_at"` // null if nothing was ever delivered
	LastFailureAt  Time     `json:"last_failure_at"`  // null if nothing ever failed
	LastError      string   `json:"last_error"`       // why the last failure failed
	Queued         int      `json:"queued"`           // notifications waiting to be (re)sent
	CreatedAt      Time     `json:"created_at"`
	ModifiedAt     Time     `json:"modified_at"`
}

// ChannelOf is c as a Channel.
func ChannelOf(c store.NotifyChannel) Channel {
	v := Channel{ID: c.ID, Name: c.Name, Format: string(c.Format), URL: c.URLShown, Events: []string{},
		SecretSet: c.HasSecret, LastDeliveryAt: Time(c.LastDeliveryAt), LastFailureAt: Time(c.LastFailureAt),
		LastError: c.LastError, Queued: c.Queued, CreatedAt: Time(c.CreatedAt), ModifiedAt: Time(c.ModifiedAt)}
	for _, e := range c.Events() {
		v.Events = append(v.Events, string(e))
	}
	return v
}

// Recipe is a recipe of the catalog, with its key as id. The catalog is
// compiled into postern, so a recipe has no modification time of its own:
// modified_at is always null, and version rises when its meaning changes.
type Recipe struct {
	ID string `json:"id"`
	recipes.PublicRecipe
	ModifiedAt Time `json:"modified_at"`
}

// RecipeOf is r as a Recipe.
func RecipeOf(r recipes.PublicRecipe) Recipe { return Recipe{ID: r.Key, PublicRecipe: r} }

// KeyCheck is one key check's outcome.
type KeyCheck struct {
	Status    string `json:"status"`  // store.KeyStatuses but unchecked
	Message   string `json:"message"` // in the target's words where it gave any
	Recipe    string `json:"recipe"`  // the recipe whose read ran, "" for none
	CheckedAt Time   `json:"checked_at"`
}

// ConnectionResult is the answer to a change of a connection (add, update,
// pin, rotate-key) and to a key check: the key check it ran and the
// connection as it now stands.
type ConnectionResult struct {
	// Stored is false when the change was refused after the check (a host
	// key mismatch, or a key not proved without allow_unverified):
	// Connection is then as it was before, or null for an add.
	Stored bool `json:"stored"`
	// Unchanged is true when the edit asked for what is stored already
	// (a re-pin of the pinned host key): nothing was checked or stored.
	Unchanged bool      `json:"unchanged"`
	Check     *KeyCheck `json:"check"` // null when no check ran
	// Probe is the read sandbox probe the change or check ran; null when
	// none ran. The connection records it, unless the probe could not run
	// on a target that did not change (found unprobed).
	Probe      *ReadSandboxProbe `json:"probe"`
	Connection *Connection       `json:"connection"`
	// Previous is the connection before the change, for a change that
	// replaced something (update, pin, rotate-key); null otherwise.
	Previous *Connection `json:"previous"`
	// StagedCheck is the check of the staged key that a key check or a
	// rotation's commit ran; null when none ran.
	StagedCheck *KeyCheck `json:"staged_check"`
	// Rotation says what a rotate-key did: staged, committed, aborted,
	// installed; "" for other changes. Steps are --install's steps in
	// order, each in words.
	Rotation string   `json:"rotation,omitempty"`
	Steps    []string `json:"steps,omitempty"`
}
