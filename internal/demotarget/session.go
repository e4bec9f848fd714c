package demotarget

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"sync"

	"github.com/pkg/sftp"
	"github.com/rs/zerolog"
	"golang.org/x/crypto/ssh"
)

// Messages a client sees on stderr when the demo target refuses a request.
const (
	shellRefused     = "postern demo target: interactive shells are not supported; give a command to run\r\n"
	subsystemRefused = "postern demo target: only the sftp subsystem is served\r\n"
)

// session is one session channel: at most one command or sftp session.
type session struct {
	t   *Target
	ch  ssh.Channel
	log zerolog.Logger

	// mu protects started and proc; proc is nil until the command starts
	// and after it has been reaped.
	mu      sync.Mutex
	started bool
	proc    *process
}

// serveSession answers the channel's requests until the client closes it.
// A command still running then is killed: nobody is left to read its output.
func (t *Target) serveSession(nc ssh.NewChannel, log zerolog.Logger) {
	ch, reqs, err := nc.Accept()
	if err != nil {
		return
	}
	s := &session{t: t, ch: ch, log: log}
	for req := range reqs {
		s.handle(req)
	}
	s.mu.Lock()
	if s.proc != nil {
		s.proc.kill()
	}
	s.mu.Unlock()
	ch.Close()
}

// reply answers req, logging (not ignoring) a failure to send the answer.
func (s *session) reply(req *ssh.Request, ok bool) {
	if err := req.Reply(ok, nil); err != nil {
		s.log.Debug().Err(err).Str("request", req.Type).Msg("reply")
	}
}

func (s *session) handle(req *ssh.Request) {
	switch req.Type {
	case "exec":
		var p struct{ Command string }
		if err := ssh.Unmarshal(req.Payload, &p); err != nil || !s.start() {
			s.reply(req, false)
			return
		}
		s.reply(req, true)
		s.t.wg.Add(1)
		go func() {
			defer s.t.wg.Done()
			s.run(p.Command)
		}()
	case "subsystem":
		var p struct{ Name string }
		if err := ssh.Unmarshal(req.Payload, &p); err == nil && p.Name == "sftp" {
			if !s.start() {
				s.reply(req, false)
				return
			}
			s.reply(req, true)
			s.t.wg.Add(1)
			go func() {
				defer s.t.wg.Done()
				s.serveSFTP()
			}()
			return
		}
		s.refuse(req, subsystemRefused)
	case "shell":
		s.refuse(req, shellRefused)
	case "pty-req", "window-change":
		// Accepted and ignored: commands run on pipes either way, which is
		// enough for a demo and keeps the package free of pty code.
		s.reply(req, true)
	case "signal":
		var p struct{ Signal string }
		if err := ssh.Unmarshal(req.Payload, &p); err != nil {
			s.reply(req, false)
			return
		}
		s.mu.Lock()
		proc := s.proc
		s.mu.Unlock()
		ok := proc != nil && proc.signal(p.Signal) == nil
		s.reply(req, ok)
	default:
		// env and everything else: refused like sshd refuses variables it
		// does not accept; the demo target's environment is fixed.
		s.reply(req, false)
	}
}

// refuse answers a shell or subsystem request no: the message goes first,
// so that it reaches the client before the refusal, which makes OpenSSH's
// ssh give up on the channel.
func (s *session) refuse(req *ssh.Request, msg string) {
	if !s.start() {
		s.reply(req, false)
		return
	}
	if _, err := io.WriteString(s.ch.Stderr(), msg); err != nil {
		s.log.Debug().Err(err).Msg("write refusal")
	}
	s.reply(req, false)
	s.ch.Close()
}

// serveSFTP serves the sftp subsystem with pkg/sftp's server on the real
// file system, as the user running postern (who can reach the same files
// with any command), starting in the scratch directory. A clean end
// reports exit status 0, as OpenSSH's sftp-server does.
func (s *session) serveSFTP() {
	s.log.Debug().Msg("sftp")
	srv, err := sftp.NewServer(s.ch, sftp.WithServerWorkingDirectory(s.t.dir))
	if err != nil {
		fmt.Fprintf(s.ch.Stderr(), "postern demo target: sftp: %v\r\n", err)
		s.finish(exitInfo{status: 1})
		return
	}
	var status uint32
	if err := srv.Serve(); err != nil && !errors.Is(err, io.EOF) {
		s.log.Debug().Err(err).Msg("sftp session")
		status = 1
	}
	s.finish(exitInfo{status: status})
}

// start marks the session as used; only the first exec, shell or subsystem
// request is answered.
func (s *session) start() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return false
	}
	s.started = true
	return true
}

// run runs command with the shell in the scratch directory and reports how
// it ended, in OpenSSH's order: exit-status (or exit-signal), EOF, close.
func (s *session) run(command string) {
	t := s.t
	cmd := t.confined.command(t.dir, t.cfg.Shell, "-c", command)
	cmd.Dir = t.dir
	cmd.Env = t.env()
	cmd.Stdout = s.ch
	cmd.Stderr = s.ch.Stderr()
	// A background child may keep stdout open after the command exits;
	// its output is read for OutputDrain more, then the pipes are closed.
	cmd.WaitDelay = t.cfg.OutputDrain
	setProcessGroup(cmd)
	stdin, err := cmd.StdinPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		fmt.Fprintf(s.ch.Stderr(), "postern demo target: %v\r\n", err)
		s.finish(exitInfo{status: 127})
		return
	}
	p := &process{cmd: cmd}
	if !t.addProc(p) {
		p.kill() // Close started while the command was starting
	}
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()
	s.log.Debug().Str("command", command).Msg("exec")

	// stdin: copied until the client's EOF or the channel closes (which
	// ends the Read), so this goroutine ends with the session at the latest.
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		io.Copy(stdin, s.ch)
		stdin.Close()
	}()

	err = cmd.Wait()
	s.mu.Lock()
	s.proc = nil
	s.mu.Unlock()
	t.removeProc(p)
	s.finish(exitInfoOf(err))
}

// finish sends the exit report, EOF and close, in that order.
func (s *session) finish(e exitInfo) {
	var err error
	if e.signal != "" {
		_, err = s.ch.SendRequest("exit-signal", false, ssh.Marshal(struct {
			Signal     string
			CoreDumped bool
			Error      string
			Lang       string
		}{e.signal, e.core, "", ""}))
	} else {
		_, err = s.ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{e.status}))
	}
	if err != nil {
		s.log.Debug().Err(err).Msg("send exit report")
	}
	s.ch.CloseWrite()
	s.ch.Close()
}

// exitInfo is how a command ended: a status, or a signal (SSH name, without
// "SIG") and whether it dumped core.
type exitInfo struct {
	status uint32
	signal string
	core   bool
}

// exitInfoOf reads cmd.Wait's error.
func exitInfoOf(err error) exitInfo {
	var ee *exec.ExitError
	switch {
	case err == nil, errors.Is(err, exec.ErrWaitDelay):
		return exitInfo{}
	case errors.As(err, &ee):
		if sig, core, ok := signalOf(ee); ok {
			return exitInfo{signal: sig, core: core}
		}
		if code := ee.ExitCode(); code >= 0 {
			return exitInfo{status: uint32(code)}
		}
		return exitInfo{status: 128 + uint32(signalNumber(ee))}
	default:
		return exitInfo{status: 255}
	}
}

// env is the fixed environment of every command: HOME is the scratch
// directory, so that nothing the demo runs touches the real home.
func (t *Target) env() []string {
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/bin:/usr/bin:/bin"
	}
	env := []string{
		"HOME=" + t.dir,
		"PWD=" + t.dir,
		"PATH=" + path,
		"SHELL=" + t.cfg.Shell,
	}
	if u, err := user.Current(); err == nil {
		env = append(env, "USER="+u.Username, "LOGNAME="+u.Username)
	}
	return env
}

// process is a running command.
type process struct {
	cmd *exec.Cmd
}

func (t *Target) addProc(p *process) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.procs[p] = struct{}{}
	return true
}

func (t *Target) removeProc(p *process) {
	t.mu.Lock()
	delete(t.procs, p)
	t.mu.Unlock()
}
