package config

import (
	"context"
	"fmt"
	"strings"

	"github.com/postern/postern/store"
)

// agentDecl is an [[agent]] that passed its checks.
type agentDecl struct {
	name     string
	disabled bool
	fps      []string          // its keys' fingerprints, in the file's order, each once
	lines    map[string]string // fingerprint → the key's line in the file
}

// agent plans one declared agent: added, changed key by key, or as
// declared.
func (p *planner) agent(where string, a Agent) {
	d, ok := p.checkAgent(where, a)
	if !ok {
		return
	}
	have, exists := p.cur.agents[d.name]
	if !exists {
		p.addAgent(d)
		return
	}
	p.updateAgent(d, have)
}

// checkAgent checks an agent's name and keys.
func (p *planner) checkAgent(where string, a Agent) (*agentDecl, bool) {
	if err := store.ValidateName("agent", a.Name); err != nil {
		p.bad(where, "%s", errText(err))
		return nil, false
	}
	if !p.firstTime(p.agents, a.Name, where) {
		return nil, false
	}
	if len(a.Keys) == 0 {
		p.bad(where, "keys: give at least one public key")
		return nil, false
	}
	d := &agentDecl{name: a.Name, disabled: a.Disabled, lines: map[string]string{}}
	ok := true
	for _, k := range a.Keys {
		_, fp, err := store.ParseAuthorizedKey(k)
		if err != nil {
			p.bad(where, "keys: %s", errText(err))
			ok = false
			continue
		}
		if _, dup := d.lines[fp]; !dup {
			d.fps = append(d.fps, fp)
		}
		d.lines[fp] = k
	}
	return d, ok
}

// addAgent plans a new agent, and disables it if the file says so.
func (p *planner) addAgent(d *agentDecl) {
	keys := make([]string, 0, len(d.fps))
	for _, fp := range d.fps {
		keys = append(keys, d.lines[fp])
	}
	p.add(fmt.Sprintf("+ agent %s: keys %s", d.name, strings.Join(d.fps, ", ")), func(ctx context.Context) (string, error) {
		_, err := p.m.AddAgent(ctx, p.by, d.name, keys)
		return "", err
	})
	if d.disabled {
		p.add("~ agent "+d.name+": disabled", func(ctx context.Context) (string, error) {
			_, err := p.m.SetAgentDisabled(ctx, p.by, d.name, true)
			return "", err
		})
	}
}

// updateAgent plans the keys the agent lacks, the keys the file leaves out
// (removed with Prune, else kept) and its disabled flag.
func (p *planner) updateAgent(d *agentDecl, have store.Agent) {
	same := true
	stored := map[string]bool{}
	for _, k := range have.Keys {
		stored[k.Fingerprint] = true
	}
	for _, fp := range d.fps {
		if stored[fp] {
			continue
		}
		same = false
		line := d.lines[fp]
		p.add("~ agent "+d.name+": add key "+fp, func(ctx context.Context) (string, error) {
			_, err := p.m.AddAgentKey(ctx, p.by, d.name, line)
			return "", err
		})
	}
	for _, k := range have.Keys {
		if _, ok := d.lines[k.Fingerprint]; ok {
			continue
		}
		if !p.opts.Prune {
			p.keep("agent " + d.name + " key " + k.Fingerprint)
			continue
		}
		same = false
		fp := k.Fingerprint
		p.add("- agent "+d.name+": key "+fp, func(ctx context.Context) (string, error) {
			_, err := p.m.RemoveAgentKey(ctx, p.by, d.name, fp)
			return "", err
		})
	}
	if have.Disabled != d.disabled {
		same = false
		p.add(fmt.Sprintf("~ agent %s: disabled %v -> %v", d.name, have.Disabled, d.disabled), func(ctx context.Context) (string, error) {
			_, err := p.m.SetAgentDisabled(ctx, p.by, d.name, d.disabled)
			return "", err
		})
	}
	if same {
		p.out.unchanged++
	}
}
