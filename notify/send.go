package notify

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/postern/postern/store"
)

// userAgent names postern to receivers.
const userAgent = "postern-notify/1"

// maxDrain bounds how much of a receiver's answer is read (and thrown
// away): postern needs only the status.
const maxDrain = 64 << 10

// maxRetryAfter bounds how long a receiver's Retry-After can hold a
// notification back.
const maxRetryAfter = 10 * time.Minute

// attempt is what one POST to a channel came to.
type attempt struct {
	status int    // the receiver's HTTP status; 0 if it never answered
	err    string // "" when delivered; else why not, without the URL
	// retry says whether the same message may succeed later (no answer,
	// timeout, 408, 425, 429, 5xx); false for a success or a refusal.
	retry      bool
	retryAfter time.Duration // the receiver's Retry-After, 0 if none
	stopped    bool          // the caller's context ended: postern is stopping
}

// newClient is the HTTP client of every attempt: no redirects followed
// (the channel's URL is the receiver, and a redirect to another host is
// not a place to send an approval's details to), no idle connections
// kept (no goroutine outlives an attempt), and the environment's proxy.
// transport overrides the default, for tests; nil uses a clone of
// http.DefaultTransport.
func newClient(transport http.RoundTripper) *http.Client {
	if transport == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.DisableKeepAlives = true
		transport = t
	}
	return &http.Client{
		Transport: transport,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// post sends m to target within timeout and classifies the answer (now
// reads an HTTP-date Retry-After). Nothing it returns holds target's URL
// or secret.
func post(ctx context.Context, client *http.Client, target store.NotifyTarget, m message, timeout time.Duration, now time.Time) attempt {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target.URL, bytes.NewReader(m.body))
	if err != nil {
		// The URL was checked when the channel was added; say nothing of it.
		return attempt{err: "the channel's URL cannot be used for a request"}
	}
	for k, vs := range m.header {
		req.Header[k] = vs
	}
	req.Header.Set("Content-Type", m.contentType)
	req.Header.Set("User-Agent", userAgent)
	resp, err := client.Do(req)
	if err != nil {
		return failedRequest(ctx, err, timeout)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
	resp.Body.Close()
	return answered(resp, now)
}

// failedRequest explains an attempt that got no answer, or an answer that
// is not HTTP, in postern's own words. The HTTP client's errors quote the
// URL (a *url.Error holds it whole) and what the receiver sent (a
// malformed status line is quoted byte for byte), and neither may be
// stored, logged or shown: the receiver's bytes may echo the URL's token,
// and on a port where another service answers they are that service's
// (escape sequences included).
func failedRequest(ctx context.Context, err error, timeout time.Duration) attempt {
	if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return attempt{err: "postern stopped during the attempt", retry: true, stopped: true}
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return attempt{err: "no answer within " + timeout.String(), retry: true}
	}
	return attempt{err: "no answer: " + noAnswerReason(err), retry: true}
}

// noAnswerReason names why a request got no usable answer; it never
// quotes err.
func noAnswerReason(err error) string {
	var (
		dnsErr     *net.DNSError
		certErr    *tls.CertificateVerificationError
		unknownCA  x509.UnknownAuthorityError
		hostErr    x509.HostnameError
		invalidErr x509.CertificateInvalidError
		recordErr  tls.RecordHeaderError
		alertErr   tls.AlertError
		protoErr   textproto.ProtocolError
		opErr      *net.OpError
	)
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "the receiver reset the connection"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "the receiver's host or network is unreachable"
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		return "the receiver's host name does not resolve"
	case errors.As(err, &dnsErr):
		return "the receiver's host name could not be looked up"
	case errors.Is(err, http.ErrSchemeMismatch):
		return "the receiver answered plain HTTP to HTTPS"
	case errors.As(err, &certErr), errors.As(err, &unknownCA), errors.As(err, &hostErr), errors.As(err, &invalidErr):
		return "the receiver's TLS certificate is not trusted"
	case errors.As(err, &recordErr):
		return "the receiver does not speak TLS"
	case errors.As(err, &alertErr):
		return "the receiver refused the TLS handshake"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "the receiver closed the connection without answering"
	// A status line or header that does not parse: net/http says
	// "malformed HTTP ..." (its own words, then the receiver's bytes,
	// which are not kept).
	case errors.As(err, &protoErr), strings.Contains(err.Error(), "malformed HTTP"):
		return "the receiver's answer is not HTTP"
	case errors.As(err, &opErr) && opErr.Op == "proxyconnect":
		return "the proxy could not be reached"
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return "the receiver could not be reached"
	}
	return "the request failed"
}

// answered classifies a receiver's answer by its status alone; the body is
// not kept, because a receiver may echo the request's path (the URL's
// token) in an error page.
func answered(resp *http.Response, now time.Time) attempt {
	code := resp.StatusCode
	a := attempt{status: code}
	text := "HTTP " + strconv.Itoa(code)
	if t := http.StatusText(code); t != "" {
		text += " " + t
	}
	switch {
	case code >= 200 && code < 300:
		return a
	case code >= 300 && code < 400:
		a.err = text + ": the receiver redirects, and postern follows no redirect; give the channel the final URL"
	case code == http.StatusRequestTimeout, code == http.StatusTooEarly, code == http.StatusTooManyRequests, code >= 500:
		a.err, a.retry = text, true
		a.retryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), now)
	default:
		a.err = text + ": the receiver refused the notification (check the channel's URL and secret); not retried"
	}
	return a
}

// parseRetryAfter reads a Retry-After header (seconds or an HTTP date),
// bounded by maxRetryAfter; 0 when absent or unreadable.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var d time.Duration
	if secs, err := strconv.Atoi(v); err == nil {
		d = time.Duration(secs) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	}
	return min(max(d, 0), maxRetryAfter)
}
