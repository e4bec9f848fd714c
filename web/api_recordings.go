package web

import (
	"errors"
	"net/http"
	"time"

	"github.com/postern/postern/internal/usererr"
	"github.com/postern/postern/model"
	"github.com/postern/postern/store"
)

// Recordings over REST (issue 24). Both routes need a token of scope
// admin whose admin has the admin role or more (manage checks the role
// again): a recording holds whatever a target printed.

func apiRecordingList() apiListSpec {
	return apiListSpec{resource: "recordings", filters: map[string]func(string) error{"connection": nil},
		sorts: []string{"started_at"}, defSort: "-started_at"}
}

// apiRecordingError maps a refusal of manage's to the API's answer.
func apiRecordingError(err error, id string) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return apiNotFound("recording", id)
	case isRoleRefusal(err):
		return &apiError{Status: http.StatusForbidden, Code: "insufficient_role",
			Message: usererr.Message(err, "your role does not allow seeing recordings")}
	}
	return err
}

// apiListRecordings lists recordings without their output.
func (s *Server) apiListRecordings(w http.ResponseWriter, r *http.Request, c *apiCall) error {
	p, err := parseAPIList(c.query, apiRecordingList())
	if err != nil {
		return err
	}
	list, err := s.cfg.Manager.Recordings(r.Context(), apiActor(r, c), store.RecordingFilter{Connection: p.filters["connection"]})
	if err != nil {
		return apiRecordingError(err, "")
	}
	return apiWriteList(w, r, apiPaginate(list, p, "recordings", apiSorter[model.Recording]{
		id: func(v model.Recording) string { return v.ID },
		keys: map[string]func(model.Recording) string{
			"started_at": func(v model.Recording) string { return sortTimeKey(time.Time(v.StartedAt)) },
		},
	}))
}

// apiGetRecording answers one recording with its events, redacted for
// playback.
func (s *Server) apiGetRecording(w http.ResponseWriter, r *http.Request, c *apiCall) error {
	if err := apiNoParams(c); err != nil {
		return err
	}
	id := r.PathValue("id")
	rec, err := s.cfg.Manager.Recording(r.Context(), apiActor(r, c), id)
	if err != nil {
		return apiRecordingError(err, id)
	}
	return s.apiWriteData(w, r, rec)
}
