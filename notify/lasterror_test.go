package notify

import (
	"bufio"
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/postern/postern/store"
)

// rawReceiver is a TCP server on 127.0.0.1 that reads each request's head
// and answers with answer's bytes as they are, then closes: a service that
// is not what the channel's URL expects, or a webhook answering a status
// line and body of its own.
func rawReceiver(t *testing.T, answer string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		l.Close()
		<-done
	})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			r := bufio.NewReader(c)
			for { // the request's head; its body is not waited for
				line, err := r.ReadString('\n')
				if err != nil || line == "\r\n" {
					break
				}
			}
			c.Write([]byte(answer))
			c.Close()
		}
	}()
	return "http://" + l.Addr().String() + "/hook/" + urlToken
}

// TestLastErrorHoldsNoRemoteBytes: what a failed delivery stores of the
// receiver's answer is its HTTP status and a short reason of postern's,
// never the bytes the receiver sent: its body, its status line's reason
// phrase, or whatever a service that is not HTTP answered (which the HTTP
// client quotes in its error). Each receiver is a real server on
// loopback.
func TestLastErrorHoldsNoRemoteBytes(t *testing.T) {
	const remote = "REMOTE-BYTES"
	body500 := newReceiver(t)
	body500.setAnswer(func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		w.Write([]byte("\x1b[2J\x07" + remote + " stack trace of the receiver " + urlToken))
	})
	tlsSrv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	tlsSrv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake
	tlsSrv.StartTLS()
	defer tlsSrv.Close()
	plain := newReceiver(t)
	gone := newReceiver(t)
	goneURL := gone.url()
	gone.srv.Close()
	tests := []struct {
		name, url string
		status    int
		want      string
	}{
		{"500 with a body", body500.url(), 500, "HTTP 500 Internal Server Error"},
		{"500 with a reason phrase of its own", rawReceiver(t, "HTTP/1.1 500 \x1b[2J"+remote+"\r\nContent-Length: 12\r\n\r\n"+remote), 500,
			"HTTP 500 Internal Server Error"},
		{"a status of its own", rawReceiver(t, "HTTP/1.1 599 "+remote+"\r\nContent-Length: 0\r\n\r\n"), 599, "HTTP 599"},
		{"not HTTP", rawReceiver(t, "\x1b[2J\x07"+remote+" SSH-2.0-OpenSSH_9.6\r\n\r\n"), 0,
			"no answer: the receiver's answer is not HTTP"},
		{"a malformed header", rawReceiver(t, "HTTP/1.1 200 OK\r\n"+remote+"\r\n\r\n"), 0,
			"no answer: the receiver's answer is not HTTP"},
		{"closed without an answer", rawReceiver(t, ""), 0, "no answer: the receiver closed the connection without answering"},
		{"connection refused", goneURL, 0, "no answer: connection refused"},
		{"TLS certificate not trusted", tlsSrv.URL + "/hook/" + urlToken, 0, "no answer: the receiver's TLS certificate is not trusted"},
		{"HTTPS to a plain HTTP receiver", "https" + strings.TrimPrefix(plain.url(), "http"), 0,
			"no answer: the receiver answered plain HTTP to HTTPS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t)
			r.channel(store.NewNotifyChannel{Name: "ops", URL: tt.url, OnPending: true})
			res, err := r.dispatcher(nil, nil).Test(context.Background(), "ops")
			if err != nil {
				t.Fatal(err)
			}
			if res.Delivered || res.Status != tt.status || res.Channel.LastError != tt.want || res.Error != tt.want {
				t.Errorf("got delivered %v, status %d, stored %q, error %q; want not delivered, %d, %q",
					res.Delivered, res.Status, res.Channel.LastError, res.Error, tt.status, tt.want)
			}
			r.checkStoredNoSecrets()
		})
	}
}
