package bastion

import (
	"flag"
	"os"
	"testing"

	"github.com/postern/postern/internal/testpg"
)

// defaultParallel is how many of this package's parallel tests run at once
// when go test is not given -parallel (whose default is GOMAXPROCS). Each
// test drives a real sshd, a bastion and OpenSSH clients through handshakes
// and commands, and spends most of its time waiting on them rather than
// computing: on the 2-core machine of bench/RESULTS.md, eight at a time
// keep both cores busy where two leave them mostly idle.
const defaultParallel = "8"

// benchPG is the PostgreSQL server of the replicas' load benchmark, started
// by it and stopped by TestMain: durable, as a real installation runs.
var benchPG = testpg.Shared{Options: testpg.Options{Durable: true}}

// TestMain fails the package if any goroutine outlives its tests: the
// server, the pool and the relay promise that every goroutine they start
// ends on close. Tests that check their own goroutines use leakCheck and do
// not run in parallel (goleak cannot tell another test's goroutines from
// theirs); go test runs them first, before the parallel ones start.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", defaultParallel)
	}
	os.Exit(testpg.Main(m, true, &benchPG))
}
