package notify

import (
	"net"
	"net/url"
)

// A channel as lists show it is model.Channel, the shape `postern notify
// list -o json` and GET /v1/notifications share.

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
