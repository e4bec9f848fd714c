// Package notify delivers approval events to webhook channels: it tells the
// people who decide that a request waits (event "pending"), what became
// of it (event "decided"), and, once per episode, that an agent or a
// connection has as many requests waiting as its bound allows and further
// ones are denied (event "bound"), in one of three formats — postern's own JSON
// payload signed with HMAC-SHA256, a Slack incoming-webhook message, or an
// ntfy publish with a view action (docs/notifications.md).
//
// # Delivery through the database
//
// Nothing here is called when an approval is made or decided. The store
// writes one outbox row per subscribed channel in the transaction that
// creates or decides the approval (store.RequestApproval,
// store.DecideApproval), so a request made by the bastion, a decision made
// with the admin CLI in another process, or either made by another postern
// serving the same database, is queued the moment it commits and never
// waits for HTTP. A Dispatcher, run by `postern serve` (and `demo`), polls
// the outbox every Config.Poll, claims due rows with a lease
// (store.ClaimNotifications: one conditional UPDATE, so two dispatchers
// never hold one row), renders and sends each with a bounded timeout, and
// writes the outcome only if it still holds the claim.
//
// A failed attempt (no answer, a timeout, 408, 425, 429 or a 5xx) is tried
// again after an exponential backoff with jitter, honouring Retry-After,
// until the event's give-up time: the request's expiry for a pending
// event, the decision plus store.NotifyDecidedWindow for a decided one. A
// 3xx or another 4xx is final: the receiver understood and refused, and the
// same bytes would be refused again. A pending event whose request was
// decided before it could be sent is cancelled, not sent late.
//
// # What is sent, and what is not
//
// Every message is built from the approval as stored: the operation and
// reasons are the redacted text the store keeps, and they, the agent's stated
// reason and a denial's note go through policy.Visible, so that a
// notification shows the bytes that run. A channel's URL and secret are
// opened from the store for the one request that uses them and never
// appear in a log line, an error or a stored failure: a failure names the
// channel and says what happened, and errors of the HTTP client (which
// quote the URL) are reduced to their cause.
//
// The HTTP client follows no redirect (the configured URL is the receiver;
// a 3xx is reported as a failure to fix), keeps no idle connection (so no
// goroutine outlives an attempt), and uses the proxy named by the usual
// HTTPS_PROXY / HTTP_PROXY / NO_PROXY environment, as a host whose egress
// goes through a proxy needs.
package notify
