package store

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Notification channels and their outbox (migrations/0007_notify.sql). The
// store keeps the channels, seals their URLs and secrets, and queues one
// outbox row per subscribed channel in the same transaction that creates or
// decides an approval or a change request; package notify renders and
// sends them.

// NotifyFormat is how a channel's messages are written.
type NotifyFormat string

// The formats (docs/notifications.md).
const (
	NotifyJSON  NotifyFormat = "json"  // postern's own payload, optionally HMAC-signed
	NotifySlack NotifyFormat = "slack" // a Slack incoming-webhook message
	NotifyNtfy  NotifyFormat = "ntfy"  // an ntfy publish with a view action
)

// NotifyFormats lists the formats.
var NotifyFormats = []NotifyFormat{NotifyJSON, NotifySlack, NotifyNtfy}

// ParseNotifyFormat checks a format name; "" is json.
func ParseNotifyFormat(s string) (NotifyFormat, error) {
	if s == "" {
		return NotifyJSON, nil
	}
	for _, f := range NotifyFormats {
		if string(f) == s {
			return f, nil
		}
	}
	return "", invalid("notification format %q: want json, slack or ntfy", s)
}

// NotifyEvent is what a notification tells.
type NotifyEvent string

// The events a channel can subscribe to.
const (
	// NotifyPending: a new approval request waits for a decision.
	NotifyPending NotifyEvent = "pending"
	// NotifyDecided: a request was approved or denied.
	NotifyDecided NotifyEvent = "decided"
	// NotifyBound: an agent or a connection has as many requests waiting
	// as its bound allows, and further ones are refused (PendingLimits).
	// It is sent once per episode, in place of the pending events of the
	// refused requests, to the channels that subscribe to pending; no
	// channel subscribes to it alone.
	NotifyBound NotifyEvent = "bound"
	// NotifyAuditHead: serve published the audit log's head (the newest
	// row's seq and hash), for a receiver that keeps it outside postern
	// (docs/deploy.md); sent only to channels that subscribe to it.
	NotifyAuditHead NotifyEvent = "audit.head"
)

// NotifySubscriptions is what a channel subscribes to.
type NotifySubscriptions struct {
	Pending, Decided, AuditHead bool
}

// Events lists the events subscribed to, in ParseNotifyEvents' order.
func (n NotifySubscriptions) Events() []NotifyEvent {
	var out []NotifyEvent
	for _, e := range []struct {
		on   bool
		name NotifyEvent
	}{{n.Pending, NotifyPending}, {n.Decided, NotifyDecided}, {n.AuditHead, NotifyAuditHead}} {
		if e.on {
			out = append(out, e.name)
		}
	}
	return out
}

// String lists the subscriptions as ParseNotifyEvents reads them, "none"
// when there is none.
func (n NotifySubscriptions) String() string {
	var ev []string
	for _, e := range n.Events() {
		ev = append(ev, string(e))
	}
	if len(ev) == 0 {
		return "none"
	}
	return strings.Join(ev, ",")
}

// ParseNotifyEvents reads a comma-separated list of events ("pending",
// "decided", "audit.head"; "" is pending and decided) into a channel's
// subscriptions.
func ParseNotifyEvents(s string) (NotifySubscriptions, error) {
	if strings.TrimSpace(s) == "" {
		return NotifySubscriptions{Pending: true, Decided: true}, nil
	}
	var n NotifySubscriptions
	for _, e := range strings.Split(s, ",") {
		switch NotifyEvent(strings.TrimSpace(e)) {
		case NotifyPending:
			n.Pending = true
		case NotifyDecided:
			n.Decided = true
		case NotifyAuditHead:
			n.AuditHead = true
		default:
			return NotifySubscriptions{}, invalid("notification event %q: want pending, decided or audit.head, comma-separated", strings.TrimSpace(e))
		}
	}
	return n, nil
}

// Bounds of a channel's input.
const (
	// maxNotifyURLLen bounds a channel's URL; webhook URLs are far shorter.
	maxNotifyURLLen = 2048
	// MaxNotifySecretLen bounds a channel's secret (an HMAC key or an
	// access token).
	MaxNotifySecretLen = 4096
	// maxNotifyErrorLen bounds the stored text of a delivery failure.
	maxNotifyErrorLen = 500
)

// NotifyDecidedWindow is how long a decided event is retried: a decision
// has no expiry of its own, and news of it older than this is no longer
// worth a message.
const NotifyDecidedWindow = 10 * time.Minute

// prefixes of the notification records' ids.
const (
	prefixNotifyChannel = "chn"
	prefixNotification  = "ntf"
)

// ParseNotifyURL checks a channel's URL: an absolute http or https URL with
// a host and without a fragment. It returns the form lists show,
// scheme://host/…, because the path and query of a webhook URL are often its
// token. Errors never quote the URL.
func ParseNotifyURL(raw string) (shown string, err error) {
	switch {
	case raw == "":
		return "", invalid("notification URL is empty")
	case len(raw) > maxNotifyURLLen:
		return "", invalid("notification URL is longer than %d bytes", maxNotifyURLLen)
	case strings.ContainsFunc(raw, func(r rune) bool { return r <= ' ' || r == 0x7f }):
		return "", invalid("notification URL contains spaces or control characters")
	}
	// url.Parse's errors quote the URL: not one of them is shown.
	u, perr := url.Parse(raw)
	switch {
	case perr != nil:
		return "", invalid("notification URL does not parse as a URL")
	case u.Scheme != "https" && u.Scheme != "http":
		return "", invalid("notification URL must start with https:// (or http://)")
	case u.Host == "" || u.Hostname() == "":
		return "", invalid("notification URL has no host")
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return "", invalid("notification URL has a #fragment, which is never sent to the receiver")
	}
	return u.Scheme + "://" + u.Host + "/…", nil
}

// NotifyChannel is a notification channel as lists show it. It carries
// neither the URL nor the secret: both stay sealed, and only
// NotifyChannelTarget opens them, for the one request that uses them.
type NotifyChannel struct {
	ID             string
	Name           string
	Format         NotifyFormat
	URLShown       string // scheme://host/…
	HasSecret      bool
	OnPending      bool
	OnDecided      bool
	OnAuditHead    bool
	LastDeliveryAt time.Time // zero if nothing was ever delivered
	LastFailureAt  time.Time // zero if nothing ever failed
	LastError      string    // why the last failure failed
	Queued         int       // notifications waiting to be (re)sent
	CreatedAt      time.Time
	ModifiedAt     time.Time
}

// Events lists the events the channel subscribes to.
func (c *NotifyChannel) Events() []NotifyEvent { return c.Subscriptions().Events() }

// Subscriptions is what the channel subscribes to.
func (c *NotifyChannel) Subscriptions() NotifySubscriptions {
	return NotifySubscriptions{Pending: c.OnPending, Decided: c.OnDecided, AuditHead: c.OnAuditHead}
}

// NewNotifyChannel is the input of CreateNotifyChannel.
type NewNotifyChannel struct {
	Name        string
	URL         string       // sealed; see ParseNotifyURL
	Format      NotifyFormat // NotifyJSON if empty
	Secret      []byte       // nil for none; sealed
	OnPending   bool
	OnDecided   bool
	OnAuditHead bool
}

// Subscriptions is what the new channel subscribes to.
func (nc NewNotifyChannel) Subscriptions() NotifySubscriptions {
	return NotifySubscriptions{Pending: nc.OnPending, Decided: nc.OnDecided, AuditHead: nc.OnAuditHead}
}

// SetSubscriptions makes the new channel subscribe to n.
func (nc *NewNotifyChannel) SetSubscriptions(n NotifySubscriptions) {
	nc.OnPending, nc.OnDecided, nc.OnAuditHead = n.Pending, n.Decided, n.AuditHead
}

// CreateNotifyChannel validates and stores a channel, sealing its URL and
// secret. A slack channel takes no secret: its URL is its credential.
func (s *Store) CreateNotifyChannel(ctx context.Context, audit Audit, nc NewNotifyChannel) (*NotifyChannel, error) {
	ctx, err := audit.bind(ctx)
	if err != nil {
		return nil, err
	}
	if err := ValidateName("notification channel", nc.Name); err != nil {
		return nil, err
	}
	format, err := ParseNotifyFormat(string(nc.Format))
	if err != nil {
		return nil, err
	}
	shown, err := ParseNotifyURL(nc.URL)
	if err != nil {
		return nil, err
	}
	if err := checkNotifyChannel(nc.Name, format, nc.Secret, nc.Secret != nil, nc.Subscriptions()); err != nil {
		return nil, err
	}
	id := newID(prefixNotifyChannel)
	sealedURL, err := s.sealFor([]byte(nc.URL), id+":url")
	if err != nil {
		return nil, err
	}
	var sealedSecret []byte
	if nc.Secret != nil {
		if sealedSecret, err = s.sealFor(nc.Secret, id+":secret"); err != nil {
			return nil, err
		}
	}
	now := formatTime(s.nowUTC())
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO notify_channels (id, name, format, sealed_url, url_shown,
			sealed_secret, on_pending, on_decided, on_audit_head, created_at, modified_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			id, nc.Name, string(format), sealedURL, shown, sealedSecret, nc.OnPending, nc.OnDecided, nc.OnAuditHead, now, now)
		if isUniqueViolation(err) {
			return &ConflictError{Kind: "notification channel", Value: nc.Name}
		}
		if err != nil {
			return fmt.Errorf("store: add notification channel %s: %w", nc.Name, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s.NotifyChannel(ctx, id)
}

// checkNotifyChannel checks what a channel subscribes to and whether its
// secret fits its format; hasSecret is whether the channel will have one
// (secret is nil when the check is about a secret already stored).
func checkNotifyChannel(name string, format NotifyFormat, secret []byte, hasSecret bool, events NotifySubscriptions) error {
	if events == (NotifySubscriptions{}) {
		return invalid("notification channel %s subscribes to no event: want pending, decided or audit.head", name)
	}
	switch {
	case secret != nil && len(secret) == 0:
		return invalid("notification channel %s: the secret is empty", name)
	case len(secret) > MaxNotifySecretLen:
		return invalid("notification channel %s: the secret is longer than %d bytes", name, MaxNotifySecretLen)
	case hasSecret && format == NotifySlack:
		return invalid("notification channel %s: a slack channel takes no secret (the webhook URL is its credential)", name)
	case format == NotifyNtfy && bytes.ContainsFunc(secret, func(r rune) bool { return r <= ' ' || r > '~' }):
		// It is sent as "Authorization: Bearer SECRET".
		return invalid("notification channel %s: an ntfy secret is an access token: printable ASCII without spaces", name)
	}
	return nil
}

// NotifyChannelChange is the input of UpdateNotifyChannel: a nil field
// keeps what is stored.
type NotifyChannelChange struct {
	Format      *NotifyFormat
	URL         *string
	Secret      *[]byte // a pointer to nil removes the secret
	OnPending   *bool
	OnDecided   *bool
	OnAuditHead *bool
}

// SetSubscriptions makes the change set every subscription to n's.
func (ch *NotifyChannelChange) SetSubscriptions(n NotifySubscriptions) {
	ch.OnPending, ch.OnDecided, ch.OnAuditHead = &n.Pending, &n.Decided, &n.AuditHead
}

// ChangesSubscriptions says whether the change sets any subscription.
func (ch NotifyChannelChange) ChangesSubscriptions() bool {
	return ch.OnPending != nil || ch.OnDecided != nil || ch.OnAuditHead != nil
}

// Subscriptions is what a channel subscribed to cur subscribes to after
// the change.
func (ch NotifyChannelChange) Subscriptions(cur NotifySubscriptions) NotifySubscriptions {
	for _, f := range []struct {
		dst *bool
		src *bool
	}{{&cur.Pending, ch.OnPending}, {&cur.Decided, ch.OnDecided}, {&cur.AuditHead, ch.OnAuditHead}} {
		if f.src != nil {
			*f.dst = *f.src
		}
	}
	return cur
}

// UpdateNotifyChannel changes the channel named by id or name, sealing a
// new URL or secret. Its outbox stays: queued notifications go out under
// the new settings.
func (s *Store) UpdateNotifyChannel(ctx context.Context, audit Audit, ref string, ch NotifyChannelChange) (*NotifyChannel, error) {
	ctx, err := audit.bind(ctx)
	if err != nil {
		return nil, err
	}
	cur, err := s.NotifyChannel(ctx, ref)
	if err != nil {
		return nil, err
	}
	format, events, hasSecret := cur.Format, ch.Subscriptions(cur.Subscriptions()), cur.HasSecret
	if ch.Format != nil {
		if format, err = ParseNotifyFormat(string(*ch.Format)); err != nil {
			return nil, err
		}
	}
	var secret []byte
	if ch.Secret != nil {
		secret, hasSecret = *ch.Secret, *ch.Secret != nil
	}
	if err := checkNotifyChannel(cur.Name, format, secret, hasSecret, events); err != nil {
		return nil, err
	}
	sets := []string{"format = ?", "on_pending = ?", "on_decided = ?", "on_audit_head = ?", "modified_at = ?"}
	args := []any{string(format), events.Pending, events.Decided, events.AuditHead, formatTime(s.nowUTC())}
	if ch.URL != nil {
		shown, err := ParseNotifyURL(*ch.URL)
		if err != nil {
			return nil, err
		}
		sealed, err := s.sealFor([]byte(*ch.URL), cur.ID+":url")
		if err != nil {
			return nil, err
		}
		sets = append(sets, "sealed_url = ?", "url_shown = ?")
		args = append(args, sealed, shown)
	}
	if ch.Secret != nil {
		var sealed []byte
		if secret != nil {
			if sealed, err = s.sealFor(secret, cur.ID+":secret"); err != nil {
				return nil, err
			}
		}
		sets = append(sets, "sealed_secret = ?")
		args = append(args, sealed)
	}
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, `UPDATE notify_channels SET `+strings.Join(sets, ", ")+` WHERE id = ?`,
			append(args, cur.ID)...)
		if err != nil {
			return fmt.Errorf("store: update notification channel %s: %w", cur.Name, err)
		}
		if n, _ := r.RowsAffected(); n == 0 {
			return notFound("notification channel", ref)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s.NotifyChannel(ctx, cur.ID)
}

// notifyChannelColumns selects a NotifyChannel, with the count of its
// notifications still to send.
const notifyChannelColumns = `c.id, c.name, c.format, c.url_shown, c.sealed_secret IS NOT NULL,
	c.on_pending, c.on_decided, c.on_audit_head, c.last_delivery_at, c.last_failure_at, c.last_error, c.created_at, c.modified_at,
	(SELECT COUNT(*) FROM notify_outbox o WHERE o.channel_id = c.id AND o.state IN ('queued', 'sending'))
	FROM notify_channels c`

func scanNotifyChannel(r rowScanner) (NotifyChannel, error) {
	var c NotifyChannel
	var format, delivered, failed, created, modified string
	if err := r.Scan(&c.ID, &c.Name, &format, &c.URLShown, &c.HasSecret, &c.OnPending, &c.OnDecided, &c.OnAuditHead,
		&delivered, &failed, &c.LastError, &created, &modified, &c.Queued); err != nil {
		return NotifyChannel{}, err
	}
	c.Format = NotifyFormat(format)
	var err error
	for _, f := range []struct {
		dst *time.Time
		src string
	}{{&c.LastDeliveryAt, delivered}, {&c.LastFailureAt, failed}, {&c.CreatedAt, created}, {&c.ModifiedAt, modified}} {
		if *f.dst, err = parseTime(f.src); err != nil {
			return NotifyChannel{}, err
		}
	}
	return c, nil
}

// NotifyChannel returns the channel with that id or, failing that, name.
func (s *Store) NotifyChannel(ctx context.Context, ref string) (*NotifyChannel, error) {
	c, err := scanNotifyChannel(s.db.QueryRowContext(ctx, `SELECT `+notifyChannelColumns+`
		WHERE c.id = ? OR c.name = ? ORDER BY c.id = ? DESC LIMIT 1`, ref, ref, ref))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("notification channel", ref)
	}
	if err != nil {
		return nil, fmt.Errorf("store: read notification channel %s: %w", ref, err)
	}
	return &c, nil
}

// ListNotifyChannels returns every channel, by name.
func (s *Store) ListNotifyChannels(ctx context.Context) ([]NotifyChannel, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+notifyChannelColumns+` ORDER BY c.name`)
	return collect(rows, err, "list notification channels", scanNotifyChannel)
}

// RemoveNotifyChannel deletes the channel named by id or name, with its
// outbox rows: nothing more is sent to it.
func (s *Store) RemoveNotifyChannel(ctx context.Context, audit Audit, ref string) (*NotifyChannel, error) {
	ctx, err := audit.bind(ctx)
	if err != nil {
		return nil, err
	}
	var c *NotifyChannel
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		got, err := scanNotifyChannel(tx.QueryRowContext(ctx, `SELECT `+notifyChannelColumns+`
			WHERE c.id = ? OR c.name = ? ORDER BY c.id = ? DESC LIMIT 1`, ref, ref, ref))
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("notification channel", ref)
		}
		if err != nil {
			return fmt.Errorf("store: remove notification channel %s: %w", ref, err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM notify_channels WHERE id = ?`, got.ID); err != nil {
			return fmt.Errorf("store: remove notification channel %s: %w", ref, err)
		}
		c = &got
		return nil
	})
	return c, err
}

// NotifyTarget is what sending to a channel needs, secrets included. It is
// for package notify alone: callers must not keep, log or return URL or
// Secret.
type NotifyTarget struct {
	ChannelID string
	Name      string
	Format    NotifyFormat
	URL       string
	Secret    []byte // nil when the channel has none
}

// NotifyChannelTarget opens the sealed URL and secret of the channel with
// that id.
func (s *Store) NotifyChannelTarget(ctx context.Context, id string) (NotifyTarget, error) {
	t := NotifyTarget{ChannelID: id}
	var format string
	var sealedURL, sealedSecret []byte
	err := s.db.QueryRowContext(ctx, `SELECT name, format, sealed_url, sealed_secret FROM notify_channels WHERE id = ?`,
		id).Scan(&t.Name, &format, &sealedURL, &sealedSecret)
	if errors.Is(err, sql.ErrNoRows) {
		return NotifyTarget{}, notFound("notification channel id", id)
	}
	if err != nil {
		return NotifyTarget{}, fmt.Errorf("store: read notification channel %s: %w", id, err)
	}
	t.Format = NotifyFormat(format)
	u, err := s.openFor(sealedURL, id+":url", "notification channel "+t.Name)
	if err != nil {
		return NotifyTarget{}, err
	}
	t.URL = string(u)
	if sealedSecret != nil {
		if t.Secret, err = s.openFor(sealedSecret, id+":secret", "notification channel "+t.Name); err != nil {
			return NotifyTarget{}, err
		}
	}
	return t, nil
}

// RecordNotifyResult notes on a channel that a delivery (or a test) at now
// succeeded (errText "") or failed with errText, for the page and the list.
// errText must not hold the URL or the secret; it is cut to a few hundred
// bytes.
func (s *Store) RecordNotifyResult(ctx context.Context, channelID, errText string) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		return recordNotifyResult(ctx, tx, channelID, errText, formatTime(s.nowUTC()))
	})
}

func recordNotifyResult(ctx context.Context, tx *sql.Tx, channelID, errText, now string) error {
	var err error
	if errText == "" {
		_, err = tx.ExecContext(ctx, `UPDATE notify_channels SET last_delivery_at = ? WHERE id = ?`, now, channelID)
	} else {
		_, err = tx.ExecContext(ctx, `UPDATE notify_channels SET last_failure_at = ?, last_error = ? WHERE id = ?`,
			now, cutText(errText, maxNotifyErrorLen), channelID)
	}
	if err != nil {
		return fmt.Errorf("store: record notification result: %w", err)
	}
	return nil
}

// cutText shortens s to at most n bytes on a rune boundary.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

// queueNotifications writes one outbox row for each channel subscribed to
// event about approval a, due now, in the caller's transaction: the one
// that created or decided a. RequestApproval and DecideApproval call it, so
// a notification is queued exactly when the change it tells of commits,
// in whichever process made it.
func queueNotifications(ctx context.Context, tx *sql.Tx, a Approval, event NotifyEvent, now time.Time) error {
	giveUp := a.ExpiresAt
	if event == NotifyDecided {
		giveUp = now.Add(NotifyDecidedWindow)
	}
	return queueOutbox(ctx, tx, outboxEntry{approval: a, event: event, giveUp: giveUp}, now)
}

// queueChangeNotifications writes one outbox row for each channel
// subscribed to event about change request c, due now, in the caller's
// transaction: the one that created or decided c. CreateChangeRequest and
// DecideChangeRequest call it, as queueNotifications is called for an
// operation's request, so that the second admin hears of a change waiting
// for them by the same channels. A pending event gives up at c's expiry,
// a decided one NotifyDecidedWindow after the decision.
func queueChangeNotifications(ctx context.Context, tx *sql.Tx, c ChangeRequest, event NotifyEvent, now time.Time) error {
	if event != NotifyPending && event != NotifyDecided {
		return fmt.Errorf("store: queue notification: event %q of change request %s: want pending or decided", event, c.ID)
	}
	giveUp := c.ExpiresAt
	if event == NotifyDecided {
		giveUp = now.Add(NotifyDecidedWindow)
	}
	return queueOutbox(ctx, tx, outboxEntry{changeID: c.ID, event: event, giveUp: giveUp}, now)
}

// outboxEntry is what queueOutbox writes for each channel. It is about
// approval or, when changeID is set, about that change request.
type outboxEntry struct {
	approval Approval
	changeID string
	event    NotifyEvent
	giveUp   time.Time
	// boundScope and boundWaiting describe a NotifyBound summary; "" and
	// 0 otherwise.
	boundScope   string
	boundWaiting int
}

// queueOutbox writes one outbox row of e for each channel subscribed to
// its event (a bound summary goes to those subscribed to pending), due now.
func queueOutbox(ctx context.Context, tx *sql.Tx, e outboxEntry, now time.Time) error {
	column := "on_pending"
	switch e.event {
	case NotifyDecided:
		column = "on_decided"
	case NotifyAuditHead:
		return fmt.Errorf("store: queue notification: an audit head is queued by QueueAuditHead")
	}
	rows, err := tx.QueryContext(ctx, `SELECT id FROM notify_channels WHERE `+column+` = 1`)
	channels, err := collect(rows, err, "queue notifications", scanString)
	if err != nil {
		return err
	}
	ts := formatTime(now)
	// Exactly one of approval_id and change_id is set; the other is NULL,
	// which its foreign key does not check (migrations/0014).
	var approvalID, changeID any = e.approval.ID, nil
	if e.changeID != "" {
		approvalID, changeID = nil, e.changeID
	}
	for _, ch := range channels {
		if _, err := tx.ExecContext(ctx, `INSERT INTO notify_outbox (id, channel_id, approval_id, change_id, event,
			state, due_at, give_up_at, created_at, modified_at, bound_scope, bound_waiting)
			VALUES (?, ?, ?, ?, ?, 'queued', ?, ?, ?, ?, ?, ?)`,
			newID(prefixNotification), ch, approvalID, changeID, string(e.event), ts, formatTime(e.giveUp), ts, ts,
			e.boundScope, e.boundWaiting); err != nil {
			return fmt.Errorf("store: queue notification: %w", err)
		}
	}
	return nil
}

// QueueAuditHead writes one outbox row for each channel subscribed to
// audit.head that has none for this head yet, due now, giving up at
// giveUp: serve publishes the head every interval, and a head not
// delivered by the next is superseded by it. head is SEQ:HASH as `postern
// audit head` prints it. Several replicas publish the same head; the
// condition in the INSERT, under the write lock, queues it once per
// channel. It returns how many rows it queued.
func (s *Store) QueueAuditHead(ctx context.Context, head string, giveUp time.Time) (int, error) {
	if head == "" {
		return 0, fmt.Errorf("store: queue audit head: no head")
	}
	now := s.nowUTC()
	ts := formatTime(now)
	var queued int
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT c.id FROM notify_channels c WHERE c.on_audit_head = 1
			AND NOT EXISTS (SELECT 1 FROM notify_outbox o WHERE o.channel_id = c.id AND o.head = ?)`, head)
		channels, err := collect(rows, err, "queue audit head", scanString)
		if err != nil {
			return err
		}
		for _, ch := range channels {
			if _, err := tx.ExecContext(ctx, `INSERT INTO notify_outbox (id, channel_id, head, event,
				state, due_at, give_up_at, created_at, modified_at) VALUES (?, ?, ?, ?, 'queued', ?, ?, ?, ?)`,
				newID(prefixNotification), ch, head, string(NotifyAuditHead), ts, formatTime(giveUp), ts, ts); err != nil {
				return fmt.Errorf("store: queue audit head: %w", err)
			}
		}
		queued = len(channels)
		return nil
	})
	return queued, err
}

// Notification is one outbox row: an event about an operation's approval
// request, about a change request, or a published audit head, to deliver
// to a channel.
type Notification struct {
	ID         string
	ChannelID  string
	Channel    string // the channel's name
	ApprovalID string // the operation's request; "" when ChangeID is set
	// ChangeID is the change request (chg_…) the row is about, waiting for
	// or decided by a second admin; "" when ApprovalID is set.
	ChangeID string
	// Head is the audit head (SEQ:HASH) of an audit.head event; "" for
	// the others, which are about ApprovalID or ChangeID.
	Head       string
	Event      NotifyEvent
	State      string // NotificationQueued, ...
	Attempts   int    // attempts made, this one included once claimed
	DueAt      time.Time
	GiveUpAt   time.Time
	Claim      string // the claim of the dispatcher that holds it
	LastStatus int    // the receiver's HTTP status at the last attempt; 0 if none
	LastError  string
	CreatedAt  time.Time
	ModifiedAt time.Time
	DoneAt     time.Time
	// BoundScope (BoundAgent or BoundConnection) and BoundWaiting (the
	// requests that waited) describe a NotifyBound summary, about the
	// agent or the connection of ApprovalID, the newest request waiting
	// when the bound was reached; "" and 0 for other events.
	BoundScope   string
	BoundWaiting int
}

// Outbox states (migrations/0007_notify.sql).
const (
	NotificationQueued    = "queued"
	NotificationSending   = "sending"
	NotificationDelivered = "delivered"
	NotificationFailed    = "failed"
	NotificationCancelled = "cancelled"
)

// Subject is the id of the request n is about: ApprovalID, or ChangeID for
// a change request. Both live in the approvals queue, under
// /approvals/{id} on the page.
func (n Notification) Subject() string {
	if n.ChangeID != "" {
		return n.ChangeID
	}
	return n.ApprovalID
}

const notificationColumns = `o.id, o.channel_id, COALESCE(c.name, ''), COALESCE(o.approval_id, ''),
	COALESCE(o.change_id, ''), COALESCE(o.head, ''), o.event, o.state, o.attempts,
	o.due_at, o.give_up_at, o.claim, o.last_status, o.last_error, o.created_at, o.modified_at, o.done_at,
	o.bound_scope, o.bound_waiting
	FROM notify_outbox o LEFT JOIN notify_channels c ON c.id = o.channel_id`

func scanNotification(r rowScanner) (Notification, error) {
	var n Notification
	var event, due, giveUp, created, modified, done string
	if err := r.Scan(&n.ID, &n.ChannelID, &n.Channel, &n.ApprovalID, &n.ChangeID, &n.Head, &event, &n.State, &n.Attempts,
		&due, &giveUp, &n.Claim, &n.LastStatus, &n.LastError, &created, &modified, &done,
		&n.BoundScope, &n.BoundWaiting); err != nil {
		return Notification{}, err
	}
	n.Event = NotifyEvent(event)
	var err error
	for _, f := range []struct {
		dst *time.Time
		src string
	}{{&n.DueAt, due}, {&n.GiveUpAt, giveUp}, {&n.CreatedAt, created}, {&n.ModifiedAt, modified}, {&n.DoneAt, done}} {
		if *f.dst, err = parseTime(f.src); err != nil {
			return Notification{}, err
		}
	}
	return n, nil
}

func (s *Store) queryNotifications(ctx context.Context, q queryer, where string, args ...any) ([]Notification, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+notificationColumns+` `+where, args...)
	return collect(rows, err, "list notifications", scanNotification)
}

type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// ListNotifications returns the limit most recently changed outbox rows,
// newest first, for the page's delivery log.
func (s *Store) ListNotifications(ctx context.Context, limit int) ([]Notification, error) {
	if limit <= 0 {
		return nil, nil
	}
	return s.queryNotifications(ctx, s.db, `ORDER BY o.modified_at DESC, o.id DESC LIMIT ?`, limit)
}

// NotificationsOf returns the outbox rows about one request, oldest first:
// an operation's approval request or, for a chg_ id, a change request.
func (s *Store) NotificationsOf(ctx context.Context, id string) ([]Notification, error) {
	column := "o.approval_id"
	if IsChangeID(id) {
		column = "o.change_id"
	}
	return s.queryNotifications(ctx, s.db, `WHERE `+column+` = ? ORDER BY o.created_at, o.id`, id)
}

// NotificationsQueued counts the outbox rows not yet delivered, given up
// or cancelled: queued, or being sent.
func (s *Store) NotificationsQueued(ctx context.Context) (int, error) {
	var n int
	if err := s.queryRow(ctx, `SELECT COUNT(*) FROM notify_outbox WHERE state IN ('queued', 'sending')`).Scan(&n); err != nil {
		return 0, fmt.Errorf("store: count queued notifications: %w", err)
	}
	return n, nil
}

// NextNotificationDue returns when the earliest claimable outbox row is
// due, and false when there is none. It only reads, so a dispatcher can ask
// often without taking the write lock.
func (s *Store) NextNotificationDue(ctx context.Context) (time.Time, bool, error) {
	var due sql.NullString
	err := s.queryRow(ctx, `SELECT MIN(due_at) FROM notify_outbox WHERE state IN ('queued', 'sending')`).Scan(&due)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("store: next notification: %w", err)
	}
	if !due.Valid {
		return time.Time{}, false, nil
	}
	t, err := parseTime(due.String)
	return t, err == nil, err
}

// ClaimNotifications claims up to limit due outbox rows for the dispatcher
// whose claim value is claim, until now+lease, and returns them. The claim
// is one UPDATE under the write lock, conditional on each row being queued
// and due, or sending with its lease run out, and not past give_up_at: of
// several dispatchers (in this process or others) exactly one gets each
// row. Each claimed row counts an attempt. claim should be new for each
// call, so that an outcome written with it cannot land on a later claim.
func (s *Store) ClaimNotifications(ctx context.Context, claim string, lease time.Duration, limit int) ([]Notification, error) {
	if claim == "" || lease <= 0 || limit <= 0 {
		return nil, invalid("claim notifications: want a claim value, a positive lease and limit")
	}
	var out []Notification
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		now := s.nowUTC()
		ts := formatTime(now)
		rows, err := tx.QueryContext(ctx, `UPDATE notify_outbox
			SET state = 'sending', claim = ?, attempts = attempts + 1, due_at = ?, modified_at = ?
			WHERE id IN (SELECT id FROM notify_outbox
				WHERE state IN ('queued', 'sending') AND due_at <= ? AND give_up_at > ?
				ORDER BY due_at, id LIMIT ?)
			RETURNING id`, claim, formatTime(now.Add(lease)), ts, ts, ts, limit)
		claimed, err := collect(rows, err, "claim notifications", scanString)
		if err != nil || len(claimed) == 0 {
			return err
		}
		ids := make([]any, len(claimed))
		for i, id := range claimed {
			ids[i] = id
		}
		// Read them back in the same transaction: if this fails, the claim
		// is rolled back with it instead of holding rows nobody sends.
		out, err = s.queryNotifications(ctx, tx, `WHERE o.id IN (?`+strings.Repeat(", ?", len(ids)-1)+`)
			ORDER BY o.created_at, o.id`, ids...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// NotifyOutcome is what became of one attempt, for FinishNotification.
type NotifyOutcome struct {
	// State is NotificationDelivered, NotificationQueued (try again at
	// RetryAt), NotificationFailed or NotificationCancelled.
	State   string
	RetryAt time.Time
	Status  int    // the receiver's HTTP status; 0 if there was none
	Error   string // what went wrong, never the URL; "" when delivered
}

// FinishNotification records the outcome of the attempt that claim made
// on n, and on n's channel its last delivery or failure. It changes nothing
// and returns false when the row no longer carries claim (its lease ran out
// and another dispatcher took it, or the channel was removed).
func (s *Store) FinishNotification(ctx context.Context, n Notification, claim string, out NotifyOutcome) (bool, error) {
	switch out.State {
	case NotificationDelivered, NotificationFailed, NotificationCancelled:
	case NotificationQueued:
		if out.RetryAt.IsZero() {
			return false, invalid("finish notification %s: a retry needs its time", n.ID)
		}
	default:
		return false, invalid("finish notification %s: state %q", n.ID, out.State)
	}
	errText := cutText(out.Error, maxNotifyErrorLen)
	var done bool
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		now := formatTime(s.nowUTC())
		due, doneAt := now, now
		if out.State == NotificationQueued {
			due, doneAt = formatTime(out.RetryAt), ""
		}
		res, err := tx.ExecContext(ctx, `UPDATE notify_outbox SET state = ?, due_at = ?, claim = '',
			last_status = ?, last_error = ?, modified_at = ?, done_at = ?
			WHERE id = ? AND claim = ? AND state = 'sending'`,
			out.State, due, out.Status, errText, now, doneAt, n.ID, claim)
		if err != nil {
			return fmt.Errorf("store: finish notification %s: %w", n.ID, err)
		}
		if k, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("store: finish notification %s: %w", n.ID, err)
		} else if k != 1 {
			return nil
		}
		done = true
		switch {
		case out.State == NotificationDelivered:
			return recordNotifyResult(ctx, tx, n.ChannelID, "", now)
		case out.State == NotificationCancelled, errText == "":
			// Nothing was sent, or the attempt was given back unmade
			// (postern stopping): the channel's record stays as it was.
			return nil
		}
		return recordNotifyResult(ctx, tx, n.ChannelID, errText, now)
	})
	return done, err
}

// ExpireNotifications gives up on every queued row, and every sending row
// whose lease ran out, that is past its give_up_at: the request expired (or
// the decision is old news) before it could be delivered. It returns the
// rows it gave up on, so that the dispatcher can log each.
func (s *Store) ExpireNotifications(ctx context.Context) ([]Notification, error) {
	var out []Notification
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		now := formatTime(s.nowUTC())
		const overdue = `WHERE (o.state = 'queued' OR (o.state = 'sending' AND o.due_at <= ?)) AND o.give_up_at <= ?`
		var err error
		if out, err = s.queryNotifications(ctx, tx, overdue, now, now); err != nil || len(out) == 0 {
			return err
		}
		for i := range out {
			n := &out[i]
			msg := "gave up: the request expired before the notification was delivered"
			switch {
			case n.ChangeID != "" && n.Event == NotifyPending:
				msg = "gave up: the change request expired before the notification was delivered"
			case n.Event == NotifyDecided:
				msg = "gave up: not delivered within " + NotifyDecidedWindow.String() + " of the decision"
			case n.Event == NotifyBound:
				msg = "gave up: the waiting requests expired before the summary was delivered"
			}
			if n.Attempts > 0 {
				msg += fmt.Sprintf(" (%d attempts", n.Attempts)
				if n.LastError != "" {
					msg += "; last: " + n.LastError
				}
				msg += ")"
			}
			n.LastError = cutText(msg, maxNotifyErrorLen)
			if _, err := tx.ExecContext(ctx, `UPDATE notify_outbox SET state = 'failed', claim = '', last_error = ?,
				modified_at = ?, done_at = ? WHERE id = ?`, n.LastError, now, now, n.ID); err != nil {
				return fmt.Errorf("store: expire notifications: %w", err)
			}
			if err := recordNotifyResult(ctx, tx, n.ChannelID, n.LastError, now); err != nil {
				return err
			}
			n.State = NotificationFailed
		}
		return nil
	})
	return out, err
}

// PruneNotifications deletes outbox rows that ended (delivered, failed or
// cancelled) before before, and returns how many went: the outbox is a
// queue, not a history (the audit log is that).
func (s *Store) PruneNotifications(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM notify_outbox
			WHERE state IN ('delivered', 'failed', 'cancelled') AND modified_at < ?`, formatTime(before))
		if err != nil {
			return fmt.Errorf("store: prune notifications: %w", err)
		}
		if n, err = res.RowsAffected(); err != nil {
			return fmt.Errorf("store: prune notifications: %w", err)
		}
		return nil
	})
	return n, err
}
