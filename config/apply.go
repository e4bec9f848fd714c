package config

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/postern/postern/manage"
	"github.com/postern/postern/model"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/recipes"
	"github.com/postern/postern/store"
)

// Options configure Apply.
type Options struct {
	DryRun bool // print the plan, change nothing
	Prune  bool // also remove what the file does not name
	// AllowUnverified keeps every new or changed connection whose key
	// check is not ok (never a host key mismatch), as a connection's own
	// allow_unverified does.
	AllowUnverified bool
	Timeout         time.Duration // bound on each key check; the manager's default if zero
	Actor           policy.Actor  // who the changes are audited as ("via apply")
	Out             io.Writer     // the plan and what became of each change
}

// Result says what Apply did.
type Result struct {
	Planned   int // changes in the plan
	Done      int // changes made
	Failed    int // changes refused (a key not proved, a name taken meanwhile)
	Unchanged int // declared things that already were as declared
	Kept      int // things the file does not name, kept without Prune
}

// change is one step of a plan.
type change struct {
	line string                                    // "+ agent bot: key SHA256:..." as printed
	do   func(ctx context.Context) (string, error) // makes it; returns a note to print after it
}

// plan is what Apply found to do.
type plan struct {
	changes   []change
	unchanged int
	kept      []string
}

// Apply makes the database hold what f declares. See the package doc.
// An error before the first change means nothing was changed (the plan
// failed); a change that fails is reported, counted and the others go on.
func Apply(ctx context.Context, m *manage.Manager, f *File, opts Options) (*Result, error) {
	if opts.Out == nil {
		opts.Out = io.Discard
	}
	p, err := makePlan(ctx, m, f, opts)
	if err != nil {
		return nil, err
	}
	res := &Result{Planned: len(p.changes), Unchanged: p.unchanged, Kept: len(p.kept)}
	w := opts.Out
	if len(p.changes) == 0 {
		fmt.Fprintln(w, "nothing to change")
	}
	for _, c := range p.changes {
		fmt.Fprintln(w, c.line)
		if opts.DryRun {
			continue
		}
		note, err := c.do(ctx)
		if note != "" {
			fmt.Fprintln(w, "    "+note)
		}
		if err != nil {
			res.Failed++
			fmt.Fprintln(w, "    FAILED: "+errText(err))
			continue
		}
		res.Done++
	}
	for _, k := range p.kept {
		fmt.Fprintln(w, "  "+k+" (not in the file; kept, --prune removes it)")
	}
	verb := "applied"
	if opts.DryRun {
		verb = "dry run, nothing changed"
	}
	fmt.Fprintf(w, "%s: %d to change, %d done, %d failed, %d unchanged, %d not in the file\n",
		verb, res.Planned, res.Done, res.Failed, res.Unchanged, res.Kept)
	return res, nil
}

// errText is an error for the plan's output, without package prefixes.
func errText(err error) string {
	s := err.Error()
	for _, p := range []string{"manage: ", "store: "} {
		s = strings.TrimPrefix(s, p)
	}
	return s
}

// current is what the database holds.
type current struct {
	agents   map[string]store.Agent
	conns    map[string]store.Connection
	grants   map[[2]string]store.Grant // agent name, alias
	channels map[string]store.NotifyChannel
}

func readCurrent(ctx context.Context, st *store.Store) (*current, error) {
	cur := &current{agents: map[string]store.Agent{}, conns: map[string]store.Connection{},
		grants: map[[2]string]store.Grant{}, channels: map[string]store.NotifyChannel{}}
	agents, err := st.ListAgents(ctx)
	if err != nil {
		return nil, err
	}
	for _, a := range agents {
		cur.agents[a.Name] = a
	}
	conns, err := st.ListConnections(ctx)
	if err != nil {
		return nil, err
	}
	for _, c := range conns {
		cur.conns[c.Alias] = c
	}
	grants, err := st.ListGrants(ctx)
	if err != nil {
		return nil, err
	}
	for _, g := range grants {
		cur.grants[[2]string{g.AgentName, g.Alias}] = g
	}
	chs, err := st.ListNotifyChannels(ctx)
	if err != nil {
		return nil, err
	}
	for _, c := range chs {
		cur.channels[c.Name] = c
	}
	return cur, nil
}

// planError collects what is wrong with a file, so that one run names
// every mistake.
type planError struct{ msgs []string }

func (e *planError) add(format string, args ...any) {
	e.msgs = append(e.msgs, fmt.Sprintf(format, args...))
}

func (e *planError) err() error {
	if len(e.msgs) == 0 {
		return nil
	}
	return fmt.Errorf("%w:\n  %s", ErrInvalid, strings.Join(e.msgs, "\n  "))
}

// ErrInvalid marks a file that cannot be applied as written; nothing was
// changed.
var ErrInvalid = errors.New("config: the file cannot be applied; nothing was changed")

func makePlan(ctx context.Context, m *manage.Manager, f *File, opts Options) (*plan, error) {
	st := m.Store()
	cur, err := readCurrent(ctx, st)
	if err != nil {
		return nil, err
	}
	p := &plan{}
	pe := &planError{}
	by := opts.Actor
	if by.Via == "" {
		by.Via = "apply"
	}

	// Agents.
	agentNames := map[string]bool{}
	for i, a := range f.Agents {
		where := fmt.Sprintf("agent %q (agent #%d)", a.Name, i+1)
		if err := store.ValidateName("agent", a.Name); err != nil {
			pe.add("%s: %s", where, errText(err))
			continue
		}
		if agentNames[a.Name] {
			pe.add("%s: declared twice", where)
			continue
		}
		agentNames[a.Name] = true
		if len(a.Keys) == 0 {
			pe.add("%s: keys: give at least one public key", where)
			continue
		}
		want := map[string]string{} // fingerprint → line
		var order []string
		bad := false
		for _, k := range a.Keys {
			_, fp, err := store.ParseAuthorizedKey(k)
			if err != nil {
				pe.add("%s: keys: %s", where, errText(err))
				bad = true
				continue
			}
			if _, dup := want[fp]; !dup {
				order = append(order, fp)
			}
			want[fp] = k
		}
		if bad {
			continue
		}
		name, disabled := a.Name, a.Disabled
		have, exists := cur.agents[a.Name]
		if !exists {
			keys := make([]string, 0, len(order))
			for _, fp := range order {
				keys = append(keys, want[fp])
			}
			p.changes = append(p.changes, change{
				line: fmt.Sprintf("+ agent %s: keys %s", name, strings.Join(order, ", ")),
				do: func(ctx context.Context) (string, error) {
					_, err := m.AddAgent(ctx, by, name, keys)
					return "", err
				}})
			if disabled {
				p.changes = append(p.changes, change{line: "~ agent " + name + ": disabled",
					do: func(ctx context.Context) (string, error) {
						_, err := m.SetAgentDisabled(ctx, by, name, true)
						return "", err
					}})
			}
			continue
		}
		same := true
		haveFP := map[string]bool{}
		for _, k := range have.Keys {
			haveFP[k.Fingerprint] = true
		}
		for _, fp := range order {
			if haveFP[fp] {
				continue
			}
			same = false
			line := want[fp]
			p.changes = append(p.changes, change{line: "~ agent " + name + ": add key " + fp,
				do: func(ctx context.Context) (string, error) {
					_, err := m.AddAgentKey(ctx, by, name, line)
					return "", err
				}})
		}
		for _, k := range have.Keys {
			if _, ok := want[k.Fingerprint]; ok {
				continue
			}
			if !opts.Prune {
				p.kept = append(p.kept, "agent "+name+" key "+k.Fingerprint)
				continue
			}
			same = false
			fp := k.Fingerprint
			p.changes = append(p.changes, change{line: "- agent " + name + ": key " + fp,
				do: func(ctx context.Context) (string, error) {
					_, err := m.RemoveAgentKey(ctx, by, name, fp)
					return "", err
				}})
		}
		if have.Disabled != disabled {
			same = false
			p.changes = append(p.changes, change{line: fmt.Sprintf("~ agent %s: disabled %v -> %v", name, have.Disabled, disabled),
				do: func(ctx context.Context) (string, error) {
					_, err := m.SetAgentDisabled(ctx, by, name, disabled)
					return "", err
				}})
		}
		if same {
			p.unchanged++
		}
	}

	// Connections.
	connNames := map[string]bool{}
	for i, c := range f.Connections {
		where := fmt.Sprintf("connection %q (connection #%d)", c.Alias, i+1)
		if ch, ok := planConnection(ctx, m, f, c, where, cur, connNames, opts, by, pe); ok {
			if ch == nil {
				p.unchanged++
			} else {
				p.changes = append(p.changes, *ch)
			}
		}
	}

	// Notification channels.
	chNames := map[string]bool{}
	for i, c := range f.Notify {
		where := fmt.Sprintf("notify %q (notify #%d)", c.Name, i+1)
		if ch, ok := planChannel(ctx, m, f, c, where, cur, chNames, by, pe); ok {
			if ch == nil {
				p.unchanged++
			} else {
				p.changes = append(p.changes, *ch)
			}
		}
	}

	// Grants.
	grantKeys := map[[2]string]bool{}
	for i, g := range f.Grants {
		where := fmt.Sprintf("grant %s on %s (grant #%d)", g.Agent, g.Connection, i+1)
		key := [2]string{g.Agent, g.Connection}
		if grantKeys[key] {
			pe.add("%s: declared twice", where)
			continue
		}
		grantKeys[key] = true
		if _, ok := cur.agents[g.Agent]; !ok && !agentNames[g.Agent] {
			pe.add("%s: no agent %q in the file or the database", where, g.Agent)
			continue
		}
		if _, ok := cur.conns[g.Connection]; !ok && !connNames[g.Connection] {
			pe.add("%s: no connection %q in the file or the database", where, g.Connection)
			continue
		}
		rules := store.DefaultRules()
		bad := false
		for _, r := range []struct {
			name, val string
			dst       *store.Rule
		}{{"read", g.Read, &rules.Read}, {"write", g.Write, &rules.Write}, {"destructive", g.Destructive, &rules.Destructive}} {
			if r.val == "" {
				continue
			}
			rule, err := store.ParseRule(r.val)
			if err != nil {
				pe.add("%s: %s: %q: want allow, ask or deny", where, r.name, r.val)
				bad = true
				continue
			}
			*r.dst = rule
		}
		if bad {
			continue
		}
		env := store.Env("")
		if c, ok := cur.conns[g.Connection]; ok {
			env = c.Env
		}
		for _, c := range f.Connections {
			if c.Alias == g.Connection && c.Env != "" {
				env = store.Env(c.Env)
			}
		}
		if err := store.ValidateGrant(env, rules); err != nil {
			pe.add("%s: %s", where, errText(err))
			continue
		}
		have, exists := cur.grants[key]
		if exists && have.Rules == rules {
			p.unchanged++
			continue
		}
		line := "+ grant " + g.Agent + " " + g.Connection + ": " + manage.RulesText(rules)
		if exists {
			line = "~ grant " + g.Agent + " " + g.Connection + ": " + manage.RulesText(rules) + " (was " + manage.RulesText(have.Rules) + ")"
		}
		agent, alias := g.Agent, g.Connection
		p.changes = append(p.changes, change{line: line, do: func(ctx context.Context) (string, error) {
			_, err := m.SetGrant(ctx, by, agent, alias, manage.RulesChange{Read: &rules.Read, Write: &rules.Write, Destructive: &rules.Destructive})
			return "", err
		}})
	}

	// What the file does not name: removed with Prune, grants first.
	var prune []change
	for _, key := range sortedKeys(cur.grants, func(a, b [2]string) bool { return a[0]+"\x00"+a[1] < b[0]+"\x00"+b[1] }) {
		if grantKeys[key] {
			continue
		}
		agent, alias := key[0], key[1]
		prune = append(prune, change{line: "- grant " + agent + " " + alias, do: func(ctx context.Context) (string, error) {
			_, err := m.RevokeGrant(ctx, by, agent, alias)
			if errors.Is(err, store.ErrNotFound) {
				return "", nil // gone with its agent or connection
			}
			return "", err
		}})
	}
	for _, name := range sortedKeys(cur.conns, strLess) {
		if !connNames[name] {
			alias := name
			prune = append(prune, change{line: "- connection " + alias, do: func(ctx context.Context) (string, error) {
				_, err := m.RemoveConnection(ctx, by, alias)
				return "", err
			}})
		}
	}
	for _, name := range sortedKeys(cur.agents, strLess) {
		if !agentNames[name] {
			n := name
			prune = append(prune, change{line: "- agent " + n, do: func(ctx context.Context) (string, error) {
				_, err := m.RemoveAgent(ctx, by, n)
				return "", err
			}})
		}
	}
	for _, name := range sortedKeys(cur.channels, strLess) {
		if !chNames[name] {
			n := name
			prune = append(prune, change{line: "- notify " + n, do: func(ctx context.Context) (string, error) {
				_, err := m.RemoveChannel(ctx, by, n)
				return "", err
			}})
		}
	}
	if opts.Prune {
		p.changes = append(p.changes, prune...)
	} else {
		for _, c := range prune {
			p.kept = append(p.kept, strings.TrimPrefix(c.line, "- "))
		}
	}
	if err := pe.err(); err != nil {
		return nil, err
	}
	return p, nil
}

func strLess(a, b string) bool { return a < b }

// sortedKeys lists a map's keys in order.
func sortedKeys[K comparable, V any](m map[K]V, less func(a, b K) bool) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return less(keys[i], keys[j]) })
	return keys
}

// planConnection plans one declared connection: nil and true when it is as
// declared, false when it is invalid (the mistake is in pe).
func planConnection(ctx context.Context, m *manage.Manager, f *File, c Connection, where string, cur *current,
	seen map[string]bool, opts Options, by policy.Actor, pe *planError) (*change, bool) {
	if err := store.ValidateName("connection", c.Alias); err != nil {
		pe.add("%s: %s", where, errText(err))
		return nil, false
	}
	if seen[c.Alias] {
		pe.add("%s: declared twice", where)
		return nil, false
	}
	seen[c.Alias] = true
	port := c.Port
	if port == 0 {
		port = store.DefaultSSHPort
	}
	if err := store.ValidateTarget(c.Alias, c.Host, port, c.User); err != nil {
		pe.add("%s: %s", where, errText(err))
		return nil, false
	}
	env := store.EnvDev
	if c.Env != "" {
		e, err := store.ParseEnv(c.Env)
		if err != nil {
			pe.add("%s: %s", where, errText(err))
			return nil, false
		}
		env = e
	}
	if c.Recipe != "" && m.Catalog().Get(c.Recipe) == nil {
		pe.add("%s: unknown recipe %q (postern recipes list)", where, c.Recipe)
		return nil, false
	}
	rs, rsReason, err := readSandboxOf(c)
	if err != nil {
		pe.add("%s: %s", where, err)
		return nil, false
	}
	var fps []string
	for _, l := range c.HostKeys {
		_, k, err := store.ParseHostKeyLine(l)
		if err != nil {
			pe.add("%s: host_keys: %s", where, errText(err))
			return nil, false
		}
		fps = append(fps, ssh.FingerprintSHA256(k))
	}
	switch {
	case len(c.HostKeys) > 0 && c.AcceptNewHostKey:
		pe.add("%s: give host_keys or accept_new_host_key, not both", where)
		return nil, false
	case c.KeyFile != "" && c.GenerateKey:
		pe.add("%s: give key_file or generate_key, not both", where)
		return nil, false
	}
	var key []byte
	var pub ssh.PublicKey
	if c.KeyFile != "" {
		b, err := f.readFile(c.KeyFile, "key_file")
		if err != nil {
			pe.add("%s: %s", where, err)
			return nil, false
		}
		if err := store.CheckPrivateKey(b); err != nil {
			pe.add("%s: key_file %s: %s", where, c.KeyFile, errText(err))
			return nil, false
		}
		signer, err := ssh.ParsePrivateKey(b)
		if err != nil {
			pe.add("%s: key_file %s does not parse", where, c.KeyFile)
			return nil, false
		}
		key, pub = b, signer.PublicKey()
	}
	checkOpts := manage.CheckOptions{AllowUnverified: opts.AllowUnverified || c.AllowUnverified, Timeout: opts.Timeout}
	alias := c.Alias
	have, exists := cur.conns[c.Alias]
	if !exists {
		switch {
		case len(c.HostKeys) == 0 && !c.AcceptNewHostKey:
			pe.add("%s: a new connection needs host_keys or accept_new_host_key", where)
			return nil, false
		case key == nil && !c.GenerateKey:
			pe.add("%s: a new connection needs key_file or generate_key", where)
			return nil, false
		}
		spec := manage.ConnectionSpec{Alias: c.Alias, Host: c.Host, Port: port, User: c.User, Env: env, Recipe: c.Recipe,
			HostKeys: c.HostKeys, AcceptNewHostKey: c.AcceptNewHostKey, PrivateKey: key, GenerateKey: c.GenerateKey,
			ReadSandbox: rs, ReadSandboxReason: rsReason}
		pin := strings.Join(fps, ", ")
		if c.AcceptNewHostKey {
			pin = "the key it presents now"
		}
		keyText := "generated"
		if pub != nil {
			keyText = ssh.FingerprintSHA256(pub)
		}
		return &change{
			line: fmt.Sprintf("+ connection %s: %s@%s:%d, env %s, host key %s, key %s, read sandbox %s", c.Alias, c.User, c.Host, port, env, pin, keyText, rs),
			do: func(ctx context.Context) (string, error) {
				res, err := m.AddConnection(ctx, by, spec, checkOpts)
				return connectionNote(res), err
			}}, true
	}
	var e manage.ConnectionEdit
	var diffs []string
	if c.Host != have.Host {
		e.Host = &c.Host
		diffs = append(diffs, "host "+have.Host+" -> "+c.Host)
	}
	if port != have.Port {
		e.Port = &port
		diffs = append(diffs, "port "+strconv.Itoa(have.Port)+" -> "+strconv.Itoa(port))
	}
	if c.User != have.User {
		e.User = &c.User
		diffs = append(diffs, "user "+have.User+" -> "+c.User)
	}
	if env != have.Env {
		e.Env = &env
		diffs = append(diffs, "env "+string(have.Env)+" -> "+string(env))
	}
	if c.Recipe != have.Recipe {
		recipe := c.Recipe
		e.Recipe = &recipe
		diffs = append(diffs, "recipe "+orNone(have.Recipe)+" -> "+orNone(recipe))
	}
	if rs != have.ReadSandbox || rs == store.ReadSandboxOff && rsReason != have.ReadSandboxReason {
		e.ReadSandbox, e.ReadSandboxReason = &rs, rsReason
		diffs = append(diffs, "read sandbox "+string(have.ReadSandbox)+" -> "+string(rs))
	}
	if len(fps) > 0 {
		var haveFPs []string
		keys, _ := have.PinnedKeys()
		for _, k := range keys {
			haveFPs = append(haveFPs, ssh.FingerprintSHA256(k))
		}
		if !sameSet(fps, haveFPs) {
			e.HostKeys = c.HostKeys
			diffs = append(diffs, "host key "+strings.Join(haveFPs, ", ")+" -> "+strings.Join(fps, ", "))
		}
	}
	if pub != nil {
		stored, err := m.Store().ConnectionPublicKey(ctx, have.ID)
		if err != nil {
			pe.add("%s: the stored key cannot be read to compare: %s", where, errText(err))
			return nil, false
		}
		if string(stored.Marshal()) != string(pub.Marshal()) {
			e.PrivateKey = key
			diffs = append(diffs, "key "+ssh.FingerprintSHA256(stored)+" -> "+ssh.FingerprintSHA256(pub))
		}
	}
	if len(diffs) == 0 {
		return nil, true
	}
	return &change{
		line: "~ connection " + c.Alias + ": " + strings.Join(diffs, ", "),
		do: func(ctx context.Context) (string, error) {
			res, err := m.UpdateConnection(ctx, by, alias, e, checkOpts)
			return connectionNote(res), err
		}}, true
}

// connectionNote is what a connection's change found: its key check, the
// public line of a generated key.
func connectionNote(res manage.ConnectionResult) string {
	var parts []string
	if res.Checked {
		parts = append(parts, "key check: "+model.StatusText(string(manage.KeyStatusOf(res.Check.Status)), res.Check.Message, false))
	}
	if res.Generated && res.PublicKey != nil && res.Stored {
		parts = append(parts, "install on the target: "+model.AuthorizedKeyLine(res.PublicKey, res.Conn.Alias))
	}
	if res.Probed {
		parts = append(parts, "read sandbox probe: "+string(res.Probe.Found))
	}
	if res.Checked && res.Stored && res.Check.Status != recipes.StatusOK {
		parts = append(parts, "stored unverified")
	}
	return strings.Join(parts, "; ")
}

// planChannel plans one declared notification channel.
func planChannel(ctx context.Context, m *manage.Manager, f *File, c Channel, where string, cur *current,
	seen map[string]bool, by policy.Actor, pe *planError) (*change, bool) {
	if err := store.ValidateName("notification channel", c.Name); err != nil {
		pe.add("%s: %s", where, errText(err))
		return nil, false
	}
	if seen[c.Name] {
		pe.add("%s: declared twice", where)
		return nil, false
	}
	seen[c.Name] = true
	format, err := store.ParseNotifyFormat(c.Format)
	if err != nil {
		pe.add("%s: %s", where, errText(err))
		return nil, false
	}
	onPending, onDecided, err := store.ParseNotifyEvents(strings.Join(c.Events, ","))
	if err != nil {
		pe.add("%s: %s", where, errText(err))
		return nil, false
	}
	var url *string
	switch {
	case c.URL != "" && c.URLFile != "":
		pe.add("%s: give url or url_file, not both", where)
		return nil, false
	case c.URLFile != "":
		b, err := f.readFile(c.URLFile, "url_file")
		if err != nil {
			pe.add("%s: %s", where, err)
			return nil, false
		}
		u := strings.TrimSpace(string(b))
		url = &u
	case c.URL != "":
		url = &c.URL
	}
	if url != nil {
		if _, err := store.ParseNotifyURL(*url); err != nil {
			pe.add("%s: %s", where, errText(err))
			return nil, false
		}
	}
	var secret *[]byte
	if c.SecretFile != "" {
		b, err := f.readFile(c.SecretFile, "secret_file")
		if err != nil {
			pe.add("%s: %s", where, err)
			return nil, false
		}
		s := []byte(strings.TrimSpace(string(b)))
		secret = &s
	}
	name := c.Name
	have, exists := cur.channels[c.Name]
	if !exists {
		if url == nil {
			pe.add("%s: a new channel needs url_file (or url)", where)
			return nil, false
		}
		nc := store.NewNotifyChannel{Name: c.Name, URL: *url, Format: format, OnPending: onPending, OnDecided: onDecided}
		if secret != nil {
			nc.Secret = *secret
		}
		shown, _ := store.ParseNotifyURL(*url)
		return &change{line: fmt.Sprintf("+ notify %s: %s to %s, events %s", c.Name, format, shown, eventsText(onPending, onDecided)),
			do: func(ctx context.Context) (string, error) {
				_, err := m.AddChannel(ctx, by, nc)
				return "", err
			}}, true
	}
	var ch store.NotifyChannelChange
	var diffs []string
	if format != have.Format {
		ch.Format = &format
		diffs = append(diffs, "format "+string(have.Format)+" -> "+string(format))
	}
	if onPending != have.OnPending || onDecided != have.OnDecided {
		ch.OnPending, ch.OnDecided = &onPending, &onDecided
		diffs = append(diffs, "events "+eventsText(have.OnPending, have.OnDecided)+" -> "+eventsText(onPending, onDecided))
	}
	if url != nil || secret != nil {
		t, err := m.Store().NotifyChannelTarget(ctx, have.ID)
		if err != nil {
			pe.add("%s: the stored URL cannot be read to compare: %s", where, errText(err))
			return nil, false
		}
		if url != nil && *url != t.URL {
			ch.URL = url
			shown, _ := store.ParseNotifyURL(*url)
			diffs = append(diffs, "url -> "+shown)
		}
		if secret != nil && string(*secret) != string(t.Secret) {
			ch.Secret = secret
			diffs = append(diffs, "secret changed")
		}
		clear(t.Secret)
	}
	if len(diffs) == 0 {
		return nil, true
	}
	return &change{line: "~ notify " + c.Name + ": " + strings.Join(diffs, ", "),
		do: func(ctx context.Context) (string, error) {
			_, err := m.UpdateChannel(ctx, by, name, ch)
			return "", err
		}}, true
}

func eventsText(onPending, onDecided bool) string {
	var ev []string
	if onPending {
		ev = append(ev, "pending")
	}
	if onDecided {
		ev = append(ev, "decided")
	}
	return strings.Join(ev, ",")
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
