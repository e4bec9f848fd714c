package web

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/postern/postern/model"
	"github.com/postern/postern/store"
)

// Notification channels over the API: list, add, read, remove and test
// (docs/notifications.md). A channel is shown as model.Channel, the shape
// `postern notify list -o json` prints: its URL as scheme://host/… and its
// secret only as secret_set. Changing channels needs a token of scope
// admin, and goes through package manage, which audits it.

// apiNotifyBody is the JSON body of POST /v1/notifications.
type apiNotifyBody struct {
	Name   string   `json:"name"`
	URL    string   `json:"url"`
	Format string   `json:"format"` // json if empty
	Secret *string  `json:"secret"` // json: the HMAC key; ntfy: an access token
	Events []string `json:"events"` // pending and/or decided; both if empty
}

// apiNotifyTest is the answer of POST /v1/notifications/{id}/test: a
// receiver's refusal is a result (delivered false), not an error.
type apiNotifyTest struct {
	Delivered bool          `json:"delivered"`
	Status    int           `json:"status"` // the receiver's HTTP status; 0 if it never answered
	Error     string        `json:"error"`  // why not delivered; "" when delivered
	Channel   model.Channel `json:"channel"`
}

func apiNotifyList() apiListSpec {
	formats := make([]string, 0, len(store.NotifyFormats))
	for _, f := range store.NotifyFormats {
		formats = append(formats, string(f))
	}
	return apiListSpec{resource: "notifications",
		filters: map[string]func(string) error{"name": nil, "format": apiEnumFilter(formats...)},
		sorts:   []string{"name", "created_at", "modified_at"}, defSort: "name"}
}

func (s *Server) apiListNotifications(w http.ResponseWriter, r *http.Request, c *apiCall) error {
	p, err := parseAPIList(c.query, apiNotifyList())
	if err != nil {
		return err
	}
	chs, err := s.cfg.Store.ListNotifyChannels(r.Context())
	if err != nil {
		return err
	}
	var views []model.Channel
	for _, ch := range chs {
		v := model.ChannelOf(ch)
		if !apiMatchAll(p.filters, map[string]string{"name": v.Name, "format": v.Format}) {
			continue
		}
		views = append(views, v)
	}
	created := func(v model.Channel) string { return sortTimeKey(time.Time(v.CreatedAt)) }
	modified := func(v model.Channel) string { return sortTimeKey(time.Time(v.ModifiedAt)) }
	return apiWriteList(w, r, apiPaginate(views, p, "notifications", apiSorter[model.Channel]{
		id: func(v model.Channel) string { return v.ID },
		keys: map[string]func(model.Channel) string{
			"name": func(v model.Channel) string { return v.Name }, "created_at": created, "modified_at": modified,
		},
	}))
}

// notifyChannel reads the channel named by the path's {id} (its id or
// name), as a 404 when there is none.
func (s *Server) notifyChannel(r *http.Request) (*store.NotifyChannel, error) {
	ref := r.PathValue("id")
	ch, err := s.cfg.Store.NotifyChannel(r.Context(), ref)
	if errors.Is(err, store.ErrNotFound) {
		return nil, apiNotFound("notification channel", ref)
	}
	return ch, err
}

func (s *Server) apiGetNotification(w http.ResponseWriter, r *http.Request, c *apiCall) error {
	if err := apiNoParams(c); err != nil {
		return err
	}
	ch, err := s.notifyChannel(r)
	if err != nil {
		return err
	}
	return s.apiWriteData(w, r, model.ChannelOf(*ch))
}

// apiNeedAdminToken refuses a change by a token that belongs to no admin:
// what it does would be nobody's.
func apiNeedAdminToken(c *apiCall) error {
	if c.token.AdminID != "" {
		return nil
	}
	return &apiError{Status: http.StatusForbidden, Code: "token_without_admin",
		Message: "console token " + c.token.Name + " belongs to no admin and cannot change notification channels; " +
			"an admin assigns it with: postern token assign " + c.token.Name + " --as ADMIN"}
}

// apiAddNotification adds a channel.
func (s *Server) apiAddNotification(r *http.Request, c *apiCall, body []byte) (int, any, error) {
	var in apiNotifyBody
	if err := apiDecodeBody(r, body, &in); err != nil {
		return 0, nil, err
	}
	nc := store.NewNotifyChannel{Name: in.Name, URL: in.URL, Format: store.NotifyFormat(in.Format)}
	events, err := store.ParseNotifyEvents(strings.Join(in.Events, ","))
	if err != nil {
		return 0, nil, apiStoreInput("events", err)
	}
	nc.SetSubscriptions(events)
	if in.Secret != nil {
		nc.Secret = []byte(*in.Secret)
	}
	ch, err := s.cfg.Manager.AddChannel(r.Context(), apiActor(r, c), nc)
	if err != nil {
		return 0, nil, apiStoreInput("", err)
	}
	s.cfg.Logger.Info().Str("channel", ch.Name).Str("format", string(ch.Format)).Str("url", ch.URLShown).
		Str("admin", c.token.AdminName).Str("token", c.token.Name).Str("request_id", requestID(r.Context())).
		Msg("web: notification channel added")
	return http.StatusCreated, model.ChannelOf(*ch), nil
}

// apiNotifyPatch is the body of PATCH /v1/notifications/{id}: the fields
// left out stay.
type apiNotifyPatch struct {
	URL          *string   `json:"url"`
	Format       *string   `json:"format"`
	Secret       *string   `json:"secret"`
	RemoveSecret bool      `json:"remove_secret"`
	Events       *[]string `json:"events"`
}

func (s *Server) apiUpdateNotification(r *http.Request, c *apiCall, body []byte) (int, any, error) {
	var in apiNotifyPatch
	if err := apiDecodeBody(r, body, &in); err != nil {
		return 0, nil, err
	}
	cur, err := s.notifyChannel(r)
	if err != nil {
		return 0, nil, err
	}
	var ch store.NotifyChannelChange
	ch.URL = in.URL
	if in.Format != nil {
		f := store.NotifyFormat(*in.Format)
		ch.Format = &f
	}
	switch {
	case in.Secret != nil && in.RemoveSecret:
		return 0, nil, apiBadBody("secret", "give secret or remove_secret, not both")
	case in.Secret != nil:
		b := []byte(*in.Secret)
		ch.Secret = &b
	case in.RemoveSecret:
		var none []byte
		ch.Secret = &none
	}
	if in.Events != nil {
		if len(*in.Events) == 0 {
			return 0, nil, apiBadBody("events", "want pending, decided or audit.head")
		}
		events, err := store.ParseNotifyEvents(strings.Join(*in.Events, ","))
		if err != nil {
			return 0, nil, apiStoreInput("events", err)
		}
		ch.SetSubscriptions(events)
	}
	updated, err := s.cfg.Manager.UpdateChannel(r.Context(), apiActor(r, c), cur.ID, ch)
	if err != nil {
		return 0, nil, apiStoreInput("", err)
	}
	return http.StatusOK, model.ChannelOf(*updated), nil
}

// apiStoreInput maps the store's refusal of a channel to 400 or 409, with
// the store's message (which never quotes the URL or the secret); field
// names the body field when known.
func apiStoreInput(field string, err error) error {
	msg, ok := userMessage(err)
	switch {
	case !ok:
		return err
	case errors.Is(err, store.ErrDuplicate):
		return &apiError{Status: http.StatusConflict, Code: "already_exists", Field: "name", Message: msg}
	}
	if field == "" {
		field = apiNotifyField(msg)
	}
	return &apiError{Status: http.StatusBadRequest, Code: "invalid_body", Field: field, Message: msg}
}

// apiNotifyField guesses the body field a store message is about.
func apiNotifyField(msg string) string {
	lower := strings.ToLower(msg)
	for _, f := range []struct{ word, field string }{
		{"secret", "secret"}, {"event", "events"}, {"format", "format"}, {"url", "url"}, {"name", "name"},
	} {
		if strings.Contains(lower, f.word) {
			return f.field
		}
	}
	return ""
}

func (s *Server) apiRemoveNotification(r *http.Request, c *apiCall, body []byte) (int, any, error) {
	if err := apiNoBody(body); err != nil {
		return 0, nil, err
	}
	cur, err := s.notifyChannel(r)
	if err != nil {
		return 0, nil, err
	}
	ch, err := s.cfg.Manager.RemoveChannel(r.Context(), apiActor(r, c), cur.ID)
	if err != nil {
		return 0, nil, err
	}
	s.cfg.Logger.Info().Str("channel", ch.Name).Str("admin", c.token.AdminName).Str("token", c.token.Name).
		Str("request_id", requestID(r.Context())).Msg("web: notification channel removed")
	return http.StatusOK, model.ChannelOf(*ch), nil
}

func (s *Server) apiTestNotification(w http.ResponseWriter, r *http.Request, c *apiCall) error {
	if err := apiNoParams(c); err != nil {
		return err
	}
	if err := apiNeedAdminToken(c); err != nil {
		return err
	}
	if s.cfg.Notifier == nil {
		return &apiError{Status: http.StatusNotImplemented, Code: "not_implemented",
			Message: "this server sends no notifications"}
	}
	ch, err := s.notifyChannel(r)
	if err != nil {
		return err
	}
	res, err := s.cfg.Notifier.Test(r.Context(), ch.ID)
	if errors.Is(err, store.ErrNotFound) {
		return apiNotFound("notification channel", r.PathValue("id")) // removed while we looked
	} else if err != nil {
		return err
	}
	return s.apiWriteData(w, r, apiNotifyTest{Delivered: res.Delivered, Status: res.Status, Error: res.Error,
		Channel: model.ChannelOf(res.Channel)})
}
