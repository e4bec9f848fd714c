package config

import (
	"context"
	"fmt"
	"strings"

	"github.com/postern/postern/store"
)

// maxPasswordFile bounds an admin's password_file: one line.
const maxPasswordFile = 4096

// admin plans one declared admin: added (with the first line of its
// password_file, hashed), its role changed, or as declared. A role of
// admin or owner, or a raise, waits for a second admin when applied
// (manage's rule, as from every door).
func (p *planner) admin(where string, a Admin) {
	if err := store.ValidateName("admin", a.Name); err != nil {
		p.bad(where, "%s", errText(err))
		return
	}
	if !p.firstTime(p.admins, strings.ToLower(a.Name), where) {
		return
	}
	role, err := store.ParseRole(a.Role)
	if err != nil {
		p.bad(where, "%s", errText(err))
		return
	}
	have, exists := p.cur.admins[strings.ToLower(a.Name)]
	if !exists {
		p.addAdmin(where, a, role)
		return
	}
	if have.Role == role {
		p.out.unchanged++
		return
	}
	name := have.Name
	p.add(fmt.Sprintf("~ admin %s: role %s -> %s", name, have.Role, role), func(ctx context.Context) (string, error) {
		_, err := p.m.SetAdminRole(ctx, p.by, name, role)
		return "", err
	})
}

// addAdmin plans a new admin, which needs a password file.
func (p *planner) addAdmin(where string, a Admin, role store.Role) {
	if a.PasswordFile == "" {
		p.bad(where, "a new admin needs password_file (its first line is the password)")
		return
	}
	if p.opts.HashPassword == nil {
		p.bad(where, "this apply cannot hash passwords: add the admin with postern admin add")
		return
	}
	b, err := p.read(a.PasswordFile, "password_file", "admin "+a.Name, maxPasswordFile)
	if err != nil {
		p.bad(where, "%s", err)
		return
	}
	pw, _, _ := strings.Cut(string(b), "\n")
	pw = strings.TrimSuffix(pw, "\r")
	if pw == "" {
		p.bad(where, "the first line of password_file is empty")
		return
	}
	hash := p.opts.HashPassword
	name := a.Name
	p.add(fmt.Sprintf("+ admin %s: role %s", name, role), func(ctx context.Context) (string, error) {
		h, err := hash(pw)
		if err != nil {
			return "", err
		}
		_, err = p.m.AddAdmin(ctx, p.by, name, h, role)
		return "", err
	})
}
