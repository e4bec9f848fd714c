package web

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// File names of the self-signed certificate in the data directory.
const (
	SelfSignedCertFile = "web-cert.pem"
	SelfSignedKeyFile  = "web-key.pem"
	// selfSignedLifetime is how long a generated certificate is valid. A
	// certificate within 30 days of its end is replaced at the next start.
	selfSignedLifetime = 397 * 24 * time.Hour
	selfSignedRenew    = 30 * 24 * time.Hour
)

// TLSConfig returns the server's TLS settings: TLS 1.2 or newer, with
// Go's default (forward-secret, AEAD) cipher suites.
func TLSConfig(cert tls.Certificate) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
	}
}

// Certificate is the server's certificate with what an operator needs to
// trust it.
type Certificate struct {
	TLS         tls.Certificate
	Fingerprint string // SHA-256 of the leaf's DER, hex with colons, as browsers show it
	SelfSigned  bool   // created by postern in the data directory
	CertFile    string
}

// LoadCertificate loads certFile and keyFile when both are given; when both
// are empty it loads, or creates on first use, a self-signed certificate in
// dataDir for localhost, 127.0.0.1 and ::1. One without the other is an
// error.
func LoadCertificate(dataDir, certFile, keyFile string, now time.Time) (*Certificate, error) {
	switch {
	case certFile != "" && keyFile != "":
		c, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("web: TLS certificate: %w", err)
		}
		return &Certificate{TLS: c, Fingerprint: fingerprint(c.Certificate[0]), CertFile: certFile}, nil
	case certFile != "" || keyFile != "":
		return nil, errors.New("web: TLS certificate: give both the certificate and the key file, or neither")
	}
	certFile = filepath.Join(dataDir, SelfSignedCertFile)
	keyFile = filepath.Join(dataDir, SelfSignedKeyFile)
	c, err := tls.LoadX509KeyPair(certFile, keyFile)
	switch {
	case err == nil && c.Leaf != nil && now.Add(selfSignedRenew).Before(c.Leaf.NotAfter):
		return &Certificate{TLS: c, Fingerprint: fingerprint(c.Certificate[0]), SelfSigned: true, CertFile: certFile}, nil
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("web: self-signed certificate in %s: %w (remove %s and %s to make a new one)",
			dataDir, err, SelfSignedCertFile, SelfSignedKeyFile)
	}
	if err := writeSelfSigned(certFile, keyFile, now); err != nil {
		return nil, err
	}
	c, err = tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("web: self-signed certificate: %w", err)
	}
	return &Certificate{TLS: c, Fingerprint: fingerprint(c.Certificate[0]), SelfSigned: true, CertFile: certFile}, nil
}

// writeSelfSigned makes an ECDSA P-256 certificate for the loopback names.
// The key file is written with mode 0600 before the certificate, so that a
// crash between the two leaves no certificate without its key.
func writeSelfSigned(certFile, keyFile string, now time.Time) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("web: self-signed certificate: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return fmt.Errorf("web: self-signed certificate: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "postern (self-signed)", Organization: []string{"postern"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(selfSignedLifetime),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return fmt.Errorf("web: self-signed certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("web: self-signed certificate: %w", err)
	}
	if err := writeFileAtomic(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return err
	}
	return writeFileAtomic(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

// writeFileAtomic writes data to a temporary file beside name and renames it
// into place, so that a reader never sees half a file.
func writeFileAtomic(name string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".*")
	if err != nil {
		return fmt.Errorf("web: write %s: %w", name, err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return fmt.Errorf("web: write %s: %w", name, err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("web: write %s: %w", name, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("web: write %s: %w", name, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("web: write %s: %w", name, err)
	}
	if err := os.Rename(tmp.Name(), name); err != nil {
		return fmt.Errorf("web: write %s: %w", name, err)
	}
	return nil
}

// fingerprint is the SHA-256 of a certificate's DER in the AA:BB:... form.
func fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	h := strings.ToUpper(hex.EncodeToString(sum[:]))
	var b strings.Builder
	for i := 0; i < len(h); i += 2 {
		if i > 0 {
			b.WriteByte(':')
		}
		b.WriteString(h[i : i+2])
	}
	return b.String()
}
