package main

import (
	"bytes"
	"encoding/json"
	"regexp"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// TestLogTimeMilliseconds: a log line's time is RFC 3339 in UTC with
// milliseconds (issue 25: whole seconds could not order a second's lines).
func TestLogTimeMilliseconds(t *testing.T) {
	var b bytes.Buffer
	at := time.Date(2026, 12, 7, 19, 5, 3, 456789000, time.FixedZone("CET", 3600))
	log, err := newLoggerAt(&b, "info", func() time.Time { return at })
	if err != nil {
		t.Fatal(err)
	}
	log.Info().Msg("hello")
	var line map[string]any
	if err := json.Unmarshal(b.Bytes(), &line); err != nil {
		t.Fatalf("log line %q: %v", b.String(), err)
	}
	got, _ := line["time"].(string)
	if !regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`).MatchString(got) {
		t.Errorf("time %q; want RFC 3339 UTC with three fractional digits", got)
	}
	if want := "2026-12-07T18:05:03.456Z"; got != want || bytes.Count(b.Bytes(), []byte(`"time"`)) != 1 {
		t.Errorf("line %s; want one time field, %s", b.String(), want)
	}
	if l := zerolog.TimestampFieldName; l != "time" {
		t.Errorf("zerolog's time field is %q; want time", l)
	}
}
