package testsshd

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// Shared is one sshd for a whole test binary, started by the first test
// that asks for it, so that a run of tests that need none starts none. It
// is for the tests that use a target without being about it: its start,
// its death, its keys or its log. Those Start a server of their own; a
// shared server refuses Kill, Restart, NewHostKey, Authorize and WaitLog.
//
// A package's tests run in parallel against it, so it raises sshd's limits
// on connections and sessions (Options.MaxStartups, MaxSessions) to where
// no test meets them unless it sets them itself. Its Stop belongs in
// TestMain, after m.Run.
//
// A server of its own costs a test an sshd start, about 30 ms of CPU and
// 50 ms on a 2-core machine; the bastion package's tests started about a
// hundred.
type Shared struct {
	// Options configure the server; MaxStartups and MaxSessions default
	// to SharedMaxStartups and SharedMaxSessions. LogLevel sets what
	// sshd writes to its log file (Server.Log reads it).
	Options Options

	once sync.Once
	srv  *Server
	err  error
	dir  string
}

// SharedMaxStartups and SharedMaxSessions are a shared server's limits
// unless Options sets them: every test of a package may connect at once
// (sshd's default MaxStartups, 10:30:100, starts refusing at 10
// unauthenticated connections), and one test may open up to 100 sessions
// on one connection.
const (
	SharedMaxStartups = "1000:30:2000"
	SharedMaxSessions = 100
)

// Get returns the shared server, starting it on the first call; it skips or
// fails t as Require does when sshd is missing, and fails t when the
// server did not start (in this test or an earlier one).
func (sh *Shared) Get(t testing.TB) *Server {
	t.Helper()
	sshd := Require(t)
	sh.once.Do(func() {
		// Should start end t (a failed wait ends its goroutine), the
		// tests after it learn why they have no server.
		sh.err = errors.New("it did not start in an earlier test")
		sh.srv, sh.err = sh.start(t, sshd)
	})
	if sh.err != nil {
		t.Fatalf("testsshd: shared server: %v", sh.err)
	}
	if sh.srv == nil {
		t.Fatal("testsshd: the shared server was stopped")
	}
	return sh.srv
}

// start starts the server in a directory of its own, which outlives the
// test that happens to start it.
func (sh *Shared) start(t testing.TB, sshd string) (*Server, error) {
	dir, err := os.MkdirTemp("", "testsshd-shared-")
	if err != nil {
		return nil, err
	}
	sh.dir = dir
	logFile, err := os.OpenFile(filepath.Join(dir, "sshd.log"), os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	opts := sh.Options
	if opts.MaxStartups == "" {
		opts.MaxStartups = SharedMaxStartups
	}
	if opts.MaxSessions == 0 {
		opts.MaxSessions = SharedMaxSessions
	}
	srv, err := start(t, sshd, dir, opts, logFile)
	if err != nil {
		logFile.Close()
		return nil, err
	}
	return srv, nil
}

// Stop stops the server if one was started and removes its directory. No
// server can start after it.
func (sh *Shared) Stop() error {
	sh.once.Do(func() {})
	var errs []error
	if sh.srv != nil {
		sh.srv.Stop()
		errs = append(errs, sh.srv.logFile.Close())
		sh.srv = nil
	}
	if sh.dir != "" {
		if err := os.RemoveAll(sh.dir); err != nil {
			errs = append(errs, fmt.Errorf("testsshd: remove the shared server's directory: %w", err))
		}
	}
	return errors.Join(errs...)
}
