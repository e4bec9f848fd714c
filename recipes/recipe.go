package recipes

import (
	"path"
	"regexp"
	"strings"

	"github.com/postern/postern/shellclass"
)

// Recipe is one kind of target, as loaded and validated from the catalog.
// Its exported fields are read-only after Load: a Catalog hands out the same
// *Recipe to every caller.
type Recipe struct {
	// PublicRecipe holds what the CLI and the API show.
	PublicRecipe

	// The fields below stay inside postern (see the package comment).

	Shell       shellclass.Dialect
	DefaultUser string // "" when the target has no usual user
	DefaultPort int

	// ExactReads are whole commands that are read on this target, compared
	// with the command's words joined by single spaces.
	ExactReads []string
	// Rules are checked in order; the first that matches raises a command to
	// write with its Why.
	Rules []Rule
	// KeyCheck is the harmless read that proves a key works.
	KeyCheck KeyCheck

	exact map[string]bool
	rules []compiledRule
}

// CredentialField is one value an admin supplies for a connection made from
// the recipe (an SSH private key, a certificate).
type CredentialField struct {
	Name     string `json:"name"`
	Label    string `json:"label"`
	Secret   bool   `json:"secret"` // sealed at rest, never shown again
	Required bool   `json:"required"`
}

// Rule kinds for Rule.Match.
const (
	MatchWord    = "word"    // any word of the command equals Value
	MatchPrefix  = "prefix"  // the words joined by single spaces start with Value
	MatchCommand = "command" // the command name (or its base name) equals Value
	MatchRegex   = "regex"   // a Go regexp matches the words joined by single spaces
)

// Rule raises a command to write. It has no class field on purpose: a recipe
// can only raise read to write, never make anything destructive, and the
// classifier clamps what a hook says anyway.
type Rule struct {
	Match string `json:"match"`
	Value string `json:"value"`
	Why   string `json:"why"` // shown to the admin deciding and the agent denied
}

// KeyCheck says how to prove a key works: run Command, a harmless read, or,
// with AuthOnly, only authenticate (git hosting offers no command to run:
// the server answers every session with a greeting and exit status 1).
type KeyCheck struct {
	Command  string `json:"command,omitempty"`
	AuthOnly bool   `json:"auth_only,omitempty"`
}

// compiledRule is a Rule ready to match; re is set for MatchRegex.
type compiledRule struct {
	Rule
	re *regexp.Regexp
}

// matches reports whether the rule applies to argv, the literal words of one
// simple command.
func (r *compiledRule) matches(argv []string) bool {
	if len(argv) == 0 {
		return false
	}
	switch r.Match {
	case MatchWord:
		for _, w := range argv {
			if w == r.Value {
				return true
			}
		}
	case MatchPrefix:
		return strings.HasPrefix(strings.Join(argv, " "), r.Value)
	case MatchCommand:
		// /usr/bin/psql is psql: a rule only raises, so matching the
		// base name as well can only make postern more careful.
		return argv[0] == r.Value || path.Base(argv[0]) == r.Value
	case MatchRegex:
		return r.re.MatchString(strings.Join(argv, " "))
	}
	return false
}
