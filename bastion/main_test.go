package bastion

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/postern/postern/internal/testpg"
	"github.com/postern/postern/internal/testsshd"
)

// defaultParallel is how many of this package's parallel tests run at once
// when go test is not given -parallel (whose default is GOMAXPROCS). Each
// test drives a real sshd, a bastion and OpenSSH clients through handshakes
// and commands, and spends most of its time waiting on them rather than
// computing: on the 2-core machine of bench/RESULTS.md, eight at a time
// keep both cores busy where two leave them mostly idle.
const defaultParallel = "8"

// sharedTarget is the sshd of the tests that use a target without being about
// it (its start, its death, its keys or its log lines), started by the
// first of them. It accepts, besides what testsshd sets, the environment
// variables postern forwards (LANG, LC_*, GIT_PROTOCOL) and two it does not
// (TERM, FOO), so that a test sees postern drop them where the target
// would have taken them.
var sharedTarget = testsshd.Shared{Options: testsshd.Options{
	ExtraConfig: []string{"AcceptEnv LANG LC_* TERM GIT_PROTOCOL FOO"},
}}

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
	code := testpg.Main(m, true, &benchPG)
	if err := sharedTarget.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}
