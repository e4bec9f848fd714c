package web

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/postern/postern/internal/usererr"
	"github.com/postern/postern/manage"
	"github.com/postern/postern/model"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/recipes"
	"github.com/postern/postern/store"
)

// The Connections page: every connection with its key's status, pinned host
// keys and public key, and forms to add one (pasting a private key or
// having postern generate one), change its address or labels, re-pin its
// host key, rotate its key, re-check it and remove it. Every change goes
// through package manage, as from the CLI and the API: checked, made and
// audited as the logged-in admin. A pasted private key is never put back
// into a page, a flash or a log line; a refused form names the field and
// the admin pastes it again.

// recheckTimeout bounds a form's key check, on top of the check's own dial
// and handshake deadlines: the admin waits for the answer.
const recheckTimeout = 30 * time.Second

// connectionRow is one connection as the page shows it. It copies the
// fields to show rather than embedding store.Connection, so that nothing
// but fingerprints of the pinned host keys and the public half of the key
// can reach the template; the private key is never read in this package.
type connectionRow struct {
	Alias        string
	Host         string
	Port         int
	Addr         string
	User         string
	Env          store.Env
	Recipe       string // the recipe's key, "" when none was chosen
	RecipeName   string
	KeyStatus    store.KeyStatus
	StatusText   string // "rejected: the target's words"
	KeyCheckedAt time.Time
	Fingerprints []string // SHA256 fingerprints of the pinned host keys
	HostKeyError string   // why a pinned key could not be read, if one could not
	PublicKey    string   // the line for the target's authorized_keys
	Grants       int
	// ReadSandbox is how its read commands run (model.ReadSandboxOf):
	// the page shows it, and the warning of a production connection whose
	// reads rely on the classifier alone. SandboxProbedAt is when the
	// target was last probed, for the template's since.
	ReadSandbox     model.ReadSandbox
	SandboxProbedAt time.Time
	// Record is what of its sessions is recorded (off, exec, all).
	Record string
	// Staged is the key staged for a rotation (its line and last check),
	// nil when none is: the page offers Commit and Abort for it.
	Staged *model.StagedKey
}

type connectionsData struct {
	Flash *flash
	Rows  []connectionRow
	Envs  []store.Env
	CSRF  string
	// ReadSandboxes are the read sandbox settings, for the forms.
	ReadSandboxes []store.ReadSandbox
	// Records are the recording settings, for the forms.
	Records []store.Record
}

func (s *Server) connectionsPage(w http.ResponseWriter, r *http.Request) {
	conns, err := s.cfg.Store.ListConnections(r.Context())
	if err != nil {
		s.serverError(w, r, "listing connections", err)
		return
	}
	grants, err := s.cfg.Store.ListGrants(r.Context())
	if err != nil {
		s.serverError(w, r, "listing grants", err)
		return
	}
	perConn := map[string]int{}
	for _, g := range grants {
		perConn[g.ConnectionID]++
	}
	d := connectionsData{Flash: flashFrom(r), Envs: store.Envs, CSRF: sessionFrom(r.Context()).CSRFToken,
		ReadSandboxes: store.ReadSandboxes, Records: store.Records}
	for _, c := range conns {
		mc := model.ConnectionOf(c, nil)
		row := connectionRow{
			Alias: c.Alias, Host: c.Host, Port: c.Port, Addr: c.Addr(), User: c.User, Env: c.Env, Recipe: c.Recipe,
			KeyStatus: c.KeyStatus, StatusText: model.StatusText(string(c.KeyStatus), c.KeyMessage, false),
			KeyCheckedAt: c.KeyCheckedAt, Grants: perConn[c.ID], ReadSandbox: model.ReadSandboxOf(c),
			SandboxProbedAt: c.SandboxProbedAt, Record: mc.Record, Staged: mc.StagedKey,
		}
		if rc := s.cfg.Catalog.Get(c.Recipe); rc != nil {
			row.RecipeName = rc.Name
		}
		keys, err := c.PinnedKeys()
		if err != nil {
			row.HostKeyError = "a pinned host key cannot be read"
		}
		for _, k := range keys {
			row.Fingerprints = append(row.Fingerprints, ssh.FingerprintSHA256(k))
		}
		if pub, err := s.cfg.Store.ConnectionPublicKey(r.Context(), c.ID); err == nil {
			row.PublicKey = model.AuthorizedKeyLine(pub, c.Alias)
		}
		d.Rows = append(d.Rows, row)
	}
	s.render(w, r, http.StatusOK, "connections.html", page("Connections", "connections", "", d))
}

// webActor is who a change made on the page is audited as, and what it
// may do: the logged-in admin with the role the session read from the
// store at this request (manage reads it again at the change).
func webActor(r *http.Request) policy.Actor {
	sess := sessionFrom(r.Context())
	return policy.Actor{Name: sess.AdminName, AdminID: sess.AdminID, Role: sess.AdminRole, Via: "web", Addr: clientAddr(r)}
}

// formLines is a textarea's non-empty lines, for pasted known_hosts lines
// and public keys.
func formLines(v string) []string {
	var out []string
	for _, l := range strings.Split(v, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

// formBool is a ticked checkbox.
func formBool(r *http.Request, name string) bool { return r.PostFormValue(name) != "" }

// checkContext bounds a form's key check.
func checkContext(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), recheckTimeout)
}

// addConnectionForm adds a connection from the form: a pasted private key
// or a generated one, pasted host keys or the one the target presents now.
func (s *Server) addConnectionForm(w http.ResponseWriter, r *http.Request) {
	alias := strings.TrimSpace(r.PostFormValue("alias"))
	spec := manage.ConnectionSpec{
		Alias: alias, Host: strings.TrimSpace(r.PostFormValue("host")), User: strings.TrimSpace(r.PostFormValue("user")),
		Env: store.Env(r.PostFormValue("env")), Recipe: strings.TrimSpace(r.PostFormValue("recipe")),
		HostKeys: formLines(r.PostFormValue("host_keys")), AcceptNewHostKey: formBool(r, "accept_new_host_key"),
		GenerateKey: formBool(r, "generate_key"), ReadSandbox: store.ReadSandbox(r.PostFormValue("read_sandbox")),
		ReadSandboxReason: strings.TrimSpace(r.PostFormValue("read_sandbox_reason")),
		Record:            store.Record(r.PostFormValue("record")),
	}
	if key := strings.TrimSpace(r.PostFormValue("private_key")); key != "" {
		spec.PrivateKey = []byte(key + "\n")
		defer clear(spec.PrivateKey)
	}
	if p := strings.TrimSpace(r.PostFormValue("port")); p != "" {
		port, err := strconv.Atoi(p)
		if err != nil {
			s.redirectFlash(w, r, "/connections", flashError, "Connection "+alias+" not added: the port is not a number.")
			return
		}
		spec.Port = port
	}
	ctx, cancel := checkContext(r)
	defer cancel()
	res, err := s.cfg.Manager.AddConnection(ctx, webActor(r), spec, manage.CheckOptions{AllowUnverified: formBool(r, "allow_unverified")})
	s.connectionFlash(w, r, "Connection "+alias+" not added", res, err)
}

// editConnectionForm changes a connection's host, port, user, env or
// recipe; fields left as they are change nothing.
func (s *Server) editConnectionForm(w http.ResponseWriter, r *http.Request) {
	alias := r.PathValue("alias")
	cur, err := s.cfg.Store.ConnectionByAlias(r.Context(), alias)
	if err != nil {
		s.formStoreError(w, r, "/connections", "Connection "+alias+" not changed", err)
		return
	}
	var e manage.ConnectionEdit
	if h := strings.TrimSpace(r.PostFormValue("host")); h != "" && h != cur.Host {
		e.Host = &h
	}
	if p := strings.TrimSpace(r.PostFormValue("port")); p != "" {
		port, err := strconv.Atoi(p)
		if err != nil {
			s.redirectFlash(w, r, "/connections", flashError, "Connection "+alias+" not changed: the port is not a number.")
			return
		}
		if port != cur.Port {
			e.Port = &port
		}
	}
	if u := strings.TrimSpace(r.PostFormValue("user")); u != "" && u != cur.User {
		e.User = &u
	}
	if env := store.Env(r.PostFormValue("env")); env != "" && env != cur.Env {
		e.Env = &env
	}
	if rc := strings.TrimSpace(r.PostFormValue("recipe")); rc != cur.Recipe {
		e.Recipe = &rc
	}
	if rs := store.ReadSandbox(r.PostFormValue("read_sandbox")); rs != "" {
		reason := strings.TrimSpace(r.PostFormValue("read_sandbox_reason"))
		if rs != cur.ReadSandbox || rs == store.ReadSandboxOff && reason != cur.ReadSandboxReason {
			e.ReadSandbox = &rs
			if rs == store.ReadSandboxOff {
				e.ReadSandboxReason = reason
			}
		}
	}
	if rec := store.Record(r.PostFormValue("record")); rec != "" && rec != cur.Record {
		e.Record = &rec
	}
	if e.Host == nil && e.Port == nil && e.User == nil && e.Env == nil && e.Recipe == nil && e.ReadSandbox == nil && e.Record == nil {
		s.redirectFlash(w, r, "/connections", flashError, "Connection "+alias+" not changed: nothing to change.")
		return
	}
	s.connectionEdit(w, r, alias, e)
}

// pinConnectionForm re-pins a connection's host key.
func (s *Server) pinConnectionForm(w http.ResponseWriter, r *http.Request) {
	e := manage.ConnectionEdit{HostKeys: formLines(r.PostFormValue("host_keys")),
		AcceptNewHostKey: formBool(r, "accept_new_host_key")}
	if (len(e.HostKeys) > 0) == e.AcceptNewHostKey {
		s.redirectFlash(w, r, "/connections", flashError, "Host key of "+r.PathValue("alias")+
			" not re-pinned: paste the host key, or tick “accept the key it presents now”, one of the two.")
		return
	}
	s.connectionEdit(w, r, r.PathValue("alias"), e)
}

// rotateKeyForm rotates a connection's key in stages: it stages a pasted
// or generated key (or does it all with install), or commits or aborts the
// staged one (the form's action field).
func (s *Server) rotateKeyForm(w http.ResponseWriter, r *http.Request) {
	alias := r.PathValue("alias")
	ctx, cancel := checkContext(r)
	defer cancel()
	by := webActor(r)
	var res manage.ConnectionResult
	var err error
	switch r.PostFormValue("action") {
	case "commit":
		res, err = s.cfg.Manager.CommitStagedKey(ctx, by, alias, 0)
	case "abort":
		res, err = s.cfg.Manager.AbortStagedKey(ctx, by, alias)
	default:
		generate := formBool(r, "generate_key")
		var key []byte
		if k := strings.TrimSpace(r.PostFormValue("private_key")); k != "" {
			key = []byte(k + "\n")
			defer clear(key)
		}
		if (len(key) > 0) == generate {
			s.redirectFlash(w, r, "/connections", flashError, "Key of "+alias+
				" not staged: paste a private key, or tick “generate”, one of the two.")
			return
		}
		if formBool(r, "install") {
			if !generate {
				s.redirectFlash(w, r, "/connections", flashError, "Key of "+alias+
					" not rotated: “install it through the current key” goes with “generate”.")
				return
			}
			res, err = s.cfg.Manager.InstallKey(ctx, by, alias, 0)
		} else {
			res, err = s.cfg.Manager.StageKey(ctx, by, alias, key, generate)
		}
	}
	var nc *manage.NotCommittedError
	switch {
	case errors.As(err, &nc):
		s.redirectFlash(w, r, "/connections", flashError, "Key of "+alias+" not switched: "+usererr.Message(nc, "the staged key is not proved")+".")
		return
	case err != nil:
		if r.Context().Err() != nil {
			return
		}
		msg := "Key of " + alias + " not rotated"
		if len(res.Steps) > 0 {
			msg += " (" + strings.Join(res.Steps, "; ") + ")"
		}
		s.formStoreError(w, r, "/connections", msg, err)
		return
	}
	parts := append([]string(nil), res.Steps...)
	switch res.Rotation {
	case manage.RotationStaged:
		parts = append(parts, "Staged key "+ssh.FingerprintSHA256(res.StagedPublicKey)+" for "+alias+
			"; nothing switched yet. Add this public key to "+res.Conn.User+"'s authorized_keys on the target: "+
			model.AuthorizedKeyLine(res.StagedPublicKey, alias)+" — then Re-check and Commit.")
	case manage.RotationAborted:
		parts = append(parts, "Dropped the staged key "+ssh.FingerprintSHA256(res.StagedPublicKey)+" of "+alias+".")
	default:
		parts = append(parts, "Connection "+alias+" switched to key "+ssh.FingerprintSHA256(res.PublicKey)+
			" (was "+ssh.FingerprintSHA256(res.PreviousPublicKey)+").")
	}
	s.cfg.Logger.Info().Str("admin", sessionFrom(r.Context()).AdminName).Str("alias", alias).
		Str("rotation", res.Rotation).Msg("web: key rotation")
	s.redirectFlash(w, r, "/connections", flashOK, strings.Join(parts, " "))
}

// connectionEdit makes an edit and says what became of it.
func (s *Server) connectionEdit(w http.ResponseWriter, r *http.Request, alias string, e manage.ConnectionEdit) {
	ctx, cancel := checkContext(r)
	defer cancel()
	res, err := s.cfg.Manager.UpdateConnection(ctx, webActor(r), alias, e,
		manage.CheckOptions{AllowUnverified: formBool(r, "allow_unverified")})
	s.connectionFlash(w, r, "Connection "+alias+" not changed", res, err)
}

// connectionFlash answers a connection form with what happened: the key
// check, the old and new host key, the public line of a generated key.
func (s *Server) connectionFlash(w http.ResponseWriter, r *http.Request, refused string, res manage.ConnectionResult, err error) {
	var ns *manage.NotStoredError
	switch {
	case errors.As(err, &ns):
		msg := refused + ": " + manage.CheckText(ns.Result) + "."
		if !ns.Mismatch() {
			msg += " Nothing was stored; tick “keep it even if the check fails” for a target that is not ready yet."
		} else {
			msg += " Nothing was stored."
		}
		s.redirectFlash(w, r, "/connections", flashError, msg)
		return
	case err != nil:
		if r.Context().Err() != nil {
			return
		}
		var scan *manage.HostKeyScanError
		if errors.As(err, &scan) {
			s.redirectFlash(w, r, "/connections", flashError, refused+": "+usererr.Message(scan, "the host key could not be fetched")+".")
			return
		}
		s.formStoreError(w, r, "/connections", refused, err)
		return
	}
	c := res.Conn
	if res.Unchanged {
		s.redirectFlash(w, r, "/connections", flashOK, "Connection "+c.Alias+" unchanged: host key "+
			strings.Join(pinFingerprints(c), ", ")+" is pinned already.")
		return
	}
	verb := "Changed"
	if res.Previous == nil {
		verb = "Added"
	}
	parts := []string{verb + " connection " + c.Alias + " (" + c.User + "@" + c.Addr() + ", " + string(c.Env) + ")."}
	if res.ScannedHostKey != nil {
		parts = append(parts, "Pinned the host key it presents now: "+ssh.FingerprintSHA256(res.ScannedHostKey)+
			"; compare it with the target's own.")
	}
	if p := res.Previous; p != nil {
		if old, now := strings.Join(pinFingerprints(p), ", "), strings.Join(pinFingerprints(c), ", "); old != now {
			parts = append(parts, "Host key: "+old+" → "+now+".")
		}
	}
	if res.Generated {
		parts = append(parts, "Add this public key to "+c.User+"'s authorized_keys on the target: "+
			model.AuthorizedKeyLine(res.PublicKey, c.Alias))
	}
	kind := flashOK
	if res.Checked {
		parts = append(parts, "Key check: "+model.StatusText(string(c.KeyStatus), c.KeyMessage, false)+".")
		if res.Check.Status != recipes.StatusOK {
			kind = flashError
		}
	}
	parts = append(parts, readSandboxFlash(res)...)
	s.cfg.Logger.Info().Str("admin", sessionFrom(r.Context()).AdminName).Str("alias", c.Alias).
		Str("key_status", string(c.KeyStatus)).Msg("web: connection saved")
	s.redirectFlash(w, r, "/connections", kind, strings.Join(parts, " "))
}

// pinFingerprints lists a connection's pinned keys by fingerprint.
func pinFingerprints(c *store.Connection) []string {
	keys, _ := c.PinnedKeys()
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, ssh.FingerprintSHA256(k))
	}
	return out
}

// formStoreError answers a form whose change the store or manager refused
// with its message, or a 500 for anything else. A change held for a second
// admin is no refusal: it is said in a notice (heldFlash); one the admin's
// role does not allow is a 403, as needRole answers.
func (s *Server) formStoreError(w http.ResponseWriter, r *http.Request, next, refused string, err error) {
	var held *manage.HeldError
	if errors.As(err, &held) {
		s.heldFlash(w, r, next, held)
		return
	}
	if isRoleRefusal(err) {
		s.roleRefused(w, r, err)
		return
	}
	if msg, ok := userMessage(err); ok {
		s.redirectFlash(w, r, next, flashError, refused+": "+msg)
		return
	}
	s.serverError(w, r, strings.ToLower(refused[:1])+refused[1:], err)
}

func (s *Server) removeConnectionForm(w http.ResponseWriter, r *http.Request) {
	alias := r.PathValue("alias")
	if !formBool(r, "confirm") {
		s.redirectFlash(w, r, "/connections", flashError, "Connection "+alias+" not removed: tick the box to confirm.")
		return
	}
	if _, err := s.cfg.Manager.RemoveConnection(r.Context(), webActor(r), alias); err != nil {
		s.formStoreError(w, r, "/connections", "Connection "+alias+" not removed", err)
		return
	}
	s.cfg.Logger.Info().Str("admin", sessionFrom(r.Context()).AdminName).Str("alias", alias).Msg("web: connection removed")
	s.redirectFlash(w, r, "/connections", flashOK, "Removed connection "+alias+" with its key and grants.")
}

// recheckForm runs the connection's key check (the Re-check button) and
// shows what it found, which is recorded.
func (s *Server) recheckForm(w http.ResponseWriter, r *http.Request) {
	alias := r.PathValue("alias")
	ctx, cancel := checkContext(r)
	defer cancel()
	res, err := s.cfg.Manager.CheckConnection(ctx, alias, 0)
	if err != nil {
		if r.Context().Err() != nil {
			return
		}
		if _, ok := userMessage(err); !ok {
			s.cfg.Logger.Warn().Err(err).Str("alias", alias).Msg("web: key check")
		}
		s.formStoreError(w, r, "/connections", "Key check of "+alias+" failed", err)
		return
	}
	kind := flashOK
	if res.Check.Status != recipes.StatusOK {
		kind = flashError
	}
	text := "Key check of " + alias + ": " + string(manage.KeyStatusOf(res.Check.Status))
	if res.Check.Message != "" {
		text += " — " + res.Check.Message
	}
	if rs := readSandboxFlash(res); len(rs) > 0 {
		text += ". " + strings.Join(rs, " ")
	}
	s.redirectFlash(w, r, "/connections", kind, text)
}
