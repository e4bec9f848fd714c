package sftpgate

import (
	"bytes"
	"encoding/binary"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/postern/postern/internal/fakeclock"
)

// Transfers: a file's open is recorded once its handle is closed, with the
// bytes read and written through the handle and how long it was open, so
// that an audit row says what data left or reached a target.

// endSession ends the agent's stream as a client's exit does and waits for
// Serve: every outcome is recorded once it has returned.
func (h *harness) endSession() {
	h.t.Helper()
	if h.client != nil {
		h.client.Close()
	} else if err := h.conn.(*net.TCPConn).CloseWrite(); err != nil {
		h.t.Fatal(err)
	}
	if err := h.served(); err != nil {
		h.t.Errorf("Serve: got %v; want nil", err)
	}
	h.done <- nil // for the cleanup
}

// outcomeFor returns the one outcome of method, failing the test if there
// is not exactly one.
func (h *harness) outcomeFor(all []opOutcome, method string) Outcome {
	h.t.Helper()
	var found []Outcome
	for _, oo := range all {
		if oo.op.Method == method {
			found = append(found, oo.o)
		}
	}
	if len(found) != 1 {
		h.t.Fatalf("got %d outcomes of %s in %+v; want 1", len(found), method, all)
	}
	return found[0]
}

// TestTransferCounted: a download and an upload of a file larger than any
// one packet, through pkg/sftp's pipelined client, are recorded on their
// open's outcome with exactly the file's size read or written and the time
// from open to close; the outcomes of other operations carry no transfer.
func TestTransferCounted(t *testing.T) {
	const size = 1<<18 + 123 // many packets of data each way
	data := bytes.Repeat([]byte("postern!"), size/8+1)[:size]
	for _, tc := range []struct {
		name, fixed string
		aliases     []string
		dir, file   string // as the agent names them
	}{
		{name: "virtual root", aliases: []string{"web"}, dir: "/web", file: "/web/"},
		{name: "fixed view", fixed: "web", dir: "/", file: "/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := fakeclock.New()
			h := startHarness(t, harnessOpts{fixed: tc.fixed, aliases: tc.aliases,
				config: func(c *Config) { c.Now = clock.Now }})
			h.writeFile("web", "/down", string(data))

			f, err := h.client.Open(tc.file + "down")
			if err != nil {
				t.Fatal(err)
			}
			clock.Advance(3 * time.Second)
			var got bytes.Buffer
			if _, err := f.WriteTo(&got); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes(), data) {
				t.Fatalf("downloaded %d bytes; want the %d of the file", got.Len(), size)
			}

			u, err := h.client.Create(tc.file + "up")
			if err != nil {
				t.Fatal(err)
			}
			clock.Advance(5 * time.Second)
			if _, err := u.ReadFrom(bytes.NewReader(data)); err != nil {
				t.Fatal(err)
			}
			if err := u.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := h.client.ReadDir(tc.dir); err != nil {
				t.Fatal(err)
			}
			h.endSession()

			all := h.takeOutcomes()
			for _, c := range []struct {
				method string
				want   Transfer
			}{
				{"get", Transfer{Read: size, Held: 3 * time.Second, Closed: true}},
				{"open", Transfer{Written: size, Held: 5 * time.Second, Closed: true}}, // pkg/sftp's Create opens for reading too
			} {
				o := h.outcomeFor(all, c.method)
				if o.Transfer == nil {
					t.Errorf("%s: got no transfer; want %+v", c.method, c.want)
					continue
				}
				if *o.Transfer != c.want {
					t.Errorf("%s: got transfer %+v; want %+v", c.method, *o.Transfer, c.want)
				}
				if !o.Answered || o.Status != fxOK {
					t.Errorf("%s: got answered %v, status %d; want the open's SSH_FX_OK", c.method, o.Answered, o.Status)
				}
			}
			for _, oo := range all {
				if oo.op.Method != "get" && oo.op.Method != "open" && oo.o.Transfer != nil {
					t.Errorf("%s: got transfer %+v; want none for an operation that opens no file", oo.op.Method, *oo.o.Transfer)
				}
			}
		})
	}
}

// TestTransferCountsWhatTheTargetAnswered: reads count the data the
// target's answers carried (a short read as short; end of file as
// nothing), writes only those the target acknowledged, and a close the
// target failed is said on the row, since data may not have reached the
// disk.
func TestTransferCountsWhatTheTargetAnswered(t *testing.T) {
	rt := newRawTarget(t)
	rt.answer = func(req []byte) []byte {
		id := binary.BigEndian.Uint32(req[5:9])
		switch req[4] {
		case fxpOpen:
			return handleAnswer(req, "H")
		case fxpRead:
			d := &decoder{b: req, off: 9}
			d.str()
			switch off := d.u64(); off {
			case 0:
				return dataAnswer(id, strings.Repeat("a", 100))
			case 100:
				return dataAnswer(id, strings.Repeat("b", 40)) // short
			}
			return statusPacket(id, fxEOF, "End of file")
		case fxpWrite:
			d := &decoder{b: req, off: 9}
			d.str()
			if d.u64() >= 1000 {
				return statusPacket(id, fxFailure, "No space left on device")
			}
		case fxpClose:
			return statusPacket(id, fxFailure, "Input/output error")
		}
		return nil
	}
	clock := fakeclock.New()
	h := startHarness(t, harnessOpts{fixed: "web", raw: true, dial: rt.dial,
		config: func(c *Config) { c.Now = clock.Now }})
	r := newRawConn(t, h.conn)
	typ, ans := r.call(fxpOpen, "/f", uint32(fxfRead|fxfWrite), uint32(0))
	if typ != fxpHandle {
		t.Fatalf("open: got packet %d; want a handle", typ)
	}
	d := &decoder{b: ans}
	handle, _ := d.str()
	clock.Advance(2 * time.Second)
	for _, off := range []uint64{0, 100, 140} {
		r.call(fxpRead, handle, off, uint32(100))
	}
	for _, w := range []struct {
		off  uint64
		data string
	}{{0, "hello"}, {5, "world!"}, {1000, "refused"}} {
		r.call(fxpWrite, handle, w.off, w.data)
	}
	if code, _ := r.status(fxpClose, handle); code != fxFailure {
		t.Errorf("close: got status %d; want the target's SSH_FX_FAILURE", code)
	}
	h.endSession()

	o := h.outcomeFor(h.takeOutcomes(), "open")
	want := Transfer{Read: 140, Written: 11, Held: 2 * time.Second, Closed: true}
	if o.Transfer == nil || *o.Transfer != want {
		t.Errorf("got transfer %+v; want %+v", o.Transfer, want)
	}
	if wantRode := []string{"close: status 4 Input/output error"}; !reflect.DeepEqual(o.Rode, wantRode) {
		t.Errorf("got rode %q; want %q", o.Rode, wantRode)
	}
}

// dataAnswer is a read's answer carrying data.
func dataAnswer(id uint32, data string) []byte {
	b := newPacket(fxpData, 8+len(data))
	b = appendU32(b, id)
	b = appendStr(b, data)
	return finish(b)
}

// TestTransferLeftOpen: handles the agent never closed are recorded when
// its session ends, with what went through them until then, held until
// the end, and the row saying that the file was not closed. Nothing is
// lost.
func TestTransferLeftOpen(t *testing.T) {
	for _, view := range []struct {
		name, fixed string
		aliases     []string
		prefix      string
	}{
		{name: "virtual root", aliases: []string{"web"}, prefix: "/web/"},
		{name: "fixed view", fixed: "web", prefix: "/"},
	} {
		t.Run(view.name, func(t *testing.T) {
			clock := fakeclock.New()
			h := startHarness(t, harnessOpts{fixed: view.fixed, aliases: view.aliases, raw: true,
				config: func(c *Config) { c.Now = clock.Now }})
			h.writeFile("web", "/f", strings.Repeat("x", 5000))
			r := newRawConn(t, h.conn)
			open := func(p string, flags uint32) string {
				typ, ans := r.call(fxpOpen, view.prefix+p, flags, uint32(0))
				if typ != fxpHandle {
					t.Fatalf("open %s: got packet %d; want a handle", p, typ)
				}
				d := &decoder{b: ans}
				s, _ := d.str()
				return s
			}
			rh := open("f", fxfRead)
			wh := open("w", fxfWrite|fxfCreat|fxfTrunc)
			clock.Advance(7 * time.Second)
			if typ, _ := r.call(fxpRead, rh, uint64(0), uint32(1000)); typ != fxpData {
				t.Fatalf("read: got packet %d; want data", typ)
			}
			if code, msg := r.status(fxpWrite, wh, uint64(0), strings.Repeat("y", 3000)); code != fxOK {
				t.Fatalf("write: got status %d %s; want SSH_FX_OK", code, msg)
			}
			h.endSession()

			all := h.takeOutcomes()
			for _, c := range []struct {
				method string
				want   Transfer
			}{
				{"get", Transfer{Read: 1000, Held: 7 * time.Second}},
				{"put", Transfer{Written: 3000, Held: 7 * time.Second}},
			} {
				o := h.outcomeFor(all, c.method)
				if o.Transfer == nil || *o.Transfer != c.want {
					t.Errorf("%s: got transfer %+v; want %+v", c.method, o.Transfer, c.want)
				}
				if want := []string{"the session ended before the file was closed"}; !reflect.DeepEqual(o.Rode, want) {
					t.Errorf("%s: got rode %q; want %q", c.method, o.Rode, want)
				}
			}
		})
	}
}
