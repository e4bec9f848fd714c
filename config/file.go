package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/pelletier/go-toml/v2"
)

// File is a postern.toml.
type File struct {
	Serve       *Serve       `toml:"serve,omitempty" comment:"Settings of postern serve --config; command-line flags override them."`
	Agents      []Agent      `toml:"agent,omitempty"`
	Connections []Connection `toml:"connection,omitempty"`
	Grants      []Grant      `toml:"grant,omitempty"`
	Notify      []Channel    `toml:"notify,omitempty"`
	Admins      []Admin      `toml:"admin,omitempty"`

	// dir is the directory of the file: relative file names in it are
	// relative to it. source is the file's own path (absolute), "" when
	// it was parsed from bytes.
	dir    string
	source string
}

// Serve is the [serve] table: postern serve's settings.
type Serve struct {
	Data       string `toml:"data,omitempty"`
	SSHListen  string `toml:"ssh_listen,omitempty"`
	HTTPListen string `toml:"http_listen,omitempty"`
	// MetricsListen is where Prometheus scrapes /metrics (plain HTTP).
	MetricsListen string `toml:"metrics_listen,omitempty"`
	TLSCert       string `toml:"tls_cert,omitempty"`
	TLSKey        string `toml:"tls_key,omitempty"`
	PublicURL     string `toml:"public_url,omitempty"`
	LogLevel      string `toml:"log_level,omitempty"`
	// TTLs.
	ApprovalTTL     Duration `toml:"approval_ttl,omitempty"`
	SessionLifetime Duration `toml:"session_lifetime,omitempty"`
	KeyCheckTimeout Duration `toml:"key_check_timeout,omitempty"`
	// Limits.
	CommandRate        float64  `toml:"command_rate,omitempty"`
	CommandBurst       int      `toml:"command_burst,omitempty"`
	CommandWait        Duration `toml:"command_wait,omitempty"`
	MaxSessionsPerConn int      `toml:"max_sessions_per_conn,omitempty"`
	HandshakeTimeout   Duration `toml:"handshake_timeout,omitempty"`
	TerminalLife       Duration `toml:"terminal_life,omitempty"`
	APIRate            float64  `toml:"api_rate,omitempty"`
	APIBurst           int      `toml:"api_burst,omitempty"`

	// MaxPendingPerAgent and MaxPendingPerConnection bound the approval
	// requests that wait for a decision at once (policy.Options).
	MaxPendingPerAgent      int `toml:"max_pending_per_agent,omitempty"`
	MaxPendingPerConnection int `toml:"max_pending_per_connection,omitempty"`

	// RecordingBound is the bytes of output one recorded session keeps;
	// RecordingRetention how long recordings are kept.
	RecordingBound     int64    `toml:"recording_bound,omitempty"`
	RecordingRetention Duration `toml:"recording_retention,omitempty"`
	// AuditSinks are where every audit row is shipped, as --audit-sink
	// takes them ([NAME=]URL); the command line's replace them all.
	AuditSinks []string `toml:"audit_sinks,omitempty"`
}

// Admin declares an admin and role (viewer, approver, admin, owner;
// approver if empty). password_file (its first line) is read only to add
// the admin: apply never changes an existing admin's password, and an
// admin the file leaves out is kept, --prune or not (admins are removed by
// no file). Adding an admin or owner, or raising a role, waits for a
// second admin as from every door.
type Admin struct {
	Name         string `toml:"name"`
	Role         string `toml:"role,omitempty"`
	PasswordFile string `toml:"password_file,omitempty"`
}

// Agent declares an agent and its public keys.
type Agent struct {
	Name     string   `toml:"name"`
	Keys     []string `toml:"keys"`
	Disabled bool     `toml:"disabled,omitempty"`
}

// Connection declares a target. The key is key_file (relative to the
// file) or generate_key; with neither, an existing connection keeps its
// key. The host key is host_keys or accept_new_host_key (for a new
// connection; an existing one keeps its pin unless host_keys says
// otherwise).
type Connection struct {
	Alias            string   `toml:"alias"`
	Host             string   `toml:"host"`
	Port             int      `toml:"port,omitempty"`
	User             string   `toml:"user"`
	Env              string   `toml:"env,omitempty"`
	Recipe           string   `toml:"recipe,omitempty"`
	HostKeys         []string `toml:"host_keys,omitempty"`
	AcceptNewHostKey bool     `toml:"accept_new_host_key,omitempty"`
	KeyFile          string   `toml:"key_file,omitempty"`
	GenerateKey      bool     `toml:"generate_key,omitempty"`
	AllowUnverified  bool     `toml:"allow_unverified,omitempty"`
	// ReadSandbox is auto (when left out), require or off, with
	// ReadSandboxReason saying why for off (docs/config.md).
	ReadSandbox       string `toml:"read_sandbox,omitempty"`
	ReadSandboxReason string `toml:"read_sandbox_reason,omitempty"`
	// Record is off (when left out), exec or all: what of the
	// connection's sessions is recorded.
	Record string `toml:"record,omitempty"`
}

// Grant declares one agent's rules on one connection; a rule left out is
// a new grant's default (read allow, write deny, destructive deny).
type Grant struct {
	Agent       string `toml:"agent"`
	Connection  string `toml:"connection"`
	Read        string `toml:"read,omitempty"`
	Write       string `toml:"write,omitempty"`
	Destructive string `toml:"destructive,omitempty"`
}

// Channel declares a notification channel. The URL may carry a token, so
// the file should name a file holding it (url_file) rather than hold it;
// with neither, an existing channel keeps its URL. secret_file likewise.
type Channel struct {
	Name       string   `toml:"name"`
	Format     string   `toml:"format,omitempty"`
	URL        string   `toml:"url,omitempty"`
	URLFile    string   `toml:"url_file,omitempty"`
	SecretFile string   `toml:"secret_file,omitempty"`
	Events     []string `toml:"events,omitempty"`
}

// Duration is a Go duration written as a string ("2m", "12h").
type Duration time.Duration

// UnmarshalText reads "2m".
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("duration %q: want a number and a unit, such as 90s, 2m or 12h", b)
	}
	*d = Duration(v)
	return nil
}

// MarshalText writes "2m0s".
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// Bounds on the files apply reads. Each is far above what a real file of
// its kind holds and far below what would hurt; a larger file is a mistake
// (a log, an image, /dev/zero) and is refused by name before it is read.
const (
	// maxConfigFile bounds a postern.toml: hundreds of agents and
	// connections with their keys take tens of KiB.
	maxConfigFile = 1 << 20
	// maxKeyFile bounds a key_file: an OpenSSH private key of RSA 16384,
	// the largest ssh-keygen makes, is about 12 KiB.
	maxKeyFile = 64 << 10
	// maxURLFile bounds a url_file: the store takes a URL of up to 2 KiB.
	maxURLFile = 8 << 10
	// maxSecretFile bounds a secret_file: the store takes a secret of up
	// to store.MaxNotifySecretLen (4 KiB).
	maxSecretFile = 8 << 10
)

// Load reads and parses path strictly: an unknown key, a wrong type or a
// duplicate table is an error that names the line. path must be a regular
// file of at most maxConfigFile bytes.
//
// Its errors show control and invisible characters escaped: they quote
// the file's keys and name its path.
func Load(path string) (*File, error) {
	f, err := load(path)
	if err != nil {
		return nil, visibleError{err}
	}
	return f, nil
}

func load(path string) (*File, error) {
	b, err := readRegular(path, maxConfigFile, "a config file")
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	f, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("config: %s: %w", path, err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	f.dir, f.source = filepath.Dir(abs), abs
	return f, nil
}

// Parse reads a file's bytes strictly; relative file names in it are
// relative to the working directory. Its errors show control and
// invisible characters escaped.
func Parse(b []byte) (*File, error) {
	var f File
	dec := toml.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, visibleError{tomlError(err)}
	}
	return &f, nil
}

// tomlError says what is wrong and where, in one or two lines.
func tomlError(err error) error {
	var sm *toml.StrictMissingError
	if errors.As(err, &sm) {
		var lines []string
		for _, e := range sm.Errors {
			row, _ := e.Position()
			lines = append(lines, fmt.Sprintf("line %d: unknown key %s", row, strings.Join(e.Key(), ".")))
		}
		return errors.New(strings.Join(lines, "; "))
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		row, col := de.Position()
		return fmt.Errorf("line %d, column %d: %s", row, col, strings.TrimPrefix(de.Error(), "toml: "))
	}
	return err
}

// Marshal writes f as TOML.
func Marshal(f *File) ([]byte, error) {
	var buf bytes.Buffer
	enc := toml.NewEncoder(&buf)
	enc.SetIndentTables(false)
	enc.SetArraysMultiline(true)
	if err := enc.Encode(f); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return buf.Bytes(), nil
}

// path resolves a file name the file gives.
func (f *File) path(name string) string {
	if filepath.IsAbs(name) || f.dir == "" {
		return name
	}
	return filepath.Join(f.dir, name)
}

// readFile reads a file the config names (what: "key_file") of at most
// limit bytes; errors name the file, never its content.
func (f *File) readFile(name, what string, limit int64) ([]byte, error) {
	b, err := readRegular(f.path(name), limit, "a "+strings.TrimSuffix(what, "_file")+" file")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return b, nil
}

// readRegular reads the regular file at path, of at most limit bytes.
// Anything else is refused before a byte is read: a FIFO would block until
// a writer came, a device such as /dev/zero never ends, a directory is no
// content. The file is checked before it is opened (opening some devices
// does something) and again once open (it may have been replaced in
// between); it is opened non-blocking, so that even a FIFO swapped in at
// that moment cannot hang the open. kind names the file in the size error
// ("a key file").
func readRegular(path string, limit int64, kind string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if err := checkRegular(path, st, limit, kind); err != nil {
		return nil, err
	}
	file, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	if st, err = file.Stat(); err != nil {
		return nil, err
	}
	if err := checkRegular(path, st, limit, kind); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(file, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit { // it grew since the check
		return nil, tooLarge(path, limit, kind)
	}
	return b, nil
}

// checkRegular refuses what is not a regular file of at most limit bytes.
func checkRegular(path string, st fs.FileInfo, limit int64, kind string) error {
	m := st.Mode()
	var what string
	switch {
	case m.IsRegular():
		if st.Size() > limit {
			return tooLarge(path, limit, kind)
		}
		return nil
	case m.IsDir():
		what = "a directory"
	case m&fs.ModeNamedPipe != 0:
		what = "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		what = "a socket"
	case m&fs.ModeCharDevice != 0:
		what = "a character device"
	case m&fs.ModeDevice != 0:
		what = "a block device"
	default:
		what = "not a regular file"
	}
	return fmt.Errorf("%s: %s; give a regular file", path, what)
}

func tooLarge(path string, limit int64, kind string) error {
	return fmt.Errorf("%s: larger than %s, the most %s may hold", path, sizeText(limit), kind)
}

// sizeText shows a bound: "1 MiB", "64 KiB".
func sizeText(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
