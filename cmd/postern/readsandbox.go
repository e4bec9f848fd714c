package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/postern/postern/manage"
	"github.com/postern/postern/metrics"
	"github.com/postern/postern/model"
	"github.com/postern/postern/store"
)

// readSandboxFlags are the read sandbox flags of conn add and conn update.
type readSandboxFlags struct {
	setting string
	reason  string
}

// add registers the flags on cmd; def is the setting's default ("" for an
// update, where an absent flag changes nothing).
func (f *readSandboxFlags) add(cmd *cobra.Command, def string) {
	cmd.Flags().StringVar(&f.setting, "read-sandbox", def,
		"read commands: auto (in the sandbox the probe found, else on the classifier alone), require (refused without a sandbox) or off")
	cmd.Flags().StringVar(&f.reason, "read-sandbox-reason", "", "why the read sandbox is off (required with --read-sandbox off)")
}

// printReadSandbox tells a person what the read sandbox probe of a change
// or check found, and how reads on the connection run now.
func printReadSandbox(w io.Writer, res manage.ConnectionResult) {
	if res.Probed {
		p := res.Probe
		msg := string(p.Found)
		if p.Message != "" {
			msg += " (" + p.Message + ")"
		}
		fmt.Fprintf(w, "read sandbox probe: %s\n", msg)
	}
	if res.Conn != nil && res.Stored {
		v := model.ReadSandboxOf(*res.Conn)
		fmt.Fprintf(w, "reads run: %s\n", model.ReadSandboxText(v))
	}
}

// warnReadSandbox warns on stderr about a production connection whose reads
// rely on the classifier alone.
func warnReadSandbox(cmd *cobra.Command, res manage.ConnectionResult) {
	if res.Conn == nil {
		return
	}
	if msg := model.ReadSandboxOf(*res.Conn).Warning; msg != "" {
		fmt.Fprintf(cmd.ErrOrStderr(), "postern: warning: %s\n", msg)
	}
}

// scrapeReadTimeout bounds the read of the connections at a scrape of
// postern_connections_read_sandbox: a scrape that waits longer for the
// database gives no series rather than hanging the scraper.
const scrapeReadTimeout = 5 * time.Second

// watchReadSandboxes exports postern_connections_read_sandbox from st's
// connections at each scrape.
func watchReadSandboxes(m *metrics.Metrics, st *store.Store) error {
	return m.WatchReadSandboxes(func() ([]metrics.ReadSandboxState, error) {
		ctx, cancel := context.WithTimeout(context.Background(), scrapeReadTimeout)
		defer cancel()
		cs, err := st.ListConnections(ctx)
		if err != nil {
			return nil, err
		}
		states := make([]metrics.ReadSandboxState, 0, len(cs))
		for _, c := range cs {
			states = append(states, metrics.ReadSandboxState{Env: string(c.Env), Setting: string(c.ReadSandbox), Found: string(c.SandboxFound)})
		}
		return states, nil
	})
}
