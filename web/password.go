package web

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/argon2"
)

// argon2id parameters: OWASP's 2023 recommendation (19 MiB, 2 passes, one
// lane). A login costs a few tens of milliseconds; the login limiter keeps
// an attacker from turning that into a CPU drain.
const (
	argonMemoryKiB = 19 * 1024
	argonTime      = 2
	argonThreads   = 1
	argonKeyLen    = 32
	argonSaltLen   = 16
	// MinPasswordLength is the shortest admin password accepted.
	MinPasswordLength = 12
	// maxPasswordLength bounds the work one login request can ask for.
	maxPasswordLength = 1024
)

// errBadHash reports a stored hash this build cannot read; it never says
// anything about the password.
var errBadHash = errors.New("web: stored password hash is malformed")

// HashPassword returns the argon2id PHC string of password:
// $argon2id$v=19$m=19456,t=2,p=1$SALT$HASH.
func HashPassword(password string) (string, error) {
	if len(password) < MinPasswordLength {
		return "", fmt.Errorf("web: password too short: want at least %d characters", MinPasswordLength)
	}
	if len(password) > maxPasswordLength {
		return "", fmt.Errorf("web: password too long: at most %d bytes", maxPasswordLength)
	}
	salt := make([]byte, argonSaltLen)
	_, _ = rand.Read(salt) // crypto/rand.Read never fails (Go 1.24+)
	key := argon2.IDKey([]byte(password), salt, argonTime, argonMemoryKiB, argonThreads, argonKeyLen)
	enc := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemoryKiB, argonTime,
		argonThreads, enc.EncodeToString(salt), enc.EncodeToString(key)), nil
}

// VerifyPassword reports whether password matches the PHC string phc, in
// time that does not depend on where the two differ.
func VerifyPassword(phc, password string) (bool, error) {
	if len(password) > maxPasswordLength {
		return false, nil
	}
	parts := strings.Split(phc, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" {
		return false, errBadHash
	}
	var version int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return false, errBadHash
	}
	var m uint32
	var t uint32
	var p uint8
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &m, &t, &p); err != nil || m == 0 || t == 0 || p == 0 ||
		m > 1<<20 || t > 16 {
		return false, errBadHash
	}
	enc := base64.RawStdEncoding
	salt, err := enc.DecodeString(parts[4])
	if err != nil || len(salt) < 8 {
		return false, errBadHash
	}
	want, err := enc.DecodeString(parts[5])
	if err != nil || len(want) < 16 || len(want) > 64 {
		return false, errBadHash
	}
	got := argon2.IDKey([]byte(password), salt, t, m, p, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}

// dummyHash is verified against when a login names no admin, so that an
// unknown name costs as much as a wrong password and the timing does not
// tell which names exist.
const dummyHash = "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHRzYWx0c2FsdA$Wn1kq0fUgm8r2hNMuAa3g2rrB0YkUJ0GQ2m3q3d6yHk"
