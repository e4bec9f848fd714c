package web

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// List parameters common to every list endpoint.
const (
	defaultListLimit = 50
	maxListLimit     = 500
	// maxFilterLen bounds a filter's value: names, aliases and ids are at
	// most 64 bytes, so anything much longer is a mistake.
	maxFilterLen = 256
	// maxCursorLen bounds a cursor; the ones postern makes are far shorter.
	maxCursorLen = 1024
	// cursorVersion is raised when the cursor's content changes, so that an
	// old cursor is refused instead of misread.
	cursorVersion = 1
	// cursorSumLen is how many bytes of SHA-256 guard a cursor's content.
	cursorSumLen = 8
)

// apiListSpec describes one list endpoint's query parameters: its filters,
// with a check of each value, and the fields it sorts by.
type apiListSpec struct {
	resource string                        // binds cursors to the list that made them
	filters  map[string]func(string) error // filter name → value check (nil: any text)
	sorts    []string                      // sortable fields; "-field" sorts descending
	defSort  string                        // the sort when none is given, e.g. "name" or "-seq"
}

// apiListParams are a list request's parsed parameters.
type apiListParams struct {
	limit   int
	sort    string // as in the query, e.g. "-created_at"
	field   string // sort without its "-"
	desc    bool
	cursor  *apiCursor        // nil on the first page
	filters map[string]string // only the filters given
}

// parseAPIList checks q against spec: every parameter known, given once, and
// valid. Each error is a 400 naming the parameter.
func parseAPIList(q url.Values, spec apiListSpec) (apiListParams, error) {
	p := apiListParams{limit: defaultListLimit, sort: spec.defSort, filters: map[string]string{}}
	names := make([]string, 0, len(q))
	for name := range q {
		names = append(names, name)
	}
	slices.Sort(names) // a request with several faults always names the same one
	var rawCursor string
	for _, name := range names {
		vals := q[name]
		if len(vals) != 1 {
			return p, apiBadParam(name, "given %d times; give it once", len(vals))
		}
		v := vals[0]
		switch name {
		case "limit":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > maxListLimit {
				return p, apiBadParam(name, "%s is not a whole number from 1 to %d", apiQuote(v), maxListLimit)
			}
			p.limit = n
		case "sort":
			if !slices.Contains(spec.sorts, strings.TrimPrefix(v, "-")) {
				return p, apiBadParam(name, "%s is not a sort field here; use one of %s, with - before it for descending order",
					apiQuote(v), strings.Join(spec.sorts, ", "))
			}
			p.sort = v
		case "cursor":
			rawCursor = v
		default:
			check, ok := spec.filters[name]
			if !ok {
				return p, &apiError{Status: 400, Code: "unknown_parameter", Field: name,
					Message: name + ": unknown query parameter; this list takes " + strings.Join(spec.params(), ", ")}
			}
			if len(v) > maxFilterLen || !utf8.ValidString(v) {
				return p, apiBadParam(name, "the value is not valid UTF-8 text of at most %d bytes", maxFilterLen)
			}
			if check != nil {
				if err := check(v); err != nil {
					return p, apiBadParam(name, "%v", err)
				}
			}
			p.filters[name] = v
		}
	}
	p.field, p.desc = strings.TrimPrefix(p.sort, "-"), strings.HasPrefix(p.sort, "-")
	if rawCursor != "" {
		c, err := decodeCursor(rawCursor, spec.resource, p.sort)
		if err != nil {
			return p, err
		}
		p.cursor = c
	}
	return p, nil
}

// params lists every parameter of the spec, for an error message.
func (spec apiListSpec) params() []string {
	out := []string{"limit", "sort", "cursor"}
	var fs []string
	for f := range spec.filters {
		fs = append(fs, f)
	}
	slices.Sort(fs)
	return append(out, fs...)
}

// apiQuote quotes a value for an error message, cut to a readable length.
func apiQuote(v string) string {
	if len(v) > 40 {
		v = v[:40] + "..."
	}
	return strconv.Quote(v)
}

// apiEnumFilter accepts exactly one of words.
func apiEnumFilter(words ...string) func(string) error {
	return func(v string) error {
		if !slices.Contains(words, v) {
			return fmt.Errorf("%s is not one of %s", apiQuote(v), strings.Join(words, ", "))
		}
		return nil
	}
}

// apiBoolFilter accepts true or false.
func apiBoolFilter(v string) error {
	if v != "true" && v != "false" {
		return fmt.Errorf("%s is not true or false", apiQuote(v))
	}
	return nil
}

// apiTimeFilter accepts an RFC 3339 time.
func apiTimeFilter(v string) error {
	if _, err := time.Parse(time.RFC3339, v); err != nil {
		return fmt.Errorf("%s is not an RFC 3339 time such as 2026-03-01T12:00:00Z", apiQuote(v))
	}
	return nil
}

// apiCursor is where a page ended: the sort key and id of its last record.
// It is bound to the list and the sort that made it. Clients see it only as
// an opaque string (see encode).
type apiCursor struct {
	V int    `json:"v"` // cursorVersion
	R string `json:"r"` // the list: "agents", "audit", ...
	S string `json:"s"` // the sort, e.g. "-created_at"
	K string `json:"k"` // the last record's sort key
	I string `json:"i"` // the last record's id
}

// encode makes the cursor's opaque form: base64url (no padding) of the
// first 8 bytes of the SHA-256 of its JSON, then the JSON. The checksum is
// not a secret — a cursor grants nothing the token does not — it makes an
// edited or truncated cursor a clear 400 instead of a silently wrong page.
func (c apiCursor) encode() string {
	js, _ := json.Marshal(c) // strings and an int: cannot fail
	sum := sha256.Sum256(js)
	return base64.RawURLEncoding.EncodeToString(append(sum[:cursorSumLen], js...))
}

// decodeCursor reads a cursor for resource and sort, or answers 400 naming
// the cursor.
func decodeCursor(raw, resource, sort string) (*apiCursor, error) {
	bad := func(why string) error {
		return apiBadParam("cursor", "%s; pass next_cursor from the previous page unchanged", why)
	}
	if len(raw) > maxCursorLen {
		return nil, bad("too long")
	}
	b, err := base64.RawURLEncoding.DecodeString(raw)
	if err != nil || len(b) <= cursorSumLen {
		return nil, bad("not a cursor postern made")
	}
	sum := sha256.Sum256(b[cursorSumLen:])
	if !bytes.Equal(sum[:cursorSumLen], b[:cursorSumLen]) {
		return nil, bad("the cursor was changed or cut short")
	}
	var c apiCursor
	dec := json.NewDecoder(bytes.NewReader(b[cursorSumLen:]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil || c.V != cursorVersion {
		return nil, bad("not a cursor this version of postern made")
	}
	if c.R != resource {
		return nil, bad("the cursor belongs to another list (" + c.R + ")")
	}
	if c.S != sort {
		return nil, bad("the cursor was made for sort=" + c.S + "; give the same sort, or none to start over")
	}
	return &c, nil
}

// page is one page of a list.
type apiPage[T any] struct {
	items   []T
	hasMore bool
	next    *string // the cursor of the following page; nil on the last
}

// sorter gives a list's records their sort keys and ids. A key is a string
// that sorts as its field does (see sortTimeKey), so that one
// comparison serves every field and a cursor can carry the key as text.
type apiSorter[T any] struct {
	keys map[string]func(T) string // sort field → key
	id   func(T) string
}

// apiPaginate sorts items by p's sort, with the id breaking ties (so the order
// is total and a cursor's position unambiguous), and returns the page after
// p's cursor. Records added or removed between pages do not make a page
// repeat or skip the others: the cursor is a position in the order, not an
// offset.
func apiPaginate[T any](items []T, p apiListParams, resource string, so apiSorter[T]) apiPage[T] {
	key := so.keys[p.field]
	type keyed struct {
		k, id string
		v     T
	}
	ks := make([]keyed, len(items))
	for i, it := range items {
		ks[i] = keyed{key(it), so.id(it), it}
	}
	cmp := func(ak, aid, bk, bid string) int {
		c := strings.Compare(ak, bk)
		if c == 0 {
			c = strings.Compare(aid, bid)
		}
		if p.desc {
			c = -c
		}
		return c
	}
	slices.SortFunc(ks, func(a, b keyed) int { return cmp(a.k, a.id, b.k, b.id) })
	start := 0
	if p.cursor != nil {
		start, _ = slices.BinarySearchFunc(ks, p.cursor, func(e keyed, c *apiCursor) int {
			if cmp(e.k, e.id, c.K, c.I) <= 0 {
				return -1
			}
			return 1
		})
	}
	end := min(start+p.limit, len(ks))
	out := apiPage[T]{items: make([]T, 0, end-start)}
	for _, e := range ks[start:end] {
		out.items = append(out.items, e.v)
	}
	if end < len(ks) {
		last := ks[end-1]
		next := apiCursor{V: cursorVersion, R: resource, S: p.sort, K: last.k, I: last.id}.encode()
		out.hasMore, out.next = true, &next
	}
	return out
}

// sortTimeLayout formats times fixed-width so that they sort as text.
const sortTimeLayout = "2006-01-02T15:04:05.000000000Z"

// sortTimeKey is the sort key of a time; the zero time sorts first.
func sortTimeKey(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(sortTimeLayout)
}
