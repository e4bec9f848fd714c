package policy

import (
	"strings"

	"github.com/postern/postern/store"
)

// Admins' changes in the audit log.
//
// What agents do is audited as operations (kinds exec and sftp); what admins
// change — an agent added, a connection re-pinned or re-keyed, a grant set,
// a token made — is audited in the same hash chain as rows of kind "admin"
// and decision "changed". Such a row uses the same encoding as every other
// row (chain version 3 since schema 0015, 2 before): the fields mean
//
//	kind        admin
//	decision    changed
//	class       ""
//	operation   the change, in words: "conn pin web: host key SHA256:a -> SHA256:b"
//	deciders    the one who made it: an admin's name, or cli:USER for the
//	            admin CLI (run by whoever holds the data directory)
//	reason      how it was made (via cli, web, api with the token's name,
//	            apply) and what a key check it ran found
//	source_addr the address of the web or API client; "" for the CLI
//	agent_*     the agent changed, if one was
//	connection_* the connection changed, if one was
//	session_id  "": an admin's change comes over no agent connection
//
// A new kind of row, not a new encoding: every field it needs already is in
// the chain, and Verify checks it like any other row. The row is written in
// the same transaction as the change (store.Audited), so that the log has
// every change that was made and none that was not.

// Admin is the kind of an admin's change in the audit log.
const Admin Kind = "admin"

// Changed is the outcome of an admin's change: it was made.
const Changed Outcome = "changed"

// Requested is the outcome of an admin's change that waits for a second
// admin: it was asked for, not made.
const Requested Outcome = "requested"

// Actor is who made a change and by which door.
type Actor struct {
	// Name is an admin's name, or "cli:" and the OS user for the admin CLI.
	Name string
	// Via is cli, web, api or apply.
	Via string
	// Token names the console token of an API call.
	Token string
	// Addr is the web or API client's address.
	Addr string
	// AdminID is the registered admin's id; "" for the CLI's OS user.
	AdminID string
	// Role is the most the door lets the actor do: a token's scope as a
	// role, a session's or --as admin's role, store.RoleOwner for the
	// server's CLI without --as (whoever holds the data directory). The
	// admin's role in the store, read at the change, bounds it again; ""
	// allows nothing.
	Role store.Role
}

// Change is one admin change to audit.
type Change struct {
	Actor Actor
	// What the change is, in words, starting with the command it
	// corresponds to ("conn pin web: ...").
	What string
	// Result is what the key check the change ran found, "" if none ran.
	Result string
	// Outcome is Changed unless the row records a change asked for
	// (Requested) or a second admin's denial of one (Denied).
	Outcome Outcome
	// Approver is the second admin whose approval made a change that
	// waited (the row's deciders are Actor and Approver).
	Approver string
	// The agent and connection the change is about, if any; a change that
	// creates one is filled in by the store when it knows the new id.
	AgentID, AgentName, ConnectionID, ConnectionAlias string
}

// ChangeAudit is the audit row of c, ready for store.Audited: it is
// appended in the transaction that makes the change.
func ChangeAudit(c Change) *store.PendingAudit {
	reason := "via " + c.Actor.Via
	if c.Actor.Token != "" {
		reason += " (token " + c.Actor.Token + ")"
	}
	if c.Result != "" {
		reason += "; key check: " + VisibleLine(c.Result)
	}
	clean := strings.NewReplacer(",", "_", "\n", " ").Replace
	name := clean(c.Actor.Name)
	if name == "" {
		name = "unknown"
	}
	deciders := []string{name}
	if c.Approver != "" {
		deciders = append(deciders, clean(c.Approver))
	}
	outcome := c.Outcome
	if outcome == "" {
		outcome = Changed
	}
	return &store.PendingAudit{
		Row: store.AuditRow{
			AgentID: c.AgentID, AgentName: c.AgentName,
			ConnectionID: c.ConnectionID, ConnectionAlias: c.ConnectionAlias,
			Kind: string(Admin), Decision: string(outcome), Reason: reason,
			Deciders: deciders, Operation: VisibleLine(c.What), SourceAddr: c.Actor.Addr,
			ChainVersion: chainCurrent,
		},
		Chain: ChainHash,
	}
}
