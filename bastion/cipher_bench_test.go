package bastion

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/crypto/ssh"
)

// These benchmarks measure, on this machine and in one run, what each
// cipher (with its MAC where it has none built in) and each key exchange
// that x/crypto offers costs postern: the data of a relayed transfer is
// decrypted on one leg and encrypted on the other, and here one process
// does both ends of one SSH connection, so its CPU per byte is the cost of
// one byte through postern when both legs use that cipher. They are what
// chose cipherPreference and macPreference (README, bench/RESULTS.md).
//
//	go test ./bastion -run '^$' -bench 'Cipher|KeyExchange' -benchtime 20x

// benchTransfer is how many bytes one iteration of BenchmarkCipher moves.
const benchTransfer = 64 << 20

// BenchmarkCipher moves benchTransfer bytes over one SSH channel on a
// loopback TCP connection with a single cipher (and MAC) on both sides.
// cpu-ns/B is the process's CPU time (user and system, both ends) per byte.
func BenchmarkCipher(b *testing.B) {
	cases := []struct{ cipher, mac string }{
		{ssh.CipherAES128GCM, ""},
		{ssh.CipherAES256GCM, ""},
		{ssh.CipherChaCha20Poly1305, ""},
		{ssh.CipherAES128CTR, ssh.HMACSHA256ETM},
		{ssh.CipherAES128CTR, ssh.HMACSHA256},
		{ssh.CipherAES128CTR, ssh.HMACSHA512ETM},
		{ssh.CipherAES256CTR, ssh.HMACSHA256ETM},
		{ssh.CipherAES128CTR, ssh.HMACSHA1},
	}
	for _, c := range cases {
		name := c.cipher
		if c.mac != "" {
			name += "+" + c.mac
		}
		b.Run(name, func(b *testing.B) {
			cfg := ssh.Config{Ciphers: []string{c.cipher}}
			if c.mac != "" {
				cfg.MACs = []string{c.mac}
			}
			ch := benchChannel(b, cfg, cfg)
			buf := make([]byte, relayBufferSize)
			var size [8]byte
			binary.BigEndian.PutUint64(size[:], benchTransfer)
			b.SetBytes(benchTransfer)
			b.ResetTimer()
			cpu0 := processCPU(b)
			for b.Loop() {
				if _, err := ch.Write(size[:]); err != nil {
					b.Fatal(err)
				}
				if _, err := io.CopyBuffer(io.Discard, io.LimitReader(ch, benchTransfer), buf); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(processCPU(b)-cpu0)/float64(int64(b.N)*benchTransfer), "cpu-ns/B")
		})
	}
}

// BenchmarkKeyExchange runs whole handshakes (key exchange, ed25519 host
// key, no user authentication) on loopback TCP with a single key exchange
// method; cpu-µs/op is both ends' CPU.
func BenchmarkKeyExchange(b *testing.B) {
	for _, kex := range []string{ssh.KeyExchangeCurve25519, ssh.KeyExchangeMLKEM768X25519, ssh.KeyExchangeECDHP256, ssh.KeyExchangeDH14SHA256} {
		b.Run(kex, func(b *testing.B) {
			cfg := ssh.Config{KeyExchanges: []string{kex}}
			cpu0 := processCPU(b)
			for b.Loop() {
				ch := benchChannel(b, cfg, cfg)
				ch.Close()
			}
			b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N)/1e3, "cpu-µs/op")
		})
	}
}

// benchChannel connects an x/crypto client and server over loopback TCP
// with the given configs and returns the client's end of a channel. The
// server answers each 8-byte big-endian length written to it with that
// many bytes. Everything is closed when b ends.
func benchChannel(b *testing.B, server, client ssh.Config) ssh.Channel {
	b.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	hostKey, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	scfg := &ssh.ServerConfig{Config: server, NoClientAuth: true}
	scfg.AddHostKey(hostKey)

	var wg sync.WaitGroup
	served := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		nc, err := ln.Accept()
		if err != nil {
			served <- err
			return
		}
		sconn, chans, reqs, err := ssh.NewServerConn(nc, scfg)
		if err != nil {
			nc.Close()
			served <- err
			return
		}
		served <- nil
		defer sconn.Close()
		go ssh.DiscardRequests(reqs)
		for nch := range chans {
			ch, chReqs, err := nch.Accept()
			if err != nil {
				continue
			}
			go ssh.DiscardRequests(chReqs)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer ch.Close()
				serveBenchChannel(ch)
			}()
		}
	}()
	conn, err := ssh.Dial("tcp", ln.Addr().String(), &ssh.ClientConfig{
		Config: client, User: "bench", HostKeyCallback: ssh.FixedHostKey(hostKey.PublicKey()),
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := <-served; err != nil {
		b.Fatal(err)
	}
	ch, reqs, err := conn.OpenChannel("bench", nil)
	if err != nil {
		b.Fatal(err)
	}
	go ssh.DiscardRequests(reqs)
	b.Cleanup(func() {
		conn.Close()
		wg.Wait()
	})
	return ch
}

// serveBenchChannel writes as many bytes as each length read from ch asks
// for, until ch ends.
func serveBenchChannel(ch ssh.Channel) {
	buf := make([]byte, relayBufferSize)
	var size [8]byte
	for {
		if _, err := io.ReadFull(ch, size[:]); err != nil {
			return
		}
		for n := binary.BigEndian.Uint64(size[:]); n > 0; {
			k := min(n, uint64(len(buf)))
			if _, err := ch.Write(buf[:k]); err != nil {
				return
			}
			n -= k
		}
	}
}

// processCPU returns the CPU time this process has used (user and system)
// in nanoseconds.
func processCPU(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(errors.Join(errors.New("getrusage"), err))
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
