package manage

import (
	"context"
	"strings"

	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
)

// AddAgent registers an agent with its public keys (authorized_keys lines,
// at least one). The first key creates the agent; each further one is added
// in its own audited step.
func (m *Manager) AddAgent(ctx context.Context, by policy.Actor, name string, keys []string) (*store.Agent, error) {
	if err := m.configure(ctx, by); err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, store.Invalidf("agent %s: give at least one public key", name)
	}
	_, fp, err := store.ParseAuthorizedKey(keys[0])
	if err != nil {
		return nil, err
	}
	aud, p := audited(policy.Change{Actor: by, AgentName: name,
		What: "agent add " + name + ": key " + fp})
	a, err := m.st.CreateAgent(ctx, aud, name, keys[0])
	if err != nil {
		return nil, err
	}
	if err := checkAudited(p, "agent add"); err != nil {
		return a, err
	}
	for _, k := range keys[1:] {
		if a, err = m.AddAgentKey(ctx, by, name, k); err != nil {
			return a, err
		}
	}
	return a, nil
}

// AddAgentKey gives an existing agent another public key.
func (m *Manager) AddAgentKey(ctx context.Context, by policy.Actor, name, key string) (*store.Agent, error) {
	if err := m.configure(ctx, by); err != nil {
		return nil, err
	}
	_, fp, err := store.ParseAuthorizedKey(key)
	if err != nil {
		return nil, err
	}
	cur, err := m.st.AgentByName(ctx, name)
	if err != nil {
		return nil, err
	}
	aud, p := audited(policy.Change{Actor: by, AgentID: cur.ID, AgentName: cur.Name,
		What: "agent key add " + name + ": " + fp})
	a, err := m.st.AddAgentKey(ctx, aud, name, key)
	if err != nil {
		return nil, err
	}
	return a, checkAudited(p, "agent key add")
}

// RemoveAgentKey removes one key, by its SHA256 fingerprint, from an agent.
func (m *Manager) RemoveAgentKey(ctx context.Context, by policy.Actor, name, fingerprint string) (*store.Agent, error) {
	if err := m.configure(ctx, by); err != nil {
		return nil, err
	}
	cur, err := m.st.AgentByName(ctx, name)
	if err != nil {
		return nil, err
	}
	aud, p := audited(policy.Change{Actor: by, AgentID: cur.ID, AgentName: cur.Name,
		What: "agent key remove " + name + ": " + fingerprint})
	a, err := m.st.RemoveAgentKey(ctx, aud, name, fingerprint)
	if err != nil {
		return nil, err
	}
	return a, checkAudited(p, "agent key remove")
}

// SetAgentKeys makes the agent's keys exactly keys: the ones missing are
// added, then the ones not listed removed (so that the agent always has one).
func (m *Manager) SetAgentKeys(ctx context.Context, by policy.Actor, name string, keys []string) (*store.Agent, error) {
	if err := m.configure(ctx, by); err != nil {
		return nil, err
	}
	cur, err := m.st.AgentByName(ctx, name)
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, store.Invalidf("agent %s: an agent keeps at least one key; remove the agent instead", name)
	}
	want := map[string]bool{}
	var order []string
	for _, k := range keys {
		_, fp, err := store.ParseAuthorizedKey(k)
		if err != nil {
			return nil, err
		}
		if !want[fp] {
			want[fp] = true
			order = append(order, k)
		}
	}
	have := map[string]bool{}
	for _, k := range cur.Keys {
		have[k.Fingerprint] = true
	}
	a := cur
	for _, k := range order {
		_, fp, _ := store.ParseAuthorizedKey(k)
		if !have[fp] {
			if a, err = m.AddAgentKey(ctx, by, name, k); err != nil {
				return a, err
			}
		}
	}
	for _, k := range cur.Keys {
		if !want[k.Fingerprint] {
			if a, err = m.RemoveAgentKey(ctx, by, name, k.Fingerprint); err != nil {
				return a, err
			}
		}
	}
	return a, nil
}

// SetAgentDisabled disables or re-enables an agent.
func (m *Manager) SetAgentDisabled(ctx context.Context, by policy.Actor, name string, disabled bool) (*store.Agent, error) {
	if err := m.configure(ctx, by); err != nil {
		return nil, err
	}
	cur, err := m.st.AgentByName(ctx, name)
	if err != nil {
		return nil, err
	}
	verb := "enable"
	if disabled {
		verb = "disable"
	}
	aud, p := audited(policy.Change{Actor: by, AgentID: cur.ID, AgentName: cur.Name, What: "agent " + verb + " " + name})
	a, err := m.st.SetAgentDisabled(ctx, aud, name, disabled)
	if err != nil {
		return nil, err
	}
	return a, checkAudited(p, "agent "+verb)
}

// RemoveAgent deletes an agent with its keys and grants.
func (m *Manager) RemoveAgent(ctx context.Context, by policy.Actor, name string) (*store.Agent, error) {
	if err := m.configure(ctx, by); err != nil {
		return nil, err
	}
	cur, err := m.st.AgentByName(ctx, name)
	if err != nil {
		return nil, err
	}
	fps := make([]string, 0, len(cur.Keys))
	for _, k := range cur.Keys {
		fps = append(fps, k.Fingerprint)
	}
	aud, p := audited(policy.Change{Actor: by, AgentID: cur.ID, AgentName: cur.Name,
		What: "agent remove " + name + ": keys " + strings.Join(fps, ", ")})
	if err := m.st.RemoveAgent(ctx, aud, name); err != nil {
		return nil, err
	}
	return cur, checkAudited(p, "agent remove")
}
