package web

import (
	"crypto/sha256"
	"net/netip"
	"strings"
	"time"

	"github.com/postern/postern/internal/ratelimit"
)

// Login limits. An account at one source gets 5 failed attempts, then one
// more a minute; a source gets 20 over all accounts, then one more every
// 15 seconds. A success clears its account's count at its source.
const (
	loginAccountBurst = 5
	loginAccountRate  = 1.0 / 60
	loginSourceBurst  = 20
	loginSourceRate   = 1.0 / 15
)

// loginLimiter throttles failed logins, counting them per account and
// source together, and per source alone.
//
// Per account and source, so that nobody can keep an admin out: a stranger
// who fails an admin's password five times from one address throttles
// that address's attempts at that account, and the admin, from any other
// address, logs in as before. (It was per account alone: five wrong
// passwords for an admin's name from anywhere made the page answer 429 to
// the admin for a minute, even with the right password.) The price is
// that a guesser with many sources gets one guess a minute per account
// from each, after the first five; the per-source limit caps how fast any
// one source guesses over all accounts.
//
// A source is an IPv4 address, or an IPv6 /64: a single host is commonly
// given a whole /64 and would otherwise be a new source at every attempt.
//
// Memory is bounded: each of the two tables keeps at most maxLimiterKeys
// keys, each of a fixed size (a source, plus a 16-byte digest of the name
// typed, which a form may make 16 KiB long), a few MB in all. When a table
// is full, ratelimit drops the buckets that have refilled, and refuses a
// new key (429) if none has, which fails closed. Filling the account table
// with buckets that have not refilled takes 10,000 account-and-source
// pairs failing within a minute, which the per-source limit makes take
// some 2,500 sources failing without pause; the source table, 10,000
// sources each failing every 15 seconds.
type loginLimiter struct {
	bySource  *ratelimit.Keyed
	byAccount *ratelimit.Keyed
}

func newLoginLimiter(now func() time.Time) *loginLimiter {
	return &loginLimiter{
		bySource:  ratelimit.New(loginSourceRate, loginSourceBurst, maxLimiterKeys, now),
		byAccount: ratelimit.New(loginAccountRate, loginAccountBurst, maxLimiterKeys, now),
	}
}

// allow reports whether a login as name from addr (a peer's IP address)
// may be tried now, and if not how long until it may.
func (l *loginLimiter) allow(name, addr string) (bool, time.Duration) {
	source := loginSource(addr)
	if ok, wait := l.bySource.Peek(source); !ok {
		return false, wait
	}
	return l.byAccount.Peek(accountKey(name, source))
}

// failed counts a failed login as name from addr.
func (l *loginLimiter) failed(name, addr string) {
	source := loginSource(addr)
	l.bySource.Charge(source)
	l.byAccount.Charge(accountKey(name, source))
}

// succeeded clears the failures of name at addr's source (and only
// there: a stranger's failures elsewhere still count).
func (l *loginLimiter) succeeded(name, addr string) {
	l.byAccount.Reset(accountKey(name, loginSource(addr)))
}

// loginSource is the source a login is counted against: the IPv4 address,
// or the IPv6 address's /64; addr as it is if it does not parse.
func loginSource(addr string) string {
	ip, err := netip.ParseAddr(addr)
	if err != nil {
		return addr
	}
	ip = ip.Unmap().WithZone("")
	if ip.Is4() {
		return ip.String()
	}
	p, err := ip.Prefix(64)
	if err != nil {
		return ip.String()
	}
	return p.String()
}

// accountKey is the account-and-source table's key: a digest of the name
// without regard to case (admin names are matched so), which bounds the
// key's size, and the source.
func accountKey(name, source string) string {
	sum := sha256.Sum256([]byte(strings.ToLower(name)))
	return string(sum[:16]) + source
}
