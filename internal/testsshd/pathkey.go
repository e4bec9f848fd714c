package testsshd

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

// PathKey authorizes a new key whose logins run the command with PATH set
// to path, and returns the key's file (PEM) and signer: a target on which
// some programs are missing or behave otherwise (a directory of fakes put
// first), for the same user, without changing the machine.
//
// sshd lets authorized_keys set HOME only (PermitUserEnvironment HOME), so
// the key's command= option runs a wrapper instead: it sets PATH and runs
// the command as sshd would, `$SHELL -c COMMAND` with $0 the shell's base
// name, with SSH_ORIGINAL_COMMAND unset. The login's HOME is Home, as for
// every key.
func (s *Server) PathKey(t testing.TB, path string) ([]byte, ssh.Signer) {
	t.Helper()
	f, err := os.CreateTemp(s.Dir, "pathkey-*.sh")
	if err != nil {
		t.Fatalf("testsshd: path key: %v", err)
	}
	wrapper := f.Name()
	script := "#!/bin/bash\nc=$SSH_ORIGINAL_COMMAND\nunset SSH_ORIGINAL_COMMAND\nPATH=" + shellQuote(path) +
		"\nexport PATH\nexec -a \"${SHELL##*/}\" \"$SHELL\" -c \"$c\"\n"
	_, err = f.WriteString(script)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(wrapper, 0o755)
	}
	if err != nil {
		t.Fatalf("testsshd: path key: %v", err)
	}
	signer, pemBytes, err := writeKey(strings.TrimSuffix(wrapper, ".sh")+"_ed25519", "testsshd path key "+filepath.Base(wrapper))
	if err != nil {
		t.Fatalf("testsshd: path key: %v", err)
	}
	// Options are one comma-separated list, so the line sets HOME itself
	// (Authorize adds it only to a line without environment=). The paths
	// are the test's own directories: no quote in them.
	s.Authorize(t, fmt.Sprintf(`environment="HOME=%s",command="%s" %s`, s.Home, wrapper, ssh.MarshalAuthorizedKey(signer.PublicKey())))
	return pemBytes, signer
}

// shellQuote single-quotes s for sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
