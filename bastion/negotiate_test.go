package bastion

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/postern/postern/internal/testwait"
	"golang.org/x/crypto/ssh"
)

// Clients' default lists, as they send them (OpenSSH 9.2 `ssh -G`,
// paramiko 2.12 Transport._preferred_*, asyncssh 2.10 get_default_*_algs).
var (
	opensshCiphers  = []string{"chacha20-poly1305@openssh.com", "aes128-ctr", "aes192-ctr", "aes256-ctr", "aes128-gcm@openssh.com", "aes256-gcm@openssh.com"}
	opensshMACs     = []string{"umac-64-etm@openssh.com", "umac-128-etm@openssh.com", "hmac-sha2-256-etm@openssh.com", "hmac-sha2-512-etm@openssh.com", "hmac-sha1-etm@openssh.com", "umac-64@openssh.com", "umac-128@openssh.com", "hmac-sha2-256", "hmac-sha2-512", "hmac-sha1"}
	paramikoCiphers = []string{"aes128-ctr", "aes192-ctr", "aes256-ctr", "aes128-cbc", "aes192-cbc", "aes256-cbc", "3des-cbc"}
	paramikoMACs    = []string{"hmac-sha2-256", "hmac-sha2-512", "hmac-sha2-256-etm@openssh.com", "hmac-sha2-512-etm@openssh.com", "hmac-sha1", "hmac-md5", "hmac-sha1-96", "hmac-md5-96"}
	asyncsshCiphers = []string{"chacha20-poly1305@openssh.com", "aes256-gcm@openssh.com", "aes128-gcm@openssh.com", "aes256-ctr", "aes192-ctr", "aes128-ctr"}
)

// TestOffer: postern offers its own pick from each client's lists, a
// cipher the client offered, or the full lists when it has nothing to pick
// from.
func TestOffer(t *testing.T) {
	t.Parallel()
	kex := func(cs, sc, macsCS, macsSC []string) *kexInit {
		return &kexInit{CiphersClientServer: cs, CiphersServerClient: sc, MACsClientServer: macsCS, MACsServerClient: macsSC}
	}
	tests := []struct {
		name        string
		kex         *kexInit
		wantCiphers []string
		wantMACs    []string
	}{
		{"no KEXINIT", nil, cipherPreference, macPreference},
		{"OpenSSH default", kex(opensshCiphers, opensshCiphers, opensshMACs, opensshMACs), []string{ssh.CipherAES128GCM}, macPreference},
		{"asyncssh default", kex(asyncsshCiphers, asyncsshCiphers, opensshMACs, opensshMACs), []string{ssh.CipherAES128GCM}, macPreference},
		{"paramiko default", kex(paramikoCiphers, paramikoCiphers, paramikoMACs, paramikoMACs), []string{ssh.CipherAES128CTR}, []string{ssh.HMACSHA256ETM}},
		{"aes256-ctr and sha-512 only", kex([]string{"aes256-ctr"}, []string{"aes256-ctr"}, []string{"hmac-sha2-512"}, []string{"hmac-sha2-512"}), []string{ssh.CipherAES256CTR}, []string{ssh.HMACSHA512}},
		{"chacha20 only", kex([]string{ssh.CipherChaCha20Poly1305}, []string{ssh.CipherChaCha20Poly1305}, nil, nil), []string{ssh.CipherChaCha20Poly1305}, macPreference},
		{"directions differ", kex([]string{"aes256-ctr", ssh.CipherAES256GCM}, []string{"aes128-ctr"}, paramikoMACs, []string{"hmac-sha1"}), []string{ssh.CipherAES256GCM, ssh.CipherAES128CTR}, []string{ssh.HMACSHA256ETM, ssh.HMACSHA1}},
		{"no cipher in common", kex([]string{"3des-cbc"}, []string{"3des-cbc"}, paramikoMACs, paramikoMACs), cipherPreference, macPreference},
		{"CTR but no MAC in common", kex([]string{"aes128-ctr"}, []string{"aes128-ctr"}, []string{"hmac-md5"}, []string{"hmac-md5"}), []string{ssh.CipherAES128CTR}, macPreference},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ciphers, macs := offer(tt.kex)
			if !slices.Equal(ciphers, tt.wantCiphers) || !slices.Equal(macs, tt.wantMACs) {
				t.Errorf("offer: got %v, %v; want %v, %v", ciphers, macs, tt.wantCiphers, tt.wantMACs)
			}
		})
	}
}

// TestPeekClientHello: a client's identification line and KEXINIT, whole
// or cut short, are read and parsed (or not), and everything read is kept
// to be replayed; postern's own line goes out first.
func TestPeekClientHello(t *testing.T) {
	t.Parallel()
	version := "SSH-2.0-OpenSSH_9.2p1 Debian\r\n"
	kexinit := packet(ssh.Marshal(kexInit{KexAlgos: []string{"curve25519-sha256"}, CiphersClientServer: opensshCiphers, CiphersServerClient: opensshCiphers,
		MACsClientServer: opensshMACs, MACsServerClient: opensshMACs, CompressionClientServer: []string{"none"}, CompressionServerClient: []string{"none"}}))
	tests := []struct {
		name    string
		sent    string
		wantKex bool
	}{
		{"version and KEXINIT", version + kexinit, true},
		{"lines before the version", "hello\r\nthere\n" + version + kexinit, true},
		{"and more after", version + kexinit + "more bytes", true},
		{"version only", version, false},
		{"KEXINIT cut short", version + kexinit[:len(kexinit)-3], false},
		{"not a KEXINIT", version + packet([]byte{21}), false},
		{"a huge packet", version + "\x7f\xff\xff\xff\x04", false},
		{"a packet of padding", version + "\x00\x00\x00\x05\x04\x00\x00\x00\x00", false},
		{"no version line", strings.Repeat("x", maxHelloLines+10), false},
		{"nothing", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			server, client := tcpPair(t)
			serverSaw := make(chan []byte, 1)
			go func() {
				// The client: send, close its side, read what postern sent.
				io.WriteString(client, tt.sent)
				client.(*net.TCPConn).CloseWrite()
				b, _ := io.ReadAll(client)
				serverSaw <- b
			}()
			h := peekClientHello(server, testwait.Deadline(t), time.Time{})
			server.Close()
			if got := string(<-serverSaw); got != identification+"\r\n" {
				t.Errorf("client read %q; want %q", got, identification+"\r\n")
			}
			if !strings.HasPrefix(tt.sent, string(h.read)) {
				t.Errorf("kept %q; want a prefix of what was sent", h.read)
			}
			if (h.kex != nil) != tt.wantKex {
				t.Fatalf("parsed KEXINIT %v; want %v", h.kex != nil, tt.wantKex)
			}
			if h.kex != nil && !slices.Equal(h.kex.CiphersClientServer, opensshCiphers) {
				t.Errorf("client ciphers: got %v; want %v", h.kex.CiphersClientServer, opensshCiphers)
			}
		})
	}
}

// TestHelloHandshake: x/crypto completes the handshake over what the peek
// read, with postern's pick when the peek read the client's KEXINIT, and
// with the client's own order when the peek gave up at once (as for a
// client that waits for the server's KEXINIT).
func TestHelloHandshake(t *testing.T) {
	t.Parallel()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	hostKey, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	// The client prefers AES-CTR, as OpenSSH does after chacha20.
	clientCiphers := []string{ssh.CipherAES256CTR, ssh.CipherAES128GCM}
	tests := []struct {
		name       string
		until      time.Time
		wantCipher string
	}{
		{"peeked", testwait.Deadline(t), ssh.CipherAES128GCM},
		{"gave up", time.Now().Add(-time.Second), ssh.CipherAES256CTR},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			server, client := tcpPair(t)
			dialed := make(chan error, 1)
			go func() {
				c, chans, reqs, err := ssh.NewClientConn(client, "postern", &ssh.ClientConfig{
					Config: ssh.Config{Ciphers: clientCiphers}, User: "agent", HostKeyCallback: ssh.FixedHostKey(hostKey.PublicKey()),
				})
				if err == nil {
					go ssh.DiscardRequests(reqs)
					go func() {
						for nch := range chans {
							nch.Reject(ssh.Prohibited, "no")
						}
					}()
					c.Close()
				}
				dialed <- err
			}()
			hello := peekClientHello(server, tt.until, time.Time{})
			cfg := &ssh.ServerConfig{NoClientAuth: true, ServerVersion: identification}
			cfg.Ciphers, cfg.MACs = offer(hello.kex)
			cfg.AddHostKey(hostKey)
			sconn, chans, reqs, err := ssh.NewServerConn(newHelloConn(server, hello), cfg)
			if err != nil {
				t.Fatalf("server handshake: %v (client: %v)", err, <-dialed)
			}
			go ssh.DiscardRequests(reqs)
			go func() {
				for range chans {
				}
			}()
			if err := <-dialed; err != nil {
				t.Fatalf("client handshake: %v", err)
			}
			if got := negotiated(sconn.Conn).Read.Cipher; got != tt.wantCipher {
				t.Errorf("cipher: got %s; want %s", got, tt.wantCipher)
			}
			if got := string(sconn.ClientVersion()); got != "SSH-2.0-Go" {
				t.Errorf("client version: got %q; want SSH-2.0-Go", got)
			}
			sconn.Close()
		})
	}
}

// FuzzPeekClientHello: no opening makes the peek panic; what it keeps is
// what the client sent, from the start; what it parses yields an offer made
// of postern's own algorithms.
func FuzzPeekClientHello(f *testing.F) {
	f.Add([]byte("SSH-2.0-x\r\n" + packet(ssh.Marshal(kexInit{CiphersClientServer: paramikoCiphers, CiphersServerClient: paramikoCiphers, MACsClientServer: paramikoMACs, MACsServerClient: paramikoMACs}))))
	f.Add([]byte("SSH-2.0-x\r\n\x00\x00\x00\x0c\x0a\x14"))
	f.Add([]byte("\n\n\nSSH-\n\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, sent []byte) {
		h := peekClientHello(&replayConn{r: bytes.NewReader(sent)}, time.Time{}, time.Time{})
		if !bytes.HasPrefix(sent, h.read) {
			t.Fatalf("kept %q; want a prefix of %q", h.read, sent)
		}
		ciphers, macs := offer(h.kex)
		for _, c := range ciphers {
			if !slices.Contains(cipherPreference, c) {
				t.Errorf("offered cipher %q is not postern's", c)
			}
		}
		for _, m := range macs {
			if !slices.Contains(macPreference, m) {
				t.Errorf("offered MAC %q is not postern's", m)
			}
		}
	})
}

// packet frames payload as an unencrypted SSH binary packet (RFC 4253 §6),
// with 4 bytes of padding.
func packet(payload []byte) string {
	b := binary.BigEndian.AppendUint32(nil, uint32(1+len(payload)+4))
	b = append(b, 4)
	b = append(b, payload...)
	return string(append(b, 0, 0, 0, 0))
}

// tcpPair returns both ends of a loopback TCP connection, closed when t
// ends.
func tcpPair(t *testing.T) (server, client net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		server.Close()
		client.Close()
	})
	return server, client
}

// replayConn is a net.Conn that reads from r and discards writes: the
// fuzz target's client.
type replayConn struct {
	net.Conn
	r io.Reader
}

func (c *replayConn) Read(p []byte) (int, error)      { return c.r.Read(p) }
func (c *replayConn) Write(p []byte) (int, error)     { return len(p), nil }
func (c *replayConn) SetReadDeadline(time.Time) error { return nil }
