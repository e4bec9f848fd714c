package notify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// SignatureHeader carries a json channel's signature: "sha256=" and the
// lower-case hex HMAC-SHA256 of the exact request body under the channel's
// secret.
const SignatureHeader = "X-Postern-Signature"

// signaturePrefix names the algorithm in SignatureHeader's value.
const signaturePrefix = "sha256="

// Sign returns the SignatureHeader value for body under secret.
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return signaturePrefix + hex.EncodeToString(m.Sum(nil))
}

// Verify reports whether header is the signature of body under secret. It
// is what a receiver written in Go does (docs/notifications.md shows it in
// other languages): recompute over the raw body, before parsing it, and
// compare in constant time.
func Verify(secret, body []byte, header string) bool {
	hexSum, ok := strings.CutPrefix(strings.TrimSpace(header), signaturePrefix)
	if !ok {
		return false
	}
	got, err := hex.DecodeString(hexSum)
	if err != nil {
		return false
	}
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return hmac.Equal(got, m.Sum(nil))
}
