package auditsink

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/postern/postern/store"
)

// field is one key of a shipped record and how it is read from a row.
type field struct {
	key   string
	value func(r *store.AuditRow) any
}

// fields is the record every sink ships, in this order: one line per
// field, so that a field added to store.AuditRow is shipped by adding one
// line here. Nothing secret is in a row (the operation and the agent's
// reason are redacted where the row is written); the hash is the row's
// chain hash, which proves the order of the log and hides nothing.
// A function, not a variable, so that the package holds no mutable state.
func fields() []field {
	return []field{
		{"seq", func(r *store.AuditRow) any { return r.Seq }},
		{"time", func(r *store.AuditRow) any { return r.Time.UTC().Format(time.RFC3339Nano) }},
		{"hash", func(r *store.AuditRow) any { return hex.EncodeToString(r.Hash) }},
		{"agent", func(r *store.AuditRow) any { return r.AgentName }},
		{"agent_id", func(r *store.AuditRow) any { return r.AgentID }},
		{"connection", func(r *store.AuditRow) any { return r.ConnectionAlias }},
		{"connection_id", func(r *store.AuditRow) any { return r.ConnectionID }},
		{"class", func(r *store.AuditRow) any { return r.Class }},
		{"kind", func(r *store.AuditRow) any { return r.Kind }},
		{"decision", func(r *store.AuditRow) any { return r.Decision }},
		{"reason", func(r *store.AuditRow) any { return r.Reason }},
		{"approval_id", func(r *store.AuditRow) any { return r.ApprovalID }},
		{"deciders", func(r *store.AuditRow) any { return nonNil(r.Deciders) }},
		{"operation", func(r *store.AuditRow) any { return r.Operation }},
		{"exit", func(r *store.AuditRow) any { return r.ExitStatus }},
		{"duration_ms", func(r *store.AuditRow) any { return r.Duration.Milliseconds() }},
		{"bytes_in", func(r *store.AuditRow) any { return r.BytesIn }},
		{"bytes_out", func(r *store.AuditRow) any { return r.BytesOut }},
		{"source_addr", func(r *store.AuditRow) any { return r.SourceAddr }},
		{"agent_reason", func(r *store.AuditRow) any { return r.AgentReason }},
	}
}

// nonNil makes "no deciders" an empty JSON array rather than null.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Record is one row as shipped: a JSON object with the keys of fields, in
// their order, on one line (no newline inside: JSON escapes it).
func Record(r *store.AuditRow) ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range fields() {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(f.key)
		v, err := json.Marshal(f.value(r))
		if err != nil {
			return nil, fmt.Errorf("auditsink: encode %s of row %d: %w", f.key, r.Seq, err)
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}
