package bastion

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine outlives its tests: the
// server, the pool and the relay promise that every goroutine they start
// ends on close. Tests that check their own goroutines use leakCheck.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
