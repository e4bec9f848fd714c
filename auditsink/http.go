package auditsink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/postern/postern/store"
)

// httpErrorBody bounds how much of a refusal's body is read, for the
// error message.
const httpErrorBody = 512

// HTTPSink POSTs each batch as one JSON array of the rows' records
// (record.go), Content-Type application/json, to a URL. A 2xx answer
// means the collector took every row of the batch; anything else, or no
// answer within the Shipper's send timeout, fails the batch, which the
// Shipper sends again after a backoff (the receiver may see rows twice:
// the seq tells). The array is what Fluent Bit's http input and Vector's
// http_server source (decoding.codec = "json") take as one event per
// element.
type HTTPSink struct {
	url    string
	shown  string // url without its query, for errors (see NewHTTPSink)
	client *http.Client
}

// NewHTTPSink posts to url with client (a client of its own if nil). The
// Shipper bounds each request with its send timeout.
func NewHTTPSink(rawURL string, client *http.Client) *HTTPSink {
	if client == nil {
		client = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	// A collector's URL may carry its token in the query; the errors of
	// net/http repeat the whole URL, and a failed Send's error is logged.
	// They name the URL as the sink's default name does, without it.
	shown := "the collector"
	if u, err := url.Parse(rawURL); err == nil {
		u.RawQuery, u.Fragment, u.ForceQuery = "", "", false
		shown = u.String()
	}
	return &HTTPSink{url: rawURL, shown: shown, client: client}
}

// Send implements Sink.
func (s *HTTPSink) Send(ctx context.Context, rows []store.AuditRow) error {
	var body bytes.Buffer
	body.WriteByte('[')
	for i := range rows {
		rec, err := Record(&rows[i])
		if err != nil {
			return err
		}
		if i > 0 {
			body.WriteByte(',')
		}
		body.Write(rec)
	}
	body.WriteByte(']')
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, &body)
	if err != nil {
		return fmt.Errorf("auditsink: http: the URL of %s does not parse", s.shown)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "postern-audit-sink")
	resp, err := s.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			ue.URL = s.shown
		}
		return fmt.Errorf("auditsink: http: %w", err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, httpErrorBody))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("auditsink: http: the collector answered %s: %q", resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}

// Close implements Sink: it drops idle connections.
func (s *HTTPSink) Close() error {
	s.client.CloseIdleConnections()
	return nil
}
