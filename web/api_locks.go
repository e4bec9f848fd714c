package web

import (
	"net/http"
	"time"

	"github.com/postern/postern/model"
	"github.com/postern/postern/store"
)

// Locks over the API (issue 24): GET /v1/locks lists the locks that hold,
// POST /v1/locks locks an agent or a connection, DELETE /v1/locks/{id}
// removes a lock. The changes go through package manage, which wants the
// admin role (403 insufficient_role otherwise) and audits them as the
// token's admin; both apply at once.

// apiLockBody is the body of POST /v1/locks.
type apiLockBody struct {
	Kind   string `json:"kind"`   // agent or connection
	Name   string `json:"name"`   // the agent's name or the connection's alias
	For    string `json:"for"`    // a Go duration ("30m", "2h"); "" holds until removed
	Reason string `json:"reason"` // told to the agents refused, kept in the audit
}

func apiLockList() apiListSpec {
	return apiListSpec{resource: "locks",
		filters: map[string]func(string) error{"kind": apiEnumFilter(store.LockAgent, store.LockConnection), "name": nil},
		sorts:   []string{"name", "created_at", "expires_at"}, defSort: "created_at"}
}

func (s *Server) apiListLocks(w http.ResponseWriter, r *http.Request, c *apiCall) error {
	p, err := parseAPIList(c.query, apiLockList())
	if err != nil {
		return err
	}
	locks, err := s.cfg.Manager.Locks(r.Context())
	if err != nil {
		return err
	}
	var views []model.Lock
	for _, l := range locks {
		v := model.LockOf(l)
		if !apiMatchAll(p.filters, map[string]string{"kind": v.Kind, "name": v.Name}) {
			continue
		}
		views = append(views, v)
	}
	return apiWriteList(w, r, apiPaginate(views, p, "locks", apiSorter[model.Lock]{
		id: func(v model.Lock) string { return v.ID },
		keys: map[string]func(model.Lock) string{
			"name":       func(v model.Lock) string { return v.Kind + " " + v.Name },
			"created_at": func(v model.Lock) string { return sortTimeKey(time.Time(v.CreatedAt)) },
			"expires_at": func(v model.Lock) string { return sortTimeKey(time.Time(v.ExpiresAt)) },
		},
	}))
}

func (s *Server) apiCreateLock(r *http.Request, c *apiCall, body []byte) (int, any, error) {
	var in apiLockBody
	if err := apiDecodeBody(r, body, &in); err != nil {
		return 0, nil, err
	}
	if in.Kind != store.LockAgent && in.Kind != store.LockConnection {
		return 0, nil, apiBadBody("kind", "want agent or connection")
	}
	var d time.Duration
	if in.For != "" {
		var err error
		if d, err = time.ParseDuration(in.For); err != nil || d <= 0 {
			return 0, nil, apiBadBody("for", "want a positive duration such as 30m or 2h, or leave it out to lock until unlocked")
		}
	}
	l, err := s.cfg.Manager.Lock(r.Context(), apiActor(r, c), in.Kind, in.Name, d, in.Reason)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, model.LockOf(*l), nil
}

// apiDeleteLock removes the lock named by {id}: the lock's id, or the
// locked agent's or connection's id.
func (s *Server) apiDeleteLock(r *http.Request, c *apiCall, body []byte) (int, any, error) {
	if err := apiNoBody(body); err != nil {
		return 0, nil, err
	}
	ref := r.PathValue("id")
	locks, err := s.cfg.Manager.Locks(r.Context())
	if err != nil {
		return 0, nil, err
	}
	for _, l := range locks {
		if l.ID == ref || l.TargetID == ref {
			got, err := s.cfg.Manager.Unlock(r.Context(), apiActor(r, c), l.Kind, l.TargetName)
			if err != nil {
				return 0, nil, err
			}
			return http.StatusOK, model.LockOf(*got), nil
		}
	}
	return 0, nil, apiNotFound("lock", ref)
}
