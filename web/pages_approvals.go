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
}

// approvalCards is the data of the live part of the approvals page: the
// inside of <section id="approvals">, which approvals.js fetches from
// /approvals/list and swaps in after each change.
type approvalCards struct {
	Pending []approvalCard
	// One is set on a single request's page: the request itself, shown as
	// a pending article or, once decided, by its status.
	One *approvalCard
}

// approvalsData is the approvals page.
type approvalsData struct {
	Flash  *flash
	List   approvalCards
	Recent []approvalCard // decided requests, newest first
	All    bool           // Recent is every decided request (up to maxDecided)
	More   bool           // there are decided requests not in Recent
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

// pendingList reads the pending requests into the live list's data.
func (s *Server) pendingList(r *http.Request) (approvalCards, error) {
	now := s.cfg.Now()
	list, err := s.cfg.Engine.Approvals(r.Context(), false)
	if err != nil {
		return approvalCards{}, fmt.Errorf("web: approvals: %w", err)
	}
	csrf := sessionFrom(r.Context()).CSRFToken
	var out approvalCards
	for _, a := range list {
		out.Pending = append(out.Pending, newApprovalCard(a, now, csrf, "/approvals"))
	}
	return out, nil
}

// oneList reads one request into the live list's data, for its own page.
func (s *Server) oneList(r *http.Request, id string) (approvalCards, error) {
	now := s.cfg.Now()
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
	// The title counts the pending requests, so that a tab in the
	// background shows that something waits; approvals.js keeps it current.
	title := "Approvals"
	if n := len(list.Pending); n > 0 {
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
	s.render(w, r, http.StatusOK, "approvals.html", page("Approval "+list.One.ID, "approvals", "approvals.js", d))
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
