package hostkeyscan

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/postern/postern/internal/testsshd"
)

func TestScanOpenSSH(t *testing.T) {
	s := testsshd.Start(t, testsshd.Options{})
	key, err := Scan(context.Background(), s.Addr, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(key.Marshal(), s.HostKey.Marshal()) {
		t.Errorf("got %s; want sshd's host key %s", key.Type(), s.HostKey.Type())
	}
}

func TestScanErrors(t *testing.T) {
	// A listener that accepts and never speaks: the timeout must end it.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := silent.Accept()
		if err == nil {
			accepted <- c
		}
		close(accepted)
	}()
	// A port with nothing listening.
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedAddr := closed.Addr().String()
	closed.Close()

	tests := []struct {
		name    string
		addr    string
		wantMsg string
	}{
		{"silent server", silent.Addr().String(), "no host key within"},
		{"nothing listening", closedAddr, "dial"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Scan(context.Background(), tt.addr, Options{Timeout: 300 * time.Millisecond})
			if err == nil || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("got %v; want an error containing %q", err, tt.wantMsg)
			}
		})
	}
	silent.Close()
	for c := range accepted {
		c.Close()
	}
}
