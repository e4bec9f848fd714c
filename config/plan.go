package config

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/postern/postern/manage"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
)

// change is one step of a plan.
type change struct {
	line string                                    // "+ agent bot: key SHA256:..." as printed
	do   func(ctx context.Context) (string, error) // makes it; returns a note to print after it
}

// plan is what Apply found to do.
type plan struct {
	changes   []change
	unchanged int
	kept      []string // "agent bot (not in the file; kept, ...)" as printed, without the indent
	reads     []string // the files read, each "PATH: what it is", for --dry-run
}

// planner makes a plan in named phases, one per kind of resource, in the
// order the changes are made: agents, connections, notification channels,
// grants (a grant may name an agent or a connection the file adds), then
// what the file does not name. Each phase adds its changes to out and its
// mistakes to errs, and goes on after a mistake, so that one run names
// every mistake in the file.
type planner struct {
	m    *manage.Manager
	f    *File
	opts Options
	by   policy.Actor // whom the changes are audited as, via apply
	cur  *current     // what the database holds

	out  plan
	errs planError

	// What the file declares, valid or not: a grant may name it, and the
	// last phase does not remove it.
	agents   map[string]bool
	conns    map[string]bool
	channels map[string]bool
	admins   map[string]bool    // lower-case names
	grants   map[[2]string]bool // agent, alias
	// connEnv is the environment each valid declared connection will
	// have, which its grants' rules are checked against.
	connEnv map[string]store.Env
	// agentUsers and connUsers name, for each agent and connection that
	// a grant in the file uses but the file does not declare, the first
	// such grant: --prune must not remove what the file still uses.
	agentUsers map[string]string
	connUsers  map[string]string
}

// makePlan reads the database and compares f with it. An error means the
// file cannot be applied as written (ErrInvalid, naming every mistake) or
// the database could not be read.
func makePlan(ctx context.Context, m *manage.Manager, f *File, opts Options) (*plan, error) {
	cur, err := readCurrent(ctx, m.Store())
	if err != nil {
		return nil, err
	}
	p := &planner{m: m, f: f, opts: opts, by: opts.Actor, cur: cur,
		agents: map[string]bool{}, conns: map[string]bool{}, channels: map[string]bool{}, grants: map[[2]string]bool{},
		admins:  map[string]bool{},
		connEnv: map[string]store.Env{}, agentUsers: map[string]string{}, connUsers: map[string]string{}}
	if p.by.Via == "" {
		p.by.Via = "apply"
	}
	if f.source != "" {
		p.out.reads = append(p.out.reads, f.source+": the config file")
	}
	for i, a := range f.Agents {
		p.agent(fmt.Sprintf("agent %q (agent #%d)", a.Name, i+1), a)
	}
	for i, c := range f.Connections {
		p.connection(ctx, fmt.Sprintf("connection %q (connection #%d)", c.Alias, i+1), c)
	}
	for i, c := range f.Notify {
		p.channel(ctx, fmt.Sprintf("notify %q (notify #%d)", c.Name, i+1), c)
	}
	for i, g := range f.Grants {
		p.grant(fmt.Sprintf("grant %s on %s (grant #%d)", g.Agent, g.Connection, i+1), g)
	}
	for i, a := range f.Admins {
		p.admin(fmt.Sprintf("admin %q (admin #%d)", a.Name, i+1), a)
	}
	p.notNamed()
	if err := p.errs.err(); err != nil {
		return nil, err
	}
	return &p.out, nil
}

// add puts a change in the plan.
func (p *planner) add(line string, do func(ctx context.Context) (string, error)) {
	p.out.changes = append(p.out.changes, change{line: line, do: do})
}

// read reads a file the config names for owner ("connection web"), and
// lists it among the files read.
func (p *planner) read(name, what, owner string, limit int64) ([]byte, error) {
	b, err := p.f.readFile(name, what, limit)
	if err != nil {
		return nil, err
	}
	p.out.reads = append(p.out.reads, p.f.path(name)+": "+what+" of "+owner)
	return b, nil
}

// bad records a mistake in the resource at where.
func (p *planner) bad(where, format string, args ...any) {
	p.errs.add("%s: %s", where, fmt.Sprintf(format, args...))
}

// firstTime records name as declared in seen, and reports false (with the
// mistake recorded) when it was already.
func (p *planner) firstTime(seen map[string]bool, name, where string) bool {
	if seen[name] {
		p.bad(where, "declared twice")
		return false
	}
	seen[name] = true
	return true
}

// notNamed is the last phase: what the database holds and the file does
// not name is removed with Prune (grants first, so that no removal of an
// agent or a connection takes a grant with it unannounced), else listed as
// kept. An agent or a connection that a grant in the file uses is not the
// file's to remove, declared or not: with Prune, the plan is an error that
// names both, since removing it would take the declared grant with it and
// the same file would no longer apply.
func (p *planner) notNamed() {
	var gone []change
	remove := func(line string, do func(ctx context.Context) (string, error)) {
		gone = append(gone, change{line: line, do: do})
	}
	for _, key := range sortedKeys(p.cur.grants, func(a, b [2]string) bool { return a[0]+"\x00"+a[1] < b[0]+"\x00"+b[1] }) {
		if p.grants[key] {
			continue
		}
		agent, alias := key[0], key[1]
		remove("- grant "+agent+" "+alias, func(ctx context.Context) (string, error) {
			_, err := p.m.RevokeGrant(ctx, p.by, agent, alias)
			if errors.Is(err, store.ErrNotFound) {
				return "", nil // gone with its agent or connection
			}
			return "", err
		})
	}
	for _, alias := range sortedKeys(p.cur.conns, strLess) {
		if user, used := p.connUsers[alias]; used {
			p.usedButUndeclared(user, "connection", alias)
			continue
		}
		if !p.conns[alias] {
			remove("- connection "+alias, func(ctx context.Context) (string, error) {
				_, err := p.m.RemoveConnection(ctx, p.by, alias)
				return "", err
			})
		}
	}
	for _, name := range sortedKeys(p.cur.agents, strLess) {
		if user, used := p.agentUsers[name]; used {
			p.usedButUndeclared(user, "agent", name)
			continue
		}
		if !p.agents[name] {
			remove("- agent "+name, func(ctx context.Context) (string, error) {
				_, err := p.m.RemoveAgent(ctx, p.by, name)
				return "", err
			})
		}
	}
	for _, name := range sortedKeys(p.cur.channels, strLess) {
		if !p.channels[name] {
			remove("- notify "+name, func(ctx context.Context) (string, error) {
				_, err := p.m.RemoveChannel(ctx, p.by, name)
				return "", err
			})
		}
	}
	if p.opts.Prune {
		p.out.changes = append(p.out.changes, gone...)
		return
	}
	for _, c := range gone {
		p.keep(strings.TrimPrefix(c.line, "- "))
	}
}

// keep lists what the file does not name and the plan keeps.
func (p *planner) keep(what string) {
	p.out.kept = append(p.out.kept, what+" (not in the file; kept, --prune removes it)")
}

// usedButUndeclared handles an agent or a connection (kind, name) that the
// grant at where uses and the file does not declare: kept, and under Prune
// a mistake naming both.
func (p *planner) usedButUndeclared(where, kind, name string) {
	if !p.opts.Prune {
		p.out.kept = append(p.out.kept, kind+" "+name+" (not in the file; kept: "+where+" uses it)")
		return
	}
	p.bad(where, "uses %s %q, which the file does not declare, so --prune would remove it and this grant with it: "+
		"declare it in the file (export prints it) or remove the grant", kind, name)
}

// current is what the database holds.
type current struct {
	agents   map[string]store.Agent
	conns    map[string]store.Connection
	grants   map[[2]string]store.Grant // agent name, alias
	channels map[string]store.NotifyChannel
	admins   map[string]store.Admin // by name in lower case: one identity whatever its case
}

func readCurrent(ctx context.Context, st *store.Store) (*current, error) {
	cur := &current{agents: map[string]store.Agent{}, conns: map[string]store.Connection{},
		grants: map[[2]string]store.Grant{}, channels: map[string]store.NotifyChannel{}, admins: map[string]store.Admin{}}
	admins, err := st.ListAdmins(ctx)
	if err != nil {
		return nil, err
	}
	for _, a := range admins {
		cur.admins[strings.ToLower(a.Name)] = a
	}
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

// add records a mistake, escaped (policy.VisibleLine): it quotes names,
// values and paths from the file.
func (e *planError) add(format string, args ...any) {
	e.msgs = append(e.msgs, policy.VisibleLine(fmt.Sprintf(format, args...)))
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
