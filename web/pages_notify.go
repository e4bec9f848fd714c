package web

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/postern/postern/model"
	"github.com/postern/postern/notify"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
)

// The Notifications page: the channels that postern serve tells of approval
// requests and decisions, with their last delivery and failure, a form to
// add one, Test and Remove buttons, and the recent deliveries. A channel's
// URL is shown as scheme://host/… and its secret as set or not set; neither
// is ever put back into a page, a flash or a log line.

// recentNotifications is how many outbox rows the page's delivery log shows.
const recentNotifications = 30

// notifyRow is one channel as the page shows it.
type notifyRow struct {
	store.NotifyChannel
	EventsText string // "pending, decided"
	Secret     string // "set" or "not set"
	LastError  string // policy.VisibleLine of the channel's last error
}

// deliveryRow is one outbox row in the delivery log.
type deliveryRow struct {
	store.Notification
	Error string // policy.VisibleLine of its last error
}

type notificationsData struct {
	Flash      *flash
	CSRF       string
	CanTest    bool // a dispatcher is configured
	Channels   []notifyRow
	Deliveries []deliveryRow
	Formats    []store.NotifyFormat
}

func (s *Server) notificationsPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	chs, err := s.cfg.Store.ListNotifyChannels(ctx)
	if err != nil {
		s.serverError(w, r, "listing notification channels", err)
		return
	}
	ns, err := s.cfg.Store.ListNotifications(ctx, recentNotifications)
	if err != nil {
		s.serverError(w, r, "listing notifications", err)
		return
	}
	d := notificationsData{Flash: flashFrom(r), CSRF: sessionFrom(ctx).CSRFToken, CanTest: s.cfg.Notifier != nil,
		Formats: store.NotifyFormats}
	for _, c := range chs {
		d.Channels = append(d.Channels, notifyRow{NotifyChannel: c,
			EventsText: strings.Join(model.ChannelOf(c).Events, ", "),
			Secret:     map[bool]string{true: "set", false: "not set"}[c.HasSecret],
			LastError:  policy.VisibleLine(c.LastError)})
	}
	for _, n := range ns {
		d.Deliveries = append(d.Deliveries, deliveryRow{Notification: n, Error: policy.VisibleLine(n.LastError)})
	}
	s.render(w, r, http.StatusOK, "notifications.html", page("Notifications", "notifications", "", d))
}

// addNotificationForm adds a channel. What the admin typed into the URL
// and secret fields is never echoed: a refusal names the field at fault
// and the admin types it again.
func (s *Server) addNotificationForm(w http.ResponseWriter, r *http.Request) {
	nc := store.NewNotifyChannel{
		Name:   strings.TrimSpace(r.PostFormValue("name")),
		URL:    strings.TrimSpace(r.PostFormValue("url")),
		Format: store.NotifyFormat(r.PostFormValue("format")),
	}
	if secret := strings.TrimSpace(r.PostFormValue("secret")); secret != "" {
		nc.Secret = []byte(secret)
	}
	var err error
	var events store.NotifySubscriptions
	if events, err = store.ParseNotifyEvents(strings.Join(r.PostForm["events"], ",")); err == nil &&
		len(r.PostForm["events"]) == 0 {
		// The form's checkboxes: none ticked is no event, not the default.
		events = store.NotifySubscriptions{}
	}
	nc.SetSubscriptions(events)
	var ch *store.NotifyChannel
	if err == nil {
		ch, err = s.cfg.Manager.AddChannel(r.Context(), webActor(r), nc)
	}
	if err != nil {
		s.formStoreError(w, r, "/notifications", "Channel "+nc.Name+" not added", err)
		return
	}
	s.cfg.Logger.Info().Str("admin", sessionFrom(r.Context()).AdminName).Str("channel", ch.Name).
		Str("format", string(ch.Format)).Str("url", ch.URLShown).Msg("web: notification channel added")
	msg := "Added channel " + ch.Name + ": " + string(ch.Format) + " to " + ch.URLShown + "."
	if warn := notify.PlainHTTPWarning(nc.URL); warn != "" {
		msg += " Warning: " + warn + "."
	}
	s.redirectFlash(w, r, "/notifications", flashOK, msg)
}

func (s *Server) removeNotificationForm(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	ch, err := s.cfg.Manager.RemoveChannel(r.Context(), webActor(r), name)
	if err != nil {
		s.formStoreError(w, r, "/notifications", "Channel "+name+" not removed", err)
		return
	}
	s.cfg.Logger.Info().Str("admin", sessionFrom(r.Context()).AdminName).Str("channel", ch.Name).
		Msg("web: notification channel removed")
	s.redirectFlash(w, r, "/notifications", flashOK, "Removed channel "+ch.Name+"; nothing more is sent to it.")
}

// testNotificationForm sends a test message now; the admin waits for the
// answer (at most the dispatcher's attempt timeout) and reads it in the
// flash.
func (s *Server) testNotificationForm(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if s.cfg.Notifier == nil {
		s.redirectFlash(w, r, "/notifications", flashError, "This server sends no notifications.")
		return
	}
	res, err := s.cfg.Notifier.Test(r.Context(), name)
	if err != nil {
		if msg, ok := userMessage(err); ok {
			s.redirectFlash(w, r, "/notifications", flashError, "Channel "+name+" not tested: "+msg)
			return
		}
		s.serverError(w, r, "testing the notification channel", err)
		return
	}
	if !res.Delivered {
		s.redirectFlash(w, r, "/notifications", flashError, "The test message to "+res.Channel.Name+
			" was not delivered: "+policy.VisibleLine(res.Error))
		return
	}
	s.redirectFlash(w, r, "/notifications", flashOK, "The test message to "+res.Channel.Name+
		" was delivered (HTTP "+strconv.Itoa(res.Status)+").")
}
