package auditsink

import (
	"context"
	"os"
	"testing"

	"github.com/postern/postern/internal/testpg"
	"github.com/postern/postern/store"
)

// testPG is the PostgreSQL server of the replica test, started by the
// first test that needs it; its databases are copies of a migrated one.
var testPG = testpg.Shared{Template: func(ctx context.Context, url string) error {
	s, err := store.OpenPostgres(ctx, url, store.Options{})
	if err != nil {
		return err
	}
	return s.Close()
}}

// Every goroutine a test starts (a Run, a receiver, an HTTP connection)
// must have ended when the tests do.
func TestMain(m *testing.M) {
	os.Exit(testpg.Main(m, true, &testPG))
}
