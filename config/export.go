package config

import (
	"context"

	"github.com/postern/postern/store"
)

// Export reads the database into a File, without a secret: connections
// carry their pinned host keys but no key (apply keeps the stored one when
// the file names none), channels their format and events but neither URL
// nor secret. Applying the result to the same database changes nothing.
func Export(ctx context.Context, st *store.Store) (*File, error) {
	f := &File{}
	agents, err := st.ListAgents(ctx)
	if err != nil {
		return nil, err
	}
	for _, a := range agents {
		x := Agent{Name: a.Name, Disabled: a.Disabled}
		for _, k := range a.Keys {
			x.Keys = append(x.Keys, k.AuthorizedKey)
		}
		f.Agents = append(f.Agents, x)
	}
	conns, err := st.ListConnections(ctx)
	if err != nil {
		return nil, err
	}
	for _, c := range conns {
		x := Connection{Alias: c.Alias, HostKeys: c.HostKeys}
		for _, s := range connSettings() {
			s.export(&c, &x)
		}
		f.Connections = append(f.Connections, x)
	}
	grants, err := st.ListGrants(ctx)
	if err != nil {
		return nil, err
	}
	for _, g := range grants {
		f.Grants = append(f.Grants, Grant{Agent: g.AgentName, Connection: g.Alias, Read: string(g.Rules.Read),
			Write: string(g.Rules.Write), Destructive: string(g.Rules.Destructive)})
	}
	chs, err := st.ListNotifyChannels(ctx)
	if err != nil {
		return nil, err
	}
	for _, c := range chs {
		x := Channel{Name: c.Name, Format: string(c.Format)}
		for _, e := range c.Events() {
			x.Events = append(x.Events, string(e))
		}
		f.Notify = append(f.Notify, x)
	}
	admins, err := st.ListAdmins(ctx)
	if err != nil {
		return nil, err
	}
	for _, a := range admins {
		f.Admins = append(f.Admins, Admin{Name: a.Name, Role: string(a.Role)})
	}
	return f, nil
}

// ExportHeader starts an exported file: what it holds and what it leaves
// out.
const ExportHeader = `# postern configuration, written by postern export.
# Secrets are not in this file: connections keep their sealed keys and
# notification channels their sealed URLs and secrets when it is applied
# (postern apply -f FILE), and admins their passwords. To declare a new
# connection, add key_file (or generate_key = true); for a new channel,
# url_file (and secret_file); for a new admin, password_file.

`
