package sftpgate

import (
	"bytes"
	"testing"
)

// FuzzParseRequest feeds arbitrary packets to the request parser. It must
// not panic; a request it accepts has every span inside the packet, each
// holding the string it decoded, so that rewriting a path or handle in the
// virtual root replaces exactly that field; and replacing each field by
// itself gives the packet back.
func FuzzParseRequest(f *testing.F) {
	for _, seed := range fuzzSeeds() {
		// Each seed stream's packets, one by one (after the view byte).
		stream := seed[1:]
		for len(stream) >= 4 {
			n := int(uint32(stream[0])<<24 | uint32(stream[1])<<16 | uint32(stream[2])<<8 | uint32(stream[3]))
			if n > len(stream)-4 {
				break
			}
			f.Add(stream[:4+n])
			stream = stream[4+n:]
		}
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		if len(frame) < 5 {
			return
		}
		r, ok, err := parseRequest(frame)
		if !ok || err != nil {
			return
		}
		fields := []struct {
			s  string
			at span
		}{{r.path, r.pathAt}, {r.path2, r.path2At}, {r.handle, r.handleAt}, {r.handle2, r.handle2At}}
		var edits []edit
		for _, f := range fields {
			if f.at == (span{}) {
				continue
			}
			if f.at.start < 9 || f.at.end > len(frame) || f.at.end-f.at.start != 4+len(f.s) {
				t.Fatalf("%s: span %+v of %q does not fit a %d-byte packet", r.name(), f.at, f.s, len(frame))
			}
			if got := string(frame[f.at.start+4 : f.at.end]); got != f.s {
				t.Fatalf("%s: span holds %q; decoded %q", r.name(), got, f.s)
			}
			edits = append(edits, edit{f.at, strField(f.s)})
		}
		// Spans come in packet order for splice.
		for i := 1; i < len(edits); i++ {
			if edits[i].at.start < edits[i-1].at.end {
				t.Fatalf("%s: spans out of order: %+v", r.name(), edits)
			}
		}
		withLen := append([]byte(nil), frame...)
		finish(withLen)
		if got := splice(frame, edits...); !bytes.Equal(got, withLen) {
			t.Fatalf("%s: splicing each field with itself changed the packet", r.name())
		}
	})
}
