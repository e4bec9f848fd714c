package manage

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/postern/postern/internal/usererr"
	"github.com/postern/postern/model"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/recipes"
	"github.com/postern/postern/store"
)

// ConnectionSpec describes a connection to add.
type ConnectionSpec struct {
	Alias  string
	Host   string
	Port   int // store.DefaultSSHPort if zero
	User   string
	Env    store.Env // dev if empty
	Recipe string    // "" lets the host pick one when the bastion connects
	// The target's host key: HostKeys (known_hosts lines or public keys),
	// or AcceptNewHostKey to fetch and pin the one it presents now.
	HostKeys         []string
	AcceptNewHostKey bool
	// The key postern authenticates with: PrivateKey (an unencrypted key
	// file), or GenerateKey to make an ed25519 key pair whose private half
	// exists only sealed in the database.
	PrivateKey  []byte
	GenerateKey bool
	// ReadSandbox is the setting for read commands (auto if empty), with
	// the reason that off needs (see store.ReadSandbox). The add probes
	// the target for the sandbox it supports once its key check passes.
	ReadSandbox       store.ReadSandbox
	ReadSandboxReason string
	// Record is what of its sessions' output is recorded (off if empty).
	Record store.Record
}

// ConnectionEdit is a change to a connection: nil fields (and empty
// HostKeys and PrivateKey) keep what is stored.
type ConnectionEdit struct {
	Host             *string
	Port             *int
	User             *string
	Env              *store.Env
	Recipe           *string
	HostKeys         []string // re-pin
	AcceptNewHostKey bool     // re-pin to what the target presents now
	PrivateKey       []byte   // re-key
	GenerateKey      bool     // re-key with a key pair made here
	// ReadSandbox changes the read sandbox setting, with the reason off
	// needs.
	ReadSandbox       *store.ReadSandbox
	ReadSandboxReason string
	// Record changes the recording setting. Lowering it on a production
	// connection waits for a second admin: what is not recorded cannot be
	// reviewed afterwards.
	Record *store.Record
}

// CheckOptions say what becomes of a change whose key check does not prove
// the key.
type CheckOptions struct {
	// AllowUnverified stores a change whose check was rejected,
	// unreachable or unproved (never a host key mismatch).
	AllowUnverified bool
	// NoCheck stores without dialing the target; the status becomes
	// unchecked.
	NoCheck bool
	// Timeout bounds the check (and a host key scan); the Checker's if zero.
	Timeout time.Duration
}

// ConnectionResult is what a change or a check of a connection did.
type ConnectionResult struct {
	Conn     *store.Connection // as it now stands; nil when an add stored nothing
	Previous *store.Connection // before an edit; nil for an add
	Stored   bool              // the change was made
	Checked  bool              // a key check ran; Check and Recipe hold it
	Check    recipes.Result
	Recipe   string // the recipe whose read the check ran, "" for none
	// PublicKey is the public half of the key the connection uses (or
	// would have used): the line for the target's authorized_keys.
	PublicKey ssh.PublicKey
	// PreviousPublicKey is the public half of the key before an edit.
	PreviousPublicKey ssh.PublicKey
	Generated         bool // the key was made by GenerateKey
	// ScannedHostKey is the host key AcceptNewHostKey fetched, nil if none.
	ScannedHostKey ssh.PublicKey
	// Probed: the target was probed for its read sandbox; Probe is what
	// the probe found (recorded with the connection unless the probe
	// could not run, see probeAfter).
	Probed bool
	Probe  store.SandboxProbe
	// Unchanged: the edit asked for what is already stored (a re-pin of
	// the pinned host key), so nothing was checked, stored or audited.
	Unchanged bool
	// StagedPublicKey is the public half of the key staged for a rotation
	// (rotate.go), nil if none; StagedChecked says a check of it ran, and
	// StagedCheck holds its outcome.
	StagedPublicKey ssh.PublicKey
	StagedChecked   bool
	StagedCheck     recipes.Result
	// Rotation is what a rotate-key did (Rotation*), "" for other
	// changes; Steps are InstallKey's steps in words.
	Rotation string
	Steps    []string
}

// NotStoredError says that a change was refused after its key check: a
// host key mismatch, or a key not proved without AllowUnverified.
type NotStoredError struct {
	Alias  string
	Result recipes.Result
}

func (e *NotStoredError) Error() string { return "manage: " + e.words() }

// Unwrap is the refusal in the admin's words, a *usererr.Error: the
// alias and the check's result, which the admin asked for.
func (e *NotStoredError) Unwrap() error { return usererr.New(e.words()) }

func (e *NotStoredError) words() string {
	return fmt.Sprintf("connection %s: %s; nothing was stored", e.Alias, CheckText(e.Result))
}

// HostKeyScanError says that the host key to accept could not be fetched:
// the target did not answer, or did not speak SSH.
type HostKeyScanError struct {
	Addr string
	Err  error
}

func (e *HostKeyScanError) Error() string { return "manage: " + e.words() }

// Unwrap gives errors.Is and errors.As the scan's error, and the doors the
// refusal in the admin's words (a *usererr.Error). The address is the one
// the admin gave for the connection, and the scan's error says what the
// network answered there; an admin may read both.
func (e *HostKeyScanError) Unwrap() []error { return []error{usererr.New(e.words()), e.Err} }

func (e *HostKeyScanError) words() string {
	return fmt.Sprintf("fetch the host key of %s: %v", e.Addr, e.Err)
}

// Mismatch reports whether the refusal was for a host key mismatch, which
// no option overrides.
func (e *NotStoredError) Mismatch() bool { return e.Result.Status == recipes.StatusHostKeyMismatch }

// KeyStatusOf maps a check's outcome to the status stored with the
// connection.
func KeyStatusOf(s recipes.Status) store.KeyStatus {
	switch s {
	case recipes.StatusOK:
		return store.KeyOK
	case recipes.StatusRejected:
		return store.KeyRejected
	case recipes.StatusHostKeyMismatch:
		return store.KeyHostKeyMismatch
	case recipes.StatusUnproved:
		return store.KeyUnproved
	}
	return store.KeyUnreachable
}

// CheckText is a check's outcome in words, as the status it is stored as
// reads (model.StatusText): what refusals, audit rows and the doors say of
// a check.
func CheckText(r recipes.Result) string {
	return model.StatusText(string(KeyStatusOf(r.Status)), r.Message, false)
}

// candidate is a connection as a change would make it, before anything is
// stored.
type candidate struct {
	alias, host, user, recipe string
	port                      int
	pins                      []string
	key                       []byte // a new key file, nil to keep the stored key
	signer                    ssh.Signer
}

// connCandidate is the stored connection cur as a candidate to check with
// signer: its current key, or the key staged for it.
func connCandidate(cur *store.Connection, signer ssh.Signer) candidate {
	return candidate{alias: cur.Alias, host: cur.Host, port: cur.Port, user: cur.User, recipe: cur.Recipe,
		pins: cur.HostKeys, signer: signer}
}

func (c *candidate) addr() string { return net.JoinHostPort(c.host, strconv.Itoa(c.port)) }

// AddConnection registers a connection: it pins the host key, proves the key
// with a check (unless opts.NoCheck) and stores it according to the
// package's rules. A refusal after the check is a *NotStoredError, with the
// result filled in.
func (m *Manager) AddConnection(ctx context.Context, by policy.Actor, spec ConnectionSpec, opts CheckOptions) (ConnectionResult, error) {
	if err := m.configure(ctx, by); err != nil {
		return ConnectionResult{}, err
	}
	var res ConnectionResult
	if err := store.ValidateName("connection", spec.Alias); err != nil {
		return res, err
	}
	if spec.Port == 0 {
		spec.Port = store.DefaultSSHPort
	}
	if spec.Env == "" {
		spec.Env = store.EnvDev
	}
	if _, err := store.ParseEnv(string(spec.Env)); err != nil {
		return res, err
	}
	if spec.ReadSandbox == "" {
		spec.ReadSandbox = store.ReadSandboxAuto
	}
	if err := checkReadSandbox(spec.Alias, spec.ReadSandbox, spec.ReadSandboxReason); err != nil {
		return res, err
	}
	if spec.Record == "" {
		spec.Record = store.RecordOff
	}
	if _, err := store.ParseRecord(string(spec.Record)); err != nil {
		return res, err
	}
	if err := m.checkRecipe(spec.Recipe); err != nil {
		return res, err
	}
	if err := store.ValidateTarget(spec.Alias, spec.Host, spec.Port, spec.User); err != nil {
		return res, err
	}
	switch {
	case len(spec.HostKeys) > 0 && spec.AcceptNewHostKey:
		return res, store.Invalidf("connection %s: give pinned host keys or accept the new one, not both", spec.Alias)
	case len(spec.HostKeys) == 0 && !spec.AcceptNewHostKey:
		return res, store.Invalidf("connection %s: the target's host key must be pinned: give a known_hosts line, or accept the one it presents now", spec.Alias)
	case len(spec.PrivateKey) > 0 && spec.GenerateKey:
		return res, store.Invalidf("connection %s: give a private key or generate one, not both", spec.Alias)
	case len(spec.PrivateKey) == 0 && !spec.GenerateKey:
		return res, store.Invalidf("connection %s: give a private key, or generate one", spec.Alias)
	}
	for _, l := range spec.HostKeys {
		if _, _, err := store.ParseHostKeyLine(l); err != nil {
			return res, err
		}
	}
	if err := m.st.CheckMasterKey(); err != nil {
		return res, err
	}
	if _, err := m.st.ConnectionByAlias(ctx, spec.Alias); err == nil {
		return res, &store.ConflictError{Kind: "connection", Value: spec.Alias}
	} else if !errors.Is(err, store.ErrNotFound) {
		return res, err
	}
	c := candidate{alias: spec.Alias, host: spec.Host, port: spec.Port, user: spec.User, recipe: spec.Recipe,
		pins: spec.HostKeys, key: spec.PrivateKey}
	if err := m.prepareKey(&c, &res, spec.GenerateKey); err != nil {
		return res, err
	}
	if spec.AcceptNewHostKey {
		if err := m.acceptNew(ctx, &c, &res, opts); err != nil {
			return res, err
		}
	}
	check, err := m.decide(ctx, &c, &res, opts, true)
	if err != nil {
		return res, err
	}
	var probe *store.SandboxProbe
	if check.Status == store.KeyOK {
		if probe, err = m.probeAfter(ctx, &c, &res, opts.Timeout); err != nil {
			return res, err
		}
	}
	what := fmt.Sprintf("conn add %s: %s@%s, env %s, recipe %s, host key %s, key %s, read sandbox %s",
		spec.Alias, spec.User, c.addr(), spec.Env, orNone(spec.Recipe), pinsText(c.pins), keyText(res.PublicKey, res.Generated),
		readSandboxText(spec.ReadSandbox, spec.ReadSandboxReason))
	if spec.Record != store.RecordOff {
		what += ", record " + string(spec.Record)
	}
	aud, p := audited(policy.Change{Actor: by, ConnectionAlias: spec.Alias, What: what, Result: resultText(res)})
	conn, err := m.st.CreateConnection(ctx, aud, store.NewConnection{
		Alias: spec.Alias, Host: spec.Host, Port: spec.Port, User: spec.User, PrivateKey: c.key,
		HostKeys: c.pins, Recipe: spec.Recipe, Env: spec.Env, Check: check,
		ReadSandbox: spec.ReadSandbox, ReadSandboxReason: spec.ReadSandboxReason, Probe: probe,
		Record: spec.Record,
	})
	if err != nil {
		return res, err
	}
	res.Conn, res.Stored = conn, true
	return res, checkAudited(p, "conn add")
}

// UpdateConnection changes a connection in place (its id, grants and
// approvals stay). A change to anything the key check depends on (host,
// port, user, recipe, pinned host keys, the key) re-runs the check against
// the connection as changed, and is stored according to the package's
// rules; a change of the environment alone is stored without dialing.
func (m *Manager) UpdateConnection(ctx context.Context, by policy.Actor, alias string, e ConnectionEdit, opts CheckOptions) (ConnectionResult, error) {
	if err := m.configure(ctx, by); err != nil {
		return ConnectionResult{}, err
	}
	var res ConnectionResult
	cur, err := m.st.ConnectionByAlias(ctx, alias)
	if err != nil {
		return res, err
	}
	res.Previous, res.Conn = cur, cur
	switch {
	case len(e.HostKeys) > 0 && e.AcceptNewHostKey:
		return res, store.Invalidf("connection %s: give pinned host keys or accept the new one, not both", alias)
	case len(e.PrivateKey) > 0 && e.GenerateKey:
		return res, store.Invalidf("connection %s: give a private key or generate one, not both", alias)
	}
	if e.Env != nil {
		if _, err := store.ParseEnv(string(*e.Env)); err != nil {
			return res, err
		}
	}
	if e.Recipe != nil {
		if err := m.checkRecipe(*e.Recipe); err != nil {
			return res, err
		}
	}
	for _, l := range e.HostKeys {
		if _, _, err := store.ParseHostKeyLine(l); err != nil {
			return res, err
		}
	}
	if err := m.st.CheckMasterKey(); err != nil {
		return res, err
	}
	c := candidate{alias: alias, host: cur.Host, port: cur.Port, user: cur.User, recipe: cur.Recipe,
		pins: cur.HostKeys, key: e.PrivateKey}
	var changes []string
	change := func(what, from, to string) {
		if from != to {
			changes = append(changes, what+" "+from+" -> "+to)
		}
	}
	if e.Host != nil {
		change("host", c.host, *e.Host)
		c.host = *e.Host
	}
	if e.Port != nil {
		change("port", strconv.Itoa(c.port), strconv.Itoa(*e.Port))
		c.port = *e.Port
	}
	if e.User != nil {
		change("user", c.user, *e.User)
		c.user = *e.User
	}
	if e.Recipe != nil {
		change("recipe", orNone(c.recipe), orNone(*e.Recipe))
		c.recipe = *e.Recipe
	}
	if err := store.ValidateTarget(alias, c.host, c.port, c.user); err != nil {
		return res, err
	}
	dialed := len(changes) > 0 // what the check depends on changed
	if e.Env != nil {
		change("env", string(cur.Env), string(*e.Env))
	}
	if e.ReadSandbox != nil {
		if err := checkReadSandbox(alias, *e.ReadSandbox, e.ReadSandboxReason); err != nil {
			return res, err
		}
		change("read sandbox", readSandboxText(cur.ReadSandbox, cur.ReadSandboxReason), readSandboxText(*e.ReadSandbox, e.ReadSandboxReason))
	} else if e.ReadSandboxReason != "" {
		return res, store.Invalidf("connection %s: a read sandbox reason goes with read sandbox off", alias)
	}
	if e.Record != nil {
		if _, err := store.ParseRecord(string(*e.Record)); err != nil {
			return res, err
		}
		change("record", string(cur.Record), string(*e.Record))
	}
	oldPub, err := m.st.ConnectionPublicKey(ctx, cur.ID)
	if err != nil {
		return res, err
	}
	res.PreviousPublicKey = oldPub
	if len(e.PrivateKey) > 0 || e.GenerateKey {
		if err := m.prepareKey(&c, &res, e.GenerateKey); err != nil {
			return res, err
		}
		change("key", ssh.FingerprintSHA256(oldPub), keyText(res.PublicKey, res.Generated))
		dialed = true
	} else {
		res.PublicKey = oldPub
		if !opts.NoCheck {
			if c.signer, err = m.st.ConnectionSigner(ctx, cur.ID); err != nil {
				return res, err
			}
		}
	}
	if len(e.HostKeys) > 0 {
		c.pins = e.HostKeys
	}
	if e.AcceptNewHostKey {
		if err := m.acceptNew(ctx, &c, &res, opts); err != nil {
			return res, err
		}
	}
	repin := len(e.HostKeys) > 0 || e.AcceptNewHostKey
	if repin && pinsText(cur.HostKeys) != pinsText(c.pins) {
		change("host key", pinsText(cur.HostKeys), pinsText(c.pins))
		dialed = true
	}
	if len(changes) == 0 && !dialed {
		if repin {
			// The pin asked for is the pin stored: say so rather than
			// "updated" (issue 25), and write nothing.
			res.Unchanged = true
			return res, nil
		}
		return res, store.Invalidf("connection %s: nothing to change", alias)
	}
	if len(changes) == 0 {
		changes = append(changes, "unchanged")
	}
	var check *store.KeyCheck
	if dialed {
		if check, err = m.decide(ctx, &c, &res, opts, false); err != nil {
			return res, err
		}
	}
	probe, err := m.probeForEdit(ctx, &c, &res, e, opts, dialed, check)
	if err != nil {
		return res, err
	}
	ch := store.ConnectionChange{Host: e.Host, Port: e.Port, User: e.User, Env: e.Env, Recipe: e.Recipe,
		PrivateKey: c.key, Check: check, ReadSandbox: e.ReadSandbox, ReadSandboxReason: e.ReadSandboxReason, Probe: probe,
		Record: e.Record}
	if len(e.HostKeys) > 0 || e.AcceptNewHostKey {
		ch.HostKeys = c.pins
	}
	what := "conn update " + alias + ": " + strings.Join(changes, ", ")
	if cur.Env == store.EnvProduction && !tightensOnly(cur, e, dialed) {
		after := applyEdit(*cur, ch)
		return res, m.hold(ctx, by, store.ChangeRequest{Kind: changeConnUpdate, Summary: what,
			Before: connText(cur), After: connText(&after), ConnectionID: cur.ID, ConnectionAlias: cur.Alias},
			heldChange{ConnUpdate: &ch})
	}
	aud, p := audited(policy.Change{Actor: by, ConnectionID: cur.ID, ConnectionAlias: cur.Alias,
		What: what, Result: resultText(res)})
	conn, err := m.st.UpdateConnection(ctx, aud, alias, ch)
	if err != nil {
		return res, err
	}
	res.Conn, res.Stored = conn, true
	return res, checkAudited(p, "conn update")
}

// CheckConnection proves a stored connection's key with its recipe's read
// and records the outcome, whatever it is. It changes nothing else and is
// not audited: it observes.
func (m *Manager) CheckConnection(ctx context.Context, alias string, timeout time.Duration) (ConnectionResult, error) {
	var res ConnectionResult
	cur, err := m.st.ConnectionByAlias(ctx, alias)
	if err != nil {
		return res, err
	}
	res.Conn = cur
	signer, err := m.st.ConnectionSigner(ctx, cur.ID)
	if err != nil {
		return res, err
	}
	res.PublicKey = signer.PublicKey()
	c := connCandidate(cur, signer)
	if err := m.runCheck(ctx, &c, &res, timeout); err != nil {
		return res, err
	}
	conn, err := m.st.SetKeyStatus(ctx, alias, KeyStatusOf(res.Check.Status), res.Check.Message)
	if err != nil {
		return res, fmt.Errorf("manage: key check of %s: %s, not recorded: %w", alias, res.Check.Status, err)
	}
	res.Conn, res.Stored = conn, true
	if cur.Staged != nil {
		// A staged key is proved too, so that the admin sees whether the
		// target accepts it yet; a key staged meanwhile is left alone.
		if _, err := m.checkStaged(ctx, cur, &res, timeout); err != nil && !errors.Is(err, store.ErrInvalid) {
			return res, err
		}
	}
	if res.Check.Status == recipes.StatusOK {
		probe, err := m.probeAfter(ctx, &c, &res, timeout)
		if err != nil {
			return res, err
		}
		if probe.Found != store.SandboxUnprobed {
			if conn, err = m.st.SetSandboxProbe(ctx, alias, *probe); err != nil {
				return res, fmt.Errorf("manage: sandbox probe of %s: %s, not recorded: %w", alias, probe.Found, err)
			}
			res.Conn = conn
		}
	}
	return res, nil
}

// RemoveConnection deletes a connection with its sealed key and grants.
func (m *Manager) RemoveConnection(ctx context.Context, by policy.Actor, alias string) (*store.Connection, error) {
	if err := m.configure(ctx, by); err != nil {
		return nil, err
	}
	cur, err := m.st.ConnectionByAlias(ctx, alias)
	if err != nil {
		return nil, err
	}
	what := fmt.Sprintf("conn remove %s: %s@%s, host key %s", alias, cur.User, cur.Addr(), pinsText(cur.HostKeys))
	if cur.Env == store.EnvProduction {
		return nil, m.hold(ctx, by, store.ChangeRequest{Kind: changeConnRemove, Summary: what, Before: connText(cur),
			After: "removed, with its grants", ConnectionID: cur.ID, ConnectionAlias: cur.Alias}, heldChange{ConnRemove: true})
	}
	aud, p := audited(policy.Change{Actor: by, ConnectionID: cur.ID, ConnectionAlias: cur.Alias, What: what})
	if err := m.st.RemoveConnection(ctx, aud, alias); err != nil {
		return nil, err
	}
	return cur, checkAudited(p, "conn remove")
}

// checkRecipe refuses a recipe the catalog does not have.
func (m *Manager) checkRecipe(key string) error {
	if key != "" && m.cat.Get(key) == nil {
		return store.Invalidf("unknown recipe %q; see postern recipes list", key)
	}
	return nil
}

// prepareKey reads or makes the candidate's key.
func (m *Manager) prepareKey(c *candidate, res *ConnectionResult, generate bool) error {
	if generate {
		key, signer, err := generateKey(c.alias)
		if err != nil {
			return err
		}
		c.key, c.signer, res.Generated = key, signer, true
		res.PublicKey = signer.PublicKey()
		return nil
	}
	if err := store.CheckPrivateKey(c.key); err != nil {
		return err
	}
	signer, err := ssh.ParsePrivateKey(c.key)
	if err != nil {
		return store.Invalidf("private key does not parse")
	}
	c.signer = signer
	res.PublicKey = signer.PublicKey()
	return nil
}

// generateKey makes an ed25519 key pair for a connection: the OpenSSH
// private key file (to seal) and its signer.
func generateKey(alias string) ([]byte, ssh.Signer, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("manage: generate key: %w", err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "postern:"+alias)
	if err != nil {
		return nil, nil, fmt.Errorf("manage: generate key: %w", err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return nil, nil, fmt.Errorf("manage: generate key: %w", err)
	}
	return pem.EncodeToMemory(block), signer, nil
}

// acceptNew fetches the host key the target presents now and pins it.
func (m *Manager) acceptNew(ctx context.Context, c *candidate, res *ConnectionResult, opts CheckOptions) error {
	if opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opts.Timeout)
		defer cancel()
	}
	pub, err := m.scan(ctx, c.addr())
	if err != nil {
		return &HostKeyScanError{Addr: c.addr(), Err: err}
	}
	c.pins = []string{knownhosts.Line([]string{knownhosts.Normalize(c.addr())}, pub)}
	res.ScannedHostKey = pub
	return nil
}

// decide runs the check of a change (unless opts.NoCheck) and applies the
// package's rules: the check to store with it, or a *NotStoredError.
func (m *Manager) decide(ctx context.Context, c *candidate, res *ConnectionResult, opts CheckOptions, adding bool) (*store.KeyCheck, error) {
	if opts.NoCheck {
		msg := "not checked: added without a check"
		if !adding {
			msg = "not checked since the last change"
		}
		return &store.KeyCheck{Status: store.KeyUnchecked, Message: msg}, nil
	}
	if err := m.runCheck(ctx, c, res, opts.Timeout); err != nil {
		return nil, err
	}
	r := res.Check
	keep := r.Status == recipes.StatusOK ||
		r.Status != recipes.StatusHostKeyMismatch && (opts.AllowUnverified || res.Generated)
	if !keep {
		return nil, &NotStoredError{Alias: c.alias, Result: r}
	}
	return &store.KeyCheck{Status: KeyStatusOf(r.Status), Message: r.Message}, nil
}

// runCheck proves c's key with its recipe's read, accepting only c's pins.
func (m *Manager) runCheck(ctx context.Context, c *candidate, res *ConnectionResult, timeout time.Duration) error {
	r, err := m.cat.ForConnection(c.recipe, c.host)
	if err != nil {
		return fmt.Errorf("manage: key check of %s: %w", c.alias, err)
	}
	pinned := store.Connection{Alias: c.alias, HostKeys: c.pins}
	hostKeys, err := pinned.HostKeyCallback()
	if err != nil {
		return err
	}
	keys, _ := pinned.PinnedKeys()
	var fps []string
	for _, k := range keys {
		fps = append(fps, ssh.FingerprintSHA256(k))
	}
	res.Check = m.checker(timeout).Check(ctx, recipes.Target{Name: c.alias, Addr: c.addr(), User: c.user, HostKeys: hostKeys, Pinned: fps},
		c.signer, r)
	res.Checked = true
	if r != nil {
		res.Recipe = r.Key
	}
	return nil
}

// checker is the Manager's key checker, bounded by timeout when that is
// set and the checker is the SSH one.
func (m *Manager) checker(timeout time.Duration) KeyChecker {
	if rc, ok := m.chk.(recipes.Checker); ok && timeout > 0 {
		rc.Timeout = timeout
		return rc
	}
	return m.chk
}

// resultText is a result's check for the audit row, "" if none ran, and
// the read sandbox probe's outcome when one ran.
func resultText(res ConnectionResult) string {
	var parts []string
	if res.Checked {
		parts = append(parts, CheckText(res.Check))
	}
	if res.Probed {
		parts = append(parts, "read sandbox probe: "+probeText(res.Probe))
	}
	return strings.Join(parts, "; ")
}

// pinsText lists pinned keys by fingerprint.
func pinsText(lines []string) string {
	var fps []string
	for _, l := range lines {
		if _, k, err := store.ParseHostKeyLine(l); err == nil {
			fps = append(fps, ssh.FingerprintSHA256(k))
		} else {
			fps = append(fps, "(unreadable)")
		}
	}
	if len(fps) == 0 {
		return "none"
	}
	return strings.Join(fps, ", ")
}

func keyText(pub ssh.PublicKey, generated bool) string {
	if pub == nil {
		return "none"
	}
	s := ssh.FingerprintSHA256(pub)
	if generated {
		s += " (generated)"
	}
	return s
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// Model is res in the shared JSON shape (model.ConnectionResult), as the
// CLI's -o json and the REST API answer it.
func (res ConnectionResult) Model() model.ConnectionResult {
	out := model.ConnectionResult{Stored: res.Stored, Unchanged: res.Unchanged}
	if res.Checked {
		out.Check = &model.KeyCheck{Status: string(KeyStatusOf(res.Check.Status)), Message: res.Check.Message,
			Recipe: res.Recipe}
		if res.Conn != nil && res.Stored {
			out.Check.CheckedAt = model.Time(res.Conn.KeyCheckedAt)
		}
	}
	if res.Probed {
		out.Probe = &model.ReadSandboxProbe{Found: string(res.Probe.Found), Message: res.Probe.Message}
	}
	if res.StagedChecked {
		out.StagedCheck = &model.KeyCheck{Status: string(KeyStatusOf(res.StagedCheck.Status)), Message: res.StagedCheck.Message,
			Recipe: res.Recipe}
		if res.Conn != nil && res.Conn.Staged != nil {
			out.StagedCheck.CheckedAt = model.Time(res.Conn.Staged.Check.CheckedAt)
		}
	}
	out.Rotation, out.Steps = res.Rotation, res.Steps
	if res.Conn != nil {
		pub := res.PreviousPublicKey // what the connection still uses when nothing was stored
		if res.Stored {
			pub = res.PublicKey
		}
		v := model.ConnectionOf(*res.Conn, pub)
		out.Connection = &v
	}
	if res.Previous != nil {
		v := model.ConnectionOf(*res.Previous, res.PreviousPublicKey)
		out.Previous = &v
	}
	return out
}

// tightensOnly reports whether edit e of production connection cur only
// tightens it: nothing the key check depends on changes (dialed is false),
// the environment stays production, the read sandbox, if changed,
// becomes required, and recording, if changed, records no less. Anything
// else waits for a second admin.
func tightensOnly(cur *store.Connection, e ConnectionEdit, dialed bool) bool {
	if dialed || e.Recipe != nil && *e.Recipe != cur.Recipe {
		return false
	}
	if e.Env != nil && *e.Env != store.EnvProduction {
		return false
	}
	if e.Record != nil && e.Record.Rank() < cur.Record.Rank() {
		return false
	}
	return e.ReadSandbox == nil || *e.ReadSandbox == store.ReadSandboxRequire
}

// applyEdit is c with the fields ch sets, for the after side of a change
// request's card.
func applyEdit(c store.Connection, ch store.ConnectionChange) store.Connection {
	for _, f := range []struct {
		to   *string
		from *string
	}{{&c.Host, ch.Host}, {&c.User, ch.User}, {&c.Recipe, ch.Recipe}} {
		if f.from != nil {
			*f.to = *f.from
		}
	}
	if ch.Port != nil {
		c.Port = *ch.Port
	}
	if ch.Env != nil {
		c.Env = *ch.Env
	}
	if ch.HostKeys != nil {
		c.HostKeys = ch.HostKeys
	}
	if ch.ReadSandbox != nil {
		c.ReadSandbox, c.ReadSandboxReason = *ch.ReadSandbox, ch.ReadSandboxReason
	}
	if ch.Record != nil {
		c.Record = *ch.Record
	}
	return c
}

// connText is a connection on one line, as a change request shows its
// before and after.
func connText(c *store.Connection) string {
	t := fmt.Sprintf("%s@%s env=%s recipe=%s read-sandbox=%s record=%s host key %s", c.User, c.Addr(), c.Env, orNone(c.Recipe),
		readSandboxText(c.ReadSandbox, c.ReadSandboxReason), orOff(c.Record), pinsText(c.HostKeys))
	return t
}

// orOff is a recording setting as shown: off when a row made before
// recordings existed has none.
func orOff(r store.Record) string {
	if r == "" {
		return string(store.RecordOff)
	}
	return string(r)
}
