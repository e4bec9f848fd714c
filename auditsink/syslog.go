package auditsink

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/postern/postern/store"
)

// Syslog facility and severities of the messages (RFC 5424, 6.2.1):
// facility 13, "log audit"; a row that let an operation through is
// informational, one that refused or failed it a notice.
const (
	syslogFacility      = 13
	syslogSevInfo       = 6
	syslogSevNotice     = 5
	syslogAppName       = "postern"
	syslogMsgID         = "audit"
	syslogProbe         = time.Millisecond
	syslogMaxHostLength = 255
)

// SyslogSink sends each row as one RFC 5424 message over TCP, framed by
// octet counting (RFC 6587, 3.4.1): "LEN SP MSG". The message's structured
// data is empty ("-") and its MSG is the row's JSON record (record.go),
// which rsyslog's mmjsonparse, syslog-ng's json-parser or any SIEM reads
// without a schema of postern's.
//
// Syslog over TCP has no acknowledgement. Before a batch and after it the
// sink looks whether the receiver has closed the connection (a read that
// finds end of file); if it has, the batch counts as failed and is sent
// again on a new connection, so a receiver that stopped between batches
// loses nothing. A receiver that dies with bytes in its socket buffer can
// lose them; the HTTP sink, whose receiver answers, has no such gap.
type SyslogSink struct {
	addr string
	host string
	pid  string
	conn net.Conn
}

// NewSyslogSink sends to the TCP address addr (host:port).
func NewSyslogSink(addr string) *SyslogSink {
	host, err := os.Hostname()
	if err != nil || host == "" || len(host) > syslogMaxHostLength {
		host = "-"
	}
	return &SyslogSink{addr: addr, host: host, pid: strconv.Itoa(os.Getpid())}
}

// Send implements Sink.
func (s *SyslogSink) Send(ctx context.Context, rows []store.AuditRow) error {
	if s.conn != nil && s.closedByPeer() {
		s.Close()
	}
	if s.conn == nil {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", s.addr)
		if err != nil {
			return fmt.Errorf("auditsink: syslog: %w", err)
		}
		s.conn = c
	}
	if dl, ok := ctx.Deadline(); ok {
		s.conn.SetWriteDeadline(dl)
	}
	var buf []byte
	for i := range rows {
		msg, err := s.message(&rows[i])
		if err != nil {
			return err
		}
		buf = strconv.AppendInt(buf, int64(len(msg)), 10)
		buf = append(buf, ' ')
		buf = append(buf, msg...)
	}
	if _, err := s.conn.Write(buf); err != nil {
		return fmt.Errorf("auditsink: syslog: %w", err)
	}
	if s.closedByPeer() {
		return errors.New("auditsink: syslog: the receiver closed the connection")
	}
	return nil
}

// message is row's RFC 5424 message: PRI VERSION TIMESTAMP HOSTNAME
// APP-NAME PROCID MSGID STRUCTURED-DATA MSG.
func (s *SyslogSink) message(r *store.AuditRow) ([]byte, error) {
	rec, err := Record(r)
	if err != nil {
		return nil, err
	}
	sev := syslogSevInfo
	switch r.Decision {
	case "allowed", "approved":
	default:
		sev = syslogSevNotice
	}
	ts := r.Time.UTC().Format("2006-01-02T15:04:05.000000Z07:00")
	head := fmt.Sprintf("<%d>1 %s %s %s %s %s - ", syslogFacility*8+sev, ts, s.host, syslogAppName, s.pid, syslogMsgID)
	return append([]byte(head), rec...), nil
}

// closedByPeer reports whether the receiver has closed the connection (or
// reset it): a read, bounded by syslogProbe, that ends in an error other
// than the timeout. A syslog receiver sends nothing, so a byte read is
// unexpected and also ends the connection.
func (s *SyslogSink) closedByPeer() bool {
	if err := s.conn.SetReadDeadline(time.Now().Add(syslogProbe)); err != nil {
		return true
	}
	var b [1]byte
	_, err := s.conn.Read(b[:])
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return true
}

// Close implements Sink.
func (s *SyslogSink) Close() error {
	if s.conn == nil {
		return nil
	}
	err := s.conn.Close()
	s.conn = nil
	return err
}
