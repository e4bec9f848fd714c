package bastion

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/postern/postern/internal/testpg"
)

// benchPG is the PostgreSQL server of the replicas' load benchmark, started
// by it and stopped by TestMain: durable, as a real installation runs.
var benchPG = testpg.Shared{Options: testpg.Options{Durable: true}}

// TestMain fails the package if any goroutine outlives its tests: the
// server, the pool and the relay promise that every goroutine they start
// ends on close. Tests that check their own goroutines use leakCheck.
func TestMain(m *testing.M) {
	code := m.Run()
	if err := benchPG.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
