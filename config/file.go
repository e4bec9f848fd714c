package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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

	// dir is the directory of the file: relative file names in it are
	// relative to it.
	dir string
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
	// Limits.
	CommandRate        float64  `toml:"command_rate,omitempty"`
	CommandBurst       int      `toml:"command_burst,omitempty"`
	MaxSessionsPerConn int      `toml:"max_sessions_per_conn,omitempty"`
	HandshakeTimeout   Duration `toml:"handshake_timeout,omitempty"`
	APIRate            float64  `toml:"api_rate,omitempty"`
	APIBurst           int      `toml:"api_burst,omitempty"`
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

// maxFile bounds a config file and the files it names: keys and URLs are
// small, and a huge file is a mistake.
const maxFile = 1 << 20

// Load reads and parses path strictly: an unknown key, a wrong type or a
// duplicate table is an error that names the line.
func Load(path string) (*File, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if st.IsDir() || st.Size() > maxFile {
		return nil, fmt.Errorf("config: %s is a directory or over %d bytes", path, maxFile)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	f, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("config: %s: %w", path, err)
	}
	abs, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	f.dir = abs
	return f, nil
}

// Parse reads a file's bytes strictly; relative file names in it are
// relative to the working directory.
func Parse(b []byte) (*File, error) {
	var f File
	dec := toml.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, tomlError(err)
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

// readFile reads a file the config names, bounded; what names it in
// errors, never its content.
func (f *File) readFile(name, what string) ([]byte, error) {
	p := f.path(name)
	st, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if st.IsDir() || st.Size() > maxFile {
		return nil, fmt.Errorf("%s %s is a directory or over %d bytes", what, p, maxFile)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return b, nil
}
