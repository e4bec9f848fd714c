package notify

import (
	"net"
	"net/url"
	"time"

	"github.com/postern/postern/store"
)

// ChannelJSON is a notification channel as `postern notify list -o json`
// and the REST API (GET /v1/notifications) show it: one shape for both. It
// has no field that could hold the URL's path or the secret: the URL is
// shown as scheme://host/…, and the secret only as whether there is one.
type ChannelJSON struct {
	ID             string   `json:"id"`
	Name           string   `json:"name"`
	Format         string   `json:"format"`
	URL            string   `json:"url"`    // scheme://host/…
	Events         []string `json:"events"` // pending, decided
	SecretSet      bool     `json:"secret_set"`
	LastDeliveryAt *string  `json:"last_delivery_at"` // null if nothing was ever delivered
	LastFailureAt  *string  `json:"last_failure_at"`  // null if nothing ever failed
	LastError      string   `json:"last_error"`       // why the last failure failed
	Queued         int      `json:"queued"`           // notifications waiting to be (re)sent
	CreatedAt      string   `json:"created_at"`
	ModifiedAt     string   `json:"modified_at"`
}

// ChannelView is c as ChannelJSON.
func ChannelView(c store.NotifyChannel) ChannelJSON {
	v := ChannelJSON{ID: c.ID, Name: c.Name, Format: string(c.Format), URL: c.URLShown, Events: []string{},
		SecretSet: c.HasSecret, LastError: c.LastError, Queued: c.Queued,
		CreatedAt: rfc3339(c.CreatedAt), ModifiedAt: rfc3339(c.ModifiedAt)}
	for _, e := range c.Events() {
		v.Events = append(v.Events, string(e))
	}
	v.LastDeliveryAt, v.LastFailureAt = optTime(c.LastDeliveryAt), optTime(c.LastFailureAt)
	return v
}

// optTime is a time that may never have happened: nil for the zero time.
func optTime(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := rfc3339(t)
	return &s
}

// PlainHTTPWarning says why a channel's URL is a risk, or "" when it is
// not: an http:// URL to a host other than loopback sends the approval's
// details, the signature and any access token in the clear.
func PlainHTTPWarning(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "http" {
		return ""
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); (ip != nil && ip.IsLoopback()) || host == "localhost" {
		return ""
	}
	return "the URL is plain http: notifications (and any access token) cross the network unencrypted; use https"
}
