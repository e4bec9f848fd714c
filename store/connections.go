package store

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// Env is a connection's environment label. It changes what a grant may
// say: production forbids destructive=allow.
type Env string

// The environment labels, in rising order of care.
const (
	EnvDev        Env = "dev"
	EnvTest       Env = "test"
	EnvStaging    Env = "staging"
	EnvProduction Env = "production"
)

// Envs lists the valid labels in order.
var Envs = []Env{EnvDev, EnvTest, EnvStaging, EnvProduction}

// ParseEnv checks an environment label.
func ParseEnv(s string) (Env, error) {
	for _, e := range Envs {
		if string(e) == s {
			return e, nil
		}
	}
	return "", invalid("environment %q: want dev, test, staging or production", s)
}

// KeyStatus is what the last key check (a harmless read on the target that
// proves the key works, which the connection's recipe names) found. Every
// outcome is recorded, so that a list says what happened at the last check
// and not only the last thing proved.
type KeyStatus string

// Key check outcomes; KeyMessage says more about each.
const (
	KeyUnchecked       KeyStatus = "unchecked"         // never checked
	KeyOK              KeyStatus = "ok"                // the target accepted the key and ran the read
	KeyRejected        KeyStatus = "rejected"          // the target refused the key, in its words
	KeyUnreachable     KeyStatus = "unreachable"       // no answer, or no SSH handshake
	KeyHostKeyMismatch KeyStatus = "host_key_mismatch" // the target presented a key that is not pinned
	KeyUnproved        KeyStatus = "unproved"          // accepted, but the read failed: nothing proved
)

// KeyStatuses lists the outcomes, never checked first.
var KeyStatuses = []KeyStatus{KeyUnchecked, KeyOK, KeyRejected, KeyUnreachable, KeyHostKeyMismatch, KeyUnproved}

// ParseKeyStatus checks a key status word.
func ParseKeyStatus(s string) (KeyStatus, error) {
	for _, k := range KeyStatuses {
		if string(k) == s {
			return k, nil
		}
	}
	return "", invalid("key status %q: want one of unchecked, ok, rejected, unreachable, host_key_mismatch, unproved", s)
}

// KeyCheck is one key check's outcome as stored with a connection.
type KeyCheck struct {
	Status    KeyStatus
	Message   string
	CheckedAt time.Time // now if zero
}

// DefaultSSHPort is the port a connection uses unless told otherwise.
const DefaultSSHPort = 22

// Connection is one target the bastion relays to. The private key is not a
// field: it stays sealed in the database, and only ConnectionSigner and
// ConnectionPrivateKey open it, so that a Connection can be logged, listed
// and marshalled to JSON without any risk of carrying the key.
type Connection struct {
	ID           string
	Alias        string // the name agents use: ssh bastion ALIAS cmd
	Host         string
	Port         int
	User         string   // the user on the target
	HostKeys     []string // pinned keys, one known_hosts line each
	Recipe       string   // recipe key, "" when none was chosen
	Env          Env
	KeyStatus    KeyStatus
	KeyMessage   string    // what the target said at the last check
	KeyCheckedAt time.Time // zero if never checked
	CreatedAt    time.Time
	ModifiedAt   time.Time
	// ReadSandbox is the setting for read commands (auto, require, off),
	// ReadSandboxReason the admin's reason for off. SandboxFound is what
	// the last probe of the target found, SandboxMessage what each
	// mechanism did, SandboxProbedAt when (zero if never).
	ReadSandbox       ReadSandbox
	ReadSandboxReason string
	SandboxFound      SandboxFound
	SandboxMessage    string
	SandboxProbedAt   time.Time
	// Record is what of its sessions' output is recorded (RecordOff
	// unless an admin chose otherwise).
	Record Record
	// Staged is the key staged for a rotation (its public half and last
	// check), nil when none is (see StageConnectionKey).
	Staged *StagedKey
}

// Addr is host:port for dialing.
func (c *Connection) Addr() string {
	return net.JoinHostPort(c.Host, strconv.Itoa(c.Port))
}

// PinnedKeys parses HostKeys.
func (c *Connection) PinnedKeys() ([]ssh.PublicKey, error) {
	var keys []ssh.PublicKey
	for _, line := range c.HostKeys {
		_, k, err := ParseHostKeyLine(line)
		if err != nil {
			return nil, fmt.Errorf("store: connection %s: pinned host key: %w", c.Alias, err)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// HostKeyCallback accepts exactly the pinned keys, whatever name the target
// is reached by: the pin belongs to the connection, not to a host name. Any
// other key is refused with an error that names both fingerprints, because
// a changed host key is either a rebuilt server or an attack, and an admin
// must look.
func (c *Connection) HostKeyCallback() (ssh.HostKeyCallback, error) {
	pinned, err := c.PinnedKeys()
	if err != nil {
		return nil, err
	}
	if len(pinned) == 0 {
		return nil, fmt.Errorf("store: connection %s has no pinned host key", c.Alias)
	}
	alias := c.Alias
	return func(_ string, _ net.Addr, key ssh.PublicKey) error {
		got := key.Marshal()
		var want []string
		for _, p := range pinned {
			if bytes.Equal(p.Marshal(), got) {
				return nil
			}
			want = append(want, ssh.FingerprintSHA256(p))
		}
		return &HostKeyMismatchError{Alias: alias, Got: ssh.FingerprintSHA256(key), Want: want}
	}, nil
}

// HostKeyMismatchError is returned by Connection.HostKeyCallback when the
// target presents a key that is not pinned.
type HostKeyMismatchError struct {
	Alias string
	Got   string   // fingerprint the target presented
	Want  []string // pinned fingerprints
}

func (e *HostKeyMismatchError) Error() string {
	return fmt.Sprintf("store: HOST KEY MISMATCH for connection %s: target presented %s, pinned %s; refusing to connect",
		e.Alias, e.Got, strings.Join(e.Want, ", "))
}

// ParseHostKeyLine reads a pinned host key given as a known_hosts line
// ("host ssh-ed25519 AAAA...") or as a bare public key ("ssh-ed25519 AAAA...").
// It returns the line in known_hosts form. Markers (@cert-authority,
// @revoked) are refused: a pin is one concrete key.
func ParseHostKeyLine(line string) (string, ssh.PublicKey, error) {
	line = strings.TrimSpace(line)
	if line == "" {
		return "", nil, invalid("host key line is empty")
	}
	if strings.HasPrefix(line, "@") {
		return "", nil, invalid("host key line has a marker (%s); give a plain known_hosts line", strings.Fields(line)[0])
	}
	if marker, hosts, key, _, rest, err := ssh.ParseKnownHosts([]byte(line)); err == nil && marker == "" && len(bytes.TrimSpace(rest)) == 0 {
		return knownhosts.Line(hosts, key), key, nil
	}
	key, _, options, rest, err := ssh.ParseAuthorizedKey([]byte(line))
	if err != nil || len(options) > 0 || len(bytes.TrimSpace(rest)) > 0 {
		return "", nil, invalid("malformed host key line: want a known_hosts line or an OpenSSH public key")
	}
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key))), key, nil
}

// ValidateTarget checks a connection's host, port and target user, as
// CreateConnection and UpdateConnection do, so that a caller can refuse bad
// input before dialing anything.
func ValidateTarget(alias, host string, port int, user string) error {
	if host == "" || strings.ContainsAny(host, " \t\r\n/@") {
		return invalid("connection %s: host %q is not a host name or address", alias, host)
	}
	if port < 1 || port > 65535 {
		return invalid("connection %s: port %d out of range 1-65535", alias, port)
	}
	if user == "" || strings.ContainsAny(user, " \t\r\n@:/") {
		return invalid("connection %s: target user %q is not a user name", alias, user)
	}
	return nil
}

// NewConnection is the input of CreateConnection.
type NewConnection struct {
	Alias      string
	Host       string
	Port       int      // DefaultSSHPort if zero
	User       string   // the user on the target
	PrivateKey []byte   // an unencrypted private key file (OpenSSH or PEM)
	HostKeys   []string // at least one known_hosts line or public key
	Recipe     string
	Env        Env // EnvDev if empty
	// Check is the key check made before storing, recorded with the
	// connection; nil leaves it unchecked.
	Check *KeyCheck
	// ReadSandbox is the read sandbox setting (ReadSandboxAuto if empty),
	// with the reason that off needs; Probe is the probe made before
	// storing, nil for unprobed.
	ReadSandbox       ReadSandbox
	ReadSandboxReason string
	Probe             *SandboxProbe
	// Record is the recording setting (RecordOff if empty).
	Record Record
}

// CreateConnection validates and stores a connection, sealing its private
// key. The key must parse and must not need a passphrase: postern has no one
// to ask for it when it dials.
func (s *Store) CreateConnection(ctx context.Context, audit Audit, nc NewConnection) (*Connection, error) {
	ctx, err := audit.bind(ctx)
	if err != nil {
		return nil, err
	}
	if err := ValidateName("connection", nc.Alias); err != nil {
		return nil, err
	}
	if nc.Port == 0 {
		nc.Port = DefaultSSHPort
	}
	if err := ValidateTarget(nc.Alias, nc.Host, nc.Port, nc.User); err != nil {
		return nil, err
	}
	if nc.Env == "" {
		nc.Env = EnvDev
	}
	if _, err := ParseEnv(string(nc.Env)); err != nil {
		return nil, err
	}
	if err := CheckPrivateKey(nc.PrivateKey); err != nil {
		return nil, fmt.Errorf("store: connection %s: %w", nc.Alias, err)
	}
	if len(nc.HostKeys) == 0 {
		return nil, invalid("connection %s: no host key to pin", nc.Alias)
	}
	var pins []string
	for _, l := range nc.HostKeys {
		norm, _, err := ParseHostKeyLine(l)
		if err != nil {
			return nil, fmt.Errorf("store: connection %s: %w", nc.Alias, err)
		}
		pins = append(pins, norm)
	}
	check := KeyCheck{Status: KeyUnchecked}
	if nc.Check != nil {
		check = *nc.Check
		if _, err := ParseKeyStatus(string(check.Status)); err != nil {
			return nil, err
		}
		if check.CheckedAt.IsZero() {
			check.CheckedAt = s.nowUTC()
		}
	}
	if nc.ReadSandbox == "" {
		nc.ReadSandbox = ReadSandboxAuto
	}
	reason, err := checkReadSandbox(nc.Alias, nc.ReadSandbox, nc.ReadSandboxReason)
	if err != nil {
		return nil, err
	}
	if nc.Record == "" {
		nc.Record = RecordOff
	}
	if _, err := ParseRecord(string(nc.Record)); err != nil {
		return nil, err
	}
	probe := SandboxProbe{Found: SandboxUnprobed}
	if nc.Probe != nil {
		if probe, err = s.checkSandboxProbe(*nc.Probe); err != nil {
			return nil, err
		}
	}
	id := newID(prefixConnection)
	sealed, err := s.sealFor(nc.PrivateKey, id)
	if err != nil {
		return nil, err
	}
	now := formatTime(s.nowUTC())
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := connectionIDByAlias(ctx, tx, nc.Alias); err == nil {
			return &ConflictError{Kind: "connection", Value: nc.Alias}
		} else if !errors.Is(err, ErrNotFound) {
			return err
		}
		_, err := tx.ExecContext(ctx, `
			INSERT INTO connections (id, alias, host, port, target_user, sealed_key, host_keys,
			                         recipe, env, check_status, key_message, key_checked_at, created_at, modified_at,
			                         read_sandbox, read_sandbox_reason, sandbox_found, sandbox_message, sandbox_probed_at, record)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			id, nc.Alias, nc.Host, nc.Port, nc.User, sealed, strings.Join(pins, "\n"),
			nc.Recipe, string(nc.Env), string(check.Status), check.Message, formatTime(check.CheckedAt), now, now,
			string(nc.ReadSandbox), reason, string(probe.Found), probe.Message, formatTime(probe.ProbedAt), string(nc.Record))
		if isUniqueViolation(err) {
			return &ConflictError{Kind: "connection", Value: nc.Alias}
		}
		if err != nil {
			return fmt.Errorf("store: add connection %s: %w", nc.Alias, err)
		}
		noteAuditSubject(ctx, "", "", id, nc.Alias)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s.ConnectionByID(ctx, id)
}

// CheckPrivateKey makes sure a private key file parses and needs no
// passphrase, so that it can be used unattended. Errors wrap ErrInvalid and
// never quote the key. CreateConnection calls it; the CLI calls it too, to
// refuse a bad key before dialing the target.
func CheckPrivateKey(key []byte) error {
	if len(bytes.TrimSpace(key)) == 0 {
		return invalid("private key is empty")
	}
	_, err := ssh.ParsePrivateKey(key)
	var pm *ssh.PassphraseMissingError
	switch {
	case errors.As(err, &pm):
		return invalid("private key is protected by a passphrase; give an unencrypted copy (ssh-keygen -p -N '' -f COPY)")
	case err != nil:
		return invalid("private key does not parse: %v", err)
	}
	return nil
}

// SetKeyStatus records the outcome of a key check and its time (now).
func (s *Store) SetKeyStatus(ctx context.Context, alias string, status KeyStatus, message string) (*Connection, error) {
	if _, err := ParseKeyStatus(string(status)); err != nil {
		return nil, err
	}
	now := formatTime(s.nowUTC())
	return s.updateConnection(ctx, alias, func(tx *sql.Tx, id string) error {
		_, err := tx.ExecContext(ctx, `
			UPDATE connections SET check_status = ?, key_message = ?, key_checked_at = ?, modified_at = ?
			WHERE id = ?`, string(status), message, now, now, id)
		if err != nil {
			return fmt.Errorf("store: update connection %s: %w", alias, err)
		}
		return nil
	})
}

// RemoveConnection deletes a connection with its grants and approval
// requests (ON DELETE CASCADE) and its lock (which no foreign key ties to
// it: see TestLockGoesWithItsTarget). Audit rows copy the alias and stay.
func (s *Store) RemoveConnection(ctx context.Context, audit Audit, alias string) error {
	ctx, err := audit.bind(ctx)
	if err != nil {
		return err
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM locks WHERE target_kind = 'connection'
			AND target_id IN (SELECT id FROM connections WHERE alias = ?)`, alias); err != nil {
			return fmt.Errorf("store: remove connection %s's lock: %w", alias, err)
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM connections WHERE alias = ?`, alias)
		if err != nil {
			return fmt.Errorf("store: remove connection %s: %w", alias, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return notFound("connection", alias)
		}
		return nil
	})
}

// ConnectionByAlias returns the connection with that alias.
func (s *Store) ConnectionByAlias(ctx context.Context, alias string) (*Connection, error) {
	cs, err := s.queryConnections(ctx, `WHERE alias = ?`, alias)
	if err != nil {
		return nil, err
	}
	if len(cs) == 0 {
		return nil, notFound("connection", alias)
	}
	return &cs[0], nil
}

// ConnectionByID returns the connection with that id.
func (s *Store) ConnectionByID(ctx context.Context, id string) (*Connection, error) {
	cs, err := s.queryConnections(ctx, `WHERE id = ?`, id)
	if err != nil {
		return nil, err
	}
	if len(cs) == 0 {
		return nil, notFound("connection id", id)
	}
	return &cs[0], nil
}

// ListConnections returns every connection, by alias.
func (s *Store) ListConnections(ctx context.Context) ([]Connection, error) {
	return s.queryConnections(ctx, "")
}

// ConnectionPrivateKey opens the sealed private key of a connection, for the
// relay alone. The bytes are the key file as it was given; callers must not
// keep, log or return them.
func (s *Store) ConnectionPrivateKey(ctx context.Context, id string) ([]byte, error) {
	var alias string
	var box []byte
	err := s.queryRow(ctx, `SELECT alias, sealed_key FROM connections WHERE id = ?`, id).Scan(&alias, &box)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("connection id", id)
	}
	if err != nil {
		return nil, fmt.Errorf("store: read connection %s: %w", id, err)
	}
	return s.openFor(box, id, "connection "+alias)
}

// ConnectionSigner opens the sealed private key of a connection as an
// ssh.Signer, which is all the relay needs to authenticate upstream.
func (s *Store) ConnectionSigner(ctx context.Context, id string) (ssh.Signer, error) {
	key, err := s.ConnectionPrivateKey(ctx, id)
	if err != nil {
		return nil, err
	}
	signer, err := ssh.ParsePrivateKey(key)
	clear(key)
	if err != nil {
		// The key parsed when it was stored, so this is damage, not input.
		return nil, fmt.Errorf("store: connection %s: stored private key does not parse", id)
	}
	return signer, nil
}

func (s *Store) queryConnections(ctx context.Context, where string, args ...any) ([]Connection, error) {
	rows, err := s.query(ctx, `
		SELECT id, alias, host, port, target_user, host_keys, recipe, env,
		       check_status, key_message, key_checked_at, created_at, modified_at,
		       read_sandbox, read_sandbox_reason, sandbox_found, sandbox_message, sandbox_probed_at, record,
		       staged_public, staged_at, staged_status, staged_message, staged_checked_at
		FROM connections `+where+` ORDER BY alias`, args...)
	return collect(rows, err, "list connections", scanConnection)
}

func scanConnection(r rowScanner) (Connection, error) {
	var (
		c                          Connection
		hostKeys, env, status      string
		checked, created, modified string
		sandbox, found, probed     string
		record                     string
		stLine, stAt, stStatus     string
		stMessage, stChecked       string
	)
	err := r.Scan(&c.ID, &c.Alias, &c.Host, &c.Port, &c.User, &hostKeys, &c.Recipe, &env,
		&status, &c.KeyMessage, &checked, &created, &modified,
		&sandbox, &c.ReadSandboxReason, &found, &c.SandboxMessage, &probed, &record,
		&stLine, &stAt, &stStatus, &stMessage, &stChecked)
	if err != nil {
		return c, err
	}
	if err := scanStaged(&c, stLine, stAt, stStatus, stMessage, stChecked); err != nil {
		return c, err
	}
	c.Env, c.KeyStatus = Env(env), KeyStatus(status)
	c.ReadSandbox, c.SandboxFound = ReadSandbox(sandbox), SandboxFound(found)
	c.Record = Record(record)
	if c.SandboxProbedAt, err = parseTime(probed); err != nil {
		return c, err
	}
	if hostKeys != "" {
		c.HostKeys = strings.Split(hostKeys, "\n")
	}
	if c.KeyCheckedAt, err = parseTime(checked); err != nil {
		return c, err
	}
	if c.CreatedAt, err = parseTime(created); err != nil {
		return c, err
	}
	c.ModifiedAt, err = parseTime(modified)
	return c, err
}

func connectionIDByAlias(ctx context.Context, tx *sql.Tx, alias string) (string, error) {
	var id string
	err := tx.QueryRowContext(ctx, `SELECT id FROM connections WHERE alias = ?`, alias).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", notFound("connection", alias)
	}
	if err != nil {
		return "", fmt.Errorf("store: find connection %s: %w", alias, err)
	}
	return id, nil
}

// updateConnection runs fn, in one transaction, on the connection with
// that alias (fn gets its id) and answers the connection as fn left it:
// the frame every write to one connection row shares, so that each of
// them is only its own UPDATE.
func (s *Store) updateConnection(ctx context.Context, alias string, fn func(tx *sql.Tx, id string) error) (*Connection, error) {
	var id string
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		if id, err = connectionIDByAlias(ctx, tx, alias); err != nil {
			return err
		}
		return fn(tx, id)
	})
	if err != nil {
		return nil, err
	}
	return s.ConnectionByID(ctx, id)
}
