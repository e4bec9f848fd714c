package sftpgate

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// SFTP version 3 packet types (draft-ietf-secsh-filexfer-02 §3, and
// OpenSSH's PROTOCOL §4 for the extensions).
const (
	fxpInit          = 1
	fxpVersion       = 2
	fxpOpen          = 3
	fxpClose         = 4
	fxpRead          = 5
	fxpWrite         = 6
	fxpLstat         = 7
	fxpFstat         = 8
	fxpSetstat       = 9
	fxpFsetstat      = 10
	fxpOpendir       = 11
	fxpReaddir       = 12
	fxpRemove        = 13
	fxpMkdir         = 14
	fxpRmdir         = 15
	fxpRealpath      = 16
	fxpStat          = 17
	fxpRename        = 18
	fxpReadlink      = 19
	fxpSymlink       = 20
	fxpStatus        = 101
	fxpHandle        = 102
	fxpData          = 103
	fxpName          = 104
	fxpAttrs         = 105
	fxpExtended      = 200
	fxpExtendedReply = 201
)

// Status codes (draft-02 §7).
const (
	fxOK               = 0
	fxEOF              = 1
	fxNoSuchFile       = 2
	fxPermissionDenied = 3
	fxFailure          = 4
	fxBadMessage       = 5
	fxNoConnection     = 6
	fxConnectionLost   = 7
	fxOpUnsupported    = 8
)

// statusName is a status code as the draft names it, for log lines and
// audit reasons.
func statusName(code uint32) string {
	names := [...]string{"SSH_FX_OK", "SSH_FX_EOF", "SSH_FX_NO_SUCH_FILE", "SSH_FX_PERMISSION_DENIED",
		"SSH_FX_FAILURE", "SSH_FX_BAD_MESSAGE", "SSH_FX_NO_CONNECTION", "SSH_FX_CONNECTION_LOST", "SSH_FX_OP_UNSUPPORTED"}
	if int(code) < len(names) {
		return names[code]
	}
	return fmt.Sprintf("status %d", code)
}

// Open flags (draft-02 §6.3).
const (
	fxfRead   = 0x01
	fxfWrite  = 0x02
	fxfAppend = 0x04
	fxfCreat  = 0x08
	fxfTrunc  = 0x10
	fxfExcl   = 0x20
)

// The version postern speaks on both legs. OpenSSH's sftp-server answers 3
// to any client; so does postern.
const sftpVersion = 3

// MaxPacket bounds an SFTP packet from the agent: the length field may be
// at most this. It is OpenSSH's SFTP_MAX_MSG_LENGTH (256 KiB), which
// sftp-server enforces by ending the session, so no client that works with
// OpenSSH sends more; postern ends the session too, with a message, since a
// stream whose framing it cannot trust cannot be resynchronised.
const MaxPacket = 256 << 10

// maxUpstreamPacket bounds a packet from a target. A target is trusted more
// than an agent but not with postern's memory: OpenSSH answers at most
// 256 KiB plus headers; other servers may answer a large READ with a
// little more.
const maxUpstreamPacket = 1 << 20

// errFraming is a packet length the reader cannot accept.
var errFraming = errors.New("sftpgate: bad packet length")

// readPacket reads one packet (its 4-byte length, then the body) from r into
// buf, growing it as needed, and returns the whole frame, length included.
// A length of 0 or above max is errFraming; a stream that ends inside a
// packet is io.ErrUnexpectedEOF, and one that ends between packets io.EOF.
func readPacket(r *bufio.Reader, buf []byte, max int) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n == 0 || uint64(n) > uint64(max) {
		return nil, fmt.Errorf("%w: %d bytes (at most %d)", errFraming, n, max)
	}
	total := 4 + int(n)
	if cap(buf) < total {
		buf = make([]byte, total)
	}
	buf = buf[:total]
	copy(buf, hdr[:])
	if _, err := io.ReadFull(r, buf[4:]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return buf, nil
}

// decoder reads the fields of a packet body. The first failure sticks: a
// caller reads every field it needs and checks err once.
type decoder struct {
	b   []byte
	off int
	err error
}

var errShort = errors.New("packet too short")

func (d *decoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
}

func (d *decoder) u32() uint32 {
	if d.err != nil || len(d.b)-d.off < 4 {
		d.fail(errShort)
		return 0
	}
	v := binary.BigEndian.Uint32(d.b[d.off:])
	d.off += 4
	return v
}

func (d *decoder) u64() uint64 {
	if d.err != nil || len(d.b)-d.off < 8 {
		d.fail(errShort)
		return 0
	}
	v := binary.BigEndian.Uint64(d.b[d.off:])
	d.off += 8
	return v
}

// span is where a string field's bytes lie in a packet, so that it can be
// replaced without touching the rest.
type span struct{ start, end int }

// str reads a string field and returns it with the span of its length
// prefix and bytes.
func (d *decoder) str() (string, span) {
	start := d.off
	n := d.u32()
	if d.err != nil {
		return "", span{}
	}
	if uint64(len(d.b)-d.off) < uint64(n) {
		d.fail(errShort)
		return "", span{}
	}
	s := string(d.b[d.off : d.off+int(n)])
	d.off += int(n)
	return s, span{start, d.off}
}

// rest reports whether bytes remain unread.
func (d *decoder) rest() int { return len(d.b) - d.off }

func appendU32(b []byte, v uint32) []byte { return binary.BigEndian.AppendUint32(b, v) }
func appendU64(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(b, v) }

func appendStr(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

// newPacket starts a frame of type typ: a length to be set by finish, then
// the type byte.
func newPacket(typ byte, sizeHint int) []byte {
	b := make([]byte, 5, 5+sizeHint)
	b[4] = typ
	return b
}

// finish sets a frame's length field.
func finish(b []byte) []byte {
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// statusPacket is SSH_FXP_STATUS for id, with msg and an empty language
// tag, as OpenSSH's sftp-server sends it.
func statusPacket(id, code uint32, msg string) []byte {
	b := newPacket(fxpStatus, 16+len(msg))
	b = appendU32(b, id)
	b = appendU32(b, code)
	b = appendStr(b, msg)
	b = appendStr(b, "")
	return finish(b)
}

// edit replaces a span of a packet with new bytes.
type edit struct {
	at  span
	new []byte
}

// splice returns a new frame made of frame with each edit applied (edits in
// increasing order, not overlapping) and its length set. The bytes outside
// the edits, file data included, are copied as they are.
func splice(frame []byte, edits ...edit) []byte {
	size := len(frame)
	for _, e := range edits {
		size += len(e.new) - (e.at.end - e.at.start)
	}
	out := make([]byte, 0, size)
	prev := 0
	for _, e := range edits {
		out = append(out, frame[prev:e.at.start]...)
		out = append(out, e.new...)
		prev = e.at.end
	}
	out = append(out, frame[prev:]...)
	return finish(out)
}

// strField is s encoded as an SFTP string, for a splice.
func strField(s string) []byte { return appendStr(make([]byte, 0, 4+len(s)), s) }
