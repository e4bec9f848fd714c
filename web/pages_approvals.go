package web

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/postern/postern/internal/usererr"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
)

// Approvals page limits.
const (
	// recentDecided is how many decided requests the approvals page lists
	// below the pending ones; ?all=1 lists up to maxDecided.
	recentDecided = 20
	maxDecided    = 500
)

// approvalCard is one approval request as the page shows it.
type approvalCard struct {
	store.Approval
	Pending   bool
	Approvers string // "0 of 1", "1 of 2: alice"
	Remaining int    // whole seconds until expiry, when the page was made
	Deciders  string // who decided, "alice and bob"
	Target    string // user@host:port of the connection
	// Scopable: the approval may be given a wider scope than the request
	// (never for a production destructive operation).
	Scopable bool
	// Extent is the operation's size and what of it lies beyond the
	// command box's first view, said on the card before the decision
	// forms: a command must not hide its end below a screenful of
	// harmless text.
	Extent policy.Extent

	// What the decision forms and the countdown need, copied into each
	// view because a nested template sees only its own data.
	CSRF string
	Next string    // where the decision forms return to
	Now  time.Time // the server's clock, from which the countdown starts
	// CanDecide: the logged-in admin's role decides approvals (a viewer's
	// page shows no decision forms; the POST is refused all the same).
	CanDecide bool
}

// approvalCards is the data of the live part of the approvals page: the
// inside of <section id="approvals">, which approvals.js fetches from
// /approvals/list and swaps in after each change.
type approvalCards struct {
	Pending []approvalCard
	// Changes are the changes of configuration that wait for a second
	// admin (kind change), listed before the operations.
	Changes []changeCard
	// One is set on a single request's page: the request itself, shown as
	// a pending article or, once decided, by its status. OneChange is the
	// same for a change request.
	One       *approvalCard
	OneChange *changeCard
}

// OneID is the id of the single request a request's page shows, "" on
// the list.
func (l approvalCards) OneID() string {
	switch {
	case l.One != nil:
		return l.One.ID
	case l.OneChange != nil:
		return l.OneChange.ID
	}
	return ""
}

// count is how many requests wait in the list.
func (l approvalCards) count() int { return len(l.Pending) + len(l.Changes) }

// changeCard is a change of configuration that waits for (or was decided
// by) a second admin, as the page shows it. It copies what the card shows
// rather than embedding store.ChangeRequest, so that the request's payload
// (what it would write) cannot reach a template. Summary, Before, After
// and the names are shown through visible: a name or summary may hold
// characters meant to mislead.
type changeCard struct {
	ID          string
	Kind        string // manage's kind: grant, conn-update, ...
	Summary     string
	Before      string
	After       string
	RequestedBy string
	Agent       string
	Connection  string
	Status      string
	DecidedBy   string
	Reason      string
	CreatedAt   time.Time
	ExpiresAt   time.Time
	DecidedAt   time.Time
	Pending     bool
	Remaining   int // whole seconds until expiry, when the page was made
	// Mine: the logged-in admin asked for it, and cannot decide it.
	Mine      bool
	CanDecide bool
	CSRF      string
	Next      string
	Now       time.Time
}

// newChangeCard prepares c for the page as seen by sess; csrf and next are
// for its decision forms ("" on the decided list).
func newChangeCard(c store.ChangeRequest, now time.Time, sess *store.AdminSession, next string) changeCard {
	v := changeCard{ID: c.ID, Kind: c.Kind, Summary: c.Summary, Before: c.Before, After: c.After,
		RequestedBy: c.RequestedBy, Agent: c.AgentName, Connection: c.ConnectionAlias, Status: c.Status,
		DecidedBy: c.DecidedBy, Reason: c.Reason, CreatedAt: c.CreatedAt, ExpiresAt: c.ExpiresAt, DecidedAt: c.DecidedAt,
		Next: next, Now: now}
	if c.Status == store.ChangePending && !now.Before(c.ExpiresAt) {
		v.Status = store.ChangeExpired
	}
	v.Pending = v.Status == store.ChangePending
	v.Remaining = max(int(c.ExpiresAt.Sub(now).Round(time.Second)/time.Second), 0)
	if sess != nil {
		v.CSRF, v.CanDecide = sess.CSRFToken, canDecide(sess)
		v.Mine = (c.RequestedByID != "" && c.RequestedByID == sess.AdminID) || strings.EqualFold(c.RequestedBy, sess.AdminName)
	}
	return v
}

// approvalsData is the approvals page.
type approvalsData struct {
	Flash  *flash
	List   approvalCards
	Recent []approvalCard // decided requests, newest first
	// RecentChanges are the decided change requests, newest first.
	RecentChanges []changeCard
	All           bool // Recent is every decided request (up to maxDecided)
	More          bool // there are decided requests not in Recent
	// Missing is set on the page of an unknown request.
	Missing bool
}

// newApprovalCard prepares a for the page; csrf and next are for its decision
// forms.
func newApprovalCard(a store.Approval, now time.Time, csrf, next string) approvalCard {
	v := approvalCard{Approval: a, Pending: a.Status == store.ApprovalPending, CSRF: csrf, Next: next, Now: now}
	got := 0
	if a.FirstApprover != "" {
		got = 1
	}
	v.Approvers = fmt.Sprintf("%d of %d", got, max(a.ApprovalsNeeded, 1))
	if a.FirstApprover != "" {
		v.Approvers += ": " + a.FirstApprover
	}
	v.Remaining = int(a.ExpiresAt.Sub(now).Round(time.Second) / time.Second)
	if v.Remaining < 0 {
		v.Remaining = 0
	}
	v.Deciders = strings.Join(a.Deciders(), " and ")
	v.Target = approvalTarget(a)
	v.Extent = cardExtent(a.Operation)
	v.Scopable = a.ApprovalsNeeded == 1 && a.TerminalLife == 0 &&
		!(a.Class == string(policy.Destructive) && a.ConnectionEnv == store.EnvProduction)
	return v
}

// pendingList reads the pending requests, operations' and changes', into
// the live list's data.
func (s *Server) pendingList(r *http.Request) (approvalCards, error) {
	now := s.cfg.Now()
	list, err := s.cfg.Engine.Approvals(r.Context(), false)
	if err != nil {
		return approvalCards{}, fmt.Errorf("web: approvals: %w", err)
	}
	changes, err := s.cfg.Manager.Changes(r.Context(), false)
	if err != nil {
		return approvalCards{}, fmt.Errorf("web: change requests: %w", err)
	}
	sess := sessionFrom(r.Context())
	var out approvalCards
	for _, c := range changes {
		out.Changes = append(out.Changes, newChangeCard(c, now, sess, "/approvals"))
	}
	for _, a := range list {
		v := newApprovalCard(a, now, sess.CSRFToken, "/approvals")
		v.CanDecide = canDecide(sess)
		out.Pending = append(out.Pending, v)
	}
	return out, nil
}

// oneList reads one request into the live list's data, for its own page.
func (s *Server) oneList(r *http.Request, id string) (approvalCards, error) {
	now := s.cfg.Now()
	if store.IsChangeID(id) {
		c, err := s.cfg.Store.ChangeRequestShown(r.Context(), id)
		if err != nil {
			return approvalCards{}, fmt.Errorf("web: change request %s: %w", id, err)
		}
		v := newChangeCard(c, now, sessionFrom(r.Context()), "/approvals/"+c.ID)
		return approvalCards{OneChange: &v}, nil
	}
	// Mark overdue requests expired first, so that the page tells the truth
	// about a request nobody waited on (as Engine.Approvals does for lists).
	if _, err := s.cfg.Store.ExpireApprovals(r.Context()); err != nil {
		return approvalCards{}, fmt.Errorf("web: approvals: %w", err)
	}
	a, err := s.cfg.Store.GetApproval(r.Context(), id)
	if err != nil {
		return approvalCards{}, fmt.Errorf("web: approval %s: %w", id, err)
	}
	v := newApprovalCard(a, now, sessionFrom(r.Context()).CSRFToken, "/approvals/"+a.ID)
	v.CanDecide = canDecide(sessionFrom(r.Context()))
	return approvalCards{One: &v}, nil
}

func (s *Server) approvalsPage(w http.ResponseWriter, r *http.Request) {
	list, err := s.pendingList(r)
	if err != nil {
		s.serverError(w, r, "listing approvals", err)
		return
	}
	now := s.cfg.Now()
	d := approvalsData{Flash: flashFrom(r), List: list, All: r.URL.Query().Get("all") == "1"}
	limit := recentDecided
	if d.All {
		limit = maxDecided
	}
	// One more than shown tells whether there are more.
	recent, err := s.cfg.Store.RecentDecidedApprovals(r.Context(), limit+1)
	if err != nil {
		s.serverError(w, r, "listing approvals", err)
		return
	}
	if len(recent) > limit {
		recent, d.More = recent[:limit], true
	}
	for _, a := range recent {
		d.Recent = append(d.Recent, newApprovalCard(a, now, "", ""))
	}
	changes, err := s.cfg.Manager.Changes(r.Context(), true)
	if err != nil {
		s.serverError(w, r, "listing change requests", err)
		return
	}
	for _, c := range changes { // newest first
		if c.Status == store.ChangePending {
			continue
		}
		if len(d.RecentChanges) == limit {
			d.More = true
			break
		}
		d.RecentChanges = append(d.RecentChanges, newChangeCard(c, now, nil, ""))
	}
	// The title counts the pending requests, so that a tab in the
	// background shows that something waits; approvals.js keeps it current.
	title := "Approvals"
	if n := list.count(); n > 0 {
		title = "(" + strconv.Itoa(n) + ") " + title
	}
	s.render(w, r, http.StatusOK, "approvals.html", page(title, "approvals", "approvals.js", d))
}

func (s *Server) approvalPage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	list, err := s.oneList(r, id)
	if errors.Is(err, store.ErrNotFound) {
		s.render(w, r, http.StatusNotFound, "approvals.html", page("Approval", "approvals", "",
			approvalsData{Missing: true, Flash: &flash{Kind: flashError, Text: "There is no approval request " + id + "."}}))
		return
	}
	if err != nil {
		s.serverError(w, r, "reading the approval", err)
		return
	}
	d := approvalsData{Flash: flashFrom(r), List: list}
	s.render(w, r, http.StatusOK, "approvals.html", page("Approval "+list.OneID(), "approvals", "approvals.js", d))
}

// approvalsFragment answers /approvals/list (the pending requests) and
// /approvals/list?id=ID (one request): the inside of the page's
// <section id="approvals">, for approvals.js.
func (s *Server) approvalsFragment(w http.ResponseWriter, r *http.Request) {
	var list approvalCards
	var err error
	if id := r.URL.Query().Get("id"); id != "" {
		list, err = s.oneList(r, id)
	} else {
		list, err = s.pendingList(r)
	}
	if errors.Is(err, store.ErrNotFound) {
		http.Error(w, "no such approval request", http.StatusNotFound)
		return
	}
	if err != nil {
		s.serverError(w, r, "listing approvals", err)
		return
	}
	s.renderFragment(w, r, "approvals.html", "approval-list", list)
}

func (s *Server) approveForm(w http.ResponseWriter, r *http.Request) {
	s.decideForm(w, r, true)
}

func (s *Server) denyForm(w http.ResponseWriter, r *http.Request) {
	s.decideForm(w, r, false)
}

// decideForm records the logged-in admin's decision through the policy
// engine, which enforces the two-person rule and lets exactly one of
// concurrent decisions win, and tells the admin what happened.
func (s *Server) decideForm(w http.ResponseWriter, r *http.Request, approve bool) {
	id := r.PathValue("id")
	if store.IsChangeID(id) {
		s.decideChangeForm(w, r, id, approve)
		return
	}
	sess := sessionFrom(r.Context())
	by := policy.Decider{AdminID: sess.AdminID, Name: sess.AdminName}
	admin := by.Name
	next := r.PostFormValue("next")
	if next == "" {
		next = "/approvals"
	}
	// The note's rules (length, one line, visible characters) are
	// policy's, kept in Deny for every door.
	note := r.PostFormValue("note")
	var a store.Approval
	var err error
	if approve {
		var scope policy.Scope
		scope, err = policy.ParseScope(r.PostFormValue("scope"), r.PostFormValue("for"))
		if err == nil {
			a, err = s.cfg.Engine.Approve(r.Context(), id, by, scope)
		}
	} else {
		a, err = s.cfg.Engine.Deny(r.Context(), id, by, note)
	}
	if isRoleRefusal(err) {
		s.roleRefused(w, r, err)
		return
	}
	kind, msg := decisionMessage(id, admin, a, err)
	if kind == "" {
		s.serverError(w, r, "recording the decision", err)
		return
	}
	s.cfg.Logger.Info().Str("approval", id).Str("admin", admin).Bool("approve", approve).
		Str("result", msg).Msg("web: approval decision")
	s.redirectFlash(w, r, next, kind, msg)
}

// decisionMessage says what a decision did, in the admin's words; kind ""
// means err is not one to explain (a database failure).
func decisionMessage(id, admin string, a store.Approval, err error) (kind, msg string) {
	var already *policy.AlreadyDecidedError
	switch {
	case err == nil && a.Status == store.ApprovalPending:
		return flashOK, "Your approval of " + id + " is recorded (1 of 2); a second admin must approve it too."
	case err == nil && a.Status == store.ApprovalApproved && a.Scope == store.ScopeOperation:
		return flashOK, "Approved " + id + ", and the same operation until " + a.ScopeExpiresAt.UTC().Format("15:04 MST") + "."
	case err == nil && a.Status == store.ApprovalApproved && a.Scope == store.ScopeClass:
		return flashOK, "Approved " + id + ", and every " + a.Class + " operation of " + a.AgentName + " on " +
			a.ConnectionAlias + " until " + a.ScopeExpiresAt.UTC().Format("15:04 MST") + "."
	case err == nil && a.Status == store.ApprovalApproved:
		return flashOK, "Approved " + id + "."
	case err == nil:
		return flashOK, "Denied " + id + "."
	case errors.As(err, &already):
		msg = id + " was already " + already.Status
		if len(already.Deciders) > 0 {
			msg += " by " + strings.Join(already.Deciders, " and ")
		}
		return flashError, msg + "; your decision was not recorded."
	case errors.Is(err, policy.ErrSameApprover):
		return flashError, "You (" + admin + ") gave the first approval of " + id + "; the second must come from a different admin."
	case errors.Is(err, policy.ErrExpired):
		return flashError, id + " expired before it was decided; nothing ran."
	case errors.Is(err, policy.ErrScope):
		return flashError, "Not approved: " + usererr.Message(err, "the scope is not allowed") + "."
	case errors.Is(err, policy.ErrInvalidText):
		return flashError, "Not denied: the note is refused: " + usererr.Message(err, "it is not allowed") + "."
	case errors.Is(err, policy.ErrInvalidAdmin):
		return flashError, "Your admin name cannot be recorded as a decider: " + usererr.Message(err, "it is not valid") + "."
	case errors.Is(err, store.ErrNotFound):
		return flashError, "There is no approval request " + id + "."
	}
	if msg, ok := userMessage(err); ok {
		return flashError, "Your decision was not recorded: " + msg
	}
	return "", ""
}

// decideChangeForm records the logged-in admin's decision on change
// request id through manage, which refuses the admin who asked for it and
// makes an approved change at once, audited with both names.
func (s *Server) decideChangeForm(w http.ResponseWriter, r *http.Request, id string, approve bool) {
	admin := sessionFrom(r.Context()).AdminName
	next := r.PostFormValue("next")
	if next == "" {
		next = "/approvals"
	}
	if sc := r.PostFormValue("scope"); approve && (sc != "" && sc != string(store.ScopeRequest) || r.PostFormValue("for") != "") {
		s.redirectFlash(w, r, next, flashError, "Not approved: a change request is approved for itself only, with no scope.")
		return
	}
	c, err := s.cfg.Manager.DecideChange(r.Context(), webActor(r), id, approve, r.PostFormValue("note"))
	if isRoleRefusal(err) {
		s.roleRefused(w, r, err)
		return
	}
	kind, msg := changeDecisionMessage(id, admin, c, err)
	if kind == "" {
		s.serverError(w, r, "recording the decision", err)
		return
	}
	s.cfg.Logger.Info().Str("change", id).Str("admin", admin).Bool("approve", approve).
		Str("result", msg).Msg("web: change decision")
	s.redirectFlash(w, r, next, kind, msg)
}

// changeDecisionMessage says what a decision on a change request did;
// kind "" means err is not one to explain (a database failure).
func changeDecisionMessage(id, admin string, c store.ChangeRequest, err error) (kind, msg string) {
	switch {
	case err == nil && c.Status == store.ChangeApproved:
		return flashOK, "Approved change " + id + ": " + policy.VisibleLine(c.Summary) + " is made."
	case err == nil:
		return flashOK, "Denied change " + id + "; nothing was changed."
	case c.Status == store.ChangeFailed:
		return flashError, "Change " + id + " was approved but could not be made: " + policy.VisibleLine(c.Reason)
	case errors.Is(err, store.ErrSameRequester):
		return flashError, "You (" + admin + ") asked for change " + id + "; a different admin must decide it."
	case errors.Is(err, store.ErrNotFound):
		return flashError, "There is no change request " + id + "."
	case errors.Is(err, policy.ErrInvalidText):
		return flashError, "Not denied: the note is refused: " + usererr.Message(err, "it is not allowed") + "."
	}
	if msg, ok := userMessage(err); ok {
		return flashError, "Your decision was not recorded: " + msg
	}
	return "", ""
}
