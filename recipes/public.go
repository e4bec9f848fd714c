package recipes

import (
	"crypto/rand"
	"encoding/hex"
)

// PublicRecipe is a recipe as the CLI and the REST API show it
// (GET /v1/recipes, GET /v1/recipes/{key}). It is built here, once, so that
// both answer the same. It leaves out the shell dialect, the default user
// and port, the exact reads, the rules and the key check: they stay inside
// postern (see the package comment).
type PublicRecipe struct {
	Key     string `json:"key"`  // unique, equal to the file name without .json
	Name    string `json:"name"` // for people: "Cisco IOS / IOS XE"
	Vendor  string `json:"vendor"`
	Version int    `json:"version"` // of the recipe, raised when its meaning changes

	Channel string `json:"channel"` // "ssh", the only channel postern relays
	Adapter string `json:"adapter"` // "ssh-key" or "ssh-cert": how the credential authenticates

	// Hosts are the patterns the recipe claims: an exact host name or
	// "*.suffix". Match picks the most specific one.
	Hosts []string `json:"hosts"`
	// ConnectionHosts and ConnectionDomains suggest where a connection made
	// from the recipe points; they are advice for the admin and play no part
	// in matching.
	ConnectionHosts   []string `json:"connection_hosts"`
	ConnectionDomains []string `json:"connection_domains"`

	CredentialFields []CredentialField `json:"credential_fields"`

	DocsURL   string `json:"docs_url"`   // how the target documents its SSH keys
	CreateURL string `json:"create_url"` // where a key is added; "" if nowhere in particular
	RevokeURL string `json:"revoke_url"` // where a key is removed; "" if nowhere in particular
	Notes     string `json:"notes"`
}

// Public returns the public view of r. Lists are never nil, so that JSON
// shows [] rather than null. The slices are copies: the caller may change
// them.
func (r *Recipe) Public() PublicRecipe {
	p := r.PublicRecipe
	p.Hosts = clone(r.Hosts)
	p.ConnectionHosts = clone(r.ConnectionHosts)
	p.ConnectionDomains = clone(r.ConnectionDomains)
	p.CredentialFields = clone(r.CredentialFields)
	return p
}

// PublicList is List in the public view: the data of GET /v1/recipes.
func (c *Catalog) PublicList(f Filter) []PublicRecipe {
	rs := c.List(f)
	out := make([]PublicRecipe, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.Public())
	}
	return out
}

// Response is the envelope of every JSON answer about recipes, the seed's
// shape: {"data": ..., "request_id": "..."}.
type Response struct {
	Data      any    `json:"data"`
	RequestID string `json:"request_id"`
}

// NewRequestID returns a fresh request id ("req_" and 16 hex digits) for an
// answer that has none from a server, such as the CLI's.
func NewRequestID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return "req_" + hex.EncodeToString(b[:])
}

func clone[T any](s []T) []T {
	return append(make([]T, 0, len(s)), s...)
}
