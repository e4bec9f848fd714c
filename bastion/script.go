package bastion

import (
	"fmt"
	"io"
	"time"
)

// Bounds of a script on stdin: a session with no command and no terminal
// (`ssh -T alias@bastion < script.sh`, an empty command, Go's
// Session.Shell() without a pty). The target would run its user's shell
// reading that stdin; postern reads it first, to its end, so that the
// script is classified, decided and audited as a whole before any of it
// runs.
const (
	// DefaultMaxScript bounds the script: a script is a few lines; what
	// is longer is data, which belongs in a file sent with scp or SFTP.
	DefaultMaxScript = 64 << 10
	// DefaultScriptWait bounds the wait for the script's end (the agent's
	// EOF): a pipe delivers at once, and an agent that leaves stdin open
	// and sends nothing would otherwise hold the session forever.
	DefaultScriptWait = 30 * time.Second
)

// errScriptTooLong and errScriptWait are why a script on stdin is refused
// before it is decided.
var (
	errScriptTooLong = fmt.Errorf("a script on stdin is limited to %d KiB; nothing ran: send a longer one as a file (scp or sftp) and run it", DefaultMaxScript>>10)
	errScriptWait    = fmt.Errorf("no end of the script on stdin within %v; nothing ran: close stdin after the script (ssh -T ... < script.sh)", DefaultScriptWait)
)

// readScript reads the agent's stdin to its end, up to max bytes, within
// wait. A read that does not end in time is left to end when the caller
// closes the channel.
func readScript(r io.Reader, max int, wait time.Duration) (string, error) {
	type result struct {
		b   []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		b, err := io.ReadAll(io.LimitReader(r, int64(max)+1))
		done <- result{b, err}
	}()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case res := <-done:
		switch {
		case res.err != nil:
			return "", fmt.Errorf("bastion: read the script on stdin: %w", res.err)
		case len(res.b) > max:
			return "", errScriptTooLong
		}
		return string(res.b), nil
	case <-t.C:
		return "", errScriptWait
	}
}

// scriptStdin is what the target's shell reads of a script on stdin: the
// script, when it runs as the target would run it; nil otherwise.
func (x *execRun) scriptStdin() []byte {
	if !x.r.script || x.run.command != x.r.command {
		return nil
	}
	return []byte(x.r.command)
}
