package web

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/postern/postern/internal/fakeclock"
)

// TestLoginSource: an IPv4 address is its own source; an IPv6 address
// counts as its /64.
func TestLoginSource(t *testing.T) {
	for _, tt := range []struct{ addr, want string }{
		{"127.0.0.1", "127.0.0.1"},
		{"::ffff:192.0.2.7", "192.0.2.7"},
		{"2001:db8:1:2:aaaa:bbbb:cccc:dddd", "2001:db8:1:2::/64"},
		{"2001:db8:1:2::1", "2001:db8:1:2::/64"},
		{"fe80::1%eth0", "fe80::/64"},
		{"not an address", "not an address"},
	} {
		if got := loginSource(tt.addr); got != tt.want {
			t.Errorf("loginSource(%q) = %q; want %q", tt.addr, got, tt.want)
		}
	}
}

// TestLoginLimiter: failures count per account and source, and per
// source: a stranger's failures for an account throttle that account at
// the stranger's source only; a source's failures over many accounts
// throttle the source; a success clears its own count and no other; the
// clock gives back one attempt a minute.
func TestLoginLimiter(t *testing.T) {
	type step struct {
		op         string // "fail", "ok" (a success), "allowed", "refused"
		name, addr string
	}
	const stranger, admin, other = "192.0.2.66", "198.51.100.1", "2001:db8:7:7::1"
	fails := func(n int, name, addr string) []step {
		var s []step
		for range n {
			s = append(s, step{"fail", name, addr})
		}
		return s
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"a stranger cannot keep the admin out", append(fails(loginAccountBurst, "admin", stranger),
			step{"refused", "admin", stranger}, step{"refused", "ADMIN", stranger},
			step{"allowed", "admin", admin}, step{"ok", "admin", admin},
			step{"refused", "admin", stranger}, step{"allowed", "bob", stranger})},
		{"four failures leave one attempt", append(fails(loginAccountBurst-1, "admin", stranger),
			step{"allowed", "admin", stranger})},
		{"a success clears its own count", append(fails(loginAccountBurst-1, "admin", admin),
			step{"ok", "admin", admin}, step{"fail", "admin", admin}, step{"fail", "admin", admin},
			step{"allowed", "admin", admin})},
		{"a source over many accounts", append(fails(loginSourceBurst, "", stranger), // a name per failure, below
			step{"refused", "carol", stranger}, step{"allowed", "carol", admin})},
		{"an IPv6 /64 is one source", append(fails(loginAccountBurst, "admin", other),
			step{"refused", "admin", "2001:db8:7:7:ffff::2"}, step{"allowed", "admin", "2001:db8:7:8::1"})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLoginLimiter(fakeclock.New().Now)
			for i, s := range tt.steps {
				name := s.name
				if name == "" {
					name = "user" + strconv.Itoa(i)
				}
				switch s.op {
				case "fail":
					if ok, _ := l.allow(name, s.addr); !ok {
						t.Fatalf("step %d: %s from %s refused before the failure", i, name, s.addr)
					}
					l.failed(name, s.addr)
				case "ok":
					l.succeeded(name, s.addr)
				case "allowed", "refused":
					ok, wait := l.allow(name, s.addr)
					if ok != (s.op == "allowed") || (!ok && wait <= 0) {
						t.Errorf("step %d: allow(%s, %s) = %v, %v; want %s", i, name, s.addr, ok, wait, s.op)
					}
				}
			}
		})
	}
}

// TestLoginLimiterRefills: one attempt comes back a minute after the
// account's burst is spent, and a success there clears the rest.
func TestLoginLimiterRefills(t *testing.T) {
	clock := fakeclock.New()
	l := newLoginLimiter(clock.Now)
	for range loginAccountBurst {
		l.failed("admin", "192.0.2.66")
	}
	ok, wait := l.allow("admin", "192.0.2.66")
	if ok || wait <= 0 || wait > time.Minute {
		t.Fatalf("after the burst: %v, %v; want refused for at most a minute", ok, wait)
	}
	clock.Advance(wait)
	if ok, _ := l.allow("admin", "192.0.2.66"); !ok {
		t.Fatalf("after %v: refused; want one attempt back", wait)
	}
	l.failed("admin", "192.0.2.66")
	if ok, _ := l.allow("admin", "192.0.2.66"); ok {
		t.Error("after that attempt failed too: allowed; want refused")
	}
}

// TestLoginFromTwoSources: over real HTTP on loopback, from 127.0.0.2
// (which Linux routes to lo like 127.0.0.1), a stranger fails five
// passwords for alice and is then refused even with the right one; alice,
// from 127.0.0.1, logs in; the stranger's source stays refused.
func TestLoginFromTwoSources(t *testing.T) {
	ps := newPageSite(t, nil)
	ps.addAdmin("alice")
	stranger := ps.clientFrom(t, "127.0.0.2")
	for i := range loginAccountBurst {
		if status, _, _ := stranger.tryLogin("alice", "wrong password here"); status != http.StatusUnauthorized {
			t.Fatalf("stranger's failure %d: got status %d; want 401", i+1, status)
		}
	}
	if status, _, _ := stranger.tryLogin("alice", pagePassword); status != http.StatusTooManyRequests {
		t.Fatalf("stranger after %d failures, right password: got status %d; want 429", loginAccountBurst, status)
	}
	alice := ps.client()
	if status, h, body := alice.tryLogin("alice", pagePassword); status != http.StatusSeeOther || h.Get("Location") != "/approvals" {
		t.Fatalf("alice from 127.0.0.1: got status %d to %q; want 303 to /approvals\n%s", status, h.Get("Location"), body)
	}
	if status, _, _ := stranger.tryLogin("alice", pagePassword); status != http.StatusTooManyRequests {
		t.Errorf("stranger after alice's login: got status %d; want still 429", status)
	}
}

// clientFrom is a client whose connections come from the local address
// ip (a loopback address other than the server's).
func (ps *pageSite) clientFrom(t *testing.T, ip string) *pageClient {
	t.Helper()
	pc := ps.client()
	tr := ps.ts.Client().Transport.(*http.Transport).Clone()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}
	pc.c.Transport = tr
	t.Cleanup(tr.CloseIdleConnections)
	return pc
}

// TestAccountKeyBounded: a name as long as a login form allows makes a
// key of the same size as a short one, so that the table's memory is
// bounded by its number of keys.
func TestAccountKeyBounded(t *testing.T) {
	long := accountKey(strings.Repeat("a", maxLoginBodySize), "192.0.2.1")
	short := accountKey("a", "192.0.2.1")
	if len(long) != len(short) || long == short {
		t.Errorf("keys of %d and %d bytes, equal %v; want the same size and different keys", len(long), len(short), long == short)
	}
	if accountKey("Alice", "192.0.2.1") != accountKey("alice", "192.0.2.1") {
		t.Error("the key depends on the name's case; admin names are matched without regard to it")
	}
}
