// Package web serves postern's admin web page and its REST API: approvals
// to decide, the audit log, connections, grants, recipes, notification
// channels, console tokens and admins with their roles.
//
// One Server answers both, over HTTPS only (TLS 1.2 or newer):
//
//   - The page, server-rendered with html/template and a little plain
//     JavaScript loaded from /static (the Content-Security-Policy forbids
//     inline script). Admins log in with a name and password (argon2id
//     hashes); a session is a random cookie value of which the store keeps
//     only the SHA-256; every state-changing form carries the session's CSRF
//     token. Pending approvals update live over server-sent events.
//   - The API under /v1, for automation, authenticated by console tokens
//     (bearer tokens of which only the SHA-256 is stored). Answers are
//     {"data": ..., "request_id": ...}; errors are honest statuses with
//     {"error": {"code", "message", "field"}, "request_id"}.
//
// Everything shown comes from package store through package policy's rules:
// approvals are decided with policy.Engine (two-person rule, single
// decision), operations are the redacted text the store keeps, and sealed
// keys are never read here — a connection is shown by its key's status and
// its pinned host keys' fingerprints, never by key material. Notification
// channels (package notify) are shown the same way: a URL as
// scheme://host/…, a secret as set or not set; the Test button and its API
// call send through Config.Notifier.
//
// Agents' command text is untrusted: it reaches the page only through
// html/template's escaping and the API only as JSON strings.
package web
