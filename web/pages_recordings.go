package web

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/postern/postern/model"
	"github.com/postern/postern/store"
)

// The recordings pages (issue 24): a list, and one recording played back.
// Only the admin role and above reaches them (needRole; manage checks the
// role again). Playback is text: each piece of output is a span with its
// time after the start, in order, stderr styled apart; recording.js plays
// the pieces back with their timing on request. A terminal's stream is
// shown as text with its escape sequences (colours, cursor moves) taken
// out, not emulated: what was printed, not the screen it drew.

// recordingsPageSize bounds the list.
const recordingsPageSize = 200

type recordingsData struct {
	Connection string
	Recordings []model.Recording
}

func (s *Server) recordingsPage(w http.ResponseWriter, r *http.Request) {
	conn := strings.TrimSpace(r.URL.Query().Get("connection"))
	list, err := s.cfg.Manager.Recordings(r.Context(), webActor(r), store.RecordingFilter{Connection: conn, Limit: recordingsPageSize})
	if isRoleRefusal(err) {
		http.Error(w, "recordings are for the admin role and above", http.StatusForbidden)
		return
	}
	if err != nil {
		s.serverError(w, r, "reading recordings", err)
		return
	}
	s.render(w, r, http.StatusOK, "recordings.html", page("Recordings", "recordings", "", recordingsData{Connection: conn, Recordings: list}))
}

// playPiece is one event as the page shows it.
type playPiece struct {
	OffsetMS int64
	Stream   string
	Text     string
}

type recordingData struct {
	Rec      model.Recording
	Pieces   []playPiece
	Duration string
}

func (s *Server) recordingPage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	rec, err := s.cfg.Manager.Recording(r.Context(), webActor(r), id)
	switch {
	case isRoleRefusal(err):
		http.Error(w, "recordings are for the admin role and above", http.StatusForbidden)
		return
	case errors.Is(err, store.ErrNotFound):
		http.Error(w, "no such recording", http.StatusNotFound)
		return
	case err != nil:
		s.serverError(w, r, "reading a recording", err)
		return
	}
	d := recordingData{Rec: rec, Duration: (time.Duration(rec.DurationMS) * time.Millisecond).String()}
	for _, e := range rec.Events {
		d.Pieces = append(d.Pieces, playPiece{OffsetMS: e.OffsetUS / 1000, Stream: e.Stream,
			Text: playbackText(e.Data, e.Stream == store.StreamPty)})
	}
	s.render(w, r, http.StatusOK, "recording.html", page("Recording "+id, "recordings", "recording.js", d))
}

// playbackText is output as the page shows it: valid UTF-8, without
// escape sequences and control characters other than newline and tab (a
// terminal's carriage returns before a newline go too), so that the
// page shows text and never what a hostile target meant a terminal to do.
func playbackText(b []byte, pty bool) string {
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	var out strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == 0x1b:
			i = skipEscape(s, i)
		case c == '\r':
			if !pty && (i+1 >= len(s) || s[i+1] != '\n') {
				out.WriteByte('\n')
			}
		case c == '\n' || c == '\t' || c >= 0x20 && c != 0x7f:
			out.WriteByte(c)
		}
	}
	return out.String()
}

// skipEscape returns the index of the last byte of the escape sequence
// that starts at s[i] (ESC): CSI (ESC [ ... final byte), OSC (ESC ] ...
// BEL or ESC \), or ESC and one byte.
func skipEscape(s string, i int) int {
	if i+1 >= len(s) {
		return i
	}
	switch s[i+1] {
	case '[':
		for j := i + 2; j < len(s); j++ {
			if s[j] >= 0x40 && s[j] <= 0x7e {
				return j
			}
		}
		return len(s) - 1
	case ']':
		for j := i + 2; j < len(s); j++ {
			if s[j] == 0x07 {
				return j
			}
			if s[j] == 0x1b && j+1 < len(s) && s[j+1] == '\\' {
				return j + 1
			}
		}
		return len(s) - 1
	}
	return i + 1
}
