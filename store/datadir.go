package store

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/crypto/ssh"
)

// Names of the files in a data directory.
const (
	DatabaseFile  = "postern.db"
	MasterKeyFile = "master.key"
	HostKeyFile   = "ssh_host_ed25519_key"
)

// Dir is one postern data directory: the database, the master key and the
// bastion's SSH host key. The zero MasterKeyFile means Path/master.key.
//
// With DatabaseURL set (postgres://...), the database is that PostgreSQL
// database instead of the directory's SQLite file; the master key and the
// host key are still files (never in the database), which every replica
// serving that database needs a copy of.
type Dir struct {
	Path          string // the directory
	MasterKeyFile string // from POSTERN_MASTER_KEY_FILE; "" for Path/master.key
	HostKeyFile   string // from --host-key-file; "" for Path/ssh_host_ed25519_key
	DatabaseURL   string // from --database; "" for SQLite in Path
}

// DatabasePath is the SQLite file.
func (d Dir) DatabasePath() string { return filepath.Join(d.Path, DatabaseFile) }

// Database names the database for logs and messages: the SQLite file, or
// the PostgreSQL URL without its password.
func (d Dir) Database() string {
	if d.DatabaseURL != "" {
		return RedactURL(d.DatabaseURL)
	}
	return d.DatabasePath()
}

// HostKeyPath is the bastion's own SSH host key (OpenSSH PEM, mode 0600).
func (d Dir) HostKeyPath() string {
	if d.HostKeyFile != "" {
		return d.HostKeyFile
	}
	return filepath.Join(d.Path, HostKeyFile)
}

// MasterKeyPath is the file holding the master key.
func (d Dir) MasterKeyPath() string {
	if d.MasterKeyFile != "" {
		return d.MasterKeyFile
	}
	return filepath.Join(d.Path, MasterKeyFile)
}

// InitResult says what Dir.Init created and what it found already there.
type InitResult struct {
	CreatedDir       bool
	CreatedMasterKey bool
	CreatedHostKey   bool
	CreatedDatabase  bool
	// HostKeyFingerprint is the SHA256 fingerprint of the bastion's host key,
	// for the admin to hand to agents' known_hosts.
	HostKeyFingerprint string
	// HostPublicKey is the host key in authorized_keys form.
	HostPublicKey string
}

// Init creates the data directory (mode 0700), the master key, the host key
// and the database, keeping any that already exist: running it twice is
// harmless, and it never replaces a master key, which would make every
// sealed key unreadable.
func (d Dir) Init(ctx context.Context, opts Options) (*InitResult, error) {
	var res InitResult
	if d.Path == "" {
		return nil, errors.New("store: empty data directory path")
	}
	if _, err := os.Stat(d.Path); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(d.Path, 0o700); err != nil {
			return nil, fmt.Errorf("store: create data directory: %w", err)
		}
		res.CreatedDir = true
	} else if err != nil {
		return nil, fmt.Errorf("store: data directory: %w", err)
	}
	// Before any secret goes in: MkdirAll's 0700 is less the umask, and
	// an existing directory may be open to others.
	if err := d.checkModes(opts.Logger, opts.SecretFiles); err != nil {
		return nil, err
	}
	if _, err := os.Stat(d.DatabasePath()); d.DatabaseURL == "" && errors.Is(err, fs.ErrNotExist) {
		res.CreatedDatabase = true
	}

	created, err := createFileExcl(d.MasterKeyPath(), func() ([]byte, error) {
		key := make([]byte, MasterKeySize)
		rand.Read(key) // never returns an error (Go 1.24+)
		return key, nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: create master key: %w", err)
	}
	res.CreatedMasterKey = created

	created, err = createFileExcl(d.HostKeyPath(), func() ([]byte, error) {
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, err
		}
		block, err := ssh.MarshalPrivateKey(priv, "postern host key")
		if err != nil {
			return nil, err
		}
		return pem.EncodeToMemory(block), nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: create host key: %w", err)
	}
	res.CreatedHostKey = created

	signer, err := d.HostKey()
	if err != nil {
		return nil, err
	}
	res.HostKeyFingerprint = ssh.FingerprintSHA256(signer.PublicKey())
	res.HostPublicKey = strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey())))

	s, err := d.Open(ctx, opts)
	if err != nil {
		return nil, err
	}
	if d.DatabaseURL != "" {
		res.CreatedDatabase = s.migratedFrom == 0
	}
	if err := s.Close(); err != nil {
		return nil, err
	}
	return &res, nil
}

// createFileExcl writes a new file with mode 0600 unless it exists already.
// The content is made only when needed. A half-written file is removed.
// With noContent it creates the empty file that SQLite then fills (the
// database, a backup), so that it is 0600 before it holds anything.
// noContent is createFileExcl's content for an empty file.
func noContent() ([]byte, error) { return nil, nil }

func createFileExcl(path string, content func() ([]byte, error)) (bool, error) {
	if _, err := os.Stat(path); err == nil {
		return false, nil
	}
	b, err := content()
	if err != nil {
		return false, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return false, nil // created concurrently; keep theirs
	}
	if err != nil {
		return false, err
	}
	err = f.Chmod(SecretMode) // exactly, whatever the umask
	if err == nil {
		_, err = f.Write(b)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return false, err
	}
	return true, nil
}

// Open opens the data directory's database, loading the master key if its
// file exists. First it keeps the directory and its secret files from group
// and others (CheckModes), logging what it changed to opts.Logger. A
// missing master key file is not an error here, so that commands that need
// no secret (listing agents, deciding approvals) work; the first sealed
// secret then fails with ErrNoMasterKey naming the file. A malformed master
// key file is an error at once.
//
// With a DatabaseURL the database is elsewhere and the directory holds
// only the secrets: when it does not exist, the store opens all the same
// (listing agents or deciding approvals from a laptop needs only the URL),
// and what needs the master key fails naming the file it lacks.
func (d Dir) Open(ctx context.Context, opts Options) (*Store, error) {
	st, err := os.Stat(d.Path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && d.DatabaseURL != "":
	case errors.Is(err, fs.ErrNotExist):
		// The directory is the one the person named (--data), not a secret.
		return nil, shown(ErrNotFound, fmt.Sprintf("data directory %s does not exist (run postern init --data %s)", d.Path, d.Path))
	case err != nil:
		return nil, fmt.Errorf("store: data directory: %w", err)
	case !st.IsDir():
		return nil, fmt.Errorf("store: data directory %s is not a directory", d.Path)
	default:
		if err := d.checkModes(opts.Logger, opts.SecretFiles); err != nil {
			return nil, err
		}
	}
	if opts.MasterKey == nil {
		key, err := d.readMasterKey()
		switch {
		case errors.Is(err, ErrNoMasterKey):
			opts.masterKeyErr = err
		case err != nil:
			return nil, err
		default:
			opts.MasterKey = key
		}
	}
	if d.DatabaseURL != "" {
		return OpenPostgres(ctx, d.DatabaseURL, opts)
	}
	return Open(ctx, d.DatabasePath(), opts)
}

// MasterKey reads the master key file: 32 raw bytes, or 64 hex digits (with
// an optional trailing newline) so that `openssl rand -hex 32` output works.
// A missing file gives an error wrapping ErrNoMasterKey.
func (d Dir) MasterKey() ([]byte, error) {
	key, err := d.readMasterKey()
	if errors.Is(err, ErrNoMasterKey) {
		return nil, fmt.Errorf("store: %w", err)
	}
	return key, err
}

// readMasterKey is MasterKey, except that the error for a missing file has no
// "store: " prefix, because it becomes the reason inside later errors.
func (d Dir) readMasterKey() ([]byte, error) {
	p := d.MasterKeyPath()
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: master key file %s does not exist", ErrNoMasterKey, p)
	}
	if err != nil {
		return nil, fmt.Errorf("store: read master key: %w", err)
	}
	if len(b) == MasterKeySize {
		return b, nil
	}
	if h := strings.TrimSpace(string(b)); len(h) == 2*MasterKeySize {
		if key, err := hex.DecodeString(h); err == nil {
			return key, nil
		}
	}
	// Say only the length: the content is a secret even when malformed.
	return nil, fmt.Errorf("store: master key file %s holds %d bytes; want %d raw bytes or %d hex digits", p, len(b), MasterKeySize, 2*MasterKeySize)
}

// HostKey loads the bastion's SSH host key as a signer.
func (d Dir) HostKey() (ssh.Signer, error) {
	b, err := os.ReadFile(d.HostKeyPath())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("store: host key %s does not exist (run postern init): %w", d.HostKeyPath(), ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: read host key: %w", err)
	}
	signer, err := ssh.ParsePrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("store: host key %s: %w", d.HostKeyPath(), err)
	}
	return signer, nil
}
