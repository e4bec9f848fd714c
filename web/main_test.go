package web

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine outlives its tests: the event
// hub, the janitor, live event streams and Serve promise to end with their
// context.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
