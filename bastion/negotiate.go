package bastion

import (
	"bytes"
	"encoding/binary"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ssh"
)

// This file chooses the agent leg's cipher and MAC by postern's order of
// cost instead of the client's order of taste.
//
// SSH takes, for each direction, the first cipher of the client's list that
// the server also offers (RFC 4253 §7.1), so a server can only choose by
// what it leaves out. A static list cannot serve the clients agents use:
// OpenSSH lists chacha20-poly1305, then the AES-CTR modes, then AES-GCM;
// paramiko 2.12 knows only CTR and CBC. Offering CTR (for paramiko) lands
// OpenSSH on aes128-ctr with hmac-sha2-256-etm; offering chacha20-poly1305
// lands it there; leaving both out locks paramiko out. x/crypto's
// chacha20 has no assembly on amd64: on the 2-core machine of
// bench/RESULTS.md, encrypting and decrypting a byte cost 2.2-3.3 ns of
// CPU with AES-GCM, 3.3-4.3 with AES-CTR and HMAC-SHA-256, 5.6-7.3 with
// chacha20-poly1305 (BenchmarkCipher, five runs), and a 256 MiB `cat`
// through postern cost it 0.49 s, 0.79 s and 1.07 s with those on the
// agent leg (bench/ciphers.sh, median of 7).
//
// So postern reads the client's KEXINIT, which the client sends
// unprompted right after the identification lines, before x/crypto starts
// the key exchange, picks from it the first cipher (and, for a cipher
// without its own MAC, the first MAC) in postern's order, and offers only
// that: the client's own rule then lands on postern's pick, and every
// client still gets a cipher it offered. A client that sends nothing within
// kexInitWait, or something that is not a KEXINIT, gets the full lists,
// and x/crypto deals with it as before.

// Preference orders, cheapest first, as measured by BenchmarkCipher
// (bench/RESULTS.md). They serve both legs: postern chooses from the
// agent's KEXINIT with them, and as the upstream client it offers them in
// this order, which the target follows.
var (
	// cipherPreference: AES-GCM (an AEAD with AES and carry-less multiply
	// instructions), AES-CTR with a MAC, and chacha20-poly1305 last, for
	// clients configured with nothing else. 128-bit AES before 256: fewer
	// rounds, the same security margin for SSH's rekeyed sessions.
	cipherPreference = []string{
		ssh.CipherAES128GCM,
		ssh.CipherAES256GCM,
		ssh.CipherAES128CTR,
		ssh.CipherAES256CTR,
		ssh.CipherAES192CTR,
		ssh.CipherChaCha20Poly1305,
	}
	// macPreference: HMAC-SHA-256 (with SHA instructions) before
	// HMAC-SHA-512 (without), encrypt-then-MAC first; HMAC-SHA-1 last.
	// hmac-sha1-96, which x/crypto calls insecure, is not offered.
	macPreference = []string{
		ssh.HMACSHA256ETM,
		ssh.HMACSHA256,
		ssh.HMACSHA512ETM,
		ssh.HMACSHA512,
		ssh.HMACSHA1,
	}
	// keyExchangePreference: the key exchanges x/crypto implements without
	// a known weakness (its insecure SHA-1 ones are left out), post-quantum
	// first. For the agent leg the client's order decides: a key exchange
	// runs once per connection (a whole handshake costs both ends about
	// 1.3 ms of CPU with mlkem768x25519, 1.2 with curve25519:
	// BenchmarkKeyExchange), and
	// choosing against an agent that asks for post-quantum protection is
	// not postern's to do. As the upstream client postern asks for it too.
	keyExchangePreference = []string{
		ssh.KeyExchangeMLKEM768X25519,
		ssh.KeyExchangeCurve25519,
		ssh.KeyExchangeECDHP256,
		ssh.KeyExchangeECDHP384,
		ssh.KeyExchangeECDHP521,
		ssh.KeyExchangeDH14SHA256,
		ssh.KeyExchangeDH16SHA512,
		ssh.KeyExchangeDHGEXSHA256,
	}
)

// kexInitWait bounds how long serveConn waits for the client's
// identification line and KEXINIT before it lets x/crypto run the
// handshake with the full lists. Clients send both at once (OpenSSH after
// reading the server's line, so one round trip); the bound only keeps a
// client that waits for the server's KEXINIT from waiting forever.
const kexInitWait = 2 * time.Second

// Bounds of what peekClientHello reads itself, past which it gives up and
// lets x/crypto read (and judge) the rest.
const (
	// maxHelloLines is the bytes of identification lines (the client's
	// own line and any before it) looked through for the client's line.
	maxHelloLines = 8 << 10
	// maxKexInitPacket bounds the KEXINIT packet: RFC 4253 §6.1 has every
	// implementation accept 35000 bytes; OpenSSH's is about 1.5 KB.
	maxKexInitPacket = 35000
)

// kexInit is the payload of SSH_MSG_KEXINIT (RFC 4253 §7.1).
type kexInit struct {
	Cookie                  [16]byte `sshtype:"20"`
	KexAlgos                []string
	ServerHostKeyAlgos      []string
	CiphersClientServer     []string
	CiphersServerClient     []string
	MACsClientServer        []string
	MACsServerClient        []string
	CompressionClientServer []string
	CompressionServerClient []string
	LanguagesClientServer   []string
	LanguagesServerClient   []string
	FirstKexFollows         bool
	Reserved                uint32
}

// clientHello is what peekClientHello read of a client's opening.
type clientHello struct {
	read []byte   // every byte read, to be given to x/crypto first
	kex  *kexInit // the client's KEXINIT; nil if not read or not parsed
}

// peekClientHello sends postern's identification line on c, then reads the
// client's identification line and its first binary packet, a KEXINIT in
// the clear, until it has both, has read something else, or the time is
// until; it leaves c's read deadline at restore. It never fails: whatever
// went wrong is x/crypto's to find and report when it reads the same bytes.
func peekClientHello(c net.Conn, until, restore time.Time) clientHello {
	var h clientHello
	if _, err := c.Write([]byte(identification + "\r\n")); err != nil {
		return h
	}
	_ = c.SetReadDeadline(until)
	defer func() { _ = c.SetReadDeadline(restore) }()

	buf := make([]byte, 4096)
	fill := func(n int) bool {
		for len(h.read) < n {
			k, err := c.Read(buf)
			h.read = append(h.read, buf[:k]...)
			if err != nil {
				return false
			}
		}
		return true
	}
	// The client's identification line is the first that starts with
	// "SSH-"; RFC 4253 §4.2 lets only servers send lines before theirs,
	// but x/crypto accepts them from either side.
	start, end := 0, -1
	for end < 0 {
		if i := bytes.IndexByte(h.read[start:], '\n'); i >= 0 {
			if bytes.HasPrefix(h.read[start:], []byte("SSH-")) {
				end = start + i + 1
				break
			}
			start += i + 1
			continue
		}
		if len(h.read) >= maxHelloLines || !fill(len(h.read)+1) {
			return h
		}
	}
	if !fill(end + 4) {
		return h
	}
	size := binary.BigEndian.Uint32(h.read[end:])
	if size < 2 || size > maxKexInitPacket || !fill(end+4+int(size)) {
		return h
	}
	packet := h.read[end+4 : end+4+int(size)]
	padding := int(packet[0])
	if padding+1 >= len(packet) {
		return h
	}
	var k kexInit
	if err := ssh.Unmarshal(packet[1:len(packet)-padding], &k); err != nil {
		return h
	}
	h.kex = &k
	return h
}

// offer returns the ciphers and MACs to offer a client whose KEXINIT is
// kex: postern's pick of each (one per direction, which in practice is
// one), or the full lists when kex is nil or when the client shares none
// with postern in some direction (x/crypto then says which).
func offer(kex *kexInit) (ciphers, macs []string) {
	if kex == nil {
		return cipherPreference, macPreference
	}
	ciphers = pickEach(cipherPreference, kex.CiphersClientServer, kex.CiphersServerClient)
	if ciphers == nil {
		return cipherPreference, macPreference
	}
	macs = macPreference
	if !allAEAD(ciphers) {
		// A cipher without its own MAC: choose the MAC the same way.
		if picked := pickEach(macPreference, kex.MACsClientServer, kex.MACsServerClient); picked != nil {
			macs = picked
		}
	}
	return ciphers, macs
}

// allAEAD reports whether every cipher in ciphers authenticates its packets
// itself, so that no MAC is negotiated for it.
func allAEAD(ciphers []string) bool {
	for _, c := range ciphers {
		switch c {
		case ssh.CipherAES128GCM, ssh.CipherAES256GCM, ssh.CipherChaCha20Poly1305:
		default:
			return false
		}
	}
	return true
}

// pickEach returns, for each of the client's lists, the first algorithm of
// pref that it holds, without repeats and in pref's order; nil if a list
// holds none.
func pickEach(pref []string, lists ...[]string) []string {
	var picked []string
	for _, l := range lists {
		i := slices.IndexFunc(pref, func(a string) bool { return slices.Contains(l, a) })
		if i < 0 {
			return nil
		}
		if !slices.Contains(picked, pref[i]) {
			picked = append(picked, pref[i])
		}
	}
	slices.SortFunc(picked, func(a, b string) int { return slices.Index(pref, a) - slices.Index(pref, b) })
	return picked
}

// helloConn is the connection x/crypto serves an agent on after
// peekClientHello: its reads return first what the peek read, and the
// first write, x/crypto's identification line, is dropped, because the peek
// has sent that line already.
type helloConn struct {
	net.Conn
	skip []byte // x/crypto's first write, as the peek sent it

	// mu guards replay. x/crypto reads from one goroutine at a time;
	// drained spares every read after the replay the lock.
	mu      sync.Mutex
	replay  []byte
	drained atomic.Bool
	wrote   atomic.Bool // the first write has been seen
}

func newHelloConn(c net.Conn, h clientHello) *helloConn {
	hc := &helloConn{Conn: c, skip: []byte(identification + "\r\n"), replay: h.read}
	if len(h.read) == 0 {
		hc.drained.Store(true)
	}
	return hc
}

func (c *helloConn) Read(p []byte) (int, error) {
	if c.drained.Load() {
		return c.Conn.Read(p)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n := copy(p, c.replay)
	c.replay = c.replay[n:]
	if len(c.replay) == 0 {
		c.drained.Store(true)
	}
	return n, nil
}

func (c *helloConn) Write(p []byte) (int, error) {
	if !c.wrote.Swap(true) && bytes.Equal(p, c.skip) {
		return len(p), nil
	}
	return c.Conn.Write(p)
}
