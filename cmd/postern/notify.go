package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/postern/postern/manage"
	"github.com/postern/postern/model"
	"github.com/postern/postern/notify"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
)

// newNotifyCmd builds `postern notify`: the webhook channels that are told
// when an approval request waits and when it is decided. A running
// `postern serve` delivers them (docs/notifications.md).
func newNotifyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "notify",
		Short: "Manage notification channels: webhooks told of approval requests and decisions",
		Args:  cobra.ArbitraryArgs,
		RunE:  groupRunE,
	}
	data := addDataFlag(cmd)
	addAsFlag(cmd, data)
	cmd.AddCommand(
		newNotifyAddCmd(data),
		newNotifyListCmd(data),
		newNotifyRemoveCmd(data),
		newNotifyTestCmd(data),
	)
	return cmd
}

func newNotifyAddCmd(data *dataFlag) *cobra.Command {
	var rawURL, urlFile, format, secretFile, events string
	cmd := &cobra.Command{
		Use:   "add NAME --url URL [--format json|slack|ntfy] [--secret-file F] [--events pending,decided,audit.head]",
		Short: "Add a channel that postern serve tells of approval requests and decisions",
		Long: `add stores a notification channel. A running postern serve sends each new
approval request (event pending) and each decision (event decided) to its
URL within a second, retrying failures until the request expires.

Formats: json (postern's payload; with --secret-file, signed in the header
X-Postern-Signature: sha256=HMAC-SHA256 of the body), slack (an incoming
webhook; its URL is its credential, so no secret) and ntfy (a publish with a
link to the request; --secret-file is an access token, sent as a bearer
token). See docs/notifications.md.

The URL is kept sealed with the master key and shown only as
scheme://host/…, because webhook URLs often carry their token. Give it with
--url-file FILE (or - for standard input) to keep it out of the shell's
history and the process list. The secret file's surrounding whitespace is
ignored.`,
		Args: exactArgs(1, "the channel NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			nc := store.NewNotifyChannel{Name: args[0], Format: store.NotifyFormat(format)}
			var err error
			if nc.URL, err = notifyURLFlag(cmd, rawURL, urlFile); err != nil {
				return err
			}
			subs, err := store.ParseNotifyEvents(events)
			if err != nil {
				return storeErr(err)
			}
			nc.SetSubscriptions(subs)
			if secretFile != "" {
				b, err := readInput(cmd, secretFile, "secret file")
				if err != nil {
					return err
				}
				nc.Secret = []byte(strings.TrimSpace(string(b)))
			}
			var c *store.NotifyChannel
			err = withManager(cmd.Context(), data, func(m *manage.Manager) error {
				var err error
				c, err = m.AddChannel(cmd.Context(), data.actor("cli"), nc)
				return err
			})
			if err != nil {
				return manageErr(err)
			}
			w := cmd.OutOrStdout()
			v := model.ChannelOf(*c)
			fmt.Fprintf(w, "added notification channel %s (%s): %s to %s, events %s, secret %s\n",
				c.Name, c.ID, c.Format, c.URLShown, strings.Join(v.Events, ","), setText(c.HasSecret))
			if warn := notify.PlainHTTPWarning(nc.URL); warn != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "postern: warning: %s\n", warn)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&rawURL, "url", "", "the webhook URL (https)")
	fl.StringVar(&urlFile, "url-file", "", "read the URL from this file (- for standard input) instead of --url")
	fl.StringVar(&format, "format", string(store.NotifyJSON), "json, slack or ntfy")
	fl.StringVar(&secretFile, "secret-file", "", "json: the HMAC-SHA256 signing key; ntfy: an access token (- for standard input)")
	fl.StringVar(&events, "events", "pending,decided", "what to send, comma-separated: pending, decided, audit.head (the audit log's head, published by serve)")
	return cmd
}

// notifyURLFlag is the channel URL from --url or --url-file, exactly one.
func notifyURLFlag(cmd *cobra.Command, rawURL, urlFile string) (string, error) {
	switch {
	case rawURL != "" && urlFile != "":
		return "", usagef("%s: give --url or --url-file, not both", cmdPath(cmd))
	case urlFile != "":
		b, err := readInput(cmd, urlFile, "URL file")
		if err != nil {
			return "", err
		}
		return strings.TrimSpace(string(b)), nil
	case rawURL == "":
		return "", usagef("%s: missing --url URL (or --url-file FILE)", cmdPath(cmd))
	}
	return rawURL, nil
}

// setText shows whether a secret is set, never the secret.
func setText(set bool) string {
	if set {
		return "set"
	}
	return "not set"
}

func newNotifyListCmd(data *dataFlag) *cobra.Command {
	return newListCmd(data, listSpec[store.NotifyChannel]{
		short: "List notification channels with their last delivery and failure (never a URL's path or a secret)",
		read:  (*store.Store).ListNotifyChannels,
		json:  func(c store.NotifyChannel) any { return model.ChannelOf(c) },
		empty: "no notification channels; add one with: postern notify add NAME --url URL",
		header: []string{"NAME", "FORMAT", "URL", "EVENTS", "SECRET", "QUEUED", "LAST DELIVERY", "LAST FAILURE",
			"ERROR"},
		rows: func(c store.NotifyChannel) [][]string {
			errText := "-"
			if c.LastError != "" {
				errText = policy.VisibleLine(c.LastError)
			}
			return [][]string{{c.Name, string(c.Format), c.URLShown, strings.Join(model.ChannelOf(c).Events, ","),
				setText(c.HasSecret), fmt.Sprint(c.Queued), timeText(c.LastDeliveryAt), timeText(c.LastFailureAt), errText}}
		},
	})
}

func newNotifyRemoveCmd(data *dataFlag) *cobra.Command {
	return &cobra.Command{
		Use:   "remove NAME",
		Short: "Remove a notification channel; nothing more is sent to it",
		Args:  exactArgs(1, "the channel NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withManager(cmd.Context(), data, func(m *manage.Manager) error {
				c, err := m.RemoveChannel(cmd.Context(), data.actor("cli"), args[0])
				if err != nil {
					return manageErr(err)
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "removed notification channel %s\n", c.Name)
				return err
			})
		},
	}
}

func newNotifyTestCmd(data *dataFlag) *cobra.Command {
	return &cobra.Command{
		Use:   "test NAME",
		Short: "Send a test message to a channel now and say whether it arrived",
		Long: `test sends one message of event "test" (about a made-up request) to the
channel, signed or authorised as real messages are, and records the result
as the channel's last delivery or failure. It waits at most ` + notify.DefaultTimeout.String() + `
and exits 1 when the receiver did not accept the message. A test sent from
the CLI has no link (the CLI does not know the web page's address); one
sent from the web page does.`,
		Args: exactArgs(1, "the channel NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := data.open(cmd.Context())
			if err != nil {
				return storeErr(err)
			}
			defer s.Close()
			d, err := notify.New(notify.Config{Store: s, Logger: zerolog.Nop()})
			if err != nil {
				return err
			}
			res, err := d.Test(cmd.Context(), args[0])
			if err != nil {
				return storeErr(err)
			}
			if !res.Delivered {
				return errors.New("test message to " + res.Channel.Name + " not delivered: " + res.Error)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "test message delivered to %s (%s, HTTP %d)\n",
				res.Channel.Name, res.Channel.URLShown, res.Status)
			return err
		},
	}
}
