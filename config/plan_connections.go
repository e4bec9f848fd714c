package config

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/crypto/ssh"

	"github.com/postern/postern/manage"
	"github.com/postern/postern/store"
)

// connSetting is one setting of a [[connection]] that apply compares with
// the stored one and changes on its own. Adding a setting to
// [[connection]] is its field in Connection and one entry in
// connSettings: the entry checks the file's value, shows it, puts it in a
// new connection and in a change, and exports the stored one. The pins
// and the key are not settings: left out, they keep what is stored.
type connSetting struct {
	name string // as the plan shows it: "port 22 -> 2222"
	// check says what is wrong with the file's value, nil if nothing;
	// nil for a setting checked with others (host, port and user are
	// checked together, as the target).
	check func(p *planner, c *Connection) error
	// want is the file's value, its default when left out; have is the
	// stored one. They are compared as they are and shown by show (as is
	// if nil).
	want func(c *Connection) string
	have func(c *store.Connection) string
	show func(v string) string
	// spec puts the file's value in a new connection, edit in a change.
	spec func(c *Connection, s *manage.ConnectionSpec)
	edit func(c *Connection, e *manage.ConnectionEdit)
	// export writes the stored value into the file's form.
	export func(c *store.Connection, x *Connection)
}

// connSettings are the settings in the order the plan shows them.
func connSettings() []connSetting {
	return []connSetting{
		{name: "host",
			want:   func(c *Connection) string { return c.Host },
			have:   func(c *store.Connection) string { return c.Host },
			spec:   func(c *Connection, s *manage.ConnectionSpec) { s.Host = c.Host },
			edit:   func(c *Connection, e *manage.ConnectionEdit) { e.Host = &c.Host },
			export: func(c *store.Connection, x *Connection) { x.Host = c.Host }},
		{name: "port",
			want: func(c *Connection) string { return strconv.Itoa(c.port()) },
			have: func(c *store.Connection) string { return strconv.Itoa(c.Port) },
			spec: func(c *Connection, s *manage.ConnectionSpec) { s.Port = c.port() },
			edit: func(c *Connection, e *manage.ConnectionEdit) { port := c.port(); e.Port = &port },
			export: func(c *store.Connection, x *Connection) {
				if c.Port != store.DefaultSSHPort {
					x.Port = c.Port
				}
			}},
		{name: "user",
			want:   func(c *Connection) string { return c.User },
			have:   func(c *store.Connection) string { return c.User },
			spec:   func(c *Connection, s *manage.ConnectionSpec) { s.User = c.User },
			edit:   func(c *Connection, e *manage.ConnectionEdit) { e.User = &c.User },
			export: func(c *store.Connection, x *Connection) { x.User = c.User }},
		{name: "env",
			check: func(_ *planner, c *Connection) error {
				if c.Env == "" {
					return nil
				}
				_, err := store.ParseEnv(c.Env)
				return err
			},
			want:   func(c *Connection) string { return string(c.env()) },
			have:   func(c *store.Connection) string { return string(c.Env) },
			spec:   func(c *Connection, s *manage.ConnectionSpec) { s.Env = c.env() },
			edit:   func(c *Connection, e *manage.ConnectionEdit) { env := c.env(); e.Env = &env },
			export: func(c *store.Connection, x *Connection) { x.Env = string(c.Env) }},
		{name: "recipe",
			check: func(p *planner, c *Connection) error {
				if c.Recipe != "" && p.m.Catalog().Get(c.Recipe) == nil {
					return fmt.Errorf("unknown recipe %q (postern recipes list)", c.Recipe)
				}
				return nil
			},
			want:   func(c *Connection) string { return c.Recipe },
			have:   func(c *store.Connection) string { return c.Recipe },
			show:   orNone,
			spec:   func(c *Connection, s *manage.ConnectionSpec) { s.Recipe = c.Recipe },
			edit:   func(c *Connection, e *manage.ConnectionEdit) { recipe := c.Recipe; e.Recipe = &recipe },
			export: func(c *store.Connection, x *Connection) { x.Recipe = c.Recipe }},
		{name: "read sandbox",
			check: func(_ *planner, c *Connection) error {
				_, _, err := readSandboxOf(*c)
				return err
			},
			want: func(c *Connection) string {
				rs, reason, _ := readSandboxOf(*c)
				return readSandboxText(rs, reason)
			},
			have: func(c *store.Connection) string { return readSandboxText(c.ReadSandbox, c.ReadSandboxReason) },
			spec: func(c *Connection, s *manage.ConnectionSpec) {
				s.ReadSandbox, s.ReadSandboxReason, _ = readSandboxOf(*c)
			},
			edit: func(c *Connection, e *manage.ConnectionEdit) {
				rs, reason, _ := readSandboxOf(*c)
				e.ReadSandbox, e.ReadSandboxReason = &rs, reason
			},
			export: func(c *store.Connection, x *Connection) {
				if c.ReadSandbox != store.ReadSandboxAuto {
					x.ReadSandbox = string(c.ReadSandbox)
				}
				x.ReadSandboxReason = c.ReadSandboxReason
			}},
		{name: "record",
			check: func(_ *planner, c *Connection) error {
				if c.Record == "" {
					return nil
				}
				_, err := store.ParseRecord(c.Record)
				return err
			},
			want: func(c *Connection) string { return string(c.record()) },
			have: func(c *store.Connection) string { return string(recordOf(c.Record)) },
			spec: func(c *Connection, s *manage.ConnectionSpec) { s.Record = c.record() },
			edit: func(c *Connection, e *manage.ConnectionEdit) { r := c.record(); e.Record = &r },
			export: func(c *store.Connection, x *Connection) {
				if r := recordOf(c.Record); r != store.RecordOff {
					x.Record = string(r)
				}
			}},
	}
}

// record is the connection's recording setting, off if the file leaves it
// out (or gives one that does not parse, which its check reports).
func (c *Connection) record() store.Record {
	r, err := store.ParseRecord(c.Record)
	if err != nil {
		return store.RecordOff
	}
	return r
}

// recordOf is a stored setting, off when empty.
func recordOf(r store.Record) store.Record {
	if r == "" {
		return store.RecordOff
	}
	return r
}

// port is the connection's port, 22 if the file leaves it out.
func (c *Connection) port() int {
	if c.Port == 0 {
		return store.DefaultSSHPort
	}
	return c.Port
}

// env is the connection's environment, dev if the file leaves it out (or
// gives one that does not parse, which its check reports).
func (c *Connection) env() store.Env {
	if c.Env == "" {
		return store.EnvDev
	}
	e, _ := store.ParseEnv(c.Env)
	return e
}

// connDecl is a [[connection]] that passed its checks, with what apply
// read for it.
type connDecl struct {
	Connection
	pins []string      // host_keys' fingerprints
	key  []byte        // key_file's content, nil without one
	pub  ssh.PublicKey // its public half
}

// connection plans one declared connection: added, changed setting by
// setting, re-pinned, re-keyed, or as declared.
func (p *planner) connection(ctx context.Context, where string, c Connection) {
	d, ok := p.checkConnection(where, c)
	if !ok {
		return
	}
	p.connEnv[c.Alias] = c.env()
	check := manage.CheckOptions{AllowUnverified: p.opts.AllowUnverified || c.AllowUnverified, Timeout: p.opts.Timeout}
	have, exists := p.cur.conns[c.Alias]
	if !exists {
		p.addConnection(where, d, check)
		return
	}
	p.updateConnection(ctx, where, d, have, check)
}

// checkConnection checks a connection's alias, target, settings and host
// keys, and reads its key file.
func (p *planner) checkConnection(where string, c Connection) (*connDecl, bool) {
	if err := store.ValidateName("connection", c.Alias); err != nil {
		p.bad(where, "%s", errText(err))
		return nil, false
	}
	if !p.firstTime(p.conns, c.Alias, where) {
		return nil, false
	}
	if err := store.ValidateTarget(c.Alias, c.Host, c.port(), c.User); err != nil {
		p.bad(where, "%s", errText(err))
		return nil, false
	}
	for _, s := range connSettings() {
		if s.check == nil {
			continue
		}
		if err := s.check(p, &c); err != nil {
			p.bad(where, "%s", errText(err))
			return nil, false
		}
	}
	d := &connDecl{Connection: c}
	for _, l := range c.HostKeys {
		_, k, err := store.ParseHostKeyLine(l)
		if err != nil {
			p.bad(where, "host_keys: %s", errText(err))
			return nil, false
		}
		d.pins = append(d.pins, ssh.FingerprintSHA256(k))
	}
	switch {
	case len(c.HostKeys) > 0 && c.AcceptNewHostKey:
		p.bad(where, "give host_keys or accept_new_host_key, not both")
		return nil, false
	case c.KeyFile != "" && c.GenerateKey:
		p.bad(where, "give key_file or generate_key, not both")
		return nil, false
	}
	if c.KeyFile == "" {
		return d, true
	}
	b, err := p.read(c.KeyFile, "key_file", "connection "+c.Alias, maxKeyFile)
	if err != nil {
		p.bad(where, "%s", err)
		return nil, false
	}
	if err := store.CheckPrivateKey(b); err != nil {
		p.bad(where, "key_file %s: %s", c.KeyFile, errText(err))
		return nil, false
	}
	signer, err := ssh.ParsePrivateKey(b)
	if err != nil { // CheckPrivateKey parsed it: never
		p.bad(where, "key_file %s does not parse", c.KeyFile)
		return nil, false
	}
	d.key, d.pub = b, signer.PublicKey()
	return d, true
}

// addConnection plans a new connection, which needs a host key and a key.
func (p *planner) addConnection(where string, d *connDecl, check manage.CheckOptions) {
	switch {
	case len(d.HostKeys) == 0 && !d.AcceptNewHostKey:
		p.bad(where, "a new connection needs host_keys or accept_new_host_key")
		return
	case d.key == nil && !d.GenerateKey:
		p.bad(where, "a new connection needs key_file or generate_key")
		return
	}
	spec := manage.ConnectionSpec{Alias: d.Alias, HostKeys: d.HostKeys, AcceptNewHostKey: d.AcceptNewHostKey,
		PrivateKey: d.key, GenerateKey: d.GenerateKey}
	for _, s := range connSettings() {
		s.spec(&d.Connection, &spec)
	}
	pin := strings.Join(d.pins, ", ")
	if d.AcceptNewHostKey {
		pin = "the key it presents now"
	}
	keyText := "generated"
	if d.pub != nil {
		keyText = ssh.FingerprintSHA256(d.pub)
	}
	p.add(fmt.Sprintf("+ connection %s: %s@%s:%d, env %s, host key %s, key %s", d.Alias, d.User, d.Host, spec.Port, spec.Env, pin, keyText),
		func(ctx context.Context) (string, error) {
			res, err := p.m.AddConnection(ctx, p.by, spec, check)
			return connectionNote(res), err
		})
}

// updateConnection plans one change of what differs: settings, pins (when
// the file gives them) and the key (when it gives one).
func (p *planner) updateConnection(ctx context.Context, where string, d *connDecl, have store.Connection, check manage.CheckOptions) {
	var e manage.ConnectionEdit
	var diffs []string
	for _, s := range connSettings() {
		want, stored := s.want(&d.Connection), s.have(&have)
		if want == stored {
			continue
		}
		s.edit(&d.Connection, &e)
		show := s.show
		if show == nil {
			show = func(v string) string { return v }
		}
		diffs = append(diffs, s.name+" "+show(stored)+" -> "+show(want))
	}
	if len(d.pins) > 0 {
		var stored []string
		keys, _ := have.PinnedKeys()
		for _, k := range keys {
			stored = append(stored, ssh.FingerprintSHA256(k))
		}
		if !sameSet(d.pins, stored) {
			e.HostKeys = d.HostKeys
			diffs = append(diffs, "host key "+strings.Join(stored, ", ")+" -> "+strings.Join(d.pins, ", "))
		}
	}
	if d.pub != nil {
		stored, err := p.m.Store().ConnectionPublicKey(ctx, have.ID)
		if err != nil {
			p.bad(where, "the stored key cannot be read to compare: %s", errText(err))
			return
		}
		if string(stored.Marshal()) != string(d.pub.Marshal()) {
			e.PrivateKey = d.key
			diffs = append(diffs, "key "+ssh.FingerprintSHA256(stored)+" -> "+ssh.FingerprintSHA256(d.pub))
		}
	}
	if len(diffs) == 0 {
		p.out.unchanged++
		return
	}
	p.add("~ connection "+d.Alias+": "+strings.Join(diffs, ", "), func(ctx context.Context) (string, error) {
		res, err := p.m.UpdateConnection(ctx, p.by, d.Alias, e, check)
		return connectionNote(res), err
	})
}
