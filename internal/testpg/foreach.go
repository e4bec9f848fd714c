package testpg

import (
	"slices"
	"strings"
	"testing"
)

// ForEachDB runs fn once on each database postern supports, as the
// subtests "sqlite" and "postgres"; the test's helpers pick the database
// with OnPostgres. The postgres run needs PostgreSQL: it is skipped
// without it, unless POSTERN_E2E=1, which makes it fail (Require).
//
// Each case has its own data directory or database, and most of its time
// is spent waiting on the database: the cases run in parallel, and each
// database's variant beside the other's.
func ForEachDB(t *testing.T, fn func(t *testing.T)) {
	t.Helper()
	t.Parallel()
	for _, name := range []string{"sqlite", "postgres"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fn(t)
		})
	}
}

// OnPostgres reports whether t runs in ForEachDB's postgres subtest.
func OnPostgres(t *testing.T) bool {
	return slices.Contains(strings.Split(t.Name(), "/"), "postgres")
}
