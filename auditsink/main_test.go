package auditsink

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine a test starts (a Run, a receiver, an HTTP connection)
// must have ended when the tests do.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
