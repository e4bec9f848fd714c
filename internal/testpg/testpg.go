// Package testpg runs a throwaway PostgreSQL server for tests and
// benchmarks: initdb in a temporary directory, postgres on a free loopback
// port with its own settings, every test its own fresh database, and the
// server stopped (and its directory removed) by Stop. Tests of the store and
// of everything that runs several replicas use it, so that they meet
// PostgreSQL's behaviour (its locks, isolation and notifications) rather than
// a fake's.
//
// It uses Debian's postgresql-15 (/usr/lib/postgresql/15/bin, or the
// directory in POSTERN_PG_BIN). initdb and postgres refuse to run as root:
// as root the server runs as the postgres user (the process credentials are
// switched for the child; its directory is handed to that user). When
// PostgreSQL is not installed a test that needs it is skipped with a message
// naming the package, unless POSTERN_E2E=1, in which case it fails.
package testpg

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/goleak"

	"github.com/postern/postern/internal/e2e"
	"github.com/postern/postern/internal/testwait"
)

// DefaultBinDir is where Debian's postgresql-15 keeps its programs.
const DefaultBinDir = "/usr/lib/postgresql/15/bin"

// stopGrace is how long Stop lets postgres shut down before it kills it:
// a test server's data is thrown away, so a slow stop loses nothing.
const stopGrace = 15 * time.Second

// User is the superuser the server is created with; Password is accepted
// and ignored (loopback connections are trusted), so that URLs carry one
// the way real ones do and tests can check that it never leaks.
const (
	User     = "postern"
	Password = "testpg-secret-password"
)

// BinDir returns the directory of initdb and postgres, or "" if there is
// none.
func BinDir() string {
	dir := os.Getenv("POSTERN_PG_BIN")
	if dir == "" {
		dir = DefaultBinDir
	}
	if _, err := os.Stat(filepath.Join(dir, "postgres")); err != nil {
		return ""
	}
	return dir
}

// Require skips the test when PostgreSQL is missing, or fails it when
// POSTERN_E2E=1. It returns BinDir.
func Require(t testing.TB) string {
	t.Helper()
	if dir := BinDir(); dir != "" {
		return dir
	}
	e2e.Missing(t, "testpg: PostgreSQL", "postgresql-15 (or set POSTERN_PG_BIN)")
	return ""
}

// Options configure Start.
type Options struct {
	// Durable keeps PostgreSQL's default durability (fsync, synchronous
	// commit, full page writes). Tests leave it off: they need
	// PostgreSQL's semantics, not its crash safety, and a commit then
	// costs no disk flush. Benchmarks set it, to measure what a real
	// installation pays.
	Durable bool
	// Settings are extra -c NAME=VALUE settings.
	Settings []string
}

// Server is a running PostgreSQL server.
type Server struct {
	Host string // 127.0.0.1
	Port int
	Dir  string // the data directory and unix socket directory

	cmd  *exec.Cmd
	done chan struct{} // closed when postgres has exited
	err  error         // how it exited, once done is closed

	// logMu protects log, postgres's stderr.
	logMu sync.Mutex
	log   bytes.Buffer

	stopOnce sync.Once
	stopErr  error
}

// Start runs initdb and starts postgres, waiting until ctx ends for it to
// take connections. The caller must Stop it.
func Start(ctx context.Context, opts Options) (*Server, error) {
	bin := BinDir()
	if bin == "" {
		return nil, errors.New("testpg: PostgreSQL not found; install postgresql-15")
	}
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	parent, err := os.MkdirTemp("", "postern-testpg-")
	if err != nil {
		return nil, fmt.Errorf("testpg: %w", err)
	}
	dir := filepath.Join(parent, "data")
	if err := os.Mkdir(dir, 0o700); err != nil {
		os.RemoveAll(parent)
		return nil, fmt.Errorf("testpg: %w", err)
	}
	if cred != nil {
		// The parent must be enterable by the postgres user too.
		if err := os.Chmod(parent, 0o755); err != nil {
			os.RemoveAll(parent)
			return nil, fmt.Errorf("testpg: %w", err)
		}
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			os.RemoveAll(parent)
			return nil, fmt.Errorf("testpg: %w", err)
		}
	}
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", dir, "-U", User, "--auth=trust",
		"--encoding=UTF8", "--locale=C", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	initdb.Dir = dir
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(parent)
		return nil, fmt.Errorf("testpg: initdb: %v\n%s", err, out)
	}
	var s *Server
	for attempt := 0; ; attempt++ {
		port, err := freePort()
		if err != nil {
			os.RemoveAll(parent)
			return nil, err
		}
		s, err = start(ctx, bin, dir, port, cred, opts)
		if err == nil {
			break
		}
		if attempt == 2 {
			os.RemoveAll(parent)
			return nil, err
		}
		// Another process may have taken the port between freePort and
		// postgres binding it: try another.
	}
	return s, nil
}

// start starts postgres on port and waits until it takes connections or
// ctx ends.
func start(ctx context.Context, bin, dir string, port int, cred *syscall.Credential, opts Options) (*Server, error) {
	args := []string{"-D", dir, "-p", strconv.Itoa(port), "-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories=" + dir, "-c", "max_connections=200",
		"-c", "log_min_messages=warning", "-c", "shared_buffers=32MB"}
	if !opts.Durable {
		args = append(args, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	for _, kv := range opts.Settings {
		args = append(args, "-c", kv)
	}
	s := &Server{Host: "127.0.0.1", Port: port, Dir: dir, done: make(chan struct{})}
	s.cmd = exec.Command(filepath.Join(bin, "postgres"), args...)
	s.cmd.Dir = dir
	// postgres dies with the test binary, whatever ends it; its backends
	// follow the postmaster.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	s.cmd.Stderr = &lockedWriter{mu: &s.logMu, w: &s.log}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("testpg: start postgres: %w", err)
	}
	go func() {
		s.err = s.cmd.Wait()
		close(s.done)
	}()
	for {
		conn, err := pgx.Connect(ctx, s.URL("postgres"))
		if err == nil {
			conn.Close(context.Background())
			return s, nil
		}
		select {
		case <-s.done:
			return nil, fmt.Errorf("testpg: postgres exited: %v\n%s", s.err, s.Log())
		case <-ctx.Done():
			s.Stop()
			return nil, fmt.Errorf("testpg: postgres took no connections before the test's deadline: %v\n%s", err, s.Log())
		case <-time.After(50 * time.Millisecond): // the next try; postgres announces nothing
		}
	}
}

// credential returns the postgres user's credentials when running as root
// (initdb and postgres refuse root), and nil otherwise.
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("testpg: running as root needs the postgres user (from postgresql-15): %w", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("testpg: user postgres has uid %q gid %q", u.Uid, u.Gid)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// freePort finds a free loopback TCP port.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("testpg: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// URL is the connection URL of database db on s, with User and Password.
func (s *Server) URL(db string) string {
	return fmt.Sprintf("postgres://%s:%s@%s:%d/%s?sslmode=disable", User, Password, s.Host, s.Port, db)
}

// Addr is HOST:PORT of the server.
func (s *Server) Addr() string { return net.JoinHostPort(s.Host, strconv.Itoa(s.Port)) }

// CreateDatabase creates a new empty database with a random name and
// returns its URL.
func (s *Server) CreateDatabase(ctx context.Context) (string, error) {
	return s.createFrom(ctx, "")
}

// createFrom creates a database with a random name as a copy of template
// ("" for PostgreSQL's default, an empty one) and returns its URL.
// PostgreSQL refuses the copy while another session is connected to the
// template ("source database is being accessed by other users", SQLSTATE
// 55006): a session that the template's preparation closed can take a
// moment to leave, so that refusal is tried again until ctx ends.
func (s *Server) createFrom(ctx context.Context, template string) (string, error) {
	var b [6]byte
	rand.Read(b[:])
	name := "t_" + hex.EncodeToString(b[:])
	sql := "CREATE DATABASE " + name
	if template != "" {
		sql += " TEMPLATE " + pgx.Identifier{template}.Sanitize()
	}
	for {
		err := s.Exec(ctx, sql)
		var pgErr *pgconn.PgError
		if err == nil {
			return s.URL(name), nil
		}
		if !errors.As(err, &pgErr) || pgErr.Code != "55006" {
			return "", err
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("testpg: %s: %w", sql, err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// DropDatabase drops database name, ending the sessions still on it.
func (s *Server) DropDatabase(ctx context.Context, name string) error {
	return s.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
}

// NewDatabase is CreateDatabase for one test: the database is dropped when
// the test ends.
func (s *Server) NewDatabase(t testing.TB) string {
	t.Helper()
	return s.newDatabase(t, "")
}

// newDatabase creates a database for t as a copy of template ("" for an
// empty one) and drops it when t ends.
func (s *Server) newDatabase(t testing.TB, template string) string {
	t.Helper()
	u, err := s.createFrom(testwait.Context(t), template)
	if err != nil {
		t.Fatalf("testpg: %v", err)
	}
	cfg, err := pgx.ParseConfig(u)
	if err != nil {
		t.Fatalf("testpg: %v", err)
	}
	t.Cleanup(func() {
		// t's own context has ended by now: the drop has the deadline
		// alone.
		ctx, cancel := context.WithDeadline(context.Background(), testwait.Deadline(t))
		defer cancel()
		if err := s.DropDatabase(ctx, cfg.Database); err != nil {
			t.Errorf("testpg: drop database %s: %v", cfg.Database, err)
		}
	})
	return u
}

// Exec runs one statement as the superuser on the postgres database.
func (s *Server) Exec(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return fmt.Errorf("testpg: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("testpg: %s: %w", sql, err)
	}
	return nil
}

// Log returns what postgres wrote on stderr.
func (s *Server) Log() string {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	return s.log.String()
}

// Stop shuts postgres down (fast shutdown: sessions are ended), kills it if
// it has not exited within stopGrace, and removes its directory. It is
// safe to call more than once.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		s.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-s.done:
		case <-time.After(stopGrace):
			// A busy machine can make a shutdown slow; the data is thrown
			// away, so killing it loses nothing.
			s.cmd.Process.Kill()
			<-s.done
		}
		if err := os.RemoveAll(filepath.Dir(s.Dir)); err != nil && s.stopErr == nil {
			s.stopErr = fmt.Errorf("testpg: %w", err)
		}
	})
	return s.stopErr
}

// Shared starts one server for a whole test binary on first use, so that a
// run of tests that need none starts none. Its Stop belongs in TestMain,
// after m.Run (Main does both).
type Shared struct {
	Options Options
	// Template, if set, prepares a database that every NewDatabase then
	// copies (CREATE DATABASE … TEMPLATE), once per test binary: the
	// store's migrations, which cost each test more than the copy does.
	// It gets the template's URL and must close every session it opened
	// on it before it returns.
	Template func(ctx context.Context, url string) error

	once sync.Once
	srv  *Server
	err  error

	// tmplMu protects tmpl and tmplErr, set by the first NewDatabase.
	tmplMu  sync.Mutex
	tmpl    string // the template database's name; "" until made
	tmplErr error
}

// Get returns the shared server, starting it on the first call; it skips or
// fails t as Require does when PostgreSQL is missing, and fails t when the
// server does not start.
func (sh *Shared) Get(t testing.TB) *Server {
	t.Helper()
	Require(t)
	sh.once.Do(func() { sh.srv, sh.err = Start(testwait.Context(t), sh.Options) })
	if sh.err != nil {
		t.Fatal(sh.err)
	}
	if sh.srv == nil {
		t.Fatal("testpg: the shared server was stopped")
	}
	return sh.srv
}

// NewDatabase returns the URL of a new database for t on the shared
// server, a copy of the Template's database if there is one, dropped when t
// ends.
func (sh *Shared) NewDatabase(t testing.TB) string {
	t.Helper()
	srv := sh.Get(t)
	if sh.Template == nil {
		return srv.NewDatabase(t)
	}
	sh.tmplMu.Lock()
	if sh.tmpl == "" && sh.tmplErr == nil {
		sh.tmpl, sh.tmplErr = sh.makeTemplate(testwait.Context(t), srv)
	}
	tmpl, err := sh.tmpl, sh.tmplErr
	sh.tmplMu.Unlock()
	if err != nil {
		t.Fatalf("testpg: template database: %v", err)
	}
	return srv.newDatabase(t, tmpl)
}

// makeTemplate creates the template database and runs Template on it.
func (sh *Shared) makeTemplate(ctx context.Context, srv *Server) (string, error) {
	u, err := srv.CreateDatabase(ctx)
	if err != nil {
		return "", err
	}
	if err := sh.Template(ctx, u); err != nil {
		return "", err
	}
	cfg, err := pgx.ParseConfig(u)
	if err != nil {
		return "", fmt.Errorf("testpg: %w", err)
	}
	return cfg.Database, nil
}

// Stop stops the server if one was started.
func (sh *Shared) Stop() error {
	sh.once.Do(func() {}) // no server can start after this
	if sh.srv == nil {
		return nil
	}
	return sh.srv.Stop()
}

// lockedWriter serializes writes to w under mu.
type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Main runs m's tests, then stops the shared servers, then, when
// checkLeaks is set and everything passed, fails the test binary if a
// goroutine outlived its tests (goleak). It returns the exit code for
// os.Exit: a TestMain's whole body is os.Exit(testpg.Main(m, …)).
func Main(m *testing.M, checkLeaks bool, shared ...*Shared) int {
	code := m.Run()
	for _, sh := range shared {
		if err := sh.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	if code == 0 && checkLeaks {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	return code
}
