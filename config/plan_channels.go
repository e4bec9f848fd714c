package config

import (
	"context"
	"fmt"
	"strings"

	"github.com/postern/postern/store"
)

// channelDecl is a [[notify]] that passed its checks, with what apply read
// for it.
type channelDecl struct {
	name   string
	format store.NotifyFormat
	events store.NotifySubscriptions
	url    *string // nil when the file names none
	secret *[]byte // likewise
}

// channel plans one declared notification channel: added, changed, or as
// declared.
func (p *planner) channel(ctx context.Context, where string, c Channel) {
	d, ok := p.checkChannel(where, c)
	if !ok {
		return
	}
	have, exists := p.cur.channels[d.name]
	if !exists {
		p.addChannel(where, d)
		return
	}
	p.updateChannel(ctx, where, d, have)
}

// checkChannel checks a channel's name, format, events and URL, and reads
// its URL and secret files.
func (p *planner) checkChannel(where string, c Channel) (*channelDecl, bool) {
	if err := store.ValidateName("notification channel", c.Name); err != nil {
		p.bad(where, "%s", errText(err))
		return nil, false
	}
	if !p.firstTime(p.channels, c.Name, where) {
		return nil, false
	}
	d := &channelDecl{name: c.Name}
	var err error
	if d.format, err = store.ParseNotifyFormat(c.Format); err != nil {
		p.bad(where, "%s", errText(err))
		return nil, false
	}
	if d.events, err = store.ParseNotifyEvents(strings.Join(c.Events, ",")); err != nil {
		p.bad(where, "%s", errText(err))
		return nil, false
	}
	switch {
	case c.URL != "" && c.URLFile != "":
		p.bad(where, "give url or url_file, not both")
		return nil, false
	case c.URLFile != "":
		b, err := p.read(c.URLFile, "url_file", "notify "+c.Name, maxURLFile)
		if err != nil {
			p.bad(where, "%s", err)
			return nil, false
		}
		u := strings.TrimSpace(string(b))
		d.url = &u
	case c.URL != "":
		d.url = &c.URL
	}
	if d.url != nil {
		if _, err := store.ParseNotifyURL(*d.url); err != nil {
			p.bad(where, "%s", errText(err))
			return nil, false
		}
	}
	if c.SecretFile != "" {
		b, err := p.read(c.SecretFile, "secret_file", "notify "+c.Name, maxSecretFile)
		if err != nil {
			p.bad(where, "%s", err)
			return nil, false
		}
		s := []byte(strings.TrimSpace(string(b)))
		d.secret = &s
	}
	return d, true
}

// addChannel plans a new channel, which needs a URL.
func (p *planner) addChannel(where string, d *channelDecl) {
	if d.url == nil {
		p.bad(where, "a new channel needs url_file (or url)")
		return
	}
	nc := store.NewNotifyChannel{Name: d.name, URL: *d.url, Format: d.format}
	nc.SetSubscriptions(d.events)
	if d.secret != nil {
		nc.Secret = *d.secret
	}
	shown, _ := store.ParseNotifyURL(*d.url)
	p.add(fmt.Sprintf("+ notify %s: %s to %s, events %s", d.name, d.format, shown, d.events),
		func(ctx context.Context) (string, error) {
			_, err := p.m.AddChannel(ctx, p.by, nc)
			return "", err
		})
}

// updateChannel plans one change of what differs: format, events, and the
// URL and secret when the file gives them (compared with the stored ones,
// which are read and cleared).
func (p *planner) updateChannel(ctx context.Context, where string, d *channelDecl, have store.NotifyChannel) {
	var ch store.NotifyChannelChange
	var diffs []string
	if d.format != have.Format {
		ch.Format = &d.format
		diffs = append(diffs, "format "+string(have.Format)+" -> "+string(d.format))
	}
	if d.events != have.Subscriptions() {
		ch.SetSubscriptions(d.events)
		diffs = append(diffs, "events "+have.Subscriptions().String()+" -> "+d.events.String())
	}
	if d.url != nil || d.secret != nil {
		t, err := p.m.Store().NotifyChannelTarget(ctx, have.ID)
		if err != nil {
			p.bad(where, "the stored URL cannot be read to compare: %s", errText(err))
			return
		}
		if d.url != nil && *d.url != t.URL {
			ch.URL = d.url
			shown, _ := store.ParseNotifyURL(*d.url)
			diffs = append(diffs, "url -> "+shown)
		}
		if d.secret != nil && string(*d.secret) != string(t.Secret) {
			ch.Secret = d.secret
			diffs = append(diffs, "secret changed")
		}
		clear(t.Secret)
	}
	if len(diffs) == 0 {
		p.out.unchanged++
		return
	}
	p.add("~ notify "+d.name+": "+strings.Join(diffs, ", "), func(ctx context.Context) (string, error) {
		_, err := p.m.UpdateChannel(ctx, p.by, d.name, ch)
		return "", err
	})
}
