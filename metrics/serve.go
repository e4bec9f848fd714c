package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Bounds of the metrics listener. A scrape reads no body and answers in
// milliseconds; the bounds keep a slow or stuck client from holding a
// connection.
const (
	readHeaderTimeout = 5 * time.Second
	writeTimeout      = 30 * time.Second
	idleTimeout       = time.Minute
	// gatherTimeout bounds one scrape's collection; promhttp answers 503
	// past it.
	gatherTimeout = 10 * time.Second
	// shutdownGrace bounds how long Serve waits for scrapes in flight
	// once its context ends.
	shutdownGrace = 5 * time.Second
)

// Handler serves the metrics of g in Prometheus's text (or protobuf, as the
// scraper asks) exposition format at /metrics, and 404 elsewhere.
func Handler(g prometheus.Gatherer) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError,
		Timeout:       gatherTimeout,
	}))
	return mux
}

// Serve answers plain HTTP on ln with Handler(g) until ctx ends, then lets
// scrapes in flight finish for a few seconds. It is a listener of its own,
// apart from the admin page's: a scrape address is often internal, and a
// scrape needs no TLS or login. It returns nil after ctx ended.
func Serve(ctx context.Context, ln net.Listener, g prometheus.Gatherer) error {
	hs := &http.Server{
		Handler:           Handler(g),
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readHeaderTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    16 << 10,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case <-ctx.Done():
		case <-done:
			return
		}
		sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		if err := hs.Shutdown(sctx); err != nil {
			hs.Close()
		}
	}()
	err := hs.Serve(ln)
	close(done)
	<-stopped
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("metrics: serve: %w", err)
}
