package recipes

import (
	"strings"

	"github.com/postern/postern/shellclass"
)

// Options returns the classifier options for commands run on a target of
// this recipe: its shell dialect and a hook with its rules and exact reads.
// A nil recipe (a host no recipe claims) gets the zero Options, the built-in
// rules for bash, so that callers can pass Catalog.Match's answer straight
// in.
func (r *Recipe) Options() shellclass.Options {
	if r == nil {
		return shellclass.Options{}
	}
	return shellclass.Options{Dialect: r.Shell, Hook: hook{r}}
}

// hook applies one recipe's rules and exact reads. shellclass clamps what it
// says: it can neither lower a destructive command nor make one.
type hook struct{ r *Recipe }

// ExactRead is true only for a command that is, word for word, one of the
// recipe's exact reads.
func (h hook) ExactRead(argv []string) bool {
	return len(argv) > 0 && h.r.exact[strings.Join(argv, " ")]
}

// Raise returns the reason of the first rule that matches argv.
func (h hook) Raise(argv []string) (string, bool) {
	for i := range h.r.rules {
		if h.r.rules[i].matches(argv) {
			return h.r.rules[i].Why, true
		}
	}
	return "", false
}

var _ shellclass.Hook = hook{}
