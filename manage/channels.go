package manage

import (
	"context"
	"strings"

	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
)

// AddChannel adds a notification channel; its URL and secret are sealed
// and named in the audit row only as scheme://host/… and "secret set".
func (m *Manager) AddChannel(ctx context.Context, by policy.Actor, nc store.NewNotifyChannel) (*store.NotifyChannel, error) {
	if err := m.configure(ctx, by); err != nil {
		return nil, err
	}
	shown, err := store.ParseNotifyURL(nc.URL)
	if err != nil {
		return nil, err
	}
	aud, p := audited(policy.Change{Actor: by,
		What: "notify add " + nc.Name + ": " + channelText(nc.Format, shown, nc.Secret != nil, nc.Subscriptions())})
	c, err := m.st.CreateNotifyChannel(ctx, aud, nc)
	if err != nil {
		return nil, err
	}
	return c, checkAudited(p, "notify add")
}

// UpdateChannel changes a notification channel.
func (m *Manager) UpdateChannel(ctx context.Context, by policy.Actor, ref string, ch store.NotifyChannelChange) (*store.NotifyChannel, error) {
	if err := m.configure(ctx, by); err != nil {
		return nil, err
	}
	cur, err := m.st.NotifyChannel(ctx, ref)
	if err != nil {
		return nil, err
	}
	var changes []string
	if ch.Format != nil && *ch.Format != cur.Format {
		changes = append(changes, "format "+string(cur.Format)+" -> "+string(*ch.Format))
	}
	if ch.URL != nil {
		shown, err := store.ParseNotifyURL(*ch.URL)
		if err != nil {
			return nil, err
		}
		changes = append(changes, "url -> "+shown)
	}
	if ch.Secret != nil {
		changes = append(changes, "secret "+map[bool]string{true: "set", false: "removed"}[*ch.Secret != nil])
	}
	if ch.ChangesSubscriptions() {
		changes = append(changes, "events "+ch.Subscriptions(cur.Subscriptions()).String())
	}
	if len(changes) == 0 {
		changes = append(changes, "unchanged")
	}
	aud, p := audited(policy.Change{Actor: by, What: "notify update " + cur.Name + ": " + strings.Join(changes, ", ")})
	c, err := m.st.UpdateNotifyChannel(ctx, aud, cur.ID, ch)
	if err != nil {
		return nil, err
	}
	return c, checkAudited(p, "notify update")
}

// RemoveChannel deletes a notification channel with its queued messages.
func (m *Manager) RemoveChannel(ctx context.Context, by policy.Actor, ref string) (*store.NotifyChannel, error) {
	if err := m.configure(ctx, by); err != nil {
		return nil, err
	}
	cur, err := m.st.NotifyChannel(ctx, ref)
	if err != nil {
		return nil, err
	}
	aud, p := audited(policy.Change{Actor: by, What: "notify remove " + cur.Name + ": " +
		channelText(cur.Format, cur.URLShown, cur.HasSecret, cur.Subscriptions())})
	c, err := m.st.RemoveNotifyChannel(ctx, aud, cur.ID)
	if err != nil {
		return nil, err
	}
	return c, checkAudited(p, "notify remove")
}

func channelText(format store.NotifyFormat, shown string, secret bool, events store.NotifySubscriptions) string {
	if format == "" {
		format = store.NotifyJSON
	}
	s := string(format) + " to " + shown + ", events " + events.String()
	if secret {
		s += ", secret set"
	}
	return s
}
