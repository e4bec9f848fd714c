package auditsink

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
)

// Kinds of sink, as a spec's URL scheme names them.
const (
	KindSyslog = "syslog+tcp"
	KindFile   = "jsonl"
	KindHTTP   = "http" // http or https
)

// maxNameLength bounds a sink's name (its cursor's key and metric label).
const maxNameLength = 128

// Spec is one --audit-sink: "[NAME=]URL".
type Spec struct {
	// Name keys the sink's cursor: the NAME given, else the URL without
	// its query. A sink whose URL changes without a NAME is a new sink
	// and receives the whole log again; give a NAME to keep the cursor.
	Name string
	Kind string // KindSyslog, KindFile or KindHTTP
	URL  string // as given, for the log

	addr    string // syslog: host:port
	path    string // file
	maxSize int64  // file
	keep    int    // file
}

// ParseSpec reads "[NAME=]URL" where URL is one of
//
//	syslog+tcp://HOST:PORT
//	jsonl:///ABSOLUTE/PATH[?max_size=SIZE&keep=N]  (SIZE: bytes, or with KiB, MiB, GiB)
//	http://HOST/PATH or https://HOST/PATH
func ParseSpec(s string) (Spec, error) {
	var sp Spec
	raw := s
	if name, rest, ok := strings.Cut(s, "="); ok && !strings.Contains(name, "://") {
		sp.Name, raw = name, rest
		if name == "" {
			return Spec{}, fmt.Errorf("auditsink: %q: the NAME before = is empty", s)
		}
	}
	u, err := url.Parse(raw)
	if err != nil {
		// url.Parse's error repeats the URL, which may hold a password.
		return Spec{}, fmt.Errorf("auditsink: the sink %q is not [NAME=]URL", sp.Name)
	}
	if u.User != nil {
		// Not repeated: the user part may be a password.
		return Spec{}, fmt.Errorf("auditsink: %q: no user or password in a sink's URL: it would be in the process list and the logs", u.Redacted())
	}
	sp.URL = raw
	switch u.Scheme {
	case KindSyslog:
		sp.Kind = KindSyslog
		host, port, err := net.SplitHostPort(u.Host)
		if err != nil || host == "" || port == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			return Spec{}, fmt.Errorf("auditsink: %q: want syslog+tcp://HOST:PORT", s)
		}
		sp.addr = u.Host
	case KindFile:
		sp.Kind = KindFile
		if u.Host != "" || !filepath.IsAbs(u.Path) || strings.HasSuffix(u.Path, "/") {
			return Spec{}, fmt.Errorf("auditsink: %q: want jsonl:///ABSOLUTE/PATH of a file", s)
		}
		sp.path = filepath.Clean(u.Path)
		q := u.Query()
		for k := range q {
			if k != "max_size" && k != "keep" {
				return Spec{}, fmt.Errorf("auditsink: %q: unknown parameter %q (max_size, keep)", s, k)
			}
		}
		if v := q.Get("max_size"); v != "" {
			if sp.maxSize, err = parseSize(v); err != nil {
				return Spec{}, fmt.Errorf("auditsink: %q: max_size: %w", s, err)
			}
		}
		if v := q.Get("keep"); v != "" {
			if sp.keep, err = strconv.Atoi(v); err != nil || sp.keep < 1 {
				return Spec{}, fmt.Errorf("auditsink: %q: keep: want a whole number of files, 1 or more", s)
			}
		}
	case "http", "https":
		sp.Kind = KindHTTP
		if u.Host == "" {
			return Spec{}, fmt.Errorf("auditsink: %q: want http(s)://HOST/PATH", s)
		}
	default:
		return Spec{}, fmt.Errorf("auditsink: %q: unknown kind %q (syslog+tcp, jsonl, http, https)", s, u.Scheme)
	}
	if sp.Name == "" {
		v := *u
		v.RawQuery, v.Fragment, v.ForceQuery = "", "", false
		sp.Name = v.String()
	}
	if len(sp.Name) > maxNameLength || strings.ContainsAny(sp.Name, "\n\r\t ") {
		return Spec{}, fmt.Errorf("auditsink: %q: a sink's name has at most %d characters and no spaces", s, maxNameLength)
	}
	return sp, nil
}

// NewSink builds the spec's sink.
func (sp Spec) NewSink() Sink {
	switch sp.Kind {
	case KindSyslog:
		return NewSyslogSink(sp.addr)
	case KindFile:
		return NewFileSink(sp.path, sp.maxSize, sp.keep)
	default:
		return NewHTTPSink(sp.URL, nil)
	}
}

// CheckNames refuses two specs with one name: they would share a cursor.
func CheckNames(specs []Spec) error {
	seen := map[string]bool{}
	for _, sp := range specs {
		if seen[sp.Name] {
			return fmt.Errorf("auditsink: two sinks are named %q; give one a NAME= of its own", sp.Name)
		}
		seen[sp.Name] = true
	}
	return nil
}

// parseSize reads a byte count: digits, optionally followed by KiB, MiB or
// GiB.
func parseSize(v string) (int64, error) {
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}} {
		if n, ok := strings.CutSuffix(v, u.suffix); ok {
			v, mult = n, u.mult
			break
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 || n > (1<<50)/mult {
		return 0, errors.New("want a positive size in bytes, or with KiB, MiB or GiB")
	}
	return n * mult, nil
}
