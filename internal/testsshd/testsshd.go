// Package testsshd starts a real OpenSSH sshd on a loopback port for tests,
// with its own host key, its own authorized key and a minimal config. Tests
// of anything that speaks to a target (host key pinning, the relay, SFTP)
// use it so that they meet OpenSSH's behaviour rather than a fake's.
//
// When sshd is not installed the test is skipped with a message naming the
// openssh-server package, unless POSTERN_E2E=1, in which case it fails: CI
// sets that so that the end-to-end tests cannot silently stop running.
package testsshd

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/postern/postern/internal/e2e"
	"github.com/postern/postern/internal/testwait"
)

// Options configure Start.
type Options struct {
	// ExtraConfig lines are appended to sshd_config (for example
	// "MaxSessions 2").
	ExtraConfig []string
	// AuthorizedKeys are accepted in addition to Server.UserKey.
	AuthorizedKeys []ssh.PublicKey

	// MaxStartups, MaxSessions and MaxAuthTries set sshd's keywords of the
	// same names; sshd's defaults (10:30:100, 10 and 6) if zero. A load
	// test raises them so that the target is not what it measures. They
	// are written before ExtraConfig, and sshd keeps the first value of a
	// keyword, so they win over the same keyword there.
	MaxStartups  string // "start:rate:full", as sshd_config(5) says
	MaxSessions  int
	MaxAuthTries int

	// LogLevel is sshd's LogLevel; VERBOSE if empty. sshd's log is kept in
	// the test's memory (Server.Log), about 100 bytes per connection and
	// session at VERBOSE: a load test that measures the process's heap
	// sets ERROR.
	LogLevel string
}

// Server is a running sshd.
type Server struct {
	Addr string // "127.0.0.1:PORT"
	Host string // "127.0.0.1"
	Port int
	User string // the OS user the tests run as; sshd only lets it in

	HostKey        ssh.PublicKey // the server's ed25519 host key
	KnownHostsLine string        // "[127.0.0.1]:PORT ssh-ed25519 AAAA..."

	UserKey    ssh.Signer // authorized for User
	UserKeyPEM []byte     // the same key as an unencrypted OpenSSH PEM file

	Dir        string // holds sshd_config, keys and authorized_keys
	ConfigPath string
	// Home is the HOME of every login: an empty directory of the test's,
	// set through authorized_keys' environment= option on every key
	// (UserKey, Options.AuthorizedKeys, Authorize) and
	// PermitUserEnvironment HOME. The target's shell then reads no
	// ~/.bashrc of the machine's user: such a file can print into a
	// test's exact output (pyenv's rehash complains when shells start at
	// once) and can cost more than the whole SSH exchange (pyenv init
	// takes about 185 ms on the 2-core machine of bench/RESULTS.md). A
	// test that compares a command run directly with the same command
	// through postern sees the same HOME on both paths, since both log in
	// with keys of this file. The working directory stays the user's real
	// home (sshd changes to it before the environment applies).
	Home string

	sshd        string // path of the sshd binary
	hostKeyPath string

	cmd      *exec.Cmd
	done     chan struct{} // closed when sshd has exited; nil for a shared server
	logsInfo bool          // LogLevel shows INFO lines, "Server listening" among them

	// logFile, for a shared server, holds sshd's log instead of log
	// (below): sshd writes it itself, so that no goroutine of the test
	// binary copies it.
	logFile *os.File

	// logMu protects log, which collects sshd's stderr (-e), and logged,
	// which is closed and replaced at each write to it.
	logMu  sync.Mutex
	log    bytes.Buffer
	logged chan struct{}
}

// SSHDPath finds sshd: /usr/sbin/sshd, else PATH. It returns "" if absent.
func SSHDPath() string {
	if st, err := os.Stat("/usr/sbin/sshd"); err == nil && !st.IsDir() {
		return "/usr/sbin/sshd"
	}
	if p, err := exec.LookPath("sshd"); err == nil {
		return p
	}
	return ""
}

// Require skips the test when sshd is missing, or fails it when POSTERN_E2E=1.
// It returns the path of sshd.
func Require(t testing.TB) string {
	t.Helper()
	p := SSHDPath()
	if p != "" {
		return p
	}
	e2e.Missing(t, "testsshd: sshd", "openssh-server")
	return ""
}

// Start runs sshd -D -e on a free 127.0.0.1 port and stops it when the test
// ends.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	sshd := Require(t)
	s, err := start(t, sshd, t.TempDir(), opts, nil)
	if err != nil {
		t.Fatalf("testsshd: %v", err)
	}
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			t.Logf("testsshd: sshd log:\n%s", s.Log())
		}
	})
	return s
}

// start writes the keys and the configuration of a server in dir and runs
// sshd; t bounds the wait for sshd to listen. With logFile set, sshd
// writes its log there and the server starts no goroutine (see Shared);
// otherwise the log is kept in memory.
func start(t testing.TB, sshd, dir string, opts Options, logFile *os.File) (*Server, error) {
	u, err := user.Current()
	if err != nil {
		return nil, fmt.Errorf("current user: %w", err)
	}
	if os.Geteuid() == 0 {
		// sshd refuses to start without its privilege separation directory,
		// which a fresh container may lack.
		if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
			return nil, fmt.Errorf("create /run/sshd: %w", err)
		}
	}
	s := &Server{Host: "127.0.0.1", User: u.Username, Dir: dir, ConfigPath: filepath.Join(dir, "sshd_config"), logged: make(chan struct{}), logFile: logFile}
	switch strings.ToUpper(opts.LogLevel) {
	case "QUIET", "FATAL", "ERROR":
	default:
		s.logsInfo = true
	}

	hostKeyPath := filepath.Join(dir, "ssh_host_ed25519_key")
	s.sshd, s.hostKeyPath = sshd, hostKeyPath
	hostSigner, _, err := writeKey(hostKeyPath, "testsshd host key")
	if err != nil {
		return nil, err
	}
	s.HostKey = hostSigner.PublicKey()
	if s.UserKey, s.UserKeyPEM, err = writeKey(filepath.Join(dir, "id_ed25519"), "testsshd user key"); err != nil {
		return nil, err
	}

	s.Home = filepath.Join(dir, "home")
	if err := os.Mkdir(s.Home, 0o755); err != nil {
		return nil, err
	}
	var ak bytes.Buffer
	ak.WriteString(s.keyLine(string(ssh.MarshalAuthorizedKey(s.UserKey.PublicKey()))))
	for _, k := range opts.AuthorizedKeys {
		ak.WriteString(s.keyLine(string(ssh.MarshalAuthorizedKey(k))))
	}
	akPath := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(akPath, ak.Bytes(), 0o600); err != nil {
		return nil, err
	}

	// The port is found by listening and closing, so another process may
	// take it before sshd binds; try a few times.
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, fmt.Errorf("free port: %w", err)
		}
		s.Port = port
		s.Addr = net.JoinHostPort(s.Host, strconv.Itoa(port))
		cfg := []string{
			"Port " + strconv.Itoa(port),
			"ListenAddress 127.0.0.1",
			"HostKey " + hostKeyPath,
			"PidFile none",
			"UsePAM no",
			"StrictModes no",
			"AuthorizedKeysFile " + akPath,
			"PubkeyAuthentication yes",
			"PasswordAuthentication no",
			"KbdInteractiveAuthentication no",
			"PermitRootLogin prohibit-password",
			"AllowUsers " + u.Username,
			"Subsystem sftp internal-sftp",
		}
		if opts.LogLevel != "" {
			cfg = append(cfg, "LogLevel "+opts.LogLevel)
		} else {
			cfg = append(cfg, "LogLevel VERBOSE")
		}
		if opts.MaxStartups != "" {
			cfg = append(cfg, "MaxStartups "+opts.MaxStartups)
		}
		if opts.MaxSessions > 0 {
			cfg = append(cfg, "MaxSessions "+strconv.Itoa(opts.MaxSessions))
		}
		if opts.MaxAuthTries > 0 {
			cfg = append(cfg, "MaxAuthTries "+strconv.Itoa(opts.MaxAuthTries))
		}
		// Only HOME: the keys' environment= option cannot set anything
		// else (LD_PRELOAD, PATH).
		cfg = append(cfg, "PermitUserEnvironment HOME")
		cfg = append(cfg, opts.ExtraConfig...)
		if err := os.WriteFile(s.ConfigPath, []byte(strings.Join(cfg, "\n")+"\n"), 0o600); err != nil {
			return nil, err
		}
		if lastErr = s.resetLog(); lastErr != nil { // a failed attempt's log is in lastErr
			return nil, lastErr
		}
		if lastErr = s.run(t, sshd); lastErr == nil {
			break
		}
	}
	if lastErr != nil {
		return nil, lastErr
	}
	s.setKnownHostsLine()
	return s, nil
}

func (s *Server) setKnownHostsLine() {
	s.KnownHostsLine = fmt.Sprintf("[%s]:%d %s", s.Host, s.Port, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(s.HostKey))))
}

// keyLine returns an authorized_keys line for line (a key, or a key with
// options of its own) that sets HOME to s.Home, unless line sets an
// environment itself.
func (s *Server) keyLine(line string) string {
	line = strings.TrimSpace(line)
	if !strings.Contains(line, "environment=") {
		line = fmt.Sprintf("environment=\"HOME=%s\" %s", s.Home, line) // t.TempDir: no quotes in it
	}
	return line + "\n"
}

// listening is what sshd logs (at INFO) once it listens on its port.
const listening = "Server listening on "

// run starts sshd and waits until it listens: for its "Server listening"
// line, or where its LogLevel hides that line (or the log is a file), for
// its banner. An error says why it did not start (the port was taken,
// say), to try again.
func (s *Server) run(t testing.TB, sshd string) error {
	t.Helper()
	if s.logFile != nil {
		return s.runShared(t, sshd)
	}
	before := s.LogCount(listening)
	cmd := exec.Command(sshd, "-D", "-e", "-f", s.ConfigPath)
	cmd.Stdout = logWriter{s}
	cmd.Stderr = logWriter{s}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start sshd: %w", err)
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		close(done)
	}()
	exited := func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	}
	if s.logsInfo {
		if !s.waitLog(listening, before+1, testwait.Deadline(t), done) {
			cmd.Process.Kill()
			<-done
			return fmt.Errorf("sshd did not listen on %s by the test's deadline\n%s", s.Addr, s.Log())
		}
	} else {
		// Nothing is logged at this level: ask for the banner until it
		// comes or sshd exits.
		testwait.Until(t, "sshd to answer on "+s.Addr, func() bool { return exited() || banner(s.Addr) })
	}
	if exited() {
		return fmt.Errorf("sshd exited at start: %s\n%s", cmd.ProcessState, s.Log())
	}
	s.cmd, s.done = cmd, done
	return nil
}

// runShared is run for a shared server, which outlives the test that
// starts it: sshd writes its log to logFile itself, and nothing waits for
// it until Stop, so that no goroutine of the test binary is left running
// between tests (the packages that check for leaked goroutines would
// count them). Should the test binary die without Stop, sshd gets SIGKILL
// (Pdeathsig) rather than running on.
func (s *Server) runShared(t testing.TB, sshd string) error {
	t.Helper()
	cmd := exec.Command(sshd, "-D", "-e", "-f", s.ConfigPath)
	cmd.Stdout, cmd.Stderr = s.logFile, s.logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start sshd: %w", err)
	}
	// An exited sshd stays a zombie until it is waited for: that is how
	// its exit shows without a goroutine waiting on it.
	testwait.Until(t, "sshd to answer on "+s.Addr, func() bool { return zombie(cmd.Process.Pid) || banner(s.Addr) })
	if zombie(cmd.Process.Pid) {
		_ = cmd.Wait()
		return fmt.Errorf("sshd exited at start: %s\n%s", cmd.ProcessState, s.Log())
	}
	s.cmd = cmd
	return nil
}

// zombie reports whether process pid has exited and waits to be reaped
// (its state in /proc/PID/stat is Z); false where /proc is absent.
func zombie(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	// The command name in parentheses may hold spaces: the state is the
	// first field after its closing parenthesis.
	i := bytes.LastIndexByte(stat, ')')
	fields := strings.Fields(string(stat[i+1:]))
	return len(fields) > 0 && fields[0] == "Z"
}

// resetLog empties the log, before a new attempt to start sshd.
func (s *Server) resetLog() error {
	if s.logFile != nil {
		if err := s.logFile.Truncate(0); err != nil {
			return fmt.Errorf("truncate sshd's log: %w", err)
		}
		return nil
	}
	s.logMu.Lock()
	s.log.Reset()
	s.logMu.Unlock()
	return nil
}

// waitLog waits until sshd's log holds substr at least n times and
// reports whether it does; it gives up at end or when stop is closed.
// Every write to the log wakes it.
func (s *Server) waitLog(substr string, n int, end time.Time, stop <-chan struct{}) bool {
	timer := time.NewTimer(time.Until(end))
	defer timer.Stop()
	for {
		s.logMu.Lock()
		got := strings.Count(s.log.String(), substr)
		logged := s.logged
		s.logMu.Unlock()
		if got >= n {
			return true
		}
		select {
		case <-logged:
		case <-stop:
			return strings.Count(s.Log(), substr) >= n
		case <-timer.C:
			return false
		}
	}
}

// banner reports whether an SSH server answers on addr. A loopback dial is
// refused at once or connects; the read's deadline is the poll's own (the
// next check asks again), not a bound on sshd's start.
func banner(addr string) bool {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	buf := make([]byte, 4)
	_, err = c.Read(buf)
	return err == nil && string(buf) == "SSH-"
}

// LogCount counts the times substr occurs in sshd's log so far.
func (s *Server) LogCount(substr string) int {
	return strings.Count(s.Log(), substr)
}

// WaitLog waits until sshd's log holds substr at least n times (a line
// sshd writes when something reached it: "rcvd eow" at DEBUG2), and fails
// t if that does not happen by the test's deadline. It waits on the
// writes to the log, not on a clock.
func (s *Server) WaitLog(t testing.TB, substr string, n int) {
	t.Helper()
	s.notShared(t, "WaitLog")
	if !s.waitLog(substr, n, testwait.Deadline(t), nil) {
		t.Fatalf("testsshd: sshd's log holds %q %d times at the test's deadline; want at least %d", substr, s.LogCount(substr), n)
	}
}

// Stop kills sshd and waits for it. It is safe to call more than once; Start
// registers it with t.Cleanup.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Kill()
	if s.done == nil {
		s.cmd.Wait() // a shared server's sshd: nothing else waits for it
		s.cmd = nil
		return
	}
	<-s.done
}

// Kill ends sshd the hard way: SIGKILL to the listener and to every
// process it started (the per-connection sshd processes and the commands
// they run), as when a target crashes or is power-cycled. Connections to
// it drop at once, sessions included; Stop alone would leave the
// per-connection processes running. It is safe to call more than once.
func (s *Server) Kill() {
	if s.logFile != nil {
		panic("testsshd: Kill on a shared server, which other tests use; Start a server of the test's own")
	}
	if s.cmd == nil {
		return
	}
	// Collect the tree before killing: orphans are re-parented to init,
	// which would hide them. Per-connection sshd processes call setsid, so
	// a process group kill would not reach them either.
	tree := descendants(s.cmd.Process.Pid)
	s.cmd.Process.Kill()
	for _, pid := range tree {
		if p, err := os.FindProcess(pid); err == nil {
			p.Kill()
		}
	}
	<-s.done
}

// Restart starts sshd again on the same port with the same configuration
// and host key (after Kill or Stop, or to pick up a host key from
// NewHostKey). It fails t if sshd does not answer by the test's deadline.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.notShared(t, "Restart")
	s.Kill()
	if err := s.run(t, s.sshd); err != nil {
		t.Fatalf("testsshd: restart: %v", err)
	}
}

// NewHostKey gives the server a new host key, as a rebuilt machine has,
// and updates HostKey and KnownHostsLine. A running sshd keeps serving the
// old key until Restart.
func (s *Server) NewHostKey(t testing.TB) {
	t.Helper()
	s.notShared(t, "NewHostKey")
	signer, _, err := writeKey(s.hostKeyPath, "testsshd new host key")
	if err != nil {
		t.Fatalf("testsshd: %v", err)
	}
	s.HostKey = signer.PublicKey()
	s.setKnownHostsLine()
}

// Revoke removes from the server's authorized_keys every line that
// carries key (its base64 field), as a target's admin revokes a key; the
// other lines stay as they are.
func (s *Server) Revoke(t testing.TB, key ssh.PublicKey) {
	t.Helper()
	s.notShared(t, "Revoke")
	path := filepath.Join(s.Dir, "authorized_keys")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("testsshd: revoke: %v", err)
	}
	blob := strings.Fields(string(ssh.MarshalAuthorizedKey(key)))[1]
	var keep []string
	for _, l := range strings.SplitAfter(string(b), "\n") {
		if !slices.Contains(strings.Fields(l), blob) {
			keep = append(keep, l)
		}
	}
	if err := os.WriteFile(path, []byte(strings.Join(keep, "")), 0o600); err != nil {
		t.Fatalf("testsshd: revoke: %v", err)
	}
}

// Authorize appends line (an authorized_keys line) to the server's
// authorized_keys, as an admin installs a key on a target, with the HOME of
// every key (Home); sshd reads the file at each login, so it takes effect
// at once.
func (s *Server) Authorize(t testing.TB, line string) {
	t.Helper()
	s.notShared(t, "Authorize")
	f, err := os.OpenFile(filepath.Join(s.Dir, "authorized_keys"), os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatalf("testsshd: authorize: %v", err)
	}
	_, err = f.WriteString(s.keyLine(line))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("testsshd: authorize: %v", err)
	}
}

// descendants lists the processes below pid, read from /proc (Linux); it
// returns nil where /proc is absent.
func descendants(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// The command name in parentheses may hold spaces: the fields
		// after its closing parenthesis are state, then ppid.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(stat[i+1:]))
		if len(fields) < 2 {
			continue
		}
		ppid, err := strconv.Atoi(fields[1])
		if err != nil {
			continue
		}
		children[ppid] = append(children[ppid], child)
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// notShared fails t when s is a shared server: what method does would
// reach the other tests that use it.
func (s *Server) notShared(t testing.TB, method string) {
	t.Helper()
	if s.logFile != nil {
		t.Fatalf("testsshd: %s on a shared server, which other tests use; Start a server of the test's own", method)
	}
}

// Log returns what sshd has written so far.
func (s *Server) Log() string {
	if s.logFile != nil {
		b, err := os.ReadFile(s.logFile.Name())
		if err != nil {
			return fmt.Sprintf("(sshd's log: %v)", err)
		}
		return string(b)
	}
	s.logMu.Lock()
	defer s.logMu.Unlock()
	return s.log.String()
}

// logWriter appends sshd's output to the server's log under its lock.
type logWriter struct{ s *Server }

func (w logWriter) Write(p []byte) (int, error) {
	w.s.logMu.Lock()
	defer w.s.logMu.Unlock()
	close(w.s.logged)
	w.s.logged = make(chan struct{})
	return w.s.log.Write(p)
}

// ClientConfig logs in as User with UserKey and accepts only the host key.
// It sets no Timeout: a loopback dial connects or is refused at once, and a
// test bounds the rest by its own deadline.
func (s *Server) ClientConfig() *ssh.ClientConfig {
	return &ssh.ClientConfig{
		User:            s.User,
		Auth:            []ssh.AuthMethod{ssh.PublicKeys(s.UserKey)},
		HostKeyCallback: ssh.FixedHostKey(s.HostKey),
	}
}

// writeKey writes a new ed25519 key to path as an OpenSSH PEM file and
// returns its signer and the file's content.
func writeKey(path, comment string) (ssh.Signer, []byte, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	block, err := ssh.MarshalPrivateKey(priv, comment)
	if err != nil {
		return nil, nil, err
	}
	pemBytes := pem.EncodeToMemory(block)
	if err := os.WriteFile(path, pemBytes, 0o600); err != nil {
		return nil, nil, err
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return nil, nil, err
	}
	return signer, pemBytes, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
