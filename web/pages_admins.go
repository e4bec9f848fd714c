package web

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/postern/postern/store"
)

// The Admins page (issue 23): every admin with role and state, shown to
// every role, and for an owner a form to add an admin and a role select
// per admin. Both forms go through package manage as the REST routes do
// (POST /v1/admins, PATCH /v1/admins/{id}) and the CLI's `postern admin add`
// and `admin role`: an admin or owner added, or a role raised, waits for a
// second admin and the page says so with the change id (heldFlash); a
// viewer or approver added, or a role lowered, applies at once.
//
// The password travels in the form's body only: it is hashed at once and
// is in no flash, redirect, log line or page.

// adminRow is one admin as the page shows it: no password hash reaches the
// template.
type adminRow struct {
	Name      string
	Role      store.Role
	Disabled  bool
	CreatedAt time.Time
	Self      bool // the logged-in admin
}

type adminsData struct {
	Flash *flash
	CSRF  string
	Rows  []adminRow
	Roles []store.Role
	// CanManage shows the forms: the session's admin is an owner. The
	// forms' routes (needRole) and manage refuse everyone else anyway.
	CanManage   bool
	MinPassword int // MinPasswordLength, for the form's minlength
}

func (s *Server) adminsPage(w http.ResponseWriter, r *http.Request) {
	list, err := s.cfg.Store.ListAdmins(r.Context())
	if err != nil {
		s.serverError(w, r, "listing admins", err)
		return
	}
	sess := sessionFrom(r.Context())
	d := adminsData{Flash: flashFrom(r), CSRF: sess.CSRFToken, Roles: store.Roles,
		CanManage: sess.AdminRole.AtLeast(store.RoleOwner), MinPassword: MinPasswordLength}
	for _, a := range list {
		d.Rows = append(d.Rows, adminRow{Name: a.Name, Role: a.Role, Disabled: a.Disabled, CreatedAt: a.CreatedAt,
			Self: a.ID == sess.AdminID})
	}
	s.render(w, r, http.StatusOK, "admins.html", page("Admins", "admins", "", d))
}

// addAdminForm adds an admin with a password and a role.
func (s *Server) addAdminForm(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimSpace(r.PostFormValue("name"))
	pw := r.PostFormValue("password")
	refused := "Admin " + name + " not added"
	role, err := store.ParseRole(r.PostFormValue("role"))
	if err != nil {
		s.redirectFlash(w, r, "/admins", flashError, refused+": choose a role: viewer, approver, admin or owner.")
		return
	}
	switch n := len(pw); {
	case n < MinPasswordLength:
		s.redirectFlash(w, r, "/admins", flashError,
			fmt.Sprintf("%s: the password has %d characters; want at least %d.", refused, n, MinPasswordLength))
		return
	case n > maxPasswordLength:
		s.redirectFlash(w, r, "/admins", flashError,
			fmt.Sprintf("%s: the password is longer than %d bytes.", refused, maxPasswordLength))
		return
	}
	hash, err := HashPassword(pw)
	if err != nil {
		// The checks above refuse every password HashPassword refuses;
		// its error names no password either way.
		s.redirectFlash(w, r, "/admins", flashError, refused+": the password is refused.")
		return
	}
	a, err := s.cfg.Manager.AddAdmin(r.Context(), webActor(r), name, hash, role)
	if err != nil {
		s.formStoreError(w, r, "/admins", refused, err)
		return
	}
	s.cfg.Logger.Info().Str("admin", sessionAdmin(sessionFrom(r.Context()))).Str("new_admin", a.Name).
		Str("role", string(a.Role)).Msg("web: admin added")
	s.redirectFlash(w, r, "/admins", flashOK, "Added admin "+a.Name+" with the "+string(a.Role)+
		" role: they can log in now.")
}

// adminRoleForm changes the role of the admin the path names.
func (s *Server) adminRoleForm(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	refused := "Role of " + name + " not changed"
	v := r.PostFormValue("role")
	if v == "" {
		s.redirectFlash(w, r, "/admins", flashError, refused+": choose a role.")
		return
	}
	role, err := store.ParseRole(v)
	if err != nil {
		s.redirectFlash(w, r, "/admins", flashError, refused+": choose a role: viewer, approver, admin or owner.")
		return
	}
	a, err := s.cfg.Manager.SetAdminRole(r.Context(), webActor(r), name, role)
	if err != nil {
		s.formStoreError(w, r, "/admins", refused, err)
		return
	}
	s.cfg.Logger.Info().Str("admin", sessionAdmin(sessionFrom(r.Context()))).Str("target_admin", a.Name).
		Str("role", string(a.Role)).Msg("web: admin role changed")
	s.redirectFlash(w, r, "/admins", flashOK, "Admin "+a.Name+" now has the "+string(a.Role)+" role.")
}
